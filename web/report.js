/*
 * TraceML HTML report: renders final_summary.json (embedded in the page as a
 * JSON data block with id "traceml-summary") with dygraphs (Debian's
 * libjs-dygraphs, inlined by src/report/html.c) and the phase colours of
 * web/phases.js (window.TRACEML_PHASES, inlined before this file).
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
  /* the phase colours: web/phases.js, shared with the dashboard */
  var PH = window.TRACEML_PHASES.slice();
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
  /* what TraceML cost, named and figured as the box's line (box.c) */
  function traceml_cost(meta) {
    var inStep = meta.traceml_overhead_us_per_step, all = meta.traceml_overhead_total_us_per_step,
        bg = meta.traceml_background_cpu_percent;
    if (isNum(all) && isNum(inStep) && isNum(bg))
      return " \u00b7 TraceML cost: " + all.toFixed(1) + " \u00b5s/step (" + inStep.toFixed(1) +
        " in step, " + bg.toFixed(1) + "% of a core)";
    return isNum(inStep) ? " \u00b7 TraceML cost: " + inStep.toFixed(1) + " \u00b5s/step" : "";
  }
  function ms(v) { return isNum(v) ? (Math.abs(v) < 0.1 && v !== 0 ? v.toFixed(2) : v.toFixed(1)) + " ms" : "n/a"; }
  function pct(v) { return isNum(v) ? (v > 0 && v < 0.5 ? "<1%" : v.toFixed(0) + "%") : "n/a"; }
  /* a rate to three digits with an SI prefix, as the box (src/base/fmt.c) */
  function si(v, sep, unit) {
    var pre = ["", "k", "M", "G", "T", "P", "E"], k = 0;
    while (v >= 999.5 && k < 6) { v /= 1000; k++; }
    return v.toFixed(v < 9.995 ? 2 : v < 99.95 ? 1 : 0) + (k ? sep + pre[k] : sep) + unit;
  }
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
  /* The intervals as a chart (inline SVG, no library): one row a setting
   * measured, its change vs the baseline (a dot) and 95% interval (a
   * whisker) on one axis of percent, 0 (the baseline) a vertical line; a
   * whisker wholly left of it is a gain. Each row carries the figures it
   * draws (data-change, data-lo, data-hi: tune.json's) for the tests. */
  function tuneChart(arms) {
    arms = arms.filter(function (a) {
      var c = a.ci_percent || [];
      return a.runs && isNum(a.change_percent) && isNum(c[0]) && isNum(c[1]);
    });
    if (!arms.length) return null;
    var NS = "http://www.w3.org/2000/svg";
    function svg(tag, attrs, text) {
      var e = document.createElementNS(NS, tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      return e;
    }
    var lo = 0, hi = 0;
    arms.forEach(function (a) {
      lo = Math.min(lo, a.ci_percent[0]); hi = Math.max(hi, a.ci_percent[1]);
    });
    var pad = (hi - lo) * 0.05 || 1;
    lo -= pad; hi += pad;
    var LABEL = 260, W = 900, ROW = 26, TOP = 10, n = arms.length, H = TOP + n * ROW + 34;
    function x(v) { return LABEL + (v - lo) / (hi - lo) * (W - LABEL - 20); }
    var root = svg("svg", { id: "tune-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      role: "img", "data-lo": lo, "data-hi": hi,
      "aria-label": "change vs baseline with its 95% interval, each setting" });
    var base = TOP + n * ROW;
    /* round ticks (1, 2 or 5 times a power of ten apart), none on top of 0's label */
    var raw = (hi - lo) / 5, mag = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var step = mag * (raw / mag >= 5 ? 5 : raw / mag >= 2 ? 2 : 1);
    for (var t = Math.ceil(lo / step) * step; t <= hi; t += step)
      if (Math.abs(x(t) - x(0)) > 45)
        root.appendChild(svg("text", { x: x(t), y: base + 16, "text-anchor": "middle",
          "font-size": 11, fill: "#555" }, (t > 0 ? "+" : "") + Math.round(t) + "%"));
    root.appendChild(svg("text", { x: x(0), y: base + 16, "text-anchor": "middle",
      "font-size": 11, fill: "#333" }, "0 (baseline)"));
    root.appendChild(svg("line", { x1: LABEL, x2: W - 20, y1: base, y2: base, stroke: "#999" }));
    root.appendChild(svg("line", { id: "tune-chart-zero", x1: x(0), x2: x(0), y1: TOP - 4,
      y2: base, stroke: "#333", "stroke-dasharray": "4 3" }));
    root.appendChild(svg("text", { x: LABEL, y: base + 30, "font-size": 11, fill: "#555" },
      "change in step time vs the baseline, 95% interval (left of 0: faster)"));
    arms.forEach(function (a, i) {
      var y = TOP + i * ROW + ROW / 2, c = a.ci_percent;
      var color = a.result === "gain" ? "#080" : a.result === "loss" ? "#b00" : "#777";
      var g = svg("g", { "class": "tune-ci " + (a.result || "").replace(/ /g, "-"),
        "data-settings": a.settings, "data-change": a.change_percent,
        "data-lo": c[0], "data-hi": c[1] });
      g.appendChild(svg("title", {}, a.settings + ": " + signed(a.change_percent) + " (" +
        signed(c[0]) + " .. " + signed(c[1]) + "), " + a.result));
      g.appendChild(svg("text", { x: LABEL - 8, y: y + 4, "text-anchor": "end", "font-size": 12,
        fill: "#222" }, a.settings));
      g.appendChild(svg("line", { "class": "whisker", x1: x(c[0]), x2: x(c[1]), y1: y, y2: y,
        stroke: color, "stroke-width": 2 }));
      [c[0], c[1]].forEach(function (v) {
        g.appendChild(svg("line", { x1: x(v), x2: x(v), y1: y - 6, y2: y + 6, stroke: color,
          "stroke-width": 2 }));
      });
      g.appendChild(svg("circle", { "class": "change", cx: x(a.change_percent), cy: y, r: 4,
        fill: color }));
      root.appendChild(g);
    });
    return el("div", { cls: "scroll tune-chart" }, root);
  }
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
    var chart = tuneChart((T.trials || []).concat(T.combination ? [T.combination] : []));
    if (chart) tsec.appendChild(chart);
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
  /* tune stops each trial (a SIGINT) once it ran its steps: a trial's
   * "interrupted" (meta.stopped_by "tune") is that, not a failure */
  function runStatus() {
    if (S.status === "interrupted" && meta.stopped_by === "tune")
      return "stopped by tune after " + (meta.common_steps || 0) + " steps (a trial)";
    return "status " + (S.status || "?");
  }
  var verdict = S.primary_diagnosis || {};
  var hdr = [meta.run_name || "run",
    (meta.ranks_reported || 0) + "/" + (meta.world_size || 0) + " ranks",
    meta.gpus_observed ? meta.gpus_observed + (meta.gpus_observed === 1 ? " GPU" : " GPUs") + " observed" : null,
    (meta.common_steps || 0) + " common steps",
    isNum(S.duration_s) ? S.duration_s.toFixed(1) + "s" : null,
    (meta.clock || "cpu").toUpperCase() + " clock",
    runStatus()].filter(Boolean).join(" \u00b7 ");
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
  var machine = get(S, "contention.machine");   /* the box's Machine row, when it matters */
  if (machine) banner.appendChild(el("p", { cls: "machine", id: "machine", text: "Machine: " + machine }));
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
  var between = get(st, "window.between_epochs_ms");
  if (isNum(between) && between >= 50)   /* validation, checkpoints before each epoch's loader */
    rows.push(["Untraced (before each epoch)", ms(between),
      isNum(st.between_epochs_wall_percent) ? pct(st.between_epochs_wall_percent) + " of wall" : ""]);
  rows.push(["DataLoader fetch (CPU, supplemental)", ms(med.dataloader_fetch_cpu_ms), ""]);
  if (isNum(med.communication_total_ms))
    rows.push(["Communication in flight (CPU, supplemental)", ms(med.communication_total_ms),
      isNum(med.communication_bytes_per_s) ? (med.communication_bytes_per_s / 1e6).toFixed(1) + " MB/s" : ""]);
  rows.push(["Step-to-step noise (stddev)", ms(st.noise_ms), ""]);
  var tp = S.throughput || {};   /* docs/summary-json.md, throughput */
  if (isNum(tp.samples_per_s))
    rows.push(["Throughput (all ranks)", si(tp.samples_per_s, "", " samples/s"),
      isNum(tp.tokens_per_s) ? si(tp.tokens_per_s, "", " tokens/s") : ""]);
  if (isNum(tp.achieved_flops_per_s))
    rows.push(["FLOPs achieved (" + (tp.flops_counted_by === "given" ? "given" : "FlopCounterMode") + ")",
      si(tp.achieved_flops_per_s, " ", "FLOP/s"),
      isNum(tp.mfu_percent) ? "MFU " + tp.mfu_percent.toFixed(1) + "% (" + tp.dtype + " peak)" : "no peak: no MFU"]);
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
        traceml_cost(meta) }))));

  /* ---- deep dive (docs/deep-dive.md) -------------------------------
   * Where the profiled window's compute went: a table of the modules
   * with a bar each (its share of the window's profiled time), then the
   * operators. Only when the summary has one. */
  var dd = S.deep_dive;
  if (dd) {
    var ddsec = el("div", { id: "deep-dive" });
    if (dd.status !== "ran") {
      ddsec.appendChild(el("h2", { text: "Deep dive" }));
      ddsec.appendChild(el("p", { cls: "meta", text: "Skipped: " + (dd.reason || "n/a") }));
    } else {
      ddsec.appendChild(el("h2", { text: "Deep dive: where the compute goes (steps " + dd.first_step + "–" + dd.last_step + ", left out of the figures above)" }));
      var ddbar = function (v) {
        var b = el("div", { cls: "bar" }), sp = el("span");
        sp.style.width = Math.max(0, Math.min(100, v)) + "%"; sp.style.background = "#4e79a7";
        b.appendChild(sp);
        return b;
      };
      var mrows = (dd.modules || []).map(function (m) {
        return [m.name || "(outside modules)", ms(m.ms), pct(m.percent), m.top_operator || "", ddbar(m.percent)];
      });
      var mt = table(["Module", "Self time", "Share", "Heaviest operator", ""], mrows, "rankbars");
      mt.id = "deep-dive-modules";
      var orows = (dd.operators || []).map(function (o) {
        return [o.name, ms(o.ms), pct(o.percent), String(o.calls), ddbar(o.percent)];
      });
      var ot = table(["Operator", "Self time", "Share", "Calls", ""], orows, "rankbars");
      ot.id = "deep-dive-operators";
      ddsec.appendChild(el("div", { cls: "grid" }, el("div", { cls: "card" }, el("h3", { text: "Modules" }), mt),
        el("div", { cls: "card" }, el("h3", { text: "Operators" }), ot)));
      var note = "Rank " + dd.rank + " · " + dd.activities + " activity · window " + ms(dd.window_ms) +
        " wall, " + ms(dd.profiled_ms) + " profiled";
      if (dd.spread) note += " · " + dd.spread.module + ": " + ms(dd.spread.slow_ms) + " on rank " +
        dd.spread.slow_rank + ", " + ms(dd.spread.fast_ms) + " on rank " + dd.spread.fast_rank;
      ddsec.appendChild(el("p", { cls: "meta", text: note }));
    }
    root.appendChild(ddsec);
  }

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
  /* The memory axis. A memory chart answers "does it grow, and by how
   * much?": an axis fitted to the data stretches a flat 335 MB with 4 MB
   * of drift over the chart's whole height, and it reads as a leak. So the
   * rule is: the y axis starts at 0 (includeZero), and a change looks as
   * big as it is next to the whole (4 MB of 339 MB: about 1% of the
   * height). One unit per chart, chosen from its largest value (decimal
   * B, KB, MB or GB, as every TraceML view), named by the axis label; the
   * ticks are plain numbers in it, with enough decimals to tell
   * neighbouring ticks apart. */
  function memUnit(rows) {
    var top = 0;
    rows.forEach(function (r) {
      for (var k = 1; k < r.length; k++) if (isNum(r[k]) && Math.abs(r[k]) > top) top = Math.abs(r[k]);
    });
    return top >= 1e9 ? [1e9, "GB"] : top >= 1e6 ? [1e6, "MB"] : top >= 1e3 ? [1e3, "KB"] : [1, "bytes"];
  }
  function unitTick(div) {
    return function (v, gran, opts, g) {
      var r = g.yAxisRange(), step = (r[1] - r[0]) / div / 5;
      var d = step > 0 ? Math.max(0, Math.min(3, Math.ceil(-Math.log(step) / Math.LN10))) : 1;
      return (v / div).toFixed(d);
    };
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
      var mrows = ms3.length ? rowsOf(xs, ms3.map(function (m) { return r[m[0]]; })) : [];
      var unit = memUnit(mrows);
      drawChart("memory", boxes.mem, ["step"].concat(ms3.map(function (m) { return m[1]; })),
        ms3.map(function (m) { return m[2]; }), mrows,
        { height: 220, xlabel: "step", ylabel: unit[1], fmt: bytes, tick: unitTick(unit[0]), yw: 60,
          zero: true, empty: "No per-step memory was recorded on this rank." });
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
    /* the section's diagnosis is usually its first issue too: each
     * sentence once (the heading names the diagnosis; its why and next
     * below it), then the other issues with their own names */
    var same = function (i) { return i.kind === d.kind && i.why === d.why; };
    var mine = (sec.issues || []).filter(same)[0];
    if (d.why) ev.appendChild(el("p", { cls: "issue" }, d.why + ((mine || d).next ? " Next: " + (mine || d).next : "")));
    (sec.issues || []).forEach(function (i) {
      if (same(i)) return;
      ev.appendChild(el("div", { cls: "issue" }, el("b", { text: i.label + " (" + i.severity + ")" }), i.why + (i.next ? " Next: " + i.next : "")));
    });
  });
  ev.appendChild(el("h3", { text: "Step time per rank (window averages)" }));
  /* 15 columns do not fit every screen: the communication columns only
   * for a run that communicated, headers that may wrap, the rank column
   * kept in view, and the table scrolls sideways in its box (.scroll)
   * when the page is narrower still, so every column can be reached */
  var rcols = [["Rank", function (r) { return r.label; }], ["Steps", function (r) { return r.steps; }],
    ["Step", function (r) { return ms(r.step_time_ms); }], ["p50", function (r) { return ms(r.step_time_p50_ms); }],
    ["p90", function (r) { return ms(r.step_time_p90_ms); }], ["Input", function (r) { return ms(r.input_wait_ms); }],
    ["H2D", function (r) { return ms(r.h2d_ms); }], ["Forward", function (r) { return ms(r.forward_ms); }],
    ["Backward", function (r) { return ms(r.backward_ms); }], ["Optimizer", function (r) { return ms(r.optimizer_ms); }],
    ["Communication", function (r) { return ms(r.communication_ms); }, 1],
    ["MB/s", function (r) { return isNum(r.communication_bytes_per_s) ? (r.communication_bytes_per_s / 1e6).toFixed(1) : "n/a"; }, 1],
    ["Residual", function (r) { return ms(r.residual_ms); }], ["Untraced", function (r) { return ms(r.untraced_ms); }],
    ["Culprit steps", function (r) { return r.culprit_steps; }]].filter(function (c) { return !c[2] || commRun; });
  var rtab = table(rcols.map(function (c) { return c[0]; }),
    pr.map(function (r) { return rcols.map(function (c) { return c[1](r); }); }), "ranks");
  rtab.id = "rank-table";
  ev.appendChild(rtab);
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
