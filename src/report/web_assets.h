/*
 * web_assets.h - the web assets, compiled in: the chart library (dygraphs,
 * from Debian's libjs-dygraphs) and web/report.{js,css}. The
 * definitions are generated at build time by scripts/gen-web-assets into
 * build/gen/web_assets.c (ours) and web/gen/dygraphs.c (the chart library,
 * carried by the sdist). Each array is NUL-terminated; _len excludes it.
 */
#ifndef TML_WEB_ASSETS_H
#define TML_WEB_ASSETS_H

#include <stddef.h>

extern const char tml__web_charts_version[];
extern const unsigned char tml__web_charts_js[], tml__web_charts_css[],
    tml__web_charts_license[], tml__web_report_js[], tml__web_report_css[];
extern const size_t tml__web_charts_js_len, tml__web_charts_css_len,
    tml__web_charts_license_len, tml__web_report_js_len, tml__web_report_css_len;

/* The phase colours (web/phases.js), one palette for the report and the
 * dashboard: html.c inlines it, live/assets.c serves it as /phases.js. */
extern const unsigned char tml__web_phases_js[];
extern const size_t tml__web_phases_js_len;

/* The live dashboard (web/dashboard/, served by src/live/assets.c). */
extern const unsigned char tml__web_dashboard_html[], tml__web_dashboard_js[],
    tml__web_dashboard_css[];
extern const size_t tml__web_dashboard_html_len, tml__web_dashboard_js_len,
    tml__web_dashboard_css_len;

#endif
