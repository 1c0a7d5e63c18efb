/*
 * dashboard.js - TraceML's live dashboard. It draws what the aggregator
 * computed (GET /api/live, then the /events stream): no diagnosis logic
 * lives here, only layout. Charts are uPlot (web/package.json, pinned).
 * window.__traceml exposes the update count and errors for the tests.
 */
(function () {
  "use strict";
  var state = { updates: 0, last: null, summary: null, errors: [], gpu: [[], []] };
  window.__traceml = state;
  var charts = {};
  var COLORS = {
    input_wait: "#e5534b", h2d: "#d4a72c", forward: "#539bf5", backward: "#6cb6ff",
    optimizer: "#b083f0", residual: "#8a96a3"
  };
  var PHASES = [
    ["input_wait", "Input Wait"], ["h2d", "H2D"], ["forward", "Forward"],
    ["backward", "Backward"], ["optimizer", "Optimizer"], ["residual", "Residual"]
  ];

  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function ms(v) {
    if (v == null) return "n/a";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : v >= 100 ? v.toFixed(0) + " ms" : v.toFixed(2) + " ms";
  }
  function pct(v) { return v == null ? "n/a" : v.toFixed(1) + "%"; }
  function bytes(v) {
    if (v == null) return "n/a";
    return v >= 1073741824 ? (v / 1073741824).toFixed(2) + " GiB" : (v / 1048576).toFixed(0) + " MiB";
  }
  function width(id) { return Math.max(300, $(id).clientWidth || 600); }

  function makeChart(id, series, data, opts) {
    var o = {
      width: width(id), height: 220,
      scales: { x: { time: false } },
      axes: [
        { stroke: "#8a96a3", grid: { stroke: "#2a323c" } },
        { stroke: "#8a96a3", grid: { stroke: "#2a323c" }, size: 70,
          values: function (u, vals) { return vals.map(function (v) { return v == null ? "" : +v.toFixed(Math.abs(v) >= 100 ? 0 : 2); }); } }
      ],
      series: [{ label: (opts && opts.xlabel) || "step" }].concat(series),
      legend: { live: true }
    };
    if (opts && opts.time) o.scales.x.time = true;
    $(id).innerHTML = "";
    return new uPlot(o, data, $(id));
  }

  function setChart(name, id, series, data, opts) {
    var c = charts[name];
    if (!c || c.series.length !== series.length + 1) {
      if (c) c.destroy();
      charts[name] = makeChart(id, series, data, opts);
    } else {
      c.setData(data);
    }
  }

  function stackChart(d) {
    var s = d.series || {};
    var x = s.step || [];
    var raw = PHASES.map(function (p) { return s[p[0] + "_ms"] || []; });
    var cum = [], acc = x.map(function () { return 0; });
    raw.forEach(function (arr) {
      acc = acc.map(function (a, i) { return a + (arr[i] == null ? 0 : arr[i]); });
      cum.push(acc.slice());
    });
    /* topmost first: each band is filled down to 0 and drawn over by the next */
    var series = [], data = [x];
    for (var k = PHASES.length - 1; k >= 0; k--) {
      (function (k) {
        series.push({
          label: PHASES[k][1], stroke: COLORS[PHASES[k][0]], fill: COLORS[PHASES[k][0]] + "cc",
          width: 1, points: { show: false },
          value: function (u, v, si, i) { return i == null ? "–" : ms(raw[k][i]); }
        });
        data.push(cum[k]);
      })(k);
    }
    $("stack-rank").textContent = x.length ? "(rank " + s.rank + ", last " + x.length + " steps, ms)" : "";
    setChart("stack", "c-stack", series, data);
  }

  function inputChart(d) {
    var s = d.series || {};
    setChart("input", "c-input", [
      { label: "Input Wait (ms)", stroke: COLORS.input_wait, width: 1.5, points: { show: false } },
      { label: "Step Time (ms)", stroke: "#8a96a3", width: 1, points: { show: false } }
    ], [s.step || [], s.input_wait_ms || [], s.step_time_ms || []]);
  }

  function memChart(d) {
    var s = d.series || {};
    function mib(a) { return (a || []).map(function (v) { return v == null ? null : v / 1048576; }); }
    setChart("mem", "c-mem", [
      { label: "RSS (MiB)", stroke: "#57ab5a", width: 1.5, points: { show: false } },
      { label: "CUDA allocated (MiB)", stroke: "#539bf5", width: 1.5, points: { show: false } },
      { label: "CUDA reserved (MiB)", stroke: "#b083f0", width: 1.5, points: { show: false } }
    ], [s.step || [], mib(s.rss_bytes), mib(s.cuda_allocated_bytes), mib(s.cuda_reserved_bytes)]);
    var m = d.step_memory || {};
    $("mem-label").textContent = m.label ? "Step memory: " + m.label + (m.why ? " — " + m.why : "") : "";
  }

  function gpuChart(d) {
    var g = state.gpu;
    if (d.gpu_util_percent != null) {
      g[0].push(d.unix_ms / 1000);
      g[1].push(d.gpu_util_percent);
      if (g[0].length > 600) { g[0].shift(); g[1].shift(); }
    }
    setChart("gpu", "c-gpu", [
      { label: "GPU util (%)", stroke: "#d4a72c", width: 1.5, points: { show: false } }
    ], [g[0], g[1]], { time: true, xlabel: "time" });
    $("gpu-label").textContent = g[0].length ? "" : "No GPU utilisation sampled in this run (n/a).";
  }

  function rankChart(d) {
    var ranks = (d.ranks || []).filter(function (r) { return r.recent_steps && r.recent_steps.length; });
    var ids = {};
    ranks.forEach(function (r) { r.recent_steps.forEach(function (s) { ids[s] = 1; }); });
    var x = Object.keys(ids).map(Number).sort(function (a, b) { return a - b; });
    var pos = {};
    x.forEach(function (s, i) { pos[s] = i; });
    var data = [x], series = [];
    ranks.forEach(function (r, k) {
      var col = x.map(function () { return null; });
      r.recent_steps.forEach(function (s, i) { col[pos[s]] = r.recent_step_time_ms[i]; });
      data.push(col);
      series.push({ label: r.label, stroke: "hsl(" + (k * 137 % 360) + ",60%,60%)", width: 1.2,
                    points: { show: false }, spanGaps: true });
    });
    setChart("ranks", "c-ranks", series, data);
  }

  function row(cells, cls) {
    return "<tr" + (cls ? ' class="' + cls + '"' : "") + ">" +
      cells.map(function (c) { return "<td>" + c + "</td>"; }).join("") + "</tr>";
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

    var s = "<tr><th>section</th><th>diagnosis</th><th></th></tr>";
    ["system", "process"].forEach(function (k) {
      var x = d[k] || {};
      s += row([k, esc(x.label || "n/a") + (x.severity ? " (" + esc(x.severity) + ")" : ""), esc(x.why || "")]);
    });
    (d.gauges || []).forEach(function (g) {
      if (g.name.indexOf("traceml_step_memory_") === 0) return;
      var who = g.rank != null ? "rank " + g.rank : "node " + g.node;
      var name = g.name.replace(/^traceml_/, "");
      var v = /_bytes$/.test(name) ? bytes(g.value) : /_percent$/.test(name) ? pct(g.value) : g.value;
      s += row([esc(name), esc(v), esc(who)]);
    });
    $("t-sys").innerHTML = s;
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
  }

  function update(d) {
    try {
      state.last = d;
      header(d);
      tables(d);
      stackChart(d);
      inputChart(d);
      memChart(d);
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

  window.addEventListener("resize", function () {
    Object.keys(charts).forEach(function (k) {
      var el = charts[k].root.parentNode;
      charts[k].setSize({ width: Math.max(300, el.clientWidth), height: 220 });
    });
  });
  connect();
})();
