/*
 * conf.c - traceml.yaml and pyproject.toml's [tool.traceml] as options
 * (conf.h).
 *
 *     # traceml.yaml                    # pyproject.toml
 *     mode: cli                         [tool.traceml]
 *     html-report: true                 mode = "cli"
 *     thresholds:                       html-report = true
 *       input_warn: 0.15                [tool.traceml.thresholds]
 *                                       input_warn = 0.15
 *
 * The file becomes options ("--mode=cli", "--html-report") that `traceml
 * run` parses as if typed first, so every value is checked in one place,
 * the command's. What this file checks is the shape: a key is an option
 * name (letters, digits, '-', '_'), so that no key can smuggle a second
 * option or a second threshold in ("mode=x", "a,b"), and a threshold's
 * value holds neither ',' nor '=' for the same reason. A file is input
 * like any other: it is taken as (buf, len), lines are counted one by one
 * (blank ones too, so that an error names the line an editor shows), and
 * it is fuzzed (tests/fuzz/fuzz_config.c).
 */
#include "base/conf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "traceml/traceml.h"

#define KEY_MAX 60

typedef struct parser {
    const char *name;
    int line;
    tml_conf *c;
    char *why;
    size_t cap;
} parser;

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

static int fail(parser *p, const char *what, const char *key)
{
    if (key)
        snprintf(p->why, p->cap, "%s:%d: '%.*s': %s", p->name, p->line, KEY_MAX, key, what);
    else
        snprintf(p->why, p->cap, "%s:%d: %s", p->name, p->line, what);
    return TML_EINVAL;
}

static int is_name(const char *k)
{
    size_t n = strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_");
    return n > 0 && n <= KEY_MAX && k[n] == '\0';
}

static int add_option(parser *p, const char *key, const char *val)
{
    tml_conf *c = p->c;
    if (strcmp(val, "false") == 0)
        return 0;
    size_t n = strlen(key) + strlen(val) + 4;
    char *opt = malloc(n);
    if (!opt || TML_GROW(c->argv, c->n + 2, c->cap) < 0) {
        free(opt);
        return TML_ENOMEM;
    }
    if (strcmp(val, "true") == 0)
        snprintf(opt, n, "--%s", key);
    else
        snprintf(opt, n, "--%s=%s", key, val);
    for (char *q = opt + 2; *q && *q != '='; q++)
        if (*q == '_')
            *q = '-';
    c->argv[c->n++] = opt;
    c->argv[c->n] = NULL;
    return 0;
}

static int add_threshold(parser *p, const char *key, const char *val)
{
    char *t = p->c->thresholds;
    size_t len = strlen(t), room = sizeof(p->c->thresholds) - len;
    if (!*val || strpbrk(val, ",="))
        return fail(p, "a threshold is one number (docs/diagnosis.md)", key);
    if ((size_t)snprintf(t + len, room, "%s%s=%s", len ? "," : "", key, val) >= room) {
        t[len] = '\0';
        snprintf(p->why, p->cap, "%s: too many thresholds", p->name);
        return TML_EINVAL;
    }
    return 0;
}

/* One "key<sep>value" line of a map; in_thresholds: the thresholds map. */
static int entry(parser *p, char *line, char sep, int in_thresholds)
{
    char *at = strchr(line, sep);
    if (!at) {
        char what[32];
        snprintf(what, sizeof(what), "expected key %c value", sep);
        return fail(p, what, NULL);
    }
    *at = '\0';
    char *key = trim(line), *val = value_of(at + 1);
    if (!*key)
        return fail(p, "a value without a key", NULL);
    if (!is_name(key))
        return fail(p, "not an option name (letters, digits, '-' and '_')", key);
    if (*val == '[' || *val == '{')
        return fail(p, "lists and inline tables are not read here (one value per key)", key);
    return in_thresholds ? add_threshold(p, key, val) : add_option(p, key, val);
}

static int yaml_line(parser *p, char *line, int *in_thresholds)
{
    int indented = isspace((unsigned char)line[0]);
    char *l = trim(line);
    if (!*l || *l == '#' || strcmp(l, "---") == 0)
        return 0;
    if (!indented) {
        char *colon = strchr(l, ':');
        *in_thresholds = 0;
        if (colon && (size_t)(colon - l) == 10 && strncmp(l, "thresholds", 10) == 0 &&
            !*value_of(colon + 1)) {
            *in_thresholds = 1;
            return 0;
        }
    } else if (!*in_thresholds) {
        return fail(p, "only 'thresholds' holds a map", NULL);
    }
    return entry(p, l, ':', *in_thresholds);
}

/* state: 0 outside [tool.traceml], 1 in it, 2 in its thresholds. */
static int toml_line(parser *p, char *line, int *state)
{
    char *l = trim(line);
    if (!*l || *l == '#')
        return 0;
    if (*l == '[') {
        char *v = value_of(l);
        *state = strcmp(v, "[tool.traceml]") == 0 ? 1
                 : strcmp(v, "[tool.traceml.thresholds]") == 0 ? 2 : 0;
        return 0;
    }
    return *state ? entry(p, l, '=', *state == 2) : 0;
}

int tml__conf_parse(const char *name, const char *text, size_t len, tml_conf *c,
                    char *why, size_t cap)
{
    parser p = {name, 0, c, why, cap};
    size_t nl = strlen(name);
    int toml = nl >= 5 && strcmp(name + nl - 5, ".toml") == 0, state = 0, rc = 0;
    memset(c, 0, sizeof(*c));
    if (memchr(text, '\0', len)) {
        snprintf(why, cap, "%s: not a text file (a NUL byte)", name);
        return TML_EINVAL;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return TML_ENOMEM;
    memcpy(copy, text, len);
    copy[len] = '\0';
    for (char *line = copy, *end; rc == 0 && line; line = end ? end + 1 : NULL) {
        if ((end = strchr(line, '\n')))
            *end = '\0';
        p.line++;
        rc = toml ? toml_line(&p, line, &state) : yaml_line(&p, line, &state);
    }
    free(copy);
    if (rc == TML_ENOMEM)
        snprintf(why, cap, "%s: out of memory", name);
    return rc;
}

void tml__conf_release(tml_conf *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->argv[i]);
    free(c->argv);
    memset(c, 0, sizeof(*c));
}
