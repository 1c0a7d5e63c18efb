/*
 * TraceML HTML report: renders final_summary.json (embedded in the page as a
 * JSON data block with id "traceml-summary") with uPlot.
 *
 * Everything the page shows comes from that JSON, so a report works from
 * the summary file alone and opens offline. The per-step charts use the
 * summary's "series" (bucketed per-step figures, docs/summary-json.md);
 * without it (an older summary) they say so. Nothing here computes a
 * verdict: the engine did that; this file only draws it.
 *
 * When it is done the page sets <body data-rendered="1"
 * data-render-ms="..."> and, for every uncaught error, data-errors="N":
 * the headless-browser test reads those.
 */
(function () {
  "use strict";
  var errors = 0;
  window.addEventListener("error", function () {
    errors++;
    document.body.setAttribute("data-errors", String(errors));
  });

  var S = JSON.parse(document.getElementById("traceml-summary").textContent);
  var root = document.getElementById("app");
  var PH = [
    { key: "input_wait", label: "Input Wait", color: "#e4572e" },
    { key: "h2d", label: "H2D", color: "#f3a712" },
    { key: "forward", label: "Forward", color: "#29335c" },
    { key: "backward", label: "Backward", color: "#4e79a7" },
    { key: "optimizer", label: "Optimizer", color: "#76b7b2" },
    { key: "residual", label: "Residual", color: "#9c755f" }
  ];

  /* ---- small helpers ---------------------------------------------- */
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }
  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function ms(v) { return isNum(v) ? (Math.abs(v) < 0.1 && v !== 0 ? v.toFixed(2) : v.toFixed(1)) + " ms" : "n/a"; }
  function pct(v) { return isNum(v) ? (v > 0 && v < 0.5 ? "<1%" : v.toFixed(0) + "%") : "n/a"; }
  function bytes(v) {
    if (!isNum(v)) return "n/a";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + " GB";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + " MB";
    if (a >= 1e3) return (v / 1e3).toFixed(1) + " KB";
    return v.toFixed(0) + " B";
  }
  function num(v, d) { return isNum(v) ? v.toFixed(d) : "n/a"; }
  function get(o, path) {
    var p = path.split(".");
    for (var i = 0; i < p.length; i++) { if (o === null || o === undefined) return null; o = o[p[i]]; }
    return o === undefined ? null : o;
  }
  function table(head, rows, cls) {
    var t = el("table", cls ? { cls: cls } : null);
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", { text: h })); });
    t.appendChild(el("thead", null, tr));
    var tb = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr", r.cls ? { cls: r.cls } : null);
      (r.cells || r).forEach(function (c) {
        row.appendChild(typeof c === "object" && c !== null ? el("td", { cls: "barcell" }, c) : el("td", { text: String(c) }));
      });
      tb.appendChild(row);
    });
    t.appendChild(tb);
    return el("div", { cls: "scroll" }, t);
  }
  function legend(items) {
    var d = el("div", { cls: "legend" });
    items.forEach(function (it) {
      var i = el("i"); i.style.background = it.color;
      d.appendChild(el("span", null, i, it.label));
    });
    return d;
  }
  function chartWidth() { return Math.max(320, Math.min(root.clientWidth || 1100, 1130) - 10); }

  /* ---- banner and header ------------------------------------------ */
  var meta = S.meta || {};
  var verdict = S.primary_diagnosis || {};
  var hdr = [meta.run_name || "run",
    (meta.ranks_reported || 0) + "/" + (meta.world_size || 0) + " ranks",
    meta.gpus_observed ? meta.gpus_observed + (meta.gpus_observed === 1 ? " GPU" : " GPUs") + " observed" : null,
    (meta.common_steps || 0) + " common steps",
    isNum(S.duration_s) ? S.duration_s.toFixed(1) + "s" : null,
    (meta.clock || "cpu").toUpperCase() + " clock",
    "status " + (S.status || "?")].filter(Boolean).join(" \u00b7 ");
  root.appendChild(el("h1", { text: "TraceML Run Summary" }));
  root.appendChild(el("div", { cls: "meta", id: "run-header", text: hdr }));
  var banner = el("div", { cls: "banner " + (verdict.severity || "INFO"), id: "verdict" },
    el("span", { cls: "verdict", text: "Verdict: " + (verdict.label || "n/a") }),
    el("span", { cls: "sev", text: verdict.severity || "" }),
    el("p", { text: "Why: " + (verdict.why || "") }),
    verdict.next ? el("p", { text: "Next: " + verdict.next }) : null);
  root.appendChild(banner);

  /* ---- phase breakdown -------------------------------------------- */
  var st = S.step_time || {};
  var med = st.median || {};
  var shares = st.shares_percent || {};
  var cause = get(st, "diagnosis.evidence.cause");
  root.appendChild(el("h2", { text: "Phase breakdown (" + (med.label ? "median rank " + med.label : "window average") + ", " + (meta.clock || "cpu").toUpperCase() + " clock)" }));
  var rows = [["Step Time", ms(med.step_time_ms), "100%"]];
  [["Input Wait", "input_wait"], ["Compute", "compute"], ["\u2003Forward", "forward"],
   ["\u2003Backward", "backward"], ["\u2003Optimizer", "optimizer"], ["H2D", "h2d"],
   ["Residual", "residual"]].forEach(function (r) {
    rows.push({ cls: cause === r[1] ? "cause" : "", cells: [r[0] + (cause === r[1] ? "  \u25c0 cause" : ""), ms(med[r[1] + "_ms"]), pct(shares[r[1]])] });
  });
  rows.push(["Untraced (outside the step)", ms(med.untraced_ms), ""]);
  rows.push(["DataLoader fetch (CPU, supplemental)", ms(med.dataloader_fetch_cpu_ms), ""]);
  rows.push(["Step-to-step noise (stddev)", ms(st.noise_ms), ""]);
  var bar = el("div", { cls: "bar", id: "phase-bar" });
  PH.forEach(function (p) {
    var v = med[p.key + "_ms"], tot = med.step_time_ms;
    if (isNum(v) && isNum(tot) && tot > 0) {
      var s = el("span", { title: p.label + " " + ms(v) }); s.style.width = (100 * v / tot) + "%"; s.style.background = p.color; bar.appendChild(s);
    }
  });
  root.appendChild(el("div", { cls: "grid" },
    el("div", { cls: "card" }, table(["Phase", "Time", "Share"], rows, "phases")),
    el("div", { cls: "card" }, el("h3", { text: "Where a step goes" }), bar, legend(PH),
      el("p", { cls: "meta", text: "Window: " + (get(st, "window.window_steps") || 0) + " steps (" +
        (get(st, "window.warmup_steps_excluded") || 0) + " warm-up excluded)" +
        (isNum(meta.traceml_overhead_us_per_step) ? " \u00b7 TraceML overhead " + meta.traceml_overhead_us_per_step.toFixed(1) + " \u00b5s/step" : "") }))));

  /* ---- per-step charts --------------------------------------------- */
  var ser = S.series;
  root.appendChild(el("h2", { text: "Per step" }));
  var charts = [];
  if (!ser || !ser.ranks || !ser.ranks.length || typeof uPlot === "undefined") {
    root.appendChild(el("p", { cls: "note", text: "This summary has no per-step series (written by an older TraceML, or a run without steps)." }));
  } else {
    var pick = 0;
    ser.ranks.forEach(function (r, i) { if (med.label && r.label === med.label) pick = i; });
    var sel = el("select", { id: "rank-select" });
    ser.ranks.forEach(function (r, i) {
      var o = el("option", { value: String(i), text: r.label }); if (i === pick) o.selected = true; sel.appendChild(o);
    });
    var note = "Each point is the mean of " + ser.bucket_steps + " step" + (ser.bucket_steps > 1 ? "s" : "") +
      " (" + ser.clock.toUpperCase() + " clock); steps " + ser.first_step + "\u2013" + ser.last_step +
      (ser.window_first_step !== null ? ", analysed window from step " + ser.window_first_step : "") +
      (ser.ranks_omitted ? "; " + ser.ranks_omitted + " ranks not included" : "") + ".";
    root.appendChild(el("p", { cls: "meta" }, "Rank: ", sel, "  " + note));
    var boxes = {
      stack: el("div", { cls: "chart", id: "chart-steps" }),
      input: el("div", { cls: "chart", id: "chart-input" }),
      mem: el("div", { cls: "chart", id: "chart-memory" })
    };
    root.appendChild(el("h3", { text: "Step time per step, stacked by phase" }));
    root.appendChild(boxes.stack);
    root.appendChild(el("h3", { text: "Input wait per step (every included rank)" }));
    root.appendChild(boxes.input);
    root.appendChild(el("h3", { text: "Memory per step" }));
    root.appendChild(boxes.mem);

    var xs = ser.step;
    var drawStack = function (ri) {
      var r = ser.ranks[ri];
      var comps = PH.map(function (p) { return r[p.key + "_ms"]; });
      var cum = [], acc = xs.map(function () { return 0; });
      var any = xs.map(function (_, i) { return isNum(r.step_time_ms ? r.step_time_ms[i] : null); });
      comps.forEach(function (c) {
        acc = acc.map(function (a, i) { return a + (c && isNum(c[i]) ? c[i] : 0); });
        cum.push(acc.map(function (a, i) { return any[i] ? a : null; }));
      });
      var series = [{ label: "step" }], data = [xs];
      for (var k = PH.length - 1; k >= 0; k--) {
        (function (k) {
          series.push({ label: PH[k].label, stroke: PH[k].color, fill: PH[k].color, width: 1,
            value: function (u, v, si, i) { var c = comps[k]; return i === null || !c || !isNum(c[i]) ? "n/a" : c[i].toFixed(2) + " ms"; } });
        })(k);
        data.push(cum[k]);
      }
      return new uPlot({ width: chartWidth(), height: 260, scales: { x: { time: false } },
        series: series, axes: [{ label: "step" }, { label: "ms" }] }, data, boxes.stack);
    };
    var palette = ["#e4572e", "#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"];
    var inSeries = [{ label: "step" }], inData = [xs];
    ser.ranks.forEach(function (r, i) {
      if (i >= 16) return;
      inSeries.push({ label: r.label, stroke: palette[i % palette.length], width: 1,
        value: function (u, v) { return isNum(v) ? v.toFixed(2) + " ms" : "n/a"; } });
      inData.push(r.input_wait_ms || xs.map(function () { return null; }));
    });
    charts.push(new uPlot({ width: chartWidth(), height: 200, scales: { x: { time: false } },
      series: inSeries, axes: [{ label: "step" }, { label: "ms" }] }, inData, boxes.input));
    var drawMem = function (ri) {
      var r = ser.ranks[ri];
      var mseries = [{ label: "step" }], mdata = [xs];
      [["rss_bytes", "RSS", "#59a14f"], ["peak_allocated_bytes", "CUDA allocated (peak)", "#4e79a7"],
       ["peak_reserved_bytes", "CUDA reserved (peak)", "#e15759"]].forEach(function (m) {
        if (!r[m[0]]) return;
        mseries.push({ label: m[1], stroke: m[2], width: 1, value: function (u, v) { return bytes(v); } });
        mdata.push(r[m[0]]);
      });
      if (mdata.length === 1) {
        boxes.mem.appendChild(el("p", { cls: "note", text: "No per-step memory was recorded on this rank." }));
        return null;
      }
      return new uPlot({ width: chartWidth(), height: 200, scales: { x: { time: false } }, series: mseries,
        axes: [{ label: "step" }, { label: "bytes", size: 70, values: function (u, v) { return v.map(bytes); } }] }, mdata, boxes.mem);
    };
    var cur = { stack: drawStack(pick), mem: drawMem(pick) };
    sel.addEventListener("change", function () {
      var i = parseInt(sel.value, 10);
      if (cur.stack) cur.stack.destroy();
      if (cur.mem) cur.mem.destroy();
      boxes.mem.textContent = "";
      cur = { stack: drawStack(i), mem: drawMem(i) };
    });
  }

  /* ---- per-rank bars ---------------------------------------------- */
  var pr = st.per_rank || [];
  root.appendChild(el("h2", { text: "Step time per rank" }));
  var maxStep = 0;
  pr.forEach(function (r) { if (isNum(r.step_time_ms) && r.step_time_ms > maxStep) maxStep = r.step_time_ms; });
  var rrows = pr.map(function (r) {
    var b = el("div", { cls: "bar" });
    PH.forEach(function (p) {
      var v = r[p.key + "_ms"];
      if (isNum(v) && maxStep > 0) { var s = el("span", { title: p.label + " " + ms(v) }); s.style.width = (100 * v / maxStep) + "%"; s.style.background = p.color; b.appendChild(s); }
    });
    return [r.label, r.steps, ms(r.step_time_ms), b];
  });
  root.appendChild(el("div", { id: "rank-bars" }, legend(PH), table(["Rank", "Steps", "Step Time", ""], rrows, "rankbars")));

  /* ---- system metrics over time ------------------------------------ */
  root.appendChild(el("h2", { text: "System metrics over time" }));
  var sys = ser ? ser.system : null;
  if (!sys || !sys.t_s || !sys.nodes || !sys.nodes.length || typeof uPlot === "undefined") {
    root.appendChild(el("p", { cls: "note", id: "system-none", text: "No system samples in this summary." }));
  } else {
    var sbox = el("div", { cls: "chart", id: "chart-system" });
    root.appendChild(sbox);
    var sseries = [{ label: "time (s)" }], sdata = [sys.t_s], k = 0;
    sys.nodes.forEach(function (n) {
      [["cpu_percent", "CPU %"], ["ram_used_percent", "RAM %"], ["gpu_util_percent", "GPU util %"], ["gpu_memory_used_percent", "GPU mem %"]].forEach(function (m) {
        if (!n[m[0]]) return;
        sseries.push({ label: "N" + n.node + " " + m[1], stroke: palette[k++ % palette.length], width: 1,
          value: function (u, v) { return isNum(v) ? v.toFixed(1) + "%" : "n/a"; } });
        sdata.push(n[m[0]]);
      });
    });
    if (sdata.length > 1)
      charts.push(new uPlot({ width: chartWidth(), height: 220, scales: { x: { time: false } },
        series: sseries, axes: [{ label: "seconds" }, { label: "%" }] }, sdata, sbox));
    else
      sbox.appendChild(el("p", { cls: "note", text: "No host or GPU metric was sampled." }));
  }

  /* ---- evidence ---------------------------------------------------- */
  root.appendChild(el("h2", { text: "Evidence" }));
  var sections = [["step_time", "Step time"], ["step_memory", "Step memory"], ["system", "System"], ["process", "Process"]];
  var ev = el("div", { id: "evidence" });
  sections.forEach(function (s) {
    var sec = S[s[0]] || {};
    var d = sec.diagnosis || {};
    ev.appendChild(el("h3", { text: s[1] + ": " + (d.label || "n/a") + (d.severity ? " (" + d.severity + ")" : "") }));
    if (d.why) ev.appendChild(el("p", { cls: "issue", text: d.why }));
    (sec.issues || []).forEach(function (i) {
      ev.appendChild(el("div", { cls: "issue" }, el("b", { text: i.label + " (" + i.severity + ")" }), i.why + (i.next ? " Next: " + i.next : "")));
    });
  });
  ev.appendChild(el("h3", { text: "Step time per rank (window averages)" }));
  ev.appendChild(table(["Rank", "Steps", "Step", "p50", "p90", "Input", "H2D", "Forward", "Backward", "Optimizer", "Residual", "Untraced", "Culprit steps"],
    pr.map(function (r) {
      return [r.label, r.steps, ms(r.step_time_ms), ms(r.step_time_p50_ms), ms(r.step_time_p90_ms), ms(r.input_wait_ms), ms(r.h2d_ms),
        ms(r.forward_ms), ms(r.backward_ms), ms(r.optimizer_ms), ms(r.residual_ms), ms(r.untraced_ms), r.culprit_steps];
    })));
  ev.appendChild(el("h3", { text: "Step memory per rank" }));
  ev.appendChild(table(["Rank", "Peak allocated", "Peak reserved", "RSS"], (get(S, "step_memory.per_rank") || []).map(function (r) {
    return [r.label, bytes(r.peak_allocated_bytes), bytes(r.peak_reserved_bytes), bytes(r.rss_bytes)];
  })));
  ev.appendChild(el("h3", { text: "System per node" }));
  ev.appendChild(table(["Node", "Samples", "CPU", "RAM used", "GPU util", "GPU memory", "GPU temp", "GPU power"], (get(S, "system.per_node") || []).map(function (n) {
    return ["N" + n.node, n.samples, isNum(n.cpu_percent) ? n.cpu_percent.toFixed(0) + "%" : "n/a", bytes(n.ram_used_bytes),
      isNum(n.gpu_util_percent) ? n.gpu_util_percent.toFixed(0) + "%" : "n/a", bytes(n.gpu_memory_used_bytes),
      isNum(n.gpu_temperature_c) ? n.gpu_temperature_c.toFixed(0) + "C" : "n/a", isNum(n.gpu_power_w) ? n.gpu_power_w.toFixed(0) + "W" : "n/a"];
  })));
  ev.appendChild(el("h3", { text: "Process per rank" }));
  ev.appendChild(table(["Rank", "Samples", "CPU capacity", "RSS", "CUDA allocated", "CUDA reserved"], (get(S, "process.per_rank") || []).map(function (r) {
    return [r.label, r.samples, isNum(r.cpu_capacity_percent) ? r.cpu_capacity_percent.toFixed(0) + "%" : "n/a", bytes(r.rss_bytes), bytes(r.cuda_allocated_bytes), bytes(r.cuda_reserved_bytes)];
  })));
  root.appendChild(ev);

  /* ---- the box and the raw JSON (rendered when opened) -------------- */
  root.appendChild(el("h2", { text: "Summary text and raw JSON" }));
  if (S.text) root.appendChild(el("details", null, el("summary", { text: "The printed summary" }), el("pre", { cls: "box", text: S.text })));
  var raw = el("pre", { id: "raw-json" });
  var det = el("details", { id: "raw" }, el("summary", { text: "Raw final_summary.json" }), raw);
  det.addEventListener("toggle", function () {
    if (det.open && !raw.textContent) raw.textContent = JSON.stringify(S, null, 2);
  });
  root.appendChild(det);
  root.appendChild(el("footer", { text: "TraceML " + (meta.traceml_version || "") + " \u00b7 generated " + (S.generated_at || "") + " \u00b7 schema " + S.schema_version }));

  document.title = "TraceML \u00b7 " + (meta.run_name || "run") + " \u00b7 " + (verdict.label || "");
  document.body.setAttribute("data-rendered", "1");
  document.body.setAttribute("data-render-ms", performance.now().toFixed(1));
  document.body.setAttribute("data-charts", String(document.querySelectorAll(".uplot").length));
})();
