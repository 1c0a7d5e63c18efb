/*
 * fuzz_json.c - libFuzzer target: the JSON reader (what `traceml view`,
 * `compare` and the trackers' flattening read), the summary flattening
 * and the notebook's card (tml_summary_html) of the public API. Any input: no crash, no leak, no undefined behaviour.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/json.h"
#include "traceml/traceml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
    if (tml__json_parse((const char *)data, size, &doc, &err) == 0) {
        double v;
        tml__json_str(tml__json_get(doc, "text"));
        tml__json_num(tml__json_path(doc, "step_time.average.step_time_ms"), &v);
        tml__json_at(tml__json_get(doc, "ranks"), 0);
        tml__json_free(doc);
    }
    char *flat = NULL;
    if (tml_summary_flatten((const char *)data, size, &flat) == 0)
        tml_free(flat);
    char *card = NULL;
    if (tml_summary_html((const char *)data, size, TML_HTML_CARD, &card) == 0)
        tml_free(card);
    return 0;
}
