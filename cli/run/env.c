/*
 * env.c - the training's environment: the launcher's own, less the
 * variables TraceML owns, plus the run's address, secret and folders.
 *
 * Zero-edit tracing (docs/zero-edit.md): a sitecustomize, first on the
 * training's PYTHONPATH, that starts TraceML in the script's own process
 * (its argv[0] is SCRIPT: not torchrun, not a worker) unless the script
 * starts it itself, then hands over to any sitecustomize it hides
 * (python/traceml_ai/_sitecustomize.py, embedded at build time).
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/array.h"
#include "base/fs.h"
#include "base/env.h"

extern char **environ;

void tml__launch_env_release(tml_run_env *e)
{
    for (size_t i = e->owned_from; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    memset(e, 0, sizeof(*e));
}

static void env_push(tml_run_env *e, char *s)
{
    if (TML_GROW(e->v, e->n + 2, e->cap) < 0)
        tml__cli_die(1, "out of memory");
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

static void env_set(tml_run_env *e, const char *key, const char *val)
{
    size_t n = strlen(key) + strlen(val) + 2;
    char *s = malloc(n);
    if (!s)
        tml__cli_die(1, "out of memory");
    snprintf(s, n, "%s=%s", key, val);
    env_push(e, s);
}

/* One of TraceML's variables, id, set to val. */
static void env_set_var(tml_run_env *e, tml_env_id id, const char *val)
{
    env_set(e, tml__env_name(id), val);
}

/* environ's entry p sets variable id. */
static int sets(const char *p, tml_env_id id)
{
    const char *name = tml__env_name(id);
    size_t n = strlen(name);
    return strncmp(p, name, n) == 0 && p[n] == '=';
}

static const tml_env_id owned_vars[] = {
    TML_ENV_ADDR, TML_ENV_RUN_ID, TML_ENV_SECRET, TML_ENV_RUN_NAME,
    TML_ENV_LOGS_DIR, TML_ENV_RUN_DIR, TML_ENV_DISABLED, TML_ENV_NNODES,
    TML_ENV_ENV_PYTHON, TML_ENV_ENV_PYTHON_PROBE, TML_ENV_SCRIPT, TML_ENV_PROFILE,
    TML_ENV_SESSION_ID, TML_ENV_AGGREGATOR_HOST, TML_ENV_AGGREGATOR_PORT,
};

/* Writes <run>/zero-edit/sitecustomize.py; its folder, or NULL. */
static const char *zero_edit_dir(tml_run_ctx *c, const tml_cli_run *r)
{
    char *dir = c->zero_edit_dir, path[4300];
    snprintf(dir, sizeof(c->zero_edit_dir), "%s/zero-edit", r->abs_dir);
    snprintf(path, sizeof(path), "%s/sitecustomize.py", dir);
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
        tml__write_file(path, (const char *)tml__zero_edit_site, tml__zero_edit_site_len,
                        0644) < 0) {
        tml__cli_warn("could not write %s: the script runs without zero-edit tracing", path);
        return NULL;
    }
    return dir;
}

void tml__launch_build_env(tml_run_ctx *c, const tml_cli_run *r, int port, int disabled)
{
    tml_run_env *e = &c->env;
    const tml_dist *d = &c->o.dist;
    const char *site = c->zero_edit_script && !disabled && port > 0 ? zero_edit_dir(c, r)
                                                                    : NULL;
    const char *pypath = NULL;
    for (char **p = environ; *p; p++) {
        int skip = 0;
        if (site && strncmp(*p, "PYTHONPATH=", 11) == 0) {
            pypath = *p + 11;
            continue;
        }
        for (size_t k = 0; k < sizeof(owned_vars) / sizeof(owned_vars[0]) && !skip; k++)
            skip = sets(*p, owned_vars[k]);
        if (c->apply_settings[0] && sets(*p, TML_ENV_TUNE_SETTINGS))
            skip = 1;   /* --apply's win */
        if (!skip)
            env_push(e, *p);
    }
    e->owned_from = e->n;
    if (disabled) {
        env_set_var(e, TML_ENV_DISABLED, "1");
        return;
    }
    char addr[320];
    /* a follower's ranks reach the host's aggregator; everyone else's are
     * on the aggregator's own host */
    int remote = d && d->enabled && !d->host && d->multi_host;
    snprintf(addr, sizeof(addr), "%s:%d", remote ? d->master_addr : "127.0.0.1", port);
    if (port > 0) {
        env_set_var(e, TML_ENV_ADDR, addr);
        env_set_var(e, TML_ENV_SECRET, r->secret);
    } else {
        env_set_var(e, TML_ENV_DISABLED, "1");   /* no aggregator: run untraced */
    }
    env_set_var(e, TML_ENV_RUN_ID, r->id);
    env_set_var(e, TML_ENV_RUN_NAME, r->name);
    env_set_var(e, TML_ENV_SESSION_ID, r->name);   /* 0.5.0's name: demos build paths from it */
    env_set_var(e, TML_ENV_LOGS_DIR, r->logs_dir);
    env_set_var(e, TML_ENV_RUN_DIR, r->abs_dir);
    if (c->watch)   /* TraceML 0.5.0's variable: the ranks trace no step */
        env_set_var(e, TML_ENV_PROFILE, "watch");
    if (site) {
        size_t n = strlen(site) + (pypath ? strlen(pypath) : 0) + 2;
        char *v = malloc(n);
        if (!v)
            tml__cli_die(1, "out of memory");
        snprintf(v, n, "%s%s%s", site, pypath && *pypath ? ":" : "", pypath ? pypath : "");
        env_set(e, "PYTHONPATH", v);
        free(v);
        env_set_var(e, TML_ENV_SCRIPT, c->zero_edit_script);
        if (c->apply_settings[0])
            env_set_var(e, TML_ENV_TUNE_SETTINGS, c->apply_settings);
    }
    if (d && d->enabled) {
        char nn[32];
        snprintf(nn, sizeof(nn), "%ld", d->nnodes);
        env_set_var(e, TML_ENV_NNODES, nn);
    }
}
