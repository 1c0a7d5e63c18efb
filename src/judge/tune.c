/*
 * tune.c - `traceml tune`'s decisions (tune.h): the settings tune may
 * apply and their ranges, the directions worth trying for a baseline's
 * diagnosis, and whether a setting's trials beat the baseline's (an
 * interval over processes, base/stats.h). The trials are run by
 * cli/cmd_tune.c and the result printed by src/report/tune.c.
 */
#include "judge/tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/stats.h"
#include "traceml/traceml.h"

/* ---- settings ------------------------------------------------------- */

/* The settings the start-up code applies (python/traceml_ai/_tune_apply.py)
 * and their ranges; 0/1 settings have max 1. */
static const struct {
    const char *key;
    double min, max;
    int integer;
    const char *code;          /* the line for the script; %s the value */
    const char *trainer;       /* the HF Trainer's TrainingArguments field, if any */
} settings[] = {
    {"num_workers", 0, 256, 1, "DataLoader(..., num_workers=%s)", "dataloader_num_workers"},
    {"pin_memory", 0, 1, 1, "DataLoader(..., pin_memory=%s)", "dataloader_pin_memory"},
    {"persistent_workers", 0, 1, 1, "DataLoader(..., persistent_workers=%s)",
     "dataloader_persistent_workers"},
    {"prefetch_factor", 1, 64, 1, "DataLoader(..., prefetch_factor=%s)",
     "dataloader_prefetch_factor"},
    {"threads", 1, 1024, 1, "torch.set_num_threads(%s)", NULL},
    {"bucket_cap_mb", 0.001, 65536, 0, "DistributedDataParallel(..., bucket_cap_mb=%s)", NULL},
    {"gradient_as_bucket_view", 0, 1, 1,
     "DistributedDataParallel(..., gradient_as_bucket_view=%s)", NULL},
    {"comm_hook", 0, 0, 0, "ddp_model.register_comm_hook(None, default_hooks.%s_compress_hook)",
     NULL},
    {"cudnn_benchmark", 0, 1, 1, "torch.backends.cudnn.benchmark = %s", NULL},
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

static int setting_of(const char *key, size_t len)
{
    for (size_t k = 0; k < NSETTINGS; k++)
        if (strlen(settings[k].key) == len && strncmp(settings[k].key, key, len) == 0)
            return (int)k;
    return -1;
}

static int value_ok(int k, const char *v)
{
    if (strcmp(settings[k].key, "comm_hook") == 0)
        return strcmp(v, "fp16") == 0 || strcmp(v, "bf16") == 0 || strcmp(v, "none") == 0;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !(x >= settings[k].min && x <= settings[k].max))
        return 0;
    return !settings[k].integer || x == floor(x);
}

int tml__tune_settings_check(const char *s, char *why, size_t cap)
{
    if (!s || !*s) {
        snprintf(why, cap, "no setting");
        return TML_EINVAL;
    }
    if (strlen(s) >= TML_TUNE_SETTING) {   /* what holds it would cut it */
        snprintf(why, cap, "the settings are %zu bytes long, more than the %d a setting "
                 "string may have", strlen(s), TML_TUNE_SETTING - 1);
        return TML_EINVAL;
    }
    char item[TML_TUNE_SETTING];
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(item)) {
            snprintf(why, cap, "an empty or too long setting in '%s'", s);
            return TML_EINVAL;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        char *eq = strchr(item, '=');
        int k = eq ? setting_of(item, (size_t)(eq - item)) : -1;
        if (!eq || k < 0) {
            snprintf(why, cap, "'%s' is not a setting tune applies", item);
            return TML_EINVAL;
        }
        if (!value_ok(k, eq + 1)) {
            snprintf(why, cap, "'%s': not a valid value for %s", item, settings[k].key);
            return TML_EINVAL;
        }
        p += len + (p[len] == ',');
    }
    return 0;
}

/* Appends "key=value" from src to dst unless dst already has the key. */
static void merge_from(const char *src, char *out, size_t cap)
{
    for (const char *p = src; p && *p;) {
        size_t len = strcspn(p, ","), klen = strcspn(p, "=");
        int have = 0;
        for (const char *q = out; *q && !have;) {
            size_t qk = strcspn(q, "=");
            have = qk == klen && strncmp(q, p, klen) == 0;
            q += strcspn(q, ",");
            q += *q == ',';
        }
        size_t used = strlen(out);
        if (!have && klen < len && used + len + 2 < cap)
            snprintf(out + used, cap - used, "%s%.*s", used ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
}

void tml__tune_merge(const char *a, const char *b, char *out, size_t cap)
{
    char both[2 * TML_TUNE_SETTING] = "";
    merge_from(b, both, sizeof(both));   /* b's first: its keys win */
    merge_from(a, both, sizeof(both));
    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t k = 0; k < NSETTINGS; k++) {   /* the table's order */
        size_t klen = strlen(settings[k].key);
        for (const char *p = both; *p;) {
            size_t len = strcspn(p, ",");
            size_t used = strlen(out);
            if (len > klen && p[klen] == '=' && strncmp(p, settings[k].key, klen) == 0 &&
                used + len + 2 < cap)
                snprintf(out + used, cap - used, "%s%.*s", used ? "," : "", (int)len, p);
            p += len + (p[len] == ',');
        }
    }
}

/* One line per setting, and where the HF Trainer builds the DataLoader
 * itself, the same loader settings as its TrainingArguments fields. */
void tml__tune_code(const char *s, tml_strbuf *out)
{
    tml_strbuf trainer = {0};
    for (const char *p = s; p && *p;) {
        size_t len = strcspn(p, ","), klen = strcspn(p, "=");
        int k = klen < len ? setting_of(p, klen) : -1;
        if (k >= 0) {
            char v[64];
            snprintf(v, sizeof(v), "%.*s", (int)(len - klen - 1), p + klen + 1);
            int flag = settings[k].integer && settings[k].max == 1;
            if (flag)
                snprintf(v, sizeof(v), "%s", strcmp(v, "1") == 0 ? "True" : "False");
            const char *code = settings[k].code, *at = strstr(code, "%s");
            tml__sb_addf(out, "%.*s%s%s\n", (int)(at - code), code, v, at + 2);
            if (settings[k].trainer)
                tml__sb_addf(&trainer, ", %s=%s", settings[k].trainer, v);
        }
        p += len + (p[len] == ',');
    }
    if (trainer.len)
        tml__sb_addf(out, "TrainingArguments(...%s)  # the HF Trainer's DataLoader\n", trainer.buf);
    tml__sb_release(&trainer);
}

/* ---- a setting against the baseline -------------------------------- */

void tml__tune_compare(const double *base, size_t nb, const double *cand, size_t nc,
                       tml_tune_cmp *out)
{
    double mb, vb, mc, vc, lb[TML_TUNE_RUNS], lc[TML_TUNE_RUNS];
    tml__mean_var(base, nb, &mb, &vb);
    tml__mean_var(cand, nc, &mc, &vc);
    out->base_ms = mb;
    out->ms = mc;
    out->change = out->lo = out->hi = NAN;
    out->verdict = TML_TUNE_UNSURE;
    out->more = -1;
    if (nb < 2 || nc < 2 || nb > TML_TUNE_RUNS || nc > TML_TUNE_RUNS || !(mb > 0))
        return;
    /* on the log of the step time: the ratio's interval, never below
     * -100% (a process is a multiplicative sample of the machine) */
    for (size_t i = 0; i < nb; i++)
        lb[i] = log(base[i] > 0 ? base[i] : 1e-9);
    for (size_t i = 0; i < nc; i++)
        lc[i] = log(cand[i] > 0 ? cand[i] : 1e-9);
    tml__mean_var(lb, nb, &mb, &vb);
    tml__mean_var(lc, nc, &mc, &vc);
    double d = mc - mb, half = tml__welch_half_width(vb, (double)nb, vc, (double)nc, 0.975);
    out->change = expm1(d);
    out->lo = expm1(d - half);
    out->hi = expm1(d + half);
    out->verdict = d + half < 0 ? TML_TUNE_GAIN : d - half > 0 ? TML_TUNE_LOSS : TML_TUNE_UNSURE;
    if (out->verdict != TML_TUNE_UNSURE || !(fabs(d) > 0))
        return;
    /* rounds more (a round: one baseline and one setting process) until
     * the interval, at the spread seen, would exclude 0 */
    for (int k = 1; k <= TML_TUNE_MORE_MAX; k++)
        if (tml__welch_half_width(vb, (double)nb + k, vc, (double)nc + k, 0.975) < fabs(d)) {
            out->more = k;
            return;
        }
    out->more = TML_TUNE_MORE_MAX + 1;
}

int tml__tune_pick(const tml_tune_result *r)
{
    if (r->combo >= 0 && r->arms[r->combo].cmp.verdict == TML_TUNE_GAIN)
        return r->combo;
    int best = -1;
    for (size_t i = 1; i < r->narms; i++) {
        const tml_tune_cmp *c = &r->arms[i].cmp;
        const tml_tune_arm *a = &r->arms[i];
        if (a->over >= 0 && a->vs_over.verdict != TML_TUNE_GAIN)
            continue;   /* no better than the setting under it */
        if ((int)i != r->combo && c->verdict == TML_TUNE_GAIN &&
            (best < 0 || c->change < r->arms[best].cmp.change))
            best = (int)i;
    }
    return best;
}

/* ---- the plan ------------------------------------------------------- */

static tml_tune_dir *dir_new(tml_tune_dir *out, size_t *n, size_t cap, const char *name,
                             int ladder)
{
    if (*n >= cap)
        return NULL;
    tml_tune_dir *d = &out[(*n)++];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof(d->name), "%s", name);
    d->ladder = ladder;
    d->on_best_of = -1;
    return d;
}

static void dir_add(tml_tune_dir *d, const char *key, int v)
{
    if (d && d->n < TML_TUNE_STEPS)
        snprintf(d->steps[d->n++], TML_TUNE_SETTING, "%s=%d", key, v);
}

/* Cores one rank may use: the host's shared by its ranks. */
static int cores_per_rank(const tml_tune_base *b)
{
    int cores = b->cores > 0 ? b->cores : 1, ranks = b->ranks_here > 0 ? b->ranks_here : 1;
    return cores / ranks > 0 ? cores / ranks : 1;
}

/* More workers, up to the cores a rank has (half of them on a host whose
 * CPU is already busy), doubling; then, on top of the best, the loader's
 * other settings. A loader that has workers also tries none (a cheap
 * fetch costs less than handing it over). */
int tml__tune_max_workers(const tml_tune_base *b)
{
    int avail = cores_per_rank(b);
    int maxw = b->host_cpu_high ? (avail / 2 > 0 ? avail / 2 : 1) : avail;
    double share = b->fetch_cpu_share;
    if (b->workers <= 0 && share >= 0 && share < TML_TUNE_WAIT_SHARE) {
        /* a waiting fetch: N workers wait N times at once, on any cores */
        double want = ceil(1.0 / (share > 1e-3 ? share : 1e-3));
        int cap = avail * TML_TUNE_WAIT_WORKERS_PER_CORE;
        cap = cap < TML_TUNE_WAIT_WORKERS ? cap : TML_TUNE_WAIT_WORKERS;
        int w = want < cap ? (int)want : cap;
        maxw = w > maxw ? w : maxw;
        maxw = maxw > 2 ? maxw : 2;
    }
    return maxw;
}

static void plan_loader(const tml_tune_base *b, tml_tune_dir *out, size_t *n, size_t cap)
{
    int maxw = tml__tune_max_workers(b);
    int wdir = (int)*n;
    tml_tune_dir *d = dir_new(out, n, cap, "DataLoader workers", 1);
    /* a waiting fetch longer than the step gains nothing from one worker
     * (it only overlaps the fetch with the step): its ladder starts at two */
    int waiting = b->workers <= 0 && b->fetch_cpu_share >= 0 &&
                  b->fetch_cpu_share < TML_TUNE_WAIT_SHARE;
    for (int w = b->workers > 0 ? b->workers * 2 : waiting ? 2 : 1; d && w <= maxw; w *= 2)
        dir_add(d, "num_workers", w);
    if (d && b->workers > 0 && b->workers * 2 > maxw && b->workers < maxw)
        dir_add(d, "num_workers", maxw);
    if (d && b->workers <= 0 && d->n && (int)strtol(d->steps[d->n - 1] + 12, NULL, 10) < maxw)
        dir_add(d, "num_workers", maxw);   /* a waiting fetch's ceil(1 / share) */
    /* one worker only overlaps the fetch with the step; two or more fetch
     * side by side: a ladder from none does not stop at one */
    if (d && b->workers <= 0 && !waiting)
        d->min_steps = 2;
    if (d && d->n == 0) {
        (*n)--;   /* no room for more workers */
        wdir = -1;
    }
    if (!d)
        wdir = -1;
    if (b->workers > 0)
        dir_add(dir_new(out, n, cap, "no DataLoader workers", 0), "num_workers", 0);
    if (b->workers <= 0 && wdir < 0)
        return;   /* the other settings need workers */
    tml_tune_dir *x = dir_new(out, n, cap, "DataLoader settings", 0);
    if (!x)
        return;
    x->on_best_of = wdir;   /* on the best worker count found; it needs workers */
    dir_add(x, "persistent_workers", 1);
    dir_add(x, "prefetch_factor", 4);
    if (b->gpu && !b->pin_memory)
        dir_add(x, "pin_memory", 1);
}

/* The cores a rank has, half of them, one. The script's own count is not
 * known (torch's default, OMP_NUM_THREADS, its own set_num_threads), and
 * either direction can win: more threads on idle cores, fewer where they
 * oversubscribe them (8 per core on small layers: several times the step,
 * docs/diagnosis.md §6 row 58). So a list, each count measured, not a
 * ladder that a first loss would stop. */
static void plan_threads(const tml_tune_base *b, tml_tune_dir *out, size_t *n, size_t cap)
{
    int avail = cores_per_rank(b);
    tml_tune_dir *d = dir_new(out, n, cap, "intra-op threads", 0);
    if (!d)
        return;
    dir_add(d, "threads", avail);
    if (avail / 2 > 1)
        dir_add(d, "threads", avail / 2);
    if (avail > 1)
        dir_add(d, "threads", 1);
}

static void plan_ddp(const tml_tune_base *b, tml_tune_dir *out, size_t *n, size_t cap)
{
    tml_tune_dir *d = dir_new(out, n, cap, "DDP communication", 0);
    dir_add(d, "bucket_cap_mb", 100);
    dir_add(d, "gradient_as_bucket_view", 1);
    if (d && d->n < TML_TUNE_STEPS)
        snprintf(d->steps[d->n++], TML_TUNE_SETTING, "comm_hook=fp16");
    if (d && b->gpu && d->n < TML_TUNE_STEPS)
        snprintf(d->steps[d->n++], TML_TUNE_SETTING, "comm_hook=bf16");
}

size_t tml__tune_plan(const tml_tune_base *b, tml_tune_dir *out, size_t cap)
{
    size_t n = 0;
    int input = strstr(b->verdict, "INPUT") != NULL || strcmp(b->verdict, "EPOCH_START") == 0;
    int comm = strcmp(b->verdict, "COMMUNICATION_BOUND") == 0;
    if (input && b->workers >= 0)
        plan_loader(b, out, &n, cap);
    if (comm && b->ddp)
        plan_ddp(b, out, &n, cap);
    if (b->gpu) {
        tml_tune_dir *d = dir_new(out, &n, cap, "cuDNN autotuner", 0);
        dir_add(d, "cudnn_benchmark", 1);
    }
    plan_threads(b, out, &n, cap);
    if (!input && b->workers >= 0)
        plan_loader(b, out, &n, cap);
    if (!comm && b->ddp)
        plan_ddp(b, out, &n, cap);
    return n;
}
