/*
 * phases.js - the one home of the phase colours, shared by the HTML report
 * (src/report/html.c inlines it before web/report.js) and the live
 * dashboard (served as /phases.js before web/dashboard/dashboard.js), so
 * that "Forward" is the same colour in both pages. Change a colour here,
 * nowhere else: tests/e2e/test_live.py compares what the two pages drew.
 *
 * The colours must read on the report's white and the dashboard's dark
 * card (#171d24) alike, so no near-black or near-white: Tableau-10 hues,
 * Input Wait (the phase a user most often has to act on) in red, the
 * compute phases in blues and green, Residual a neutral grey-brown.
 *
 * window.TRACEML_PHASES: [{key, label, color}] in step order; key is the
 * summary's and /api/live's phase key ("<key>_ms").
 */
(function () {
  "use strict";
  window.TRACEML_PHASES = [
    { key: "input_wait", label: "Input Wait", color: "#e15759" },
    { key: "h2d", label: "H2D", color: "#edc948" },
    { key: "forward", label: "Forward", color: "#4e79a7" },
    { key: "backward", label: "Backward", color: "#76b7b2" },
    { key: "optimizer", label: "Optimizer", color: "#59a14f" },
    { key: "communication", label: "Communication", color: "#b07aa1" },
    { key: "residual", label: "Residual", color: "#9c755f" }
  ];
})();
