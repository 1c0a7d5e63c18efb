/*
 * guard.c - a guarded run's launcher outcomes, as TraceML 0.5.0 keeps
 * them: traceml.yaml's `guard:` block declares the workload a regression
 * gate compares; every node's launcher records how its training ended in
 * <run>/nodes/node_<k>/guard_outcome.json, and node 0's collects them
 * (a bounded wait: the run folder is shared, as for the run's secret)
 * into the manifest's guard.training, which the summary's
 * run_context.execution.launcher_completion projects. `traceml compare`
 * reads the declarations (docs/compare.md).
 */
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/hmac.h"
#include "base/json.h"
#include "base/jsonw.h"
#include "base/strbuf.h"

#define OUTCOME_FILE "guard_outcome.json"
#define OUTCOME_MAX (16 * 1024)

/* "sha256:<hex>" of the declaration's canonical JSON (sorted keys, no
 * blanks): launchers of one run compare it. -1 when it does not parse. */
static int contract_digest(const char *guard, char out[80])
{
    tml_json *doc = NULL;
    if (tml__json_parse(guard, strlen(guard), &doc, NULL) < 0)
        return -1;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__json_add_canon(&sb, doc);
    tml__json_free(doc);
    if (sb.failed) {
        tml__sb_release(&sb);
        return -1;
    }
    uint8_t h[TML_SHA256_SIZE];
    tml_sha256 c;
    tml__sha256_init(&c);
    tml__sha256_add(&c, sb.buf, sb.len);
    tml__sha256_done(&c, h);
    tml__sb_release(&sb);
    int n = snprintf(out, 80, "sha256:");
    for (int i = 0; i < TML_SHA256_SIZE; i++)
        n += snprintf(out + n, 80 - (size_t)n, "%02x", h[i]);
    return 0;
}

static long nodes_of(const tml_dist *d)
{
    return d->enabled ? d->nnodes : 1;
}

static long per_node_of(const tml_dist *d)
{
    return d->enabled ? d->nproc : 1;
}

void tml__launch_guard_record(const tml_run_ctx *c, const tml_cli_run *r, int exit_code)
{
    const tml_run_opts *o = &c->o;
    const tml_dist *d = &o->dist;
    char digest[80], dir[4400], iso[64];
    if (!c->project.guard[0] || d->slurm || contract_digest(c->project.guard, digest) < 0)
        return;
    /* node 0's run folder: this one's, or, on a follower, the host's on a
     * shared disk */
    int follower = d->enabled && !d->host;
    int n = snprintf(dir, sizeof(dir), "%s", follower ? o->logs_dir : r->dir);
    if (follower && n > 0 && (size_t)n < sizeof(dir))
        n += snprintf(dir + n, sizeof(dir) - (size_t)n, "/%s", r->name);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof(dir) - 64 || stat(dir, &st) < 0) {
        fprintf(stderr, "traceml: note: %s is not here: node %ld's guard outcome is not "
                "recorded (node 0 reports it missing)\n", dir, d->node_rank);
        return;
    }
    snprintf(dir + n, sizeof(dir) - (size_t)n, "/nodes");
    mkdir(dir, 0755);
    snprintf(dir + n, sizeof(dir) - (size_t)n, "/nodes/node_%ld", d->node_rank);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return;
    tml__iso_time(tml__unix_ms(), iso, sizeof(iso));
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__sb_adds(&sb, "{\n  \"schema_version\": 1,\n  \"run_name\": ");
    tml__sb_add_json_str(&sb, r->name);
    tml__sb_addf(&sb, ",\n  \"node_rank\": %ld,\n  \"nnodes\": %ld,\n  \"nproc_per_node\": %ld,\n"
                 "  \"contract_digest\": \"%s\",\n  \"training\": {\"status\": \"%s\", "
                 "\"exit_code\": %d},\n  \"completed_at\": \"%s\"\n}\n",
                 d->node_rank, nodes_of(d), per_node_of(d), digest,
                 exit_code == 0 ? "completed" : "failed", exit_code < 0 ? 1 : exit_code, iso);
    if (!sb.failed)
        tml__write_file_atomic(dir, OUTCOME_FILE, sb.buf, sb.len, 0644);
    tml__sb_release(&sb);
}

/* One node's outcome: 1 observed (*code set), 0 not there yet, or a
 * reason it cannot count. */
static int read_outcome(const tml_run_ctx *c, const char *name, const char *path, long node,
                        const char *digest, int *code, const char **reason)
{
    const tml_dist *d = &c->o.dist;
    char *buf = NULL;
    size_t len = 0;
    if (access(path, F_OK) < 0)
        return 0;
    tml_json *doc = NULL;
    *reason = "node_outcome_invalid";
    if (tml__read_file(path, OUTCOME_MAX, &buf, &len) < 0 ||
        tml__json_parse(buf, len, &doc, NULL) < 0) {
        free(buf);
        return -1;
    }
    free(buf);
    double v[4] = {-1, -1, -1, -1}, ec = -1;
    const char *keys[4] = {"schema_version", "node_rank", "nnodes", "nproc_per_node"};
    for (int k = 0; k < 4; k++)
        tml__json_num(tml__json_get(doc, keys[k]), &v[k]);
    const tml_json *t = tml__json_get(doc, "training");
    const char *got = tml__json_str(tml__json_get(doc, "run_name"));
    const char *dg = tml__json_str(tml__json_get(doc, "contract_digest"));
    const char *status = tml__json_str(tml__json_get(t, "status"));
    int rc = -1;
    if (v[0] == 1 && got && dg && status && tml__json_num(tml__json_get(t, "exit_code"), &ec) &&
        ec >= 0 && ec <= 255 && (ec == 0) == (strcmp(status, "completed") == 0)) {
        if (strcmp(got, name) != 0 || v[1] != node || v[2] != nodes_of(d) ||
            v[3] != per_node_of(d) || strcmp(dg, digest) != 0) {
            *reason = "node_outcome_conflict";
        } else {
            *code = (int)ec;
            rc = 1;
        }
    }
    tml__json_free(doc);
    return rc;
}

int tml__launch_guard_collect(const tml_run_ctx *c, const tml_cli_run *r, double timeout_s,
                           tml_strbuf *out)
{
    const tml_dist *d = &c->o.dist;
    char digest[80];
    if (!c->project.guard[0] || d->slurm || contract_digest(c->project.guard, digest) < 0)
        return -1;
    long nodes = nodes_of(d);
    int *code = malloc((size_t)nodes * sizeof(*code));
    char *state = calloc((size_t)nodes, 1);   /* 0 pending, 1 observed, 2 refused */
    if (!code || !state) {
        free(code);
        free(state);
        return -1;
    }
    const char *reasons[4];
    int nreasons = 0;
    int64_t deadline = tml__mono_ms() + (int64_t)(timeout_s * 1000);
    if (nodes > 1)
        fprintf(stderr, "traceml: waiting up to %g s for the %ld nodes' guard outcomes\n",
                timeout_s, nodes);
    for (long pending = nodes;;) {
        for (long k = 0; k < nodes; k++) {
            char path[4400];
            const char *why = NULL;
            if (state[k])
                continue;
            snprintf(path, sizeof(path), "%s/nodes/node_%ld/" OUTCOME_FILE, r->dir, k);
            int got = read_outcome(c, r->name, path, k, digest, &code[k], &why);
            if (got == 0)
                continue;
            state[k] = got > 0 ? 1 : 2;
            pending--;
            if (got > 0)
                why = code[k] != 0 ? "node_training_failed" : NULL;
            for (int i = 0; why && i < nreasons; i++)
                why = strcmp(reasons[i], why) == 0 ? NULL : why;
            if (why)
                reasons[nreasons++] = why;
        }
        if (!pending || tml__mono_ms() >= deadline)
            break;
        usleep(50 * 1000);
    }
    long seen = 0;
    for (long k = 0; k < nodes; k++)
        seen += state[k] == 1;
    int missing = 0;
    for (long k = 0; k < nodes; k++)
        missing |= state[k] == 0;
    if (missing)
        reasons[nreasons++] = "node_outcome_missing";
    tml__sb_addf(out, "{\"status\": \"%s\", \"nodes_expected\": %ld, \"nodes_observed\": %ld, "
                 "\"reasons\": [", !nreasons && seen == nodes ? "completed" : "incomplete",
                 nodes, seen);
    for (int i = 0; i < nreasons; i++)
        tml__sb_addf(out, "%s\"%s\"", i ? ", " : "", reasons[i]);
    tml__sb_adds(out, "], \"nodes\": [");
    for (long k = 0, first = 1; k < nodes; k++)
        if (state[k] == 1) {
            tml__sb_addf(out, "%s{\"node_rank\": %ld, \"exit_code\": %d}", first ? "" : ", ", k,
                         code[k]);
            first = 0;
        }
    tml__sb_adds(out, "]}");
    if (nodes > 1)
        fprintf(stderr, "traceml: guard outcomes: %ld of %ld nodes%s\n", seen, nodes,
                nreasons ? " (incomplete)" : "");
    free(code);
    free(state);
    return out->failed ? -1 : 0;
}
