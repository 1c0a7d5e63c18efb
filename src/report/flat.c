/*
 * flat.c - the summary as one flat object of `traceml/...` keys, for
 * experiment trackers (`traceml.summary()`, W&B's `wandb.log`, MLflow's
 * `log_metrics` / `log_params`).
 *
 * Trackers take a flat mapping of scalars, so the nested final_summary.json
 * is flattened by fixed rules (docs/python-api.md lists the keys):
 *
 *   top-level scalars          traceml/<key>   (not text, generated_at)
 *   meta scalars               traceml/meta/<key>
 *   primary_diagnosis scalars  traceml/primary/<key>
 *   also[i] kind, label, severity  traceml/also/<i>/<key>
 *   throughput scalars         traceml/throughput/<key>
 *   each section (step_time, step_memory, system, process):
 *     diagnosis label/kind/severity  traceml/<sec>/diagnosis, /kind, /severity
 *     the section's own scalars      traceml/<sec>/<key>
 *     average scalars                traceml/<sec>/<key>
 *     shares_percent                 traceml/<sec>/<key>_share_percent
 *
 * then TraceML 0.5.0's 25 keys (its sdk/summary_projection.py), in its
 * meaning and value style, replacing a key of the same name:
 *   primary/status, <sec>/status   the diagnosis' label ("HIGH CPU")
 *   primary/severity, <sec>/severity  crit, warn, info
 *   step_time/diagnosis_clock and its 14 metrics   step_time.global
 *   system/ram_percent, gpu_mem_percent, gpu_temp_c; process/ram_percent,
 *   gpu_mem_reserved_percent   computed from the averages' bytes
 *
 * Nulls are left out (a tracker would log them as 0 or NaN, and missing is
 * not zero); objects and arrays other than those above are left out (the
 * per-rank tables belong in the JSON artifact, not in a metrics row). A
 * later key with the same name replaces the earlier value in place, so a
 * key appears once.
 */
#include "report/flat.h"
#include "base/array.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

typedef struct kv {
    char *key;
    const tml_json *val;
} kv;

#define FLAT_MADE 32   /* values made here (0.5.0's keys), not the document's */

typedef struct flat {
    kv *v;
    size_t n, cap;
    int failed;
    tml_json made[FLAT_MADE];
    size_t nmade;
} flat;

static void put(flat *f, const char *prefix, const char *key, const char *suffix,
                const tml_json *val)
{
    char k[512];
    if (!val || val->type == TML_JSON_NULL || val->type == TML_JSON_ARRAY ||
        val->type == TML_JSON_OBJECT)
        return;
    snprintf(k, sizeof(k), "%s%s%s", prefix, key, suffix);
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->v[i].key, k) == 0) {
            f->v[i].val = val;
            return;
        }
    if (TML_GROW(f->v, f->n + 1, f->cap) < 0) {
        f->failed = 1;
        return;
    }
    f->v[f->n].key = strdup(k);
    if (!f->v[f->n].key) {
        f->failed = 1;
        return;
    }
    f->v[f->n++].val = val;
}

static void scalars(flat *f, const char *prefix, const tml_json *obj, const char *const *skip)
{
    if (!obj || obj->type != TML_JSON_OBJECT)
        return;
    for (size_t i = 0; i < obj->n; i++) {
        int skipped = 0;
        for (const char *const *s = skip; s && *s; s++)
            if (strcmp(obj->keys[i], *s) == 0)
                skipped = 1;
        if (!skipped)
            put(f, prefix, obj->keys[i], "", &obj->items[i]);
    }
}

/* A value made here: a number (NAN: left out) or a static string. */
static void put_made(flat *f, const char *prefix, const char *key, double num, const char *str)
{
    if ((!str && !isfinite(num)) || f->nmade == FLAT_MADE)
        return;
    tml_json *v = &f->made[f->nmade++];
    memset(v, 0, sizeof(*v));
    v->type = str ? TML_JSON_STRING : TML_JSON_NUMBER;
    v->number = num;
    v->str = (char *)str;
    put(f, prefix, key, "", v);
}

static double num_at(const tml_json *obj, const char *key)
{
    double v;
    return tml__json_num(tml__json_get(obj, key), &v) ? v : NAN;
}

/* 100 * part / whole of two keys of obj; NAN without both. */
static double percent_of(const tml_json *obj, const char *part, const char *whole)
{
    double p = num_at(obj, part), w = num_at(obj, whole);
    return w > 0 ? 100.0 * p / w : NAN;
}

/* TraceML 0.5.0's severities. */
static const char *severity_05(const tml_json *diag)
{
    const char *s = tml__json_str(tml__json_get(diag, "severity"));
    if (!s)
        return NULL;
    return strcmp(s, "CRITICAL") == 0 ? "crit" : strcmp(s, "WARNING") == 0 ? "warn" : "info";
}

/* 0.5.0's keys of one diagnosis: status (its label) and severity. */
static void diagnosis_05(flat *f, const char *prefix, const tml_json *diag)
{
    put(f, prefix, "status", "", tml__json_get(diag, "label"));
    put_made(f, prefix, "severity", NAN, severity_05(diag));
}

static void keys_05(flat *f, const tml_json *doc)
{
    static const char *const sections[] = { "system", "process", "step_time", "step_memory" };
    diagnosis_05(f, "traceml/primary/", tml__json_get(doc, "primary_diagnosis"));
    for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "traceml/%s/", sections[s]);
        diagnosis_05(f, prefix, tml__json_path(tml__json_get(doc, sections[s]), "diagnosis"));
    }
    const tml_json *g = tml__json_path(doc, "step_time.global");
    put(f, "traceml/step_time/", "diagnosis_clock", "", tml__json_path(g, "window.diagnosis_clock"));
    scalars(f, "traceml/step_time/", tml__json_get(g, "average"), NULL);
    const tml_json *sys = tml__json_path(doc, "system.average");
    put_made(f, "traceml/system/", "ram_percent", percent_of(sys, "ram_used_bytes",
                                                             "ram_total_bytes"), NULL);
    put_made(f, "traceml/system/", "gpu_mem_percent",
             percent_of(sys, "gpu_memory_used_bytes", "gpu_memory_total_bytes"), NULL);
    put(f, "traceml/system/", "gpu_temp_c", "", tml__json_get(sys, "gpu_temperature_c"));
    const tml_json *proc = tml__json_path(doc, "process.average");
    put_made(f, "traceml/process/", "ram_percent",
             percent_of(proc, "rss_bytes", "host_ram_total_bytes"), NULL);
    put_made(f, "traceml/process/", "gpu_mem_reserved_percent",
             percent_of(proc, "cuda_reserved_bytes", "device_total_bytes"), NULL);
}

/* Shortest text that reads back as the same double; integers without a
 * fraction. */
static void add_number(tml_strbuf *sb, double d)
{
    char b[64];
    if (!isfinite(d)) {
        tml__sb_adds(sb, "null");
        return;
    }
    if (d == floor(d) && fabs(d) < 9007199254740992.0) {
        tml__sb_addf(sb, "%.0f", d == 0 ? 0.0 : d);
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(b, sizeof(b), "%.*g", prec, d);
        if (strtod(b, NULL) == d)
            break;
    }
    tml__sb_adds(sb, b);
}

int tml__summary_flatten(const tml_json *doc, tml_strbuf *out)
{
    static const char *const top_skip[] = { "text", "generated_at", NULL };
    static const char *const sections[] = { "step_time", "step_memory", "system", "process" };
    flat f;
    memset(&f, 0, sizeof(f));

    if (!doc || doc->type != TML_JSON_OBJECT)
        return TML_EINVAL;
    scalars(&f, "traceml/", doc, top_skip);
    scalars(&f, "traceml/meta/", tml__json_get(doc, "meta"), NULL);
    scalars(&f, "traceml/primary/", tml__json_get(doc, "primary_diagnosis"), NULL);
    scalars(&f, "traceml/throughput/", tml__json_get(doc, "throughput"), NULL);
    const tml_json *also = tml__json_get(doc, "also");
    for (size_t i = 0; also && also->type == TML_JSON_ARRAY && i < also->n; i++) {
        static const char *const keys[] = { "kind", "label", "severity" };
        char prefix[48];
        snprintf(prefix, sizeof(prefix), "traceml/also/%zu/", i);
        for (size_t k = 0; k < 3; k++)
            put(&f, prefix, keys[k], "", tml__json_get(&also->items[i], keys[k]));
    }
    for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
        const tml_json *sec = tml__json_get(doc, sections[s]);
        char prefix[64];
        if (!sec || sec->type != TML_JSON_OBJECT)
            continue;
        snprintf(prefix, sizeof(prefix), "traceml/%s/", sections[s]);
        const tml_json *d = tml__json_get(sec, "diagnosis");
        put(&f, prefix, "diagnosis", "", tml__json_get(d, "label"));
        put(&f, prefix, "kind", "", tml__json_get(d, "kind"));
        put(&f, prefix, "severity", "", tml__json_get(d, "severity"));
        scalars(&f, prefix, sec, NULL);
        scalars(&f, prefix, tml__json_get(sec, "average"), NULL);
        const tml_json *sh = tml__json_get(sec, "shares_percent");
        if (sh && sh->type == TML_JSON_OBJECT)
            for (size_t i = 0; i < sh->n; i++)
                put(&f, prefix, sh->keys[i], "_share_percent", &sh->items[i]);
    }
    keys_05(&f, doc);

    tml__sb_addc(out, '{');
    for (size_t i = 0; i < f.n; i++) {
        const tml_json *v = f.v[i].val;
        tml__sb_adds(out, i ? ",\n " : "\n ");
        tml__sb_add_json_str(out, f.v[i].key);
        tml__sb_adds(out, ": ");
        if (v->type == TML_JSON_NUMBER)
            add_number(out, v->number);
        else if (v->type == TML_JSON_BOOL)
            tml__sb_adds(out, v->boolean ? "true" : "false");
        else
            tml__sb_add_json_str(out, v->str);
    }
    tml__sb_adds(out, f.n ? "\n}\n" : "}\n");
    for (size_t i = 0; i < f.n; i++)
        free(f.v[i].key);
    free(f.v);
    if (f.failed || out->failed)
        return TML_ENOMEM;
    return 0;
}

int tml_summary_flatten(const char *json, size_t len, char **out)
{
    tml_json *doc = NULL;
    tml_strbuf sb = TML_STRBUF_INIT;
    if (!json || !out)
        return TML_EINVAL;
    *out = NULL;
    int rc = tml__json_parse(json, len, &doc, NULL);
    if (rc < 0)
        return rc == TML_ENOMEM ? rc : TML_EPROTO;
    rc = tml__summary_flatten(doc, &sb);
    tml__json_free(doc);
    if (rc == TML_EINVAL)
        rc = TML_EPROTO;
    if (rc == 0)
        *out = tml__sb_detach(&sb, NULL);
    tml__sb_release(&sb);
    return rc;
}
