/*
 * config_file.c - defaults for `traceml run` from the project's own file:
 * traceml.yaml in the current folder, else the [tool.traceml] table of
 * ./pyproject.toml (the shape: src/base/conf.h, docs/cli.md). This file
 * finds and reads it and dies on a malformed one (one line naming the file
 * and line); the options it holds are parsed by the command as if typed
 * first. The command line wins over the file, and a TRACEML_THRESHOLDS
 * already set wins over the file's thresholds.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf.h"
#include "diag/diag.h"

char **tml__cli_config_options(int *n_out, const char **path)
{
    static const char *const names[] = {"traceml.yaml", "traceml.yml", "pyproject.toml"};
    const char *name = NULL;
    char *text = NULL, why[512];
    size_t len;
    *n_out = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !text; i++)
        if (tml__read_file(names[i], 1u << 20, &text, &len) == 0)
            name = names[i];
    if (!text)
        return NULL;
    *path = name;
    tml_conf c;
    int rc = tml__conf_parse(name, text, len, &c, why, sizeof(why));
    free(text);
    if (rc < 0)
        tml__cli_die(rc == TML_ENOMEM ? 1 : TML_EXIT_USAGE, "%s", why);
    if (c.thresholds[0]) {
        tml_thresholds th;
        tml__thresholds_default(&th);
        if (tml__thresholds_parse(&th, c.thresholds) < 0)
            tml__cli_die(TML_EXIT_USAGE, "%s: bad thresholds '%s' (keys and ranges: "
                         "docs/diagnosis.md)", name, c.thresholds);
        setenv("TRACEML_THRESHOLDS", c.thresholds, 0);
    }
    *n_out = (int)c.n;
    return c.argv;      /* kept for the process's life, as the command's argv */
}
