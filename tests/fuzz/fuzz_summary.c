/*
 * fuzz_summary.c - libFuzzer target: a final_summary.json read back into
 * the report model (report/reload.h: this TraceML's schema and 0.5.0's),
 * then the box and the JSON printed from it, as `traceml view
 * --re-render`, `view` of a 0.5.0 summary, `compare` and `inspect` do. Any
 * input: no crash, no leak, no undefined behaviour.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/json.h"
#include "report/model.h"
#include "report/reload.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tml_json *doc = NULL;
    tml_report_loaded *l = NULL;
    char why[256];
    if (tml__json_parse((const char *)data, size, &doc, NULL) < 0)
        return 0;
    if (tml__report_load(doc, "f.json", 80 + (int)(size % 100), &l, why, sizeof(why)) == 0) {
        tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
        tml__report_box(&l->m, &box);
        tml__report_json(&l->m, box.buf ? box.buf : "", &js);
        tml__sb_release(&box);
        tml__sb_release(&js);
        tml__report_loaded_free(l);
    }
    tml__json_free(doc);
    return 0;
}
