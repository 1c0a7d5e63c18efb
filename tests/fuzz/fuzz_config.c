/*
 * fuzz_config.c - libFuzzer target: the project's defaults file as
 * `traceml run` reads it (cli/config_file.c, tml__cli_config_parse). The
 * first byte picks the file (odd: pyproject.toml, even: traceml.yaml; the
 * seeds start with '1' or '0'), the rest is its text; then its thresholds
 * go through the rules' own parser (diag/diag.h), as the CLI does before
 * setting TRACEML_THRESHOLDS.
 *
 * Checked beyond no crash, no leak, no undefined behaviour (abort when
 * not): every option is "--", an option name, '=' and its value, with its
 * line in the file; the thresholds are "key=value" pairs, one '=' each;
 * an error is one line naming the file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/cli.h"
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
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.";

static void check(const tml_cli_config *c, size_t size)
{
    for (int i = 0; i < c->n; i++) {
        const char *o = c->argv[i];
        must(strncmp(o, "--", 2) == 0, "an option without --");
        size_t k = strspn(o + 2, NAME_CHARS);
        must(k > 0 && o[2 + k] == '=', "not an option name and '='");
        must(!memchr(o + 2, '_', k), "an '_' left in an option name");
        must(c->line[i] >= 1 && (size_t)c->line[i] <= size + 1, "a line outside the file");
    }
    must(c->argv == NULL || c->argv[c->n] == NULL, "argv not NULL-terminated");
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
    tml_cli_config c;
    if (tml__cli_config_parse(&c, name, (const char *)data + 1, size - 1) == 0) {
        check(&c, size);
        tml_thresholds th;
        tml__thresholds_default(&th);
        if (c.thresholds[0])
            must(tml__thresholds_parse(&th, c.thresholds) == 0, "thresholds accepted twice differ");
    } else {
        must(strncmp(c.err, name, strlen(name)) == 0 && !strchr(c.err, '\n'),
             "an error that is not one line naming the file");
    }
    tml__cli_config_release(&c);
    return 0;
}
