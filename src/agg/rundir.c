/*
 * rundir.c - run names, run folders, secrets, the manifest and TraceML's
 * own log.
 *
 * A run folder is the user's record of a run, so it is never reused:
 * creation is a plain mkdir(2), which fails atomically when the folder
 * exists, rather than a check followed by a write that could race with
 * another launch. Names are restricted to [A-Za-z0-9_.-] so a name can never
 * climb out of the logs folder or need quoting in a shell.
 *
 * Files the user may be reading while we write (manifest.json) are written
 * to a temporary name and renamed over, so a reader sees the old or the new
 * version, never half of one.
 */
#include "agg/rundir.h"
#include "base/hmac.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "traceml/traceml.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/jsonw.h"
#include "base/strbuf.h"


static int mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        buf[i] = c;
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int tml__rundir_create(const char *logs_dir, const char *name, char *out, size_t cap)
{
    if (!logs_dir || !tml__run_name_valid(name))
        return TML_EINVAL;
    int n = snprintf(out, cap, "%s/%s", logs_dir, name);
    if (n < 0 || (size_t)n >= cap) {
        errno = ENAMETOOLONG;
        return TML_EIO;
    }
    if (mkdir_p(logs_dir) < 0)
        return TML_EIO;
    if (mkdir(out, 0755) < 0)
        return errno == EEXIST ? TML_EEXIST : TML_EIO;
    return 0;
}

int tml__random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char buf[256];
    if (nbytes > sizeof(buf))
        return TML_EINVAL;
    if (tml__random_bytes(buf, nbytes) < 0)
        return TML_EIO;
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[buf[i] >> 4];
        out[2 * i + 1] = hex[buf[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return 0;
}

static const char *const artifacts[] = {
    "final_summary.json", "final_summary.txt", "final_summary.html",
    "telemetry.sqlite", "traceml.log",
};

static void add_time(tml_strbuf *sb, const char *key, int64_t ms)
{
    if (ms > 0) {
        char iso[64];
        tml__iso_time(ms, iso, sizeof(iso));
        tml__sb_addf(sb, "  \"%s_time\": \"%s\",\n  \"%s_unix_ms\": %lld,\n", key, iso,
                     key, (long long)ms);
    } else {
        tml__sb_addf(sb, "  \"%s_time\": null,\n  \"%s_unix_ms\": null,\n", key, key);
    }
}

static void add_iso(tml_strbuf *sb, int64_t ms)
{
    char iso[64];
    if (ms <= 0) {
        tml__sb_adds(sb, "null");
        return;
    }
    tml__iso_time(ms, iso, sizeof(iso));
    tml__sb_add_json_str(sb, iso);
}

int tml__manifest_write(const char *run_dir, const tml_manifest *m)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    char host[256] = "";
    int running = !m->status || strcmp(m->status, "running") == 0;
    gethostname(host, sizeof(host) - 1);

    tml__sb_adds(&sb, "{\n  \"schema_version\": 1,\n  \"run_name\": ");
    tml__sb_add_json_str(&sb, m->run_name ? m->run_name : "");
    tml__sb_adds(&sb, ",\n  \"run_id\": ");
    tml__sb_add_json_str(&sb, m->run_id ? m->run_id : "");
    tml__sb_adds(&sb, ",\n  \"status\": ");
    tml__sb_add_json_str(&sb, m->status ? m->status : "running");
    tml__sb_adds(&sb, ",\n  \"profile\": ");
    tml__sb_add_json_str(&sb, m->profile ? m->profile : "run");
    if (running || m->exit_code < 0)   /* negative: not known */
        tml__sb_adds(&sb, ",\n  \"exit_code\": null,\n");
    else
        tml__sb_addf(&sb, ",\n  \"exit_code\": %d,\n", m->exit_code);
    tml__sb_adds(&sb, "  \"traceml_version\": \"" TML_VERSION_STRING "\",\n");
    add_time(&sb, "start", m->start_unix_ms);
    add_time(&sb, "end", running ? 0 : m->end_unix_ms);
    if (!running && m->duration_s >= 0)
        tml__sb_addf(&sb, "  \"duration_s\": %.3f,\n", m->duration_s);
    else
        tml__sb_adds(&sb, "  \"duration_s\": null,\n");
    tml__sb_adds(&sb, "  \"host\": ");
    tml__sb_add_json_str(&sb, host);
    tml__sb_addf(&sb, ",\n  \"world_size\": %d,\n  \"nnodes\": %d,\n  \"command\": [",
                 (int)m->world_size, (int)m->nnodes);
    for (int i = 0; i < m->argc; i++) {
        if (i)
            tml__sb_adds(&sb, ", ");
        tml__sb_add_json_str(&sb, m->argv[i] ? m->argv[i] : "");
    }
    tml__sb_adds(&sb, "],\n  \"session_id\": ");   /* 0.5.0's names from here on */
    tml__sb_add_json_str(&sb, m->run_name ? m->run_name : "");
    tml__sb_adds(&sb, ",\n  \"lifecycle\": ");
    if (m->lifecycle) {
        tml__sb_adds(&sb, m->lifecycle);
    } else {
        tml__sb_adds(&sb, "{\"training_started_at\": ");
        add_iso(&sb, m->training_started_unix_ms);
        tml__sb_adds(&sb, ", \"training_ended_at\": ");
        add_iso(&sb, m->training_ended_unix_ms);
        tml__sb_adds(&sb, "}");
    }
    tml__sb_adds(&sb, ",\n  \"launch\": ");
    tml__sb_adds(&sb, m->launch && m->launch[0] ? m->launch : "null");
    char summary[4200];
    snprintf(summary, sizeof(summary), "%s/final_summary.json", run_dir);
    const char *telemetry = m->telemetry_status ? m->telemetry_status
                            : running                    ? "running"
                            : access(summary, F_OK) == 0 ? "complete"
                                                         : "unavailable";
    tml__sb_adds(&sb, ",\n  \"telemetry_status\": ");
    tml__sb_add_json_str(&sb, telemetry);
    tml__sb_adds(&sb, ",\n  \"telemetry_reason\": ");
    tml__json_add_str_or_null(&sb, m->telemetry_reason);
    if (m->aggregator_exited)
        tml__sb_addf(&sb, ",\n  \"aggregator_exit_code\": %d", m->aggregator_exit_code);
    else
        tml__sb_adds(&sb, ",\n  \"aggregator_exit_code\": null");
    /* the declaration and, once known, what the nodes' launchers saw */
    tml__sb_adds(&sb, ",\n  \"guard\": ");
    if (m->guard && m->guard[0])
        tml__sb_addf(&sb, "{\"contract\": %s, \"training\": %s}", m->guard,
                     m->guard_training && m->guard_training[0] ? m->guard_training : "null");
    else
        tml__sb_adds(&sb, "null");
    tml__sb_adds(&sb, ",\n  \"artifacts\": [\"manifest.json\"");
    for (size_t i = 0; i < sizeof(artifacts) / sizeof(artifacts[0]); i++) {
        char path[4096];
        int n = snprintf(path, sizeof(path), "%s/%s", run_dir, artifacts[i]);
        if (n > 0 && (size_t)n < sizeof(path) && access(path, F_OK) == 0)
            tml__sb_addf(&sb, ", \"%s\"", artifacts[i]);
    }
    tml__sb_adds(&sb, "]\n}\n");
    if (sb.failed) {
        tml__sb_release(&sb);
        return TML_ENOMEM;
    }
    int rc = tml__write_file_atomic(run_dir, "manifest.json", sb.buf, sb.len, 0644);
    tml__sb_release(&sb);
    return rc;
}

void tml__run_log(const char *run_dir, const char *who, const char *fmt, ...)
{
    char path[4096];
    if (!run_dir)
        return;
    int n = snprintf(path, sizeof(path), "%s/traceml.log", run_dir);
    if (n < 0 || (size_t)n >= sizeof(path))
        return;
    va_list ap;
    va_start(ap, fmt);
    tml__log_vline(path, who ? who : "traceml", fmt, ap);
    va_end(ap);
}

/* The guard: declaration of a manifest: guard.contract (an older
 * manifest of ours: guard itself); NULL none. */
static const tml_json *guard_declaration(const tml_json *doc)
{
    const tml_json *g = tml__json_get(doc, "guard");
    if (!g || g->type != TML_JSON_OBJECT)
        return NULL;
    const tml_json *c = tml__json_get(g, "contract");
    return c ? (c->type == TML_JSON_OBJECT ? c : NULL) : g;
}

/* The run folder's manifest.json, parsed (the caller frees *doc). */
static int read_manifest(const char *run_dir, tml_json **doc)
{
    char path[4200], *buf = NULL;
    size_t len = 0;
    *doc = NULL;
    snprintf(path, sizeof(path), "%s/manifest.json", run_dir);
    if (tml__read_file(path, 1 << 20, &buf, &len) < 0)
        return TML_EIO;
    int rc = tml__json_parse(buf, len, doc, NULL);
    free(buf);
    return rc;
}

int tml__manifest_finish(const char *run_dir, const char *status, int exit_code,
                         double duration_s)
{
    tml_json *doc = NULL;
    int rc = read_manifest(run_dir, &doc);
    if (rc < 0)
        return rc;
    const tml_json *cmd = tml__json_get(doc, "command");
    size_t argc = cmd && cmd->type == TML_JSON_ARRAY ? cmd->n : 0;
    char **argv = calloc(argc + 1, sizeof(*argv));
    double start = 0, ws = 0, nn = 0;
    tml__json_num(tml__json_get(doc, "start_unix_ms"), &start);
    tml__json_num(tml__json_get(doc, "world_size"), &ws);
    tml__json_num(tml__json_get(doc, "nnodes"), &nn);
    /* a hand-edited manifest: out of range is unknown, never a wild cast */
    if (!(start >= 0 && start <= 1e15))
        start = 0;
    if (!(ws >= 0 && ws <= TML_MAX_WORLD_SIZE))
        ws = 0;
    if (!(nn >= 0 && nn <= TML_MAX_WORLD_SIZE))
        nn = 0;
    for (size_t i = 0; argv && i < argc; i++) {
        const char *a = tml__json_str(tml__json_at(cmd, i));
        argv[i] = (char *)(a ? a : "");
    }
    tml_manifest m = {
        .run_name = tml__json_str(tml__json_get(doc, "run_name")),
        .run_id = tml__json_str(tml__json_get(doc, "run_id")),
        .status = status, .exit_code = exit_code,
        .start_unix_ms = (int64_t)start, .end_unix_ms = tml__unix_ms(),
        .duration_s = duration_s,
        .argc = argv ? (int)argc : 0, .argv = argv,
        .world_size = (int32_t)ws, .nnodes = (int32_t)nn,
        .profile = tml__json_str(tml__json_get(doc, "profile")),
    };
    /* the blocks of the launcher's, kept as they were */
    tml_strbuf kept[4] = {TML_STRBUF_INIT, TML_STRBUF_INIT, TML_STRBUF_INIT, TML_STRBUF_INIT};
    const char **to[4] = {&m.guard, &m.guard_training, &m.launch, &m.lifecycle};
    const tml_json *g = tml__json_get(doc, "guard");
    const tml_json *from[4] = {guard_declaration(doc), g ? tml__json_get(g, "training") : NULL,
                               tml__json_get(doc, "launch"), tml__json_get(doc, "lifecycle")};
    for (int k = 0; k < 4; k++)
        if (from[k] && from[k]->type == TML_JSON_OBJECT) {
            tml__json_add_canon(&kept[k], from[k]);
            *to[k] = kept[k].failed ? NULL : kept[k].buf;
        }
    double agg_code;
    if (tml__json_num(tml__json_get(doc, "aggregator_exit_code"), &agg_code) &&
        agg_code >= -255 && agg_code <= 255) {
        m.aggregator_exited = 1;
        m.aggregator_exit_code = (int)agg_code;
    }
    rc = argv ? tml__manifest_write(run_dir, &m) : TML_ENOMEM;
    for (int k = 0; k < 4; k++)
        tml__sb_release(&kept[k]);
    free(argv);
    tml__json_free(doc);
    return rc;
}

int tml__manifest_workload(const char *run_dir, tml_strbuf *out)
{
    tml_json *doc = NULL;
    int rc = read_manifest(run_dir, &doc);
    if (rc < 0)
        return rc;
    const tml_json *cmd = tml__json_get(doc, "command");
    size_t argc = cmd && cmd->type == TML_JSON_ARRAY ? cmd->n : 0, first = 0;
    /* python SCRIPT args / python -m MODULE args: the script is what the
     * interpreter ran; any other command is its own script */
    const char *a0 = argc ? tml__json_str(tml__json_at(cmd, 0)) : NULL;
    const char *base = a0 ? strrchr(a0, '/') : NULL;
    base = base ? base + 1 : a0;
    if (base && strncmp(base, "python", 6) == 0 && argc > 1)
        first = 1;
    const char *script = argc > first ? tml__json_str(tml__json_at(cmd, first)) : NULL;
    int module = script && strcmp(script, "-m") == 0 && argc > first + 1;
    tml__sb_adds(out, "{\"script\": ");
    if (module) {
        char s[512];
        snprintf(s, sizeof(s), "-m %s", tml__json_str(tml__json_at(cmd, first + 1)) ?: "");
        tml__json_add_str_or_null(out, s);
        first++;
    } else {
        tml__json_add_str_or_null(out, script);
    }
    tml__sb_adds(out, ", \"args\": [");
    for (size_t i = first + 1; i < argc; i++) {
        const char *s = tml__json_str(tml__json_at(cmd, i));
        tml__sb_adds(out, i > first + 1 ? ", " : "");
        tml__sb_add_json_str(out, s ? s : "");
    }
    double ws = 0;
    tml__json_num(tml__json_get(doc, "world_size"), &ws);
    tml__sb_addf(out, "], \"world_size\": ");
    if (ws >= 1 && ws <= TML_MAX_WORLD_SIZE)
        tml__sb_addf(out, "%d", (int)ws);
    else
        tml__sb_adds(out, "null");
    tml__sb_adds(out, ", \"guard\": ");
    const tml_json *g = guard_declaration(doc);
    if (g)
        tml__json_add_canon(out, g);
    else
        tml__sb_adds(out, "null");
    tml__sb_adds(out, "}");
    tml__json_free(doc);
    return out->failed ? TML_ENOMEM : 0;
}

/* A positive integer of the manifest's launch block, 0 when not one. */
static long launch_int(const tml_json *launch, const char *key)
{
    double v = 0;
    if (!tml__json_num(tml__json_get(launch, key), &v) || !(v >= 1 && v <= TML_MAX_WORLD_SIZE))
        return 0;
    return (long)v;
}

int tml__manifest_run_context(const char *run_dir, const char *status, tml_strbuf *out)
{
    tml_json *doc = NULL;
    int rc = read_manifest(run_dir, &doc);
    if (rc < 0)
        return rc;
    const char *profile = tml__json_str(tml__json_get(doc, "profile"));
    tml__sb_adds(out, "{\"run\": {\"status\": ");
    tml__json_add_str_or_null(out, status);
    tml__sb_adds(out, ", \"profile\": ");
    tml__json_add_str_or_null(out, profile ? profile : "run");
    tml__sb_adds(out, "}, \"declaration\": ");
    const tml_json *decl = guard_declaration(doc);
    if (decl)
        tml__json_add_canon(out, decl);
    else
        tml__sb_adds(out, "null");
    const tml_json *launch = tml__json_get(doc, "launch");
    long nodes = launch_int(launch, "nnodes"), per_node = launch_int(launch, "nproc_per_node");
    tml__sb_adds(out, ", \"execution\": {");
    if (nodes && per_node)
        tml__sb_addf(out, "\"expected_nodes\": %ld, \"processes_per_node\": %ld, "
                     "\"expected_world_size\": %ld", nodes, per_node, nodes * per_node);
    /* 0.5.0's projection of the launchers' outcomes: guarded runs only */
    const tml_json *g = tml__json_get(doc, "guard");
    const tml_json *t = g ? tml__json_get(g, "training") : NULL;
    if (t && t->type == TML_JSON_OBJECT) {
        const tml_json *reasons = tml__json_get(t, "reasons");
        double seen = 0;
        tml__json_num(tml__json_get(t, "nodes_observed"), &seen);
        tml__sb_adds(out, nodes && per_node ? ", " : "");
        tml__sb_adds(out, "\"launcher_completion\": {\"status\": ");
        tml__json_add_str_or_null(out, tml__json_str(tml__json_get(t, "status")));
        tml__sb_addf(out, ", \"nodes_observed\": %d, \"reason_codes\": ",
                     seen >= 0 && seen <= TML_MAX_WORLD_SIZE ? (int)seen : 0);
        if (reasons && reasons->type == TML_JSON_ARRAY)
            tml__json_add_canon(out, reasons);
        else
            tml__sb_adds(out, "[]");
        tml__sb_adds(out, "}");
    }
    tml__sb_adds(out, "}}");
    tml__json_free(doc);
    return out->failed ? TML_ENOMEM : 0;
}

/* The advert folder (rundir.h); create: make it (0700). -1 when it is not
 * this user's own. */
static int advert_dir(char *out, size_t cap, int create)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (xdg && xdg[0] == '/')
        snprintf(out, cap, "%s/traceml", xdg);
    else
        snprintf(out, cap, "/tmp/traceml-%u", (unsigned)getuid());
    if (create && mkdir(out, 0700) < 0 && errno != EEXIST)
        return -1;
    if (lstat(out, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & 077))
        return -1;
    return 0;
}

int tml__serve_advert(int port, const tml_serve_advert *a)
{
    char dir[4096], name[64];
    if (advert_dir(dir, sizeof(dir), a != NULL) < 0)
        return -1;
    snprintf(name, sizeof(name), "serve-%d.json", port);
    if (!a) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        return unlink(path);
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__sb_addf(&sb, "{\"pid\": %ld, \"run_id\": ", a->pid);
    tml__sb_add_json_str(&sb, a->run_id);
    tml__sb_adds(&sb, ", \"secret\": ");
    tml__sb_add_json_str(&sb, a->secret);
    tml__sb_adds(&sb, ", \"run_dir\": ");
    tml__sb_add_json_str(&sb, a->run_dir);
    tml__sb_adds(&sb, "}\n");
    int rc = sb.failed ? -1 : tml__write_file_atomic(dir, name, sb.buf, sb.len, 0600);
    tml__sb_release(&sb);
    return rc < 0 ? -1 : 0;
}

int tml__serve_advert_read(int port, tml_serve_advert *a)
{
    char dir[4096], path[4200], *buf = NULL;
    size_t len = 0;
    struct stat st;
    tml_json *doc = NULL;
    memset(a, 0, sizeof(*a));
    if (advert_dir(dir, sizeof(dir), 0) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/serve-%d.json", dir, port);
    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        tml__read_file(path, 16384, &buf, &len) < 0)
        return -1;
    int rc = tml__json_parse(buf, len, &doc, NULL);
    free(buf);
    if (rc < 0)
        return -1;
    double pid = 0;
    const char *id = tml__json_str(tml__json_get(doc, "run_id"));
    const char *secret = tml__json_str(tml__json_get(doc, "secret"));
    const char *run_dir = tml__json_str(tml__json_get(doc, "run_dir"));
    tml__json_num(tml__json_get(doc, "pid"), &pid);
    if (id && secret && run_dir && pid >= 1 && pid < 1e9) {
        a->pid = (long)pid;
        snprintf(a->run_id, sizeof(a->run_id), "%s", id);
        snprintf(a->secret, sizeof(a->secret), "%s", secret);
        snprintf(a->run_dir, sizeof(a->run_dir), "%s", run_dir);
    }
    tml__json_free(doc);
    /* a serve that was killed left its advert: not alive, not read */
    return a->pid && (kill((pid_t)a->pid, 0) == 0 || errno == EPERM) ? 0 : -1;
}

