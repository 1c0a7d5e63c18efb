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
 * tables, no multi-line values); anything else is one error naming the
 * file and line. Every line counts (blank and comment lines too, as an
 * editor numbers them), a UTF-8 byte order mark is skipped, and a key set
 * twice is an error naming both lines: a file that says two things says
 * neither.
 *
 * The parser is pure (tml__cli_config_parse: bytes in, options or one
 * message out, nothing printed, nothing exited) so that it can be fuzzed;
 * tml__cli_config_load finds and reads the file. The options come out as
 * "--key=value" strings, each with its line, which `traceml run` parses
 * as if typed first, so every value is checked the same way and its error
 * names the line (cli/run/options.c).
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/array.h"
#include "diag/diag.h"
#include "base/env.h"

typedef struct tml_cli_config_key {
    char name[64];     /* normalized: '_' as '-' */
    int map;           /* 1: inside the thresholds map */
    int line;
} tml_cli_config_key;

/* The parse in progress: the result, the line being read, the map. */
typedef struct cfg {
    tml_cli_config *c;
    int line;
    int in_thresholds;
    tml_thresholds th;
} cfg;

__attribute__((format(printf, 2, 3)))
static int fail(cfg *p, const char *fmt, ...)
{
    tml_cli_config *c = p->c;
    int n = snprintf(c->err, sizeof(c->err), "%s:%d: ", c->path, p->line);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(c->err))
        vsnprintf(c->err + n, sizeof(c->err) - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

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

/* A key set before in the same map: an error naming both lines. */
static int remember_key(cfg *p, const char *key)
{
    tml_cli_config *c = p->c;
    tml_cli_config_key k;
    memset(&k, 0, sizeof(k));
    snprintf(k.name, sizeof(k.name), "%s", key);
    for (char *s = k.name; *s; s++)
        if (*s == '_' && !p->in_thresholds)
            *s = '-';
    k.map = p->in_thresholds;
    k.line = p->line;
    for (size_t i = 0; i < c->nkeys; i++)
        if (c->keys[i].map == k.map && strcmp(c->keys[i].name, k.name) == 0)
            return fail(p, "'%s' is set twice (also on %s:%d); say it once", key, c->path,
                        c->keys[i].line);
    if (TML_GROW(c->keys, c->nkeys + 1, c->kcap) < 0)
        return fail(p, "out of memory");
    c->keys[c->nkeys++] = k;
    return 0;
}

static int add_option(cfg *p, const char *key, const char *val)
{
    tml_cli_config *c = p->c;
    size_t n = strlen(key) + strlen(val) + 4;
    char *opt = malloc(n);
    if (!opt || TML_GROW(c->argv, (size_t)c->n + 2, c->cap) < 0 ||
        TML_GROW(c->line, (size_t)c->n + 1, c->lcap) < 0) {
        free(opt);
        return fail(p, "out of memory");
    }
    snprintf(opt, n, "--%s=%s", key, val);
    for (char *s = opt + 2; *s != '='; s++)
        if (*s == '_')
            *s = '-';
    c->line[c->n] = p->line;
    c->argv[c->n++] = opt;
    c->argv[c->n] = NULL;
    return 0;
}

static int add_threshold(cfg *p, const char *key, const char *val)
{
    tml_cli_config *c = p->c;
    char item[160];
    int w = snprintf(item, sizeof(item), "%s=%s", key, val);
    if (w < 0 || (size_t)w >= sizeof(item) || tml__thresholds_set(&p->th, item, (size_t)w) < 0)
        return fail(p, "threshold %s: '%s' is not a known key with a value in range "
                    "(docs/diagnosis.md)", key, val);
    size_t len = strlen(c->thresholds);
    if ((size_t)snprintf(c->thresholds + len, sizeof(c->thresholds) - len, "%s%s",
                         len ? "," : "", item) >= sizeof(c->thresholds) - len)
        return fail(p, "too many thresholds");
    if (!c->thresholds_line)
        c->thresholds_line = p->line;
    return 0;
}

/* One "key<sep>value" line of a map. */
static int entry(cfg *p, char *line, char sep)
{
    char *at = strchr(line, sep);
    if (!at)
        return fail(p, "expected key %c value", sep);
    *at = '\0';
    char *key = trim(line), *val = value_of(at + 1);
    if (!*key)
        return fail(p, "a value without a key");
    if (strlen(key) > 60 || strspn(key, "abcdefghijklmnopqrstuvwxyz"
                                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != strlen(key))
        return fail(p, "'%.60s' is not a key (letters, digits, '-' and '_')", key);
    if (*val == '[' || *val == '{')
        return fail(p, "'%s': lists and inline tables are not read here (one value per key)",
                    key);
    if (remember_key(p, key) < 0)
        return -1;
    return p->in_thresholds ? add_threshold(p, key, val) : add_option(p, key, val);
}

static void guard_add(tml_cli_config *c, const char *unused, const char *s)
{
    size_t n = strlen(c->guard);
    (void)unused;
    snprintf(c->guard + n, sizeof(c->guard) - n, "%s", s);
}

/* Closes the guard block's open maps down to depth d. */
static void guard_close(tml_cli_config *c, int d)
{
    while (c->guard_depth > d) {
        guard_add(c, "%s", "}");
        c->guard_depth--;
    }
}

/* A JSON string of s (the guard's values are short, printable text). */
static void guard_str(tml_cli_config *c, const char *s, size_t n)
{
    guard_add(c, "%s", "\"");
    for (size_t i = 0; i < n; i++) {
        char e[8] = {s[i], 0};
        if (s[i] == '"' || s[i] == '\\')
            snprintf(e, sizeof(e), "\\%c", s[i]);
        else if ((unsigned char)s[i] < 0x20)
            snprintf(e, sizeof(e), "\\u%04x", (unsigned char)s[i]);
        guard_add(c, NULL, e);
    }
    guard_add(c, "%s", "\"");
}

/* One line of traceml.yaml's `guard:` block (TraceML 0.5.0's declared
 * workload: schema_version, workload.name, workload.parameters.*,
 * measurement.*): nested maps of scalars, kept as JSON with the scalars'
 * types (quoted: a string; true/false; null; a number). TraceML keeps it
 * whole; `traceml compare` holds two runs' declarations against each
 * other. */
static int guard_line(cfg *p, char *line)
{
    tml_cli_config *c = p->c;
    int indent = (int)strspn(line, " ");
    if (line[indent] == '\t')
        return fail(p, "guard: indent with spaces, not tabs");
    char *l = trim(line);
    if (*l == '-')
        return fail(p, "guard: lists are not read here (maps of values only)");
    char *colon = NULL;
    for (char *q = l, quote = 0; *q; q++) {   /* the first ':' outside quotes */
        if (quote ? *q == quote : (*q == '"' || *q == '\''))
            quote = quote ? 0 : *q;
        else if (!quote && *q == ':' && (q[1] == '\0' || isspace((unsigned char)q[1]))) {
            colon = q;
            break;
        }
    }
    if (!colon || colon == l)
        return fail(p, "guard: expected 'key: value'");
    *colon = '\0';
    char *key = trim(l), *v = colon + 1;
    size_t kn = strlen(key);
    if (kn >= 2 && (key[0] == '"' || key[0] == '\'') && key[kn - 1] == key[0]) {
        key[kn - 1] = '\0';
        key++;
    }
    /* the value, its comment dropped; quoted or not */
    char q = 0, *end = v + strlen(v);
    for (char *s = v; *s; s++) {
        if (q ? *s == q : (*s == '"' || *s == '\''))
            q = q ? 0 : *s;
        else if (!q && *s == '#' && (s == v || isspace((unsigned char)s[-1]))) {
            end = s;
            break;
        }
    }
    *end = '\0';
    v = trim(v);
    while (c->guard_depth > 1 && indent <= c->guard_indent[c->guard_depth - 1])
        guard_close(c, c->guard_depth - 1);
    if (c->guard_depth >= 8)
        return fail(p, "guard: nested too deep");
    if (c->guard_count[c->guard_depth - 1]++)
        guard_add(c, "%s", ",");
    guard_str(c, key, strlen(key));
    guard_add(c, "%s", ":");
    size_t vn = strlen(v);
    char *num_end = NULL;
    if (!*v) {   /* a map opens */
        guard_add(c, "%s", "{");
        c->guard_indent[c->guard_depth] = indent;
        c->guard_count[c->guard_depth] = 0;
        c->guard_depth++;
    } else if (*v == '[' || *v == '{') {
        return fail(p, "guard: lists and inline tables are not read here (one value per key)");
    } else if (vn >= 2 && (v[0] == '"' || v[0] == '\'') && v[vn - 1] == v[0]) {
        guard_str(c, v + 1, vn - 2);
    } else if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0 || strcmp(v, "null") == 0) {
        guard_add(c, "%s", v);
    } else if (strcmp(v, "~") == 0) {
        guard_add(c, "%s", "null");
    } else if ((strtod(v, &num_end), num_end && *num_end == '\0') &&
               strspn(v, "+-0123456789.eE") == vn) {
        guard_add(c, "%s", v[0] == '+' ? v + 1 : v);
    } else {
        guard_str(c, v, vn);
    }
    if (strlen(c->guard) >= sizeof(c->guard) - 16)
        return fail(p, "guard: over %zu bytes", sizeof(c->guard) - 16);
    return 0;
}

static int yaml_line(cfg *p, char *line)
{
    int indented = isspace((unsigned char)line[0]);
    char *l = trim(line);
    if (!*l || *l == '#' || strcmp(l, "---") == 0)
        return 0;
    if (indented && p->c->guard_depth > 0)
        return guard_line(p, line);
    guard_close(p->c, 0);
    if (!indented && strncmp(l, "guard:", 6) == 0 && !*value_of(l + 6)) {
        if (p->c->guard[0])
            return fail(p, "'guard' is set twice");
        p->in_thresholds = 0;
        p->c->guard_depth = 1;
        p->c->guard_count[0] = 0;
        p->c->guard_indent[0] = -1;
        guard_add(p->c, "%s", "{");
        return 0;
    }
    if (!indented) {
        char *colon = strchr(l, ':');
        p->in_thresholds = 0;
        if (colon && (size_t)(colon - l) == 10 && strncmp(l, "thresholds", 10) == 0 &&
            !*value_of(colon + 1)) {
            p->in_thresholds = 1;
            return remember_key(p, "thresholds");
        }
    } else if (!p->in_thresholds) {
        return fail(p, "only 'thresholds' holds a map");
    }
    return entry(p, l, ':');
}

/* in: 0 outside, 1 in [tool.traceml], 2 in [tool.traceml.thresholds] */
static int toml_line(cfg *p, char *line, int *in)
{
    char *l = trim(line);
    if (!*l || *l == '#')
        return 0;
    if (*l == '[') {
        char *v = value_of(l);
        *in = strcmp(v, "[tool.traceml]") == 0                ? 1
              : strcmp(v, "[tool.traceml.thresholds]") == 0 ? 2
                                                             : 0;
        p->in_thresholds = *in == 2;
        return 0;
    }
    return *in ? entry(p, l, '=') : 0;
}

static int parse_lines(cfg *p, char *text, int toml)
{
    int in = 0;
    for (char *line = text; line; p->line++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if ((toml ? toml_line(p, line, &in) : yaml_line(p, line)) < 0)
            return -1;
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

int tml__cli_config_parse(tml_cli_config *c, const char *path, const char *text, size_t len)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->path, sizeof(c->path), "%s", path);
    cfg p;
    memset(&p, 0, sizeof(p));
    p.c = c;
    p.line = 1;
    tml__thresholds_default(&p.th);
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {   /* the UTF-8 BOM */
        text += 3;
        len -= 3;
    }
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        for (const char *s = text; s < nul; s++)
            p.line += *s == '\n';
        return fail(&p, "a NUL byte: the file is not UTF-8 text (UTF-16? save it as UTF-8)");
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return fail(&p, "out of memory");
    memcpy(copy, text, len);
    copy[len] = '\0';
    const char *dot = strrchr(path, '.');
    int rc = parse_lines(&p, copy, dot && strcmp(dot, ".toml") == 0);
    free(copy);
    guard_close(c, 0);
    if (rc < 0)
        c->guard[0] = '\0';
    if (rc == 0 && c->thresholds[0]) {
        tml_thresholds th;
        tml__thresholds_default(&th);
        p.line = c->thresholds_line;
        if (tml__thresholds_parse(&th, c->thresholds) < 0)
            rc = fail(&p, "thresholds: each *_warn must be at most its *_crit (%s)",
                      c->thresholds);
    }
    return rc;
}

void tml__cli_config_release(tml_cli_config *c)
{
    for (int k = 0; k < c->n; k++)
        free(c->argv[k]);
    free(c->argv);
    free(c->line);
    free(c->keys);
    memset(c, 0, sizeof(*c));
}

/* Reads the file at name: 1 read, 0 none there, -1 with c->err. One that
 * is there but cannot be read is an error, never a reason to read the
 * next candidate instead. */
static int read_config(tml_cli_config *c, const char *name, char **text, size_t *len)
{
    struct stat st;
    if (lstat(name, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (stat(name, &st) < 0)
        snprintf(c->err, sizeof(c->err), "%s: a link to nothing (%s)", name, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(c->err, sizeof(c->err), "%s is not a regular file (a %s); TraceML reads its "
                 "options from it", name, S_ISDIR(st.st_mode) ? "folder" : "special file");
    else if (tml__read_file(name, TML_CLI_CONFIG_MAX, text, len) == 0)
        return 1;
    else if (errno == EFBIG)
        snprintf(c->err, sizeof(c->err), "%s is over %u MiB: not an options file", name,
                 TML_CLI_CONFIG_MAX >> 20);
    else
        snprintf(c->err, sizeof(c->err), "cannot read %s: %s", name, strerror(errno));
    return -1;
}

int tml__cli_config_load(tml_cli_config *c)
{
    static const char *const names[] = {"traceml.yaml", "traceml.yml", "pyproject.toml"};
    char *text = NULL;
    size_t len = 0;
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int rc = read_config(c, names[i], &text, &len);
        if (rc < 0) {
            if (!c->err[0])
                snprintf(c->err, sizeof(c->err), "cannot read %s: %s", names[i],
                         strerror(errno));
            return -1;
        }
        if (rc == 0)
            continue;
        struct stat st;
        if (i == 0 && lstat(names[1], &st) == 0) {   /* which would the user mean? */
            free(text);
            snprintf(c->err, sizeof(c->err), "both %s and %s are here: keep one", names[0],
                     names[1]);
            return -1;
        }
        rc = tml__cli_config_parse(c, names[i], text, len);
        free(text);
        if (rc == 0 && c->thresholds[0])   /* a TRACEML_THRESHOLDS already set wins */
            setenv(tml__env_name(TML_ENV_THRESHOLDS), c->thresholds, 0);
        return rc;
    }
    return 0;
}
