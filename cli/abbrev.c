/*
 * abbrev.c - argparse's habits on the command line, which TraceML 0.5.0's
 * users have: a unique prefix of a long option is that option (`--nproc 2`
 * is `--nproc-per-node 2`, `--html` is `--html-report`), an ambiguous one
 * is an error naming the candidates, and an unknown option or command
 * names the nearest one ("did you mean '--nproc-per-node'?" for
 * `--nproc_per_node`, "'run'?" for `rnu`).
 *
 * A command's options are those its usage text lists, one per line
 * ("  --name VALUE  what it does": a word after one blank is its value),
 * and the TraceML 0.5.0 options it accepts with a note (tml__launch_legacy,
 * tml__serve_legacy).
 * Expansion rewrites argv before the command parses it, so every parser
 * stays exact; for `run`, `watch` and `tune` it stops at SCRIPT, whose
 * own arguments are never touched.
 */
#include "cli.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 128

typedef struct opt_name {
    char name[48];
    int value;
} opt_name;

static size_t add(opt_name *o, size_t n, const char *name, size_t len, int value)
{
    if (n == MAX_OPTS || len >= sizeof(o->name))
        return n;
    for (size_t k = 0; k < n; k++)
        if (strlen(o[k].name) == len && strncmp(o[k].name, name, len) == 0)
            return n;
    memcpy(o[n].name, name, len);
    o[n].name[len] = '\0';
    o[n].value = value;
    return n + 1;
}

/* TraceML 0.5.0's names that serve's parser takes as aliases of ours
 * (cli/cmd_serve.c): no usage line lists them. run's are its table's
 * (tml__launch_alias). */
static const tml_cli_legacy serve_aliases[] = {
    {"--session-id", 1, NULL}, {"--aggregator-port", 1, NULL},
    {"--aggregator-bind-host", 1, NULL}, {"--mode", 1, NULL},
};

/* The options of command c. */
static size_t options_of(const tml_cli_cmd *c, opt_name *o)
{
    size_t n = 0;
    for (const char *l = c->usage; l && *l; l += strcspn(l, "\n"), l += *l == '\n') {
        if (strncmp(l, "  --", 4) != 0)
            continue;
        const char *name = l + 2;
        size_t len = strspn(name + 2, "abcdefghijklmnopqrstuvwxyz0123456789-_") + 2;
        n = add(o, n, name, len, name[len] == ' ' && name[len + 1] != ' ');
    }
    int run = strcmp(c->name, "run") == 0 || strcmp(c->name, "watch") == 0;
    const tml_cli_legacy *more = run ? tml__launch_legacy
                                 : strcmp(c->name, "serve") == 0 ? tml__serve_legacy : NULL;
    size_t nmore = run ? tml__launch_nlegacy : more ? tml__serve_nlegacy : 0;
    for (size_t k = 0; k < nmore; k++)
        n = add(o, n, more[k].name, strlen(more[k].name), more[k].value);
    int value;
    const char *alias;
    for (size_t k = 0; run && (alias = tml__launch_alias(k, &value)); k++)
        n = add(o, n, alias, strlen(alias), value);
    for (size_t k = 0; !run && more && k < sizeof(serve_aliases) / sizeof(serve_aliases[0]); k++)
        n = add(o, n, serve_aliases[k].name, strlen(serve_aliases[k].name),
                serve_aliases[k].value);
    return n;
}

void tml__cli_abbrev(const tml_cli_cmd *c, int argc, char **argv)
{
    opt_name o[MAX_OPTS];
    size_t n = options_of(c, o);
    /* run, watch, tune: "[options] SCRIPT [script args...]" */
    int script = c->usage && strstr(c->usage, "SCRIPT [script args") != NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strncmp(a, "--", 2) != 0 || !a[2]) {
            if (script && a[0] != '-')
                break;                   /* SCRIPT: the rest is the script's */
            continue;
        }
        size_t len = strcspn(a, "="), hit = n, matches = 0;
        char which[400] = "";
        for (size_t k = 0; k < n && hit == n; k++)
            if (strlen(o[k].name) == len && strncmp(o[k].name, a, len) == 0)
                hit = k;
        for (size_t k = 0; k < n && hit == n; k++)
            if (strncmp(o[k].name, a, len) == 0) {
                size_t w = strlen(which);
                snprintf(which + w, sizeof(which) - w, "%s%.47s", matches++ ? ", " : "",
                         o[k].name);
            }
        if (matches > 1)
            tml__cli_die(TML_EXIT_USAGE, "ambiguous option '%.*s' for 'traceml %s': %s",
                         (int)len, a, c->name, which);
        for (size_t k = 0; k < n && hit == n && matches == 1; k++)
            if (strncmp(o[k].name, a, len) == 0)
                hit = k;
        if (hit == n)
            continue;                    /* unknown: the command says so */
        if (strlen(o[hit].name) != len) {   /* a prefix: the option it stands for */
            size_t sz = strlen(o[hit].name) + strlen(a + len) + 1;
            char *full = malloc(sz);     /* argv's for the process's life */
            if (!full)
                tml__cli_die(1, "out of memory");
            snprintf(full, sz, "%s%s", o[hit].name, a + len);
            argv[i] = full;
        }
        if (o[hit].value && a[len] != '=')
            i++;                         /* its value */
    }
}

/* Edit distance of a and b, '_' as '-' and case ignored (short strings). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 63 || lb >= 63)
        return 99;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)(a[i - 1] == '_' ? '-' : a[i - 1]));
            int cb = tolower((unsigned char)(b[j - 1] == '_' ? '-' : b[j - 1]));
            size_t best = diag + (ca != cb);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            diag = row[j];
            row[j] = best;
        }
    }
    return row[lb];
}

/* The candidate nearest to word, NULL when none is near (at most 2 edits,
 * or a third of the candidate's length). */
static const char *nearest(const char *word, const char *const *cand, size_t n)
{
    const char *best = NULL;
    size_t bd = 99;
    for (size_t k = 0; k < n; k++) {
        size_t d = distance(word, cand[k]), len = strlen(cand[k]);
        if (d < bd && (d <= 2 || d <= len / 3)) {
            best = cand[k];
            bd = d;
        }
    }
    return best;
}

static void hint(char *out, size_t cap, const char *best)
{
    snprintf(out, cap, "%s%s%s", best ? "; did you mean '" : "", best ? best : "", best ? "'?" : "");
}

void tml__cli_suggest_option(const char *cmd, const char *arg, char *out, size_t cap)
{
    const tml_cli_cmd *c = tml__cli_find(cmd);
    opt_name o[MAX_OPTS];
    const char *names[MAX_OPTS];
    char word[64];
    size_t n = c ? options_of(c, o) : 0;
    snprintf(word, sizeof(word), "%.*s", (int)strcspn(arg, "="), arg);
    for (size_t k = 0; k < n; k++)
        names[k] = o[k].name;
    const char *best = nearest(word, names, n);
    hint(out, cap, best);
}

void tml__cli_suggest_command(const char *word, char *out, size_t cap)
{
    const char *names[64];
    size_t n = 0;
    for (const tml_cli_cmd *c = tml__cli_cmds; c->name && n < 64; c++)
        if (c->summary)
            names[n++] = c->name;
    const char *best = nearest(word, names, n);
    hint(out, cap, best);
}
