/*
 * assets.c - the dashboard's files, compiled into the binary so that the
 * dashboard works with no network access: web/dashboard/ (ours) and
 * dygraphs (Debian's libjs-dygraphs), embedded at build time by
 * scripts/gen-web-assets, the same mechanism and the same library as the
 * HTML report.
 */
#include "live/live.h"

#include <string.h>

#include "report/web_assets.h"

static const tml_live_asset *table(size_t *n)
{
    static tml_live_asset assets[6];
    static int ready;
    if (!ready) {   /* array lengths are not constant expressions in C */
        tml_live_asset a[6] = {
            {"/", "text/html; charset=utf-8", tml__web_dashboard_html,
             tml__web_dashboard_html_len},
            {"/dashboard.js", "text/javascript; charset=utf-8", tml__web_dashboard_js,
             tml__web_dashboard_js_len},
            {"/phases.js", "text/javascript; charset=utf-8", tml__web_phases_js,
             tml__web_phases_js_len},
            {"/dashboard.css", "text/css; charset=utf-8", tml__web_dashboard_css,
             tml__web_dashboard_css_len},
            {"/dygraph.min.js", "text/javascript; charset=utf-8", tml__web_charts_js,
             tml__web_charts_js_len},
            {"/dygraph.min.css", "text/css; charset=utf-8", tml__web_charts_css,
             tml__web_charts_css_len},
        };
        memcpy(assets, a, sizeof(a));
        ready = 1;
    }
    *n = sizeof(assets) / sizeof(assets[0]);
    return assets;
}

const tml_live_asset *tml__live_asset(const char *path)
{
    size_t n;
    const tml_live_asset *a = table(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].path, path) == 0)
            return &a[i];
    return NULL;
}
