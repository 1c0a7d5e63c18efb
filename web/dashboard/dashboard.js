/*
 * dashboard.js - TraceML's live dashboard. It draws what the aggregator
 * computed (GET /api/live, then the /events stream): no diagnosis logic
 * lives here, only layout. Charts are dygraphs (Debian's libjs-dygraphs,
 * compiled into the binary and served as /dygraph.min.js).
 * window.__traceml exposes the update count, errors and the Dygraph
 * objects (charts) for the tests.
 */
(function () {
  "use strict";
  var charts = {};
  var state = { updates: 0, last: null, summary: null, errors: [], gpu: [], charts: charts,
                cpuram: { points: [], nodes: [] } };
  window.__traceml = state;
  /* the phase colours: web/phases.js (/phases.js), shared with the HTML
   * report; Communication only once a rank has communicated */
  var COLORS = {}, ALL_PHASES = [];
  window.TRACEML_PHASES.forEach(function (p) {
    COLORS[p.key] = p.color;
    ALL_PHASES.push([p.key, p.label]);
  });
  var PHASES = ALL_PHASES.filter(function (p) { return p[0] !== "communication"; });
  function phasesOf(d) {
    var comm = (d.ranks || []).some(function (r) { return r.communication_ms != null; });
    PHASES = ALL_PHASES.filter(function (p) { return p[0] !== "communication" || comm; });
  }

  /* The System and process table names a gauge (its /metrics name less
   * "traceml_") in words, with its unit in the value: [label, unit], the
   * unit one of bytes, %, C, W. A key not listed here is shown in words
   * made from its name, never raw. */
  var GAUGES = {
    system_cpu_percent: ["Host CPU", "%"],
    system_ram_used_bytes: ["Host RAM used", "bytes"],
    system_ram_total_bytes: ["Host RAM total", "bytes"],
    system_ram_used_peak_bytes: ["Host RAM used, peak", "bytes"],
    system_gpu_util_percent: ["GPU utilisation", "%"],
    system_gpu_memory_used_bytes: ["GPU memory used", "bytes"],
    system_gpu_memory_total_bytes: ["GPU memory total", "bytes"],
    system_gpu_memory_peak_percent: ["GPU memory used, peak", "%"],
    system_gpu_temperature_c: ["GPU temperature", "C"],
    system_gpu_temperature_peak_c: ["GPU temperature, peak", "C"],
    system_gpu_power_w: ["GPU power", "W"],
    system_gpu_power_limit_w: ["GPU power limit", "W"],
    system_gpu_power_percent: ["GPU power, of its limit", "%"],
    process_cpu_percent: ["Process CPU (100% = one core)", "%"],
    process_cpu_capacity_percent: ["Process CPU, of the host's cores", "%"],
    process_runqueue_wait_percent: ["Process waiting for a core, of wall time", "%"],
    process_rss_bytes: ["Process RSS", "bytes"],
    process_rss_peak_bytes: ["Process RSS, peak", "bytes"],
    process_cuda_allocated_bytes: ["CUDA allocated", "bytes"],
    process_cuda_reserved_bytes: ["CUDA reserved", "bytes"],
    process_cuda_reserved_peak_bytes: ["CUDA reserved, peak", "bytes"],
    process_device_total_bytes: ["GPU memory total (the rank's device)", "bytes"],
    process_host_ram_total_bytes: ["Host RAM total (the rank's host)", "bytes"]
  };
  function gaugeOf(name) {
    if (GAUGES[name]) return GAUGES[name];
    var m = /_(bytes|percent|c|w)$/.exec(name), unit = m ? { bytes: "bytes", percent: "%", c: "C", w: "W" }[m[1]] : "";
    var words = name.replace(/_(bytes|percent|c|w)$/, "").replace(/^(system|process)_/, "").replace(/_/g, " ");
    return [(/^process_/.test(name) ? "Process " : "Host ") + words, unit];
  }
  function gaugeValue(v, unit) {
    return unit === "bytes" ? bytes(v) : unit === "%" ? pct(v) : unit === "C" ? v.toFixed(0) + " \u00b0C" :
           unit === "W" ? v.toFixed(0) + " W" : String(v);
  }

  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  /* The unit policy of every TraceML view (src/base/fmt.h): decimal sizes,
   * ms with one decimal (two below 0.1 ms), seconds from 10 s, whole percent. */
  function ms(v) {
    if (v == null) return "n/a";
    var m = Math.abs(v);
    return m >= 10000 ? (v / 1000).toFixed(1) + " s" : m > 0 && m < 0.1 ? v.toFixed(2) + " ms" : v.toFixed(1) + " ms";
  }
  function pct(v) { return v == null ? "n/a" : v > 0 && v < 0.5 ? "<1%" : v.toFixed(0) + "%"; }
  function bytes(v) {
    if (v == null) return "n/a";
    var a = Math.abs(v);
    return a >= 1e9 ? (v / 1e9).toFixed(1) + " GB" : a >= 1e6 ? (v / 1e6).toFixed(1) + " MB" :
           a >= 1e3 ? (v / 1e3).toFixed(1) + " KB" : v.toFixed(0) + " B";
  }
  /* A chart: dygraphs draws into .plot inside the card's chart div, the
   * legend (names; values under the mouse) goes below it. Data is
   * row-major, [x, y1, y2, ...] per row, null where a value is missing. */
  function box(id) {
    var b = $(id);
    if (!b.plot) {
      b.textContent = "";
      b.plot = document.createElement("div");
      b.plot.className = "plot";
      b.leg = document.createElement("div");
      b.leg.className = "legend";
      b.appendChild(b.plot);
      b.appendChild(b.leg);
    }
    return b;
  }

  function span(cls, text, color) {
    var e = document.createElement("span");
    if (cls) e.className = cls;
    if (color) { var i = document.createElement("i"); i.style.background = color; e.appendChild(i); }
    e.appendChild(document.createTextNode(text));
    return e;
  }

  function legendFormatter(xfmt, fmt) {
    return function (data) {
      var f = document.createDocumentFragment(), sel = typeof data.x === "number" && isFinite(data.x);
      if (sel) f.appendChild(span("x", xfmt(data.x)));
      data.series.forEach(function (s) {
        f.appendChild(span(s.isHighlighted ? "hl" : "", s.label +
          (sel ? " " + (typeof s.y === "number" && isFinite(s.y) ? fmt(s.y) : "n/a") : ""), s.color));
      });
      return f;
    };
  }

  function tick(v) { return String(+v.toFixed(Math.abs(v) >= 100 ? 0 : 2)); }

  /* o: fmt (legend values), xfmt (legend x), ylabel, zero (y from 0), stacked,
   * connect (draw lines over missing values), range (the y axis' [min, max]),
   * y2 ({labels, ylabel, fmt, range}: the series drawn against a second axis
   * on the right, from 0) */
  function setChart(name, id, labels, colors, rows, o) {
    var b = box(id), c = charts[name];
    if (!rows.length) return;              /* dygraphs cannot draw no rows: keep what is there */
    if (c && c.getLabels().join("\u0001") === labels.join("\u0001")) {
      if (o.y2 && o.y2.range) c.updateOptions({ axes: { y2: { valueRange: o.y2.range } } }, true);
      /* a redraw clears the selection: keep the legend's values under the
       * mouse on the same x while new steps arrive */
      var sel = c.getSelection(), x = sel >= 0 ? c.getValue(sel, 0) : null;
      c.updateOptions({ file: rows });
      if (x !== null) {
        for (var i = 0; i < rows.length; i++) {
          if (+rows[i][0] === x) { c.setSelection(i); break; }
        }
      }
      return;
    }
    if (c) c.destroy();
    var opts = {
      labels: labels, colors: colors, legend: "always", labelsDiv: b.leg,
      legendFormatter: legendFormatter(o.xfmt || function (x) { return "step " + x; }, o.fmt || tick),
      strokeWidth: 1.5, axisLabelFontSize: 12, gridLineColor: "#2a323c", axisLineColor: "#8a96a3",
      includeZero: !!o.zero, connectSeparatedPoints: !!o.connect, ylabel: o.ylabel || "",
      axes: { y: { axisLabelWidth: 60, valueFormatter: o.fmt || tick } }
    };
    if (o.y2) {                            /* these series on a right-hand axis */
      opts.series = {};
      o.y2.labels.forEach(function (l) { opts.series[l] = { axis: "y2" }; });
      opts.y2label = o.y2.ylabel;
      opts.axes.y2 = { axisLabelWidth: 60, valueFormatter: o.y2.fmt, independentTicks: true,
                       includeZero: true };
      if (o.y2.range) opts.axes.y2.valueRange = o.y2.range;
    }
    if (o.range) opts.axes.y.valueRange = o.range;
    if (o.stacked) {
      opts.stackedGraph = true;
      opts.stackedGraphNaNFill = "none";
      opts.fillAlpha = 0.8;
      opts.strokeWidth = 1;
    }
    charts[name] = new Dygraph(b.plot, rows, opts);
  }

  function rowsOf(x, cols, keep) {
    var rows = [];
    x.forEach(function (v, i) {
      if (keep && !keep(i)) return;
      rows.push([v].concat(cols.map(function (c) { return c && c[i] != null ? c[i] : null; })));
    });
    return rows;
  }

  function stackChart(d) {
    var s = d.series || {};
    var x = s.step || [];
    var st = s.step_time_ms || [];
    /* dygraphs stacks from the last series up: Input Wait (last) at the bottom */
    var top = PHASES.slice().reverse();
    $("stack-rank").textContent = x.length ? "(rank " + s.rank + ", last " + x.length + " steps, ms)" : "";
    setChart("stack", "c-stack", ["step"].concat(top.map(function (p) { return p[1]; })),
             top.map(function (p) { return COLORS[p[0]]; }),
             rowsOf(x, top.map(function (p) { return s[p[0] + "_ms"]; }), function (i) { return st[i] != null; }),
             { fmt: ms, ylabel: "ms", zero: true, stacked: true });
  }

  function inputChart(d) {
    var s = d.series || {};
    setChart("input", "c-input", ["step", "Input Wait", "Step Time"], [COLORS.input_wait, "#8a96a3"],
             rowsOf(s.step || [], [s.input_wait_ms, s.step_time_ms]), { fmt: ms, ylabel: "ms", zero: true });
  }

  function memChart(d) {
    var s = d.series || {};
    function mb(a) { return (a || []).map(function (v) { return v == null ? null : v / 1e6; }); }
    setChart("mem", "c-mem", ["step", "RSS (MB)", "CUDA allocated (MB)", "CUDA reserved (MB)"],
             ["#57ab5a", "#539bf5", "#b083f0"],
             rowsOf(s.step || [], [mb(s.rss_bytes), mb(s.cuda_allocated_bytes), mb(s.cuda_reserved_bytes)]),
             /* from 0, as the report's memory chart (web/report.js,
              * memUnit): a flat 335 MB with 4 MB of drift must look flat */
             { fmt: function (v) { return v.toFixed(1) + " MB"; }, ylabel: "MB", zero: true });
    var m = d.step_memory || {};
    $("mem-label").textContent = m.label ? "Step memory: " + m.label + (m.why ? " — " + m.why : "") : "";
  }

  function gpuChart(d) {
    var g = state.gpu;
    if (d.gpu_util_percent != null) {
      g.push([new Date(d.unix_ms), d.gpu_util_percent]);
      if (g.length > 600) g.shift();
    }
    $("c-gpu").style.display = g.length ? "" : "none";
    setChart("gpu", "c-gpu", ["time", "GPU util"], ["#d4a72c"], g,
             { fmt: pct, ylabel: "%", zero: true, xfmt: function (t) { return new Date(t).toLocaleTimeString(); } });
    $("gpu-label").textContent = g.length ? "" : "No GPU utilisation sampled in this run (n/a).";
  }

  /* Host CPU % (per node) and the training's RAM (the RSS of its ranks,
   * added up) over time. /api/live carries them as gauges, each the
   * average over the live window; every update adds one point, as for the
   * GPU chart (the last 600: 10 minutes at the default interval). */
  function cpuRamChart(d) {
    var h = state.cpuram, cpu = {}, rss = null, any = false;
    (d.gauges || []).forEach(function (g) {
      if (g.name === "traceml_system_cpu_percent") { cpu[g.node] = g.value; any = true; }
      if (g.name === "traceml_process_rss_bytes") { rss = (rss || 0) + g.value; any = true; }
    });
    if (any) {
      h.points.push({ t: new Date(d.unix_ms), cpu: cpu, rss: rss });
      Object.keys(cpu).forEach(function (n) { if (h.nodes.indexOf(+n) < 0) h.nodes.push(+n); });
      h.nodes.sort(function (a, b) { return a - b; });
      if (h.points.length > 600) h.points.shift();
    }
    var many = h.nodes.length > 1;
    var cpuLabels = h.nodes.map(function (n) { return "Host CPU" + (many ? " N" + n : ""); });
    var rssLabel = (d.ranks || []).length > 1 ? "Process RSS (all ranks)" : "Process RSS";
    var rows = h.points.map(function (p) {
      return [p.t].concat(h.nodes.map(function (n) { return p.cpu[n] != null ? p.cpu[n] : null; }),
                          [p.rss != null ? p.rss / 1e6 : null]);
    });
    /* CPU on 0-100% (a little headroom, so 100% is not the frame); RSS
     * from 0 to a quarter above its largest value, so that the two lines do
     * not lie on each other at the top when the host is saturated */
    var top = 0;
    rows.forEach(function (r) { var v = r[r.length - 1]; if (v != null && v > top) top = v; });
    $("cpuram-label").textContent = h.points.length ? "" : "Waiting for host and process samples.";
    setChart("cpuram", "c-cpuram", ["time"].concat(cpuLabels, [rssLabel]),
             h.nodes.map(function (n, i) { return ["#e15759", "#f28e2b", "#edc948", "#ff9da7"][i % 4]; })
               .concat(["#57ab5a"]), rows,
             { fmt: pct, ylabel: "host CPU %", zero: true, range: [0, 105],
               xfmt: function (t) { return new Date(t).toLocaleTimeString(); },
               y2: { labels: [rssLabel], ylabel: "process RSS, MB", range: [0, top > 0 ? top * 1.25 : 1],
                     fmt: function (v) { return v.toFixed(1) + " MB"; } } });
  }

  function rankChart(d) {
    var ranks = (d.ranks || []).filter(function (r) { return r.recent_steps && r.recent_steps.length; });
    var ids = {};
    ranks.forEach(function (r) { r.recent_steps.forEach(function (s) { ids[s] = 1; }); });
    var x = Object.keys(ids).map(Number).sort(function (a, b) { return a - b; });
    var pos = {};
    x.forEach(function (s, i) { pos[s] = i; });
    var cols = ranks.map(function (r) {
      var col = x.map(function () { return null; });
      r.recent_steps.forEach(function (s, i) { col[pos[s]] = r.recent_step_time_ms[i]; });
      return col;
    });
    setChart("ranks", "c-ranks", ["step"].concat(ranks.map(function (r) { return r.label; })),
             ranks.map(function (r, k) { return "hsl(" + (k * 137 % 360) + ",60%,60%)"; }),
             rowsOf(x, cols), { fmt: ms, ylabel: "ms", connect: true });
  }

  function row(cells, cls) {
    return "<tr" + (cls ? ' class="' + cls + '"' : "") + ">" +
      cells.map(function (c) { return "<td>" + c + "</td>"; }).join("") + "</tr>";
  }

  /* A rate to three digits with an SI prefix, as the box prints it
   * (src/base/fmt.c, tml__fmt_si). */
  function si(v, sep, unit) {
    var pre = ["", "k", "M", "G", "T", "P", "E"], k = 0;
    while (v >= 999.5 && k < 6) { v /= 1000; k++; }
    return v.toFixed(v < 9.995 ? 2 : v < 99.95 ? 1 : 0) + (k ? sep + pre[k] : sep) + unit;
  }

  function tables(d) {
    var rank = (d.ranks || []).filter(function (r) { return r.rank === (d.series || {}).rank; })[0] ||
               (d.ranks || [])[0] || {};
    var sh = d.shares_percent || {};
    var cause = (d.verdict || {}).cause;
    var h = "<tr><th>phase</th><th>avg / step</th><th>share</th></tr>";
    h += row(["Step Time", ms(rank.step_time_ms), ""]);
    PHASES.forEach(function (p) {
      h += row([esc(p[1]), ms(rank[p[0] + "_ms"]), pct(sh[p[0]])], p[0] === cause ? "cause" : "");
    });
    h += row(["Untraced (outside steps)", ms(rank.untraced_ms), ""]);
    h += row(["DataLoader fetch (CPU)", ms(rank.dataloader_fetch_cpu_ms), ""]);
    var tp = d.throughput || {};
    if (tp.samples_per_s != null)
      h += row(["Throughput (all ranks)", si(tp.samples_per_s, "", " samples/s") +
                (tp.tokens_per_s != null ? " · " + si(tp.tokens_per_s, "", " tokens/s") : ""), ""]);
    if (tp.achieved_flops_per_s != null)
      h += row(["FLOPs achieved", si(tp.achieved_flops_per_s, " ", "FLOP/s"),
                tp.mfu_percent != null ? "MFU " + tp.mfu_percent.toFixed(1) + "%" : ""]);
    $("t-phases").innerHTML = h;

    var r = "<tr><th>rank</th><th>host</th><th>steps</th><th>step</th><th>p90</th><th>input</th>" +
            "<th>forward</th><th>backward</th><th>optimizer</th><th>RSS</th></tr>";
    (d.ranks || []).forEach(function (x) {
      r += row([esc(x.label) + (x.ended ? " (done)" : ""), esc(x.host), x.steps_received, ms(x.step_time_ms),
                ms(x.step_time_p90_ms), ms(x.input_wait_ms), ms(x.forward_ms), ms(x.backward_ms),
                ms(x.optimizer_ms), bytes(x.rss_bytes)],
               (d.ranks.length > 1 && x.rank === d.worst_rank) ? "worst" : "");
    });
    if (d.skew_percent != null && (d.ranks || []).length > 1)
      r += row(["skew (worst vs median)", "", "", pct(d.skew_percent), "", "", "", "", "", ""]);
    $("t-ranks").innerHTML = r;

    var s = "<tr><th></th><th>value</th><th>where</th></tr>";
    [["system", "System"], ["process", "Process"]].forEach(function (k) {
      var x = d[k[0]] || {};
      s += row([k[1] + " diagnosis", esc(x.label || "n/a") + (x.severity ? " (" + esc(x.severity) + ")" : ""), esc(x.why || "")]);
    });
    (d.gauges || []).forEach(function (g) {
      if (g.name.indexOf("traceml_step_memory_") === 0) return;
      var who = g.rank != null ? "rank " + g.rank : "node " + g.node;
      var m = gaugeOf(g.name.replace(/^traceml_/, ""));
      s += row([esc(m[0]), esc(gaugeValue(g.value, m[1])), esc(who)]);
    });
    $("t-sys").innerHTML = s;
  }

  /* the latest deep-dive window (docs/deep-dive.md): its modules */
  function deepDive(d) {
    var dd = d.deep_dive;
    $("deep-dive").hidden = !dd;
    if (!dd) return;
    if (dd.status !== "ran") {
      $("dd-steps").textContent = "(skipped)";
      $("t-dd").innerHTML = row([esc(dd.reason || "")]);
      return;
    }
    $("dd-steps").textContent = "(steps " + dd.first_step + "\u2013" + dd.last_step + ", left out of the figures)";
    var h = "<tr><th>module</th><th>self time</th><th>share</th><th>heaviest operator</th></tr>";
    (dd.modules || []).forEach(function (m) {
      h += row([esc(m.name || "(outside modules)"), ms(m.ms), pct(m.percent), esc(m.top_operator)]);
    });
    $("t-dd").innerHTML = h;
  }

  function header(d) {
    var last = -1;
    (d.ranks || []).forEach(function (r) { if (r.last_step != null && r.last_step > last) last = r.last_step; });
    $("run").textContent = d.run_name + " · " + (d.ranks || []).length + "/" + d.world_size + " rank(s) · step " +
      Math.max(last, 0) + " · " + (d.elapsed_s == null ? "?" : d.elapsed_s.toFixed(0) + " s") + " · " +
      d.status + " · " + (d.window.clock === "gpu" ? "GPU" : "CPU") + " clock";
    var v = d.verdict || {};
    var sev = (v.severity || "INFO").toLowerCase();
    $("verdict").className = "verdict " + sev;
    $("v-label").textContent = v.label || "NO DATA";
    $("v-sev").textContent = v.severity || "";
    $("v-window").textContent = "over the last " + d.window.window_steps + " steps";
    $("v-why").textContent = v.why || "–";
    $("v-next").textContent = v.next || "–";
    var also = $("v-also");
    while (also.firstChild) also.removeChild(also.firstChild);
    (v.also || []).forEach(function (a) {
      var div = document.createElement("div");
      div.className = "also " + (a.severity || "INFO").toLowerCase();
      div.textContent = "Also: " + a.label + " (" + a.severity + "): " + a.why;
      also.appendChild(div);
    });
  }

  function update(d) {
    try {
      state.last = d;
      phasesOf(d);
      header(d);
      tables(d);
      deepDive(d);
      stackChart(d);
      inputChart(d);
      memChart(d);
      cpuRamChart(d);
      gpuChart(d);
      rankChart(d);
      state.updates++;
      $("seq").textContent = String(state.updates);
      document.body.setAttribute("data-updates", String(state.updates));
    } catch (e) {
      state.errors.push(String(e && e.stack || e));
      throw e;
    }
  }

  function setConn(cls, title) {
    var c = $("conn");
    c.className = "conn " + cls;
    c.title = title;
  }

  function poll() {
    fetch("api/live", { cache: "no-store" }).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.json();
    }).then(function (d) { setConn("ok", "polling"); update(d); })
      .catch(function () { setConn("lost", "no connection"); })
      .then(function () { setTimeout(poll, 2000); });
  }

  function connect() {
    if (!window.EventSource) { poll(); return; }
    var es = new EventSource("events");
    es.addEventListener("open", function () { setConn("ok", "live"); });
    es.addEventListener("live", function (e) { update(JSON.parse(e.data)); });
    es.addEventListener("summary", function (e) {
      try { state.summary = JSON.parse(e.data); } catch (x) { state.errors.push(String(x)); }
    });
    es.addEventListener("error", function () {
      setConn(es.readyState === 2 ? "lost" : "wait",
              "connection lost: the run may have ended (reconnecting)");
    });
  }

  /* dygraphs redraws its charts itself when the window is resized */
  connect();
})();
