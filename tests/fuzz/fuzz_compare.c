/*
 * fuzz_compare.c - libFuzzer target: any JSON given to `traceml compare`,
 * `traceml view` and the HTML report, read as the commands read it.
 *
 * The input is summary A, then optionally a NUL byte and summary B (B is A
 * without one). For each: `view --html` of the file as it is (the page
 * embeds the raw JSON), and `view --re-render` (the summary into the
 * report model, the box and the JSON printed from it, the page of that
 * JSON). Then `compare A B` (either kind of summary, 0.5.0's mapped
 * first), its box and its JSON.
 *
 * Beyond no crash, no leak, no undefined behaviour, three things are
 * checked (abort when they fail): every JSON we print parses; a summary
 * we re-rendered loads again; and nothing in the page's data block can
 * close its <script> element early ("</" or "<!" in it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "report/compare.h"
#include "report/html.h"
#include "report/model.h"
#include "report/reload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DATA_OPEN "<script type=\"application/json\" id=\"traceml-summary\">\n"
#define DATA_CLOSE "</script>\n<!-- dygraphs"

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_compare: %s\n", what);
        abort();
    }
}

/* Our own JSON output parses (returned, for the caller to free). */
static tml_json *must_parse(const tml_strbuf *sb, const char *what)
{
    tml_json *doc = NULL;
    if (sb->failed)
        return NULL;
    must(tml__json_parse(sb->buf ? sb->buf : "", sb->len, &doc, NULL) == 0, what);
    return doc;
}

static void html_of(const char *json, size_t len)
{
    tml_strbuf page = TML_STRBUF_INIT;
    if (tml__html_render(json, len, &page) == 0) {
        const char *at = strstr(page.buf, DATA_OPEN);
        must(at != NULL, "the page has no data block");
        at += strlen(DATA_OPEN);
        const char *end = strstr(at, "</");
        must(end && strncmp(end, DATA_CLOSE, strlen(DATA_CLOSE)) == 0,
             "'</' inside the page's data block");
        must(memmem(at, (size_t)(end - at), "<!", 2) == NULL, "'<!' inside the data block");
    }
    tml__sb_release(&page);
}

/* `view --re-render` (and --html of what it printed). */
static void rerender(const tml_json *doc, int width)
{
    tml_report_loaded *l = NULL, *again = NULL;
    char why[256];
    if (tml__report_load(doc, "a.json", width, &l, why, sizeof(why)) < 0)
        return;
    tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__report_box(&l->m, &box);
    tml__report_json(&l->m, box.buf ? box.buf : "", &js);
    tml__report_loaded_free(l);
    tml_json *printed = must_parse(&js, "the re-rendered summary is not JSON");
    if (printed) {
        must(tml__report_load(printed, NULL, width, &again, why, sizeof(why)) == 0,
             "the re-rendered summary does not load again");
        tml__report_loaded_free(again);
        html_of(js.buf, js.len);
    }
    tml__json_free(printed);
    tml__sb_release(&box);
    tml__sb_release(&js);
}

static void compare(const tml_json *a, const tml_json *b, double gate)
{
    tml_cmp_run ra, rb;
    char why[256];
    if (tml__cmp_run_load(a, &ra, why, sizeof(why)) < 0 ||
        tml__cmp_run_load(b, &rb, why, sizeof(why)) < 0)
        return;
    tml_cmp_gates g;
    tml__cmp_gates_default(&g);
    g.step_time = gate;
    tml_cmp_result r;
    tml__cmp_decide(&ra, &rb, &g, &r);
    tml_strbuf text = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__cmp_text(&ra, &rb, &r, &text);
    tml__cmp_json(&ra, &rb, &r, text.buf ? text.buf : "", "2025-01-01T00:00:00Z", &js);
    tml__json_free(must_parse(&js, "the comparison is not JSON"));
    tml__sb_release(&text);
    tml__sb_release(&js);
    /* several runs a side (the run-level test, the sides' medians) */
    tml_cmp_run sa[2] = {ra, rb}, sb[3] = {rb, ra, rb}, ma, mb;
    tml__cmp_decide_n(sa, 2, sb, 3, &g, &r);
    tml__cmp_side(sa, 2, &ma);
    tml__cmp_side(sb, 3, &mb);
    tml_strbuf text2 = TML_STRBUF_INIT, js2 = TML_STRBUF_INIT;
    tml__cmp_text(&ma, &mb, &r, &text2);
    tml__cmp_json(&ma, &mb, &r, text2.buf ? text2.buf : "", "2025-01-01T00:00:00Z", &js2);
    tml__json_free(must_parse(&js2, "the comparison of runs a side is not JSON"));
    tml__sb_release(&text2);
    tml__sb_release(&js2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *a = (const char *)data;
    const char *nul = memchr(data, '\0', size);
    size_t na = nul ? (size_t)(nul - a) : size;
    const char *b = nul ? nul + 1 : a;
    size_t nb = nul ? size - na - 1 : size;
    tml_json *da = NULL, *db = NULL;
    html_of(a, na);
    if (tml__json_parse(a, na, &da, NULL) == 0)
        rerender(da, 40 + (int)(size % 160));
    if (nul && tml__json_parse(b, nb, &db, NULL) == 0)
        rerender(db, 120);
    if (da && (db || !nul))
        compare(da, db ? db : da, (double)(size % 1000) / 1000.0);
    tml__json_free(da);
    tml__json_free(db);
    return 0;
}
