/*
 * config_file.c - defaults for `traceml run` from the project's own file:
 * traceml.yaml in the current folder, else the [tool.traceml] table of
 * ./pyproject.toml. Keys are the command's option names without the
 * dashes ("mode", "logs-dir"; "logs_dir" too), values what the option
 * takes (true/false for the flags); the thresholds of docs/diagnosis.md go
 * in a `thresholds` map ([tool.traceml.thresholds] in TOML):
 *
 *     # traceml.yaml                    # pyproject.toml
 *     mode: cli                         [tool.traceml]
 *     html-report: true                 mode = "cli"
 *     thresholds:                       html-report = true
 *       input_warn: 0.15                [tool.traceml.thresholds]
 *                                       input_warn = 0.15
 *
 * Only this flat shape is read (a YAML/TOML subset: no lists, no inline
 * tables, no multi-line values); anything else is one error line naming
 * the file and line. The command line wins over the file, and a
 * TRACEML_THRESHOLDS already set wins over the file's thresholds.
 *
 * The file becomes options ("--mode=cli", "--html-report") that the
 * command parses as if typed first, so every value is checked the same way.
 */
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "diag/diag.h"

typedef struct cfg {
    const char *path;
    int line;
    char **argv;             /* "--key=value" options, malloc'd */
    size_t n, cap;
    char thresholds[1024];   /* "key=value,..." */
} cfg;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Drops a comment ('#' outside quotes) and unquotes a whole-value string. */
static char *value_of(char *v)
{
    char q = 0;
    for (char *p = v; *p; p++) {
        if (q ? *p == q : (*p == '"' || *p == '\''))
            q = q ? 0 : *p;
        else if (!q && *p == '#' && (p == v || isspace((unsigned char)p[-1]))) {
            *p = '\0';
            break;
        }
    }
    v = trim(v);
    size_t n = strlen(v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        v[n - 1] = '\0';
        v++;
    }
    return v;
}

static void add_option(cfg *c, const char *key, const char *val)
{
    char name[64], *opt;
    snprintf(name, sizeof(name), "--%s", key);
    for (char *p = name; *p; p++)
        if (*p == '_')
            *p = '-';
    if (strcmp(val, "false") == 0)
        return;
    size_t n = strlen(name) + strlen(val) + 2;
    if (!(opt = malloc(n)) || TML_GROW(c->argv, c->n + 2, c->cap) < 0)
        tml__cli_die(1, "out of memory");
    if (strcmp(val, "true") == 0)
        snprintf(opt, n, "%s", name);
    else
        snprintf(opt, n, "%s=%s", name, val);
    c->argv[c->n++] = opt;
    c->argv[c->n] = NULL;
}

static void add_threshold(cfg *c, const char *key, const char *val)
{
    size_t len = strlen(c->thresholds);
    if ((size_t)snprintf(c->thresholds + len, sizeof(c->thresholds) - len, "%s%s=%s",
                         len ? "," : "", key, val) >= sizeof(c->thresholds) - len)
        tml__cli_die(TML_EXIT_USAGE, "%s: too many thresholds", c->path);
}

/* One "key<sep>value" line of a map; in_thresholds: the thresholds map. */
static void entry(cfg *c, char *line, char sep, int in_thresholds)
{
    char *at = strchr(line, sep);
    if (!at)
        tml__cli_die(TML_EXIT_USAGE, "%s:%d: expected key %c value", c->path, c->line, sep);
    *at = '\0';
    char *key = trim(line), *val = value_of(at + 1);
    if (!*key)
        tml__cli_die(TML_EXIT_USAGE, "%s:%d: a value without a key", c->path, c->line);
    if (*val == '[' || *val == '{')
        tml__cli_die(TML_EXIT_USAGE, "%s:%d: '%s': lists and inline tables are not read "
                     "here (one value per key)", c->path, c->line, key);
    if (in_thresholds)
        add_threshold(c, key, val);
    else
        add_option(c, key, val);
}

static void read_yaml(cfg *c, char *text)
{
    int in_thresholds = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        c->line++;
        int indented = isspace((unsigned char)line[0]);
        char *l = trim(line);
        if (!*l || *l == '#' || strcmp(l, "---") == 0)
            continue;
        if (!indented) {
            char *colon = strchr(l, ':');
            in_thresholds = 0;
            if (colon && (size_t)(colon - l) == 10 && strncmp(l, "thresholds", 10) == 0 &&
                !*value_of(colon + 1)) {
                in_thresholds = 1;
                continue;
            }
        } else if (!in_thresholds) {
            tml__cli_die(TML_EXIT_USAGE, "%s:%d: only 'thresholds' holds a map", c->path,
                         c->line);
        }
        entry(c, l, ':', in_thresholds);
    }
}

static void read_toml(cfg *c, char *text)
{
    int in = 0, in_thresholds = 0;   /* inside [tool.traceml] / its thresholds */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        c->line++;
        char *l = trim(line);
        if (!*l || *l == '#')
            continue;
        if (*l == '[') {
            char *v = value_of(l);
            in = strcmp(v, "[tool.traceml]") == 0;
            in_thresholds = strcmp(v, "[tool.traceml.thresholds]") == 0;
            continue;
        }
        if (in || in_thresholds)
            entry(c, l, '=', in_thresholds);
    }
}

char **tml__cli_config_options(int *n_out, const char **path)
{
    static const char *const names[] = {"traceml.yaml", "traceml.yml", "pyproject.toml"};
    cfg c;
    memset(&c, 0, sizeof(c));
    *n_out = 0;
    char *text = NULL;
    size_t len;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !text; i++)
        if (tml__read_file(names[i], 1u << 20, &text, &len) == 0)
            c.path = names[i];
    if (!text)
        return NULL;
    *path = c.path;
    if (strcmp(c.path, "pyproject.toml") == 0)
        read_toml(&c, text);
    else
        read_yaml(&c, text);
    free(text);
    if (c.thresholds[0]) {
        tml_thresholds th;
        tml__thresholds_default(&th);
        if (tml__thresholds_parse(&th, c.thresholds) < 0)
            tml__cli_die(TML_EXIT_USAGE, "%s: bad thresholds '%s' (keys and ranges: "
                         "docs/diagnosis.md)", c.path, c.thresholds);
        setenv("TRACEML_THRESHOLDS", c.thresholds, 0);
    }
    *n_out = (int)c.n;
    return c.argv;
}
