/*
 * conf.h - the project's defaults file: traceml.yaml, or the
 * [tool.traceml] table of pyproject.toml, read as options of `traceml run`
 * (docs/cli.md, "Project defaults"). A parser of text, nothing else: the
 * CLI finds and reads the file, checks the options as if typed and the
 * thresholds with tml__thresholds_parse.
 *
 *     tml_conf c;
 *     char why[256];
 *     if (tml__conf_parse("traceml.yaml", text, len, &c, why, sizeof(why)) < 0)
 *         ...error: why ("traceml.yaml:3: expected key : value")
 *     for (size_t i = 0; i < c.n; i++) ...c.argv[i]: "--mode=cli", "--html-report"
 *     ...c.thresholds: "input_warn=0.15,input_crit=0.3" ("" none)
 *     tml__conf_release(&c);
 *
 * Only the flat shape is read (a YAML / TOML subset: one value per key, a
 * `thresholds` map, no lists, no inline tables, no multi-line values);
 * anything else is an error naming the file and the line.
 *
 * Ownership: argv and its strings are malloc'd into c; tml__conf_release
 * frees them (also after a failed parse).
 */
#ifndef TML_CONF_H
#define TML_CONF_H

#include <stddef.h>

typedef struct tml_conf {
    char **argv;              /* "--key=value" / "--flag", NULL-terminated */
    size_t n, cap;
    char thresholds[1024];    /* "key=value,...", "" none */
} tml_conf;

/*
 * Parses text (len bytes, no NUL inside) as the file `name`: TOML's
 * [tool.traceml] when name ends in ".toml", else YAML. Keys are option
 * names without the dashes ("logs-dir", "logs_dir"); a `false` value drops
 * the option, `true` makes it a flag. Returns 0, or TML_EINVAL with one
 * line in why naming the file (and line), or TML_ENOMEM.
 */
int tml__conf_parse(const char *name, const char *text, size_t len, tml_conf *c,
                    char *why, size_t cap);
void tml__conf_release(tml_conf *c);

#endif
