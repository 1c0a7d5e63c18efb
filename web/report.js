/*
 * TraceML HTML report: renders final_summary.json (embedded in the page as a
 * JSON data block with id "traceml-summary") with dygraphs (Debian's
 * libjs-dygraphs, inlined by src/report/html.c).
 *
 * Everything the page shows comes from that JSON, so a report works from
 * the summary file alone and opens offline. The per-step charts use the
 * summary's "series" (bucketed per-step figures, docs/summary-json.md);
 * without it (an older summary) they say so. Nothing here computes a
 * verdict: the engine did that; this file only draws it.
 *
 * When it is done the page sets <body data-rendered="1"
 * data-render-ms="..." data-charts="N"> (N: charts drawn) and, for every
 * uncaught error, data-errors="N"; window.__traceml.charts holds the
 * Dygraph objects. The headless-browser test reads those.
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
    { key: "communication", label: "Communication", color: "#b07aa1" },
    { key: "residual", label: "Residual", color: "#9c755f" }
  ];
  /* communication is a phase only of runs that communicated */
  var commRun = ((S.step_time || {}).per_rank || []).some(function (r) {
    return typeof r.communication_ms === "number";
  });
  PH = PH.filter(function (p) { return p.key !== "communication" || commRun; });

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

  /* ---- traceml tune ------------------------------------------------
   * tune.html is the baseline trial's own report with the tune's result
   * (tune.json, docs/tune.md) in "tune": shown first, the run below. */
  function signed(v) { return isNum(v) ? (v > 0 ? "+" : "") + v.toFixed(1) + "%" : ""; }
  if (S.tune) {
    var T = S.tune, TB = T.baseline || {};
    var tsec = el("section", { id: "tune" }, el("h1", { text: "TraceML Tune" }));
    tsec.appendChild(el("div", { cls: "meta", id: "tune-header", text: [T.command,
      T.trials_run + " trials", T.repeats + " processes a side",
      num(T.elapsed_s, 0) + " s of a " + num(T.budget_s, 0) + " s budget"].join(" \u00b7 ") }));
    var trows = [["baseline" + (TB.label ? " (" + TB.label + ")" : ""), ms(TB.step_time_ms),
      num(TB.steps_per_s, 2), "", "", TB.runs, ""]];
    (T.trials || []).concat(T.combination ? [T.combination] : []).forEach(function (a) {
      var c = a.ci_percent || [];
      trows.push({ cls: a.result === "gain" ? "gain" : a.result === "loss" ? "loss" : "",
        cells: [a.settings, a.runs ? ms(a.step_time_ms) : "", a.runs ? num(a.steps_per_s, 2) : "",
          signed(a.change_percent), isNum(c[0]) ? signed(c[0]) + " .. " + signed(c[1]) : "",
          a.runs, a.result + (a.why && !a.runs ? " (" + a.why + ")" : "")] });
    });
    tsec.appendChild(table(["Setting", "Step time", "Steps/s", "Change", "95% interval",
      "Runs", "Result"], trows, "tune"));
    tsec.appendChild(el("p", { id: "tune-pick", text: T.apply ? "Recommended: " + T.apply +
      " \u2014 traceml run --apply tune.json SCRIPT, or in the script:" :
      "Nothing recommended: no setting was faster over its whole interval." }));
    if (T.code && T.code.length) tsec.appendChild(el("pre", { cls: "box", text: T.code.join("\n") }));
    if (T.note) tsec.appendChild(el("p", { cls: "note", text: "Note: " + T.note }));
    tsec.appendChild(el("p", { cls: "meta", text: "Below: the baseline trial's own run report." }));
    root.appendChild(tsec);
  }

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
  (S.also || []).forEach(function (d, i) {
    banner.appendChild(el("p", { cls: "also " + (d.severity || "INFO"), id: "also-" + i,
      text: "Also: " + d.label + " (" + d.severity + "): " + d.why }));
  });
  root.appendChild(banner);

  /* ---- phase breakdown -------------------------------------------- */
  var st = S.step_time || {};
  var med = st.median || {};
  var shares = med.shares_percent || {};   /* the shown rank's own, as in the box */
  var cause = get(st, "diagnosis.evidence.cause");
  root.appendChild(el("h2", { text: "Phase breakdown (" + (med.label ? "median rank " + med.label : "window average") + ", " + (meta.clock || "cpu").toUpperCase() + " clock)" }));
  var rows = [["Step Time", ms(med.step_time_ms), "100%"]];
  [["Input Wait", "input_wait"], ["Compute", "compute"], ["\u2003Forward", "forward"],
   ["\u2003Backward", "backward"], ["\u2003Optimizer", "optimizer"], ["Communication", "communication"],
   ["H2D", "h2d"], ["Residual", "residual"]].forEach(function (r) {
    if (r[1] === "communication" && !isNum(med.communication_ms)) return;   /* a run that never communicated */
    rows.push({ cls: cause === r[1] ? "cause" : "", cells: [r[0] + (cause === r[1] ? "  \u25c0 cause" : ""), ms(med[r[1] + "_ms"]), pct(shares[r[1]])] });
  });
  rows.push(["Untraced (between steps)", ms(med.untraced_ms),
    isNum(st.untraced_wall_percent) ? pct(st.untraced_wall_percent) + " of wall" : ""]);
  rows.push(["DataLoader fetch (CPU, supplemental)", ms(med.dataloader_fetch_cpu_ms), ""]);
  if (isNum(med.communication_total_ms))
    rows.push(["Communication in flight (CPU, supplemental)", ms(med.communication_total_ms),
      isNum(med.communication_bytes_per_s) ? (med.communication_bytes_per_s / 1e6).toFixed(1) + " MB/s" : ""]);
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

  /* ---- charts (dygraphs) ---------------------------------------------
   * A chart is a box (class "chart", the id the tests look for) holding the
   * plot (dygraphs draws its canvases into it) and a legend below it: the
   * series names, and their values under the mouse. Data is row-major:
   * [x, y1, y2, ...] per row, null for a missing value. */
  var charts = {};
  window.__traceml = { charts: charts };
  function chartBox(id) {
    var plot = el("div", { cls: "chart-plot" });
    var leg = el("div", { cls: "legend chart-legend" });
    var box = el("div", { cls: "chart", id: id }, plot, leg);
    box.plot = plot; box.leg = leg;
    return box;
  }
  function legendFormatter(xfmt, fmt) {
    return function (data) {
      var f = document.createDocumentFragment(), sel = isNum(data.x);
      if (sel) f.appendChild(el("b", { text: xfmt(data.x) }));
      data.series.forEach(function (s) {
        var i = el("i"); i.style.background = s.color;
        f.appendChild(el("span", s.isHighlighted ? { cls: "hl" } : null, i,
          s.label + (sel ? " " + (isNum(s.y) ? fmt(s.y) : "n/a") : "")));
      });
      return f;
    };
  }
  /* o: height, xlabel, ylabel, xfmt / fmt (legend values), tick (y-axis labels),
   * yw (y-axis label width), zero (y from 0), stacked */
  function drawChart(name, box, labels, colors, rows, o) {
    if (charts[name]) { charts[name].destroy(); charts[name] = null; }
    box.plot.textContent = "";
    box.leg.textContent = "";
    if (!rows.length) {
      box.plot.style.height = "";
      box.plot.appendChild(el("p", { cls: "note", text: o.empty || "Nothing recorded." }));
      return null;
    }
    box.plot.style.height = o.height + "px";
    var y = { axisLabelWidth: o.yw || 50, valueFormatter: o.fmt };
    if (o.tick) y.axisLabelFormatter = o.tick;
    var opts = {
      labels: labels, colors: colors, xlabel: o.xlabel, ylabel: o.ylabel,
      legend: "always", labelsDiv: box.leg, legendFormatter: legendFormatter(o.xfmt || fmtStep, o.fmt),
      strokeWidth: 1, axisLabelFontSize: 12, gridLineColor: "#e6e9ed",
      includeZero: !!o.zero, axes: { y: y }
    };
    if (o.stacked) {
      opts.stackedGraph = true;
      opts.stackedGraphNaNFill = "none";   /* a phase missing on a step adds 0 */
      opts.fillAlpha = 0.8;
    }
    charts[name] = new Dygraph(box.plot, rows, opts);
    return charts[name];
  }
  function rowsOf(xs, cols, keep) {
    var rows = [];
    xs.forEach(function (x, i) {
      if (keep && !keep(i)) return;
      rows.push([x].concat(cols.map(function (c) { return c && isNum(c[i]) ? c[i] : null; })));
    });
    return rows;
  }
  /* y-axis bytes: enough decimals to tell neighbouring ticks apart */
  function byteTick(v, gran, opts, g) {
    var r = g.yAxisRange(), top = Math.max(Math.abs(r[0]), Math.abs(r[1]));
    var u = top >= 1e9 ? [1e9, " GB"] : top >= 1e6 ? [1e6, " MB"] : top >= 1e3 ? [1e3, " KB"] : [1, " B"];
    var step = (r[1] - r[0]) / u[0] / 5;
    var d = step > 0 ? Math.max(0, Math.min(3, Math.ceil(-Math.log(step) / Math.LN10))) : 1;
    return (v / u[0]).toFixed(d) + u[1];
  }
  function fmtStep(x) { return "step " + x; }
  function fmtMs(v) { return v.toFixed(2) + " ms"; }
  function fmtPct(v) { return v.toFixed(1) + "%"; }
  var palette = ["#e4572e", "#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"];
  var haveCharts = typeof Dygraph !== "undefined";

  /* ---- per-step charts --------------------------------------------- */
  var ser = S.series;
  root.appendChild(el("h2", { text: "Per step" }));
  if (!ser || !ser.ranks || !ser.ranks.length || !haveCharts) {
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
    var boxes = { stack: chartBox("chart-steps"), input: chartBox("chart-input"), mem: chartBox("chart-memory") };
    root.appendChild(el("h3", { text: "Step time per step, stacked by phase (ms)" }));
    root.appendChild(boxes.stack);
    root.appendChild(el("h3", { text: "Input wait per step, every included rank (ms)" }));
    root.appendChild(boxes.input);
    root.appendChild(el("h3", { text: "Memory per step" }));
    root.appendChild(boxes.mem);

    var xs = ser.step || [];
    /* dygraphs stacks from the last series up: Residual first in the
     * labels puts Input Wait at the bottom and the legend in drawing order */
    var TOP = PH.slice().reverse();
    var drawStack = function (ri) {
      var r = ser.ranks[ri];
      var stt = r.step_time_ms || [];
      /* the phases this rank has (communication only where it communicated) */
      var top = TOP.filter(function (p) { return r[p.key + "_ms"]; });
      drawChart("steps", boxes.stack, ["step"].concat(top.map(function (p) { return p.label; })),
        top.map(function (p) { return p.color; }),
        rowsOf(xs, top.map(function (p) { return r[p.key + "_ms"]; }), function (i) { return isNum(stt[i]); }),
        { height: 280, xlabel: "step", ylabel: "ms", fmt: fmtMs, zero: true, stacked: true,
          empty: "No steps on this rank." });
    };
    var inRanks = ser.ranks.slice(0, 16);
    drawChart("input", boxes.input, ["step"].concat(inRanks.map(function (r) { return r.label; })),
      inRanks.map(function (r, i) { return palette[i % palette.length]; }),
      rowsOf(xs, inRanks.map(function (r) { return r.input_wait_ms; })),
      { height: 220, xlabel: "step", ylabel: "ms", fmt: fmtMs, zero: true, empty: "No steps." });
    var drawMem = function (ri) {
      var r = ser.ranks[ri];
      var ms3 = [["rss_bytes", "RSS", "#59a14f"], ["peak_allocated_bytes", "CUDA allocated (peak)", "#4e79a7"],
        ["peak_reserved_bytes", "CUDA reserved (peak)", "#e15759"]].filter(function (m) { return r[m[0]]; });
      drawChart("memory", boxes.mem, ["step"].concat(ms3.map(function (m) { return m[1]; })),
        ms3.map(function (m) { return m[2]; }),
        ms3.length ? rowsOf(xs, ms3.map(function (m) { return r[m[0]]; })) : [],
        { height: 220, xlabel: "step", ylabel: "bytes", fmt: bytes, tick: byteTick, yw: 70,
          empty: "No per-step memory was recorded on this rank." });
    };
    drawStack(pick);
    drawMem(pick);
    sel.addEventListener("change", function () {
      var i = parseInt(sel.value, 10);
      drawStack(i);
      drawMem(i);
      countCharts();
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
  if (!sys || !sys.t_s || !sys.nodes || !sys.nodes.length || !haveCharts) {
    root.appendChild(el("p", { cls: "note", id: "system-none", text: "No system samples in this summary." }));
  } else {
    var sbox = chartBox("chart-system");
    root.appendChild(sbox);
    var slabels = ["seconds"], scols = [], scolors = [];
    sys.nodes.forEach(function (n) {
      [["cpu_percent", "CPU %"], ["ram_used_percent", "RAM %"], ["gpu_util_percent", "GPU util %"], ["gpu_memory_used_percent", "GPU mem %"]].forEach(function (m) {
        if (!n[m[0]]) return;
        slabels.push("N" + n.node + " " + m[1]);
        scolors.push(palette[scols.length % palette.length]);
        scols.push(n[m[0]]);
      });
    });
    drawChart("system", sbox, slabels, scolors, scols.length ? rowsOf(sys.t_s, scols) : [],
      { height: 240, xlabel: "seconds", ylabel: "%", fmt: fmtPct,
        xfmt: function (x) { return x.toFixed(1) + " s"; }, zero: true,
        empty: "No host or GPU metric was sampled." });
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
  ev.appendChild(table(["Rank", "Steps", "Step", "p50", "p90", "Input", "H2D", "Forward", "Backward", "Optimizer", "Communication", "MB/s", "Residual", "Untraced", "Culprit steps"],
    pr.map(function (r) {
      return [r.label, r.steps, ms(r.step_time_ms), ms(r.step_time_p50_ms), ms(r.step_time_p90_ms), ms(r.input_wait_ms), ms(r.h2d_ms),
        ms(r.forward_ms), ms(r.backward_ms), ms(r.optimizer_ms), ms(r.communication_ms),
        isNum(r.communication_bytes_per_s) ? (r.communication_bytes_per_s / 1e6).toFixed(1) : "n/a",
        ms(r.residual_ms), ms(r.untraced_ms), r.culprit_steps];
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

  /* data-charts: how many charts dygraphs has drawn, with at least one row */
  function countCharts() {
    var n = 0;
    for (var k in charts) if (charts[k] && charts[k].numRows() > 0) n++;
    document.body.setAttribute("data-charts", String(n));
  }
  document.title = "TraceML \u00b7 " + (meta.run_name || "run") + " \u00b7 " + (verdict.label || "");
  document.body.setAttribute("data-rendered", "1");
  document.body.setAttribute("data-render-ms", performance.now().toFixed(1));
  countCharts();
})();
