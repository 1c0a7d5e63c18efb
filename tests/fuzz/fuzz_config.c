/*
 * fuzz_config.c - libFuzzer target: the project's defaults file as
 * `traceml run` reads it (base/conf.h). The first byte picks the file
 * (odd: pyproject.toml, even: traceml.yaml; the seeds start with '1' or
 * '0'), the rest is its text; then its thresholds go through the rules'
 * own parser (diag/diag.h), as the CLI does before setting
 * TRACEML_THRESHOLDS.
 *
 * Checked beyond no crash, no leak, no undefined behaviour (abort when
 * not): every option is "--" and an option name, '=' and its value at
 * most; the thresholds are "key=value" pairs, one '=' each; an error is
 * one line naming the file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf.h"
#include "diag/diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_config: %s\n", what);
        abort();
    }
}

static const char NAME_CHARS[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";

static void check(const tml_conf *c)
{
    for (size_t i = 0; i < c->n; i++) {
        const char *o = c->argv[i];
        must(strncmp(o, "--", 2) == 0, "an option without --");
        size_t k = strspn(o + 2, NAME_CHARS);
        must(k > 0 && (o[2 + k] == '\0' || o[2 + k] == '='), "not an option name");
        must(strchr(o + 2, '_') == NULL || strchr(o + 2, '_') > o + 2 + k,
             "an '_' left in an option name");
    }
    must(c->n == 0 || c->argv[c->n] == NULL, "argv not NULL-terminated");
    for (const char *t = c->thresholds; *t;) {
        size_t len = strcspn(t, ","), k = strspn(t, NAME_CHARS);
        must(k > 0 && k < len && t[k] == '=' && !memchr(t + k + 1, '=', len - k - 1),
             "a threshold that is not key=value");
        t += len + (t[len] == ',');
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *name = data[0] & 1 ? "pyproject.toml" : "traceml.yaml";
    tml_conf c;
    char why[512];
    if (tml__conf_parse(name, (const char *)data + 1, size - 1, &c, why, sizeof(why)) == 0) {
        check(&c);
        tml_thresholds th;
        tml__thresholds_default(&th);
        if (c.thresholds[0])
            tml__thresholds_parse(&th, c.thresholds);
    } else {
        must(strncmp(why, name, strlen(name)) == 0 && !strchr(why, '\n'),
             "an error that is not one line naming the file");
    }
    tml__conf_release(&c);
    return 0;
}
