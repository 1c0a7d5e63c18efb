/* test_rundir.c - run names (both sides of every rule), run folders (never
 * reused), secrets, the manifest's content, a write that fails leaving the
 * file it would have replaced, TraceML's own log, the progress files. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agg/rundir.h"
#include "traceml/traceml.h"
#include "base/json.h"
#include "model/progress.h"

#include "harness.h"

static char dir[256];

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static const char *tmp(void)
{
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/tml_test_rundir_XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(teardown);
    }
    return dir;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void test_name_valid(void)
{
    static const char *good[] = {"a", "run_1", "bert-finetune.v2", "A.b-c_D", "..a", "a..",
                                 "0", "-x"};
    static const char *bad[] = {"", ".", "..", "a/b", "../x", "a b", "naïve", "a*", "a\n",
                                "$HOME", "a:b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
        CHECK_EQ_INT(tml__run_name_valid(good[i]), 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        CHECK_EQ_INT(tml__run_name_valid(bad[i]), 0);
    CHECK_EQ_INT(tml__run_name_valid(NULL), 0);
    char name[200];
    memset(name, 'x', sizeof(name));
    name[100] = '\0';
    CHECK_EQ_INT(tml__run_name_valid(name), 1);    /* 100 bytes: allowed */
    name[100] = 'x';
    name[101] = '\0';
    CHECK_EQ_INT(tml__run_name_valid(name), 0);    /* 101: not */
}

static void test_name_generate(void)
{
    char out[128];
    tml__run_name_generate("examples/quickstart.py", out, sizeof(out));
    CHECK(strncmp(out, "quickstart_", 11) == 0);
    CHECK_EQ_INT(strlen(out), 11 + 15);   /* YYYYmmdd_HHMMSS */
    CHECK_EQ_INT(tml__run_name_valid(out), 1);
    tml__run_name_generate(NULL, out, sizeof(out));
    CHECK(strncmp(out, "run_", 4) == 0);
    tml__run_name_generate("/x/my script (v2).py", out, sizeof(out));
    CHECK(strncmp(out, "my_script__v2__", 15) == 0);
    CHECK_EQ_INT(tml__run_name_valid(out), 1);
    tml__run_name_generate("..", out, sizeof(out));
    CHECK(strncmp(out, "run_", 4) == 0);
    tml__run_name_generate(".hidden.py", out, sizeof(out));
    CHECK(strncmp(out, "hidden_", 7) == 0);
    char longstem[300];
    memset(longstem, 'a', sizeof(longstem));
    longstem[299] = '\0';
    tml__run_name_generate(longstem, out, sizeof(out));
    CHECK_EQ_INT(tml__run_name_valid(out), 1);
}

static void test_rundir_create(void)
{
    char logs[512], out[1024], marker[1200];
    snprintf(logs, sizeof(logs), "%s/deep/logs", tmp());
    CHECK_EQ_INT(tml__rundir_create(logs, "r1", out, sizeof(out)), 0);   /* parents made */
    struct stat st;
    CHECK(stat(out, &st) == 0 && S_ISDIR(st.st_mode));
    /* exists: TML_EEXIST and the contents are untouched */
    snprintf(marker, sizeof(marker), "%s/marker", out);
    FILE *f = fopen(marker, "w");
    fputs("keep", f);
    fclose(f);
    CHECK_EQ_INT(tml__rundir_create(logs, "r1", out, sizeof(out)), TML_EEXIST);
    size_t len;
    char *m = slurp(marker, &len);
    CHECK_STR(m, "keep");
    free(m);
    CHECK_EQ_INT(tml__rundir_create(logs, "../escape", out, sizeof(out)), TML_EINVAL);
    CHECK_EQ_INT(tml__rundir_create(logs, "", out, sizeof(out)), TML_EINVAL);
    /* logs dir is a file */
    char file[600];
    snprintf(file, sizeof(file), "%s/afile", tmp());
    f = fopen(file, "w");
    fclose(f);
    CHECK_EQ_INT(tml__rundir_create(file, "r", out, sizeof(out)), TML_EIO);
    /* output too small */
    char tiny[8];
    CHECK_EQ_INT(tml__rundir_create(logs, "r2", tiny, sizeof(tiny)), TML_EIO);
}

static void test_random_hex(void)
{
    char a[65], b[65];
    CHECK_EQ_INT(tml__random_hex(a, 32), 0);
    CHECK_EQ_INT(tml__random_hex(b, 32), 0);
    CHECK_EQ_INT(strlen(a), 64);
    CHECK(strspn(a, "0123456789abcdef") == 64);
    CHECK(strcmp(a, b) != 0);
}

static void test_manifest(void)
{
    char run[600], path[700];
    snprintf(run, sizeof(run), "%s/m", tmp());
    mkdir(run, 0755);
    char *argv[] = {"/usr/bin/python3", "train.py", "--lr", "1e-3 \"quoted\""};
    tml_manifest m = {.run_name = "bert", .run_id = "id42", .status = "running",
                      .start_unix_ms = 1700000000123, .duration_s = -1, .argc = 4, .argv = argv,
                      .world_size = 1, .nnodes = 1,
                      .guard = "{\"workload\": {\"name\": \"bert\"}}"};
    CHECK_EQ_INT(tml__manifest_write(run, &m), 0);
    {   /* what ran, as the summary's meta.workload (issue 45) */
        tml_strbuf wl = TML_STRBUF_INIT;
        CHECK_EQ_INT(tml__manifest_workload(run, &wl), 0);
        CHECK_STR(wl.buf, "{\"script\": \"train.py\", \"args\": [\"--lr\", \"1e-3 \\\"quoted\\\"\"], "
                  "\"world_size\": 1, \"guard\": {\"workload\":{\"name\":\"bert\"}}}");
        tml__sb_release(&wl);
    }
    snprintf(path, sizeof(path), "%s/manifest.json", run);
    size_t len;
    char *buf = slurp(path, &len);
    tml_json *doc = NULL;
    CHECK(buf && tml__json_parse(buf, len, &doc, NULL) == 0);
    free(buf);
    if (doc) {
        CHECK_STR(tml__json_str(tml__json_get(doc, "run_name")), "bert");
        CHECK_STR(tml__json_str(tml__json_get(doc, "run_id")), "id42");
        CHECK_STR(tml__json_str(tml__json_get(doc, "status")), "running");
        CHECK_EQ_INT(tml__json_get(doc, "exit_code")->type, TML_JSON_NULL);
        CHECK_EQ_INT(tml__json_get(doc, "end_time")->type, TML_JSON_NULL);
        CHECK_STR(tml__json_str(tml__json_get(doc, "start_time")), "2023-11-14T22:13:20.123Z");
        CHECK_STR(tml__json_str(tml__json_get(doc, "traceml_version")), TML_VERSION_STRING);
        /* TraceML 0.5.0's fields (issue 47) */
        CHECK_STR(tml__json_str(tml__json_get(doc, "session_id")), "bert");
        CHECK_STR(tml__json_str(tml__json_get(doc, "telemetry_status")), "running");
        CHECK_EQ_INT(tml__json_get(doc, "aggregator_exit_code")->type, TML_JSON_NULL);
        CHECK_EQ_INT(tml__json_path(doc, "lifecycle.training_ended_at")->type, TML_JSON_NULL);
        CHECK_STR(tml__json_str(tml__json_path(doc, "guard.contract.workload.name")), "bert");
        CHECK_EQ_INT(tml__json_path(doc, "guard.training")->type, TML_JSON_NULL);
        const tml_json *cmd = tml__json_get(doc, "command");
        CHECK(cmd && cmd->n == 4);
        CHECK_STR(tml__json_str(tml__json_at(cmd, 3)), "1e-3 \"quoted\"");
        const tml_json *art = tml__json_get(doc, "artifacts");
        CHECK(art && art->n == 1);
        CHECK(tml__json_get(doc, "secret") == NULL);
        tml__json_free(doc);
    }
    /* final: status, exit code, end time, artifacts that exist */
    snprintf(path, sizeof(path), "%s/final_summary.txt", run);
    FILE *f = fopen(path, "w");
    fclose(f);
    m.status = "failed";
    m.exit_code = 3;
    m.end_unix_ms = 1700000002623;
    m.duration_s = 7.25;   /* the monotonic clock's, not end - start (2.5) */
    m.training_ended_unix_ms = 1700000002000;
    m.launch = "{\"nnodes\": 2, \"nproc_per_node\": 4}";
    m.guard_training = "{\"status\": \"incomplete\", \"nodes_expected\": 2, "
                       "\"nodes_observed\": 1, \"reasons\": [\"node_outcome_missing\"], "
                       "\"nodes\": [{\"node_rank\": 0, \"exit_code\": 3}]}";
    CHECK_EQ_INT(tml__manifest_write(run, &m), 0);
    {   /* the summary's run_context, as 0.5.0 projects it */
        tml_strbuf rc = TML_STRBUF_INIT;
        CHECK_EQ_INT(tml__manifest_run_context(run, "failed", &rc), 0);
        CHECK_STR(rc.buf, "{\"run\": {\"status\": \"failed\", \"profile\": \"run\"}, "
                  "\"declaration\": {\"workload\":{\"name\":\"bert\"}}, \"execution\": "
                  "{\"expected_nodes\": 2, \"processes_per_node\": 4, "
                  "\"expected_world_size\": 8, \"launcher_completion\": {\"status\": "
                  "\"incomplete\", \"nodes_observed\": 1, \"reason_codes\": "
                  "[\"node_outcome_missing\"]}}}");
        tml__sb_release(&rc);
    }
    snprintf(path, sizeof(path), "%s/manifest.json", run);
    buf = slurp(path, &len);
    doc = NULL;
    CHECK(buf && tml__json_parse(buf, len, &doc, NULL) == 0);
    free(buf);
    if (doc) {
        double d = 0;
        CHECK_STR(tml__json_str(tml__json_get(doc, "status")), "failed");
        CHECK(tml__json_num(tml__json_get(doc, "exit_code"), &d) && d == 3);
        CHECK(tml__json_num(tml__json_get(doc, "duration_s"), &d));
        CHECK_NEAR(d, 7.25, 1e-9);
        /* no final_summary.json: the telemetry never became a summary */
        CHECK_STR(tml__json_str(tml__json_get(doc, "telemetry_status")), "unavailable");
        CHECK_STR(tml__json_str(tml__json_path(doc, "lifecycle.training_ended_at")),
                  "2023-11-14T22:13:22.000Z");
        CHECK_EQ_INT(tml__json_path(doc, "launch.nproc_per_node")->type, TML_JSON_NUMBER);
        const tml_json *art = tml__json_get(doc, "artifacts");
        CHECK(art && art->n == 2);
        CHECK_STR(tml__json_str(tml__json_at(art, 1)), "final_summary.txt");
        tml__json_free(doc);
    }
    /* no temporary file left behind */
    snprintf(path, sizeof(path), "%s/.manifest.json.tmp", run);
    CHECK(access(path, F_OK) != 0);
}

/* Files in dir whose name starts with '.' (a temporary file left behind). */
static int hidden_files(const char *d)
{
    DIR *dp = opendir(d);
    struct dirent *e;
    int n = 0;
    while (dp && (e = readdir(dp)) != NULL)
        n += e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (dp)
        closedir(dp);
    return n;
}

/* A full disk (here: a file size limit, EFBIG, in a child so it binds
 * nothing else): the write fails with the system's reason, and the file
 * it would have replaced is whole and unchanged, with no temporary file
 * left. Both through tml__write_file and through the manifest. */
static void test_failed_write_keeps_the_old_file(void)
{
    char run[600], path[700];
    snprintf(run, sizeof(run), "%s/full", tmp());
    mkdir(run, 0755);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {"train.py"};
        tml_manifest m = {.run_name = "full", .run_id = "id1", .status = "running",
                          .start_unix_ms = 1700000000123, .duration_s = -1, .argc = 1,
                          .argv = argv, .world_size = 1, .nnodes = 1};
        static char big[64 * 1024];
        size_t before_len, after_len;
        memset(big, 'x', sizeof(big));
        CHECK_EQ_INT(tml__write_file_atomic(run, "final_summary.json", "{\"good\": 1}\n", 12,
                                            0644), 0);
        CHECK_EQ_INT(tml__manifest_write(run, &m), 0);
        snprintf(path, sizeof(path), "%s/manifest.json", run);
        char *before = slurp(path, &before_len);

        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {100, 100};   /* smaller than either new file */
        setrlimit(RLIMIT_FSIZE, &rl);
        errno = 0;
        CHECK_EQ_INT(tml__write_file_atomic(run, "final_summary.json", big, sizeof(big), 0644),
                     TML_EIO);
        CHECK_EQ_INT(errno, EFBIG);
        m.status = "completed";
        m.end_unix_ms = 1700000002623;
        errno = 0;
        CHECK_EQ_INT(tml__manifest_write(run, &m), TML_EIO);
        CHECK_EQ_INT(errno, EFBIG);

        snprintf(path, sizeof(path), "%s/final_summary.json", run);
        char *json = slurp(path, &after_len);
        CHECK(json && after_len == 12 && memcmp(json, "{\"good\": 1}\n", 12) == 0);
        snprintf(path, sizeof(path), "%s/manifest.json", run);
        char *after = slurp(path, &after_len);
        CHECK(before && after && before_len == after_len &&
              memcmp(before, after, before_len) == 0);
        CHECK(after && strstr(after, "\"status\": \"running\"") != NULL);
        CHECK_EQ_INT(hidden_files(run), 0);
        free(json);
        free(before);
        free(after);
        _exit(harness_failures ? 1 : 0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_run_log(void)
{
    char run[600], path[700];
    snprintf(run, sizeof(run), "%s/log", tmp());
    mkdir(run, 0755);
    tml__run_log(run, "aggregator", "rejected connection from %s: %s", "1.2.3.4:5", "bad\nsecret");
    tml__run_log(run, "launcher", "second");
    snprintf(path, sizeof(path), "%s/traceml.log", run);
    size_t len;
    char *buf = slurp(path, &len);
    CHECK(buf != NULL);
    if (buf) {
        int lines = 0;
        for (size_t i = 0; i < len; i++)
            lines += buf[i] == '\n';
        CHECK_EQ_INT(lines, 2);   /* the newline inside a message is flattened */
        CHECK(strstr(buf, "aggregator[") != NULL);
        CHECK(strstr(buf, "rejected connection from 1.2.3.4:5: bad secret") != NULL);
        free(buf);
    }
    tml__run_log(NULL, "x", "ignored");   /* no folder: no crash */
}

/* The progress files: what a process stored is read after it died of a
 * signal, the one that got furthest counts, and they go at the end. */
static void test_progress(void)
{
    char run[512], path[600];
    snprintf(run, sizeof(run), "%s/prog", tmp());
    CHECK_EQ_INT(mkdir(run, 0755), 0);
    tml_progress_sum sum;
    tml__progress_read(run, &sum);
    CHECK(sum.processes == 0 && sum.steps == 0);
    tml_progress *p = tml__progress_create(run);
    CHECK(p != NULL);
    if (!p)
        return;
    atomic_store(&p->steps, 5);
    atomic_store(&p->last_end_ns, 1000);
    pid_t child = fork();
    if (child == 0) {
        tml_progress *c = tml__progress_create(run);
        if (c) {
            atomic_store(&c->steps, 20);
            atomic_store(&c->last_end_ns, 2000);
        }
        raise(SIGKILL);   /* no exit handler, no unmap */
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFSIGNALED(st));
    tml__progress_read(run, &sum);
    CHECK_EQ_INT(sum.processes, 2);
    CHECK(sum.steps == 20 && sum.last_end_ns == 2000);
    /* a process that aborts at exit, after TraceML's shutdown: its page
     * says so, and it still dies of SIGABRT. Not so: a handler of its own
     * (left alone), a child it forked after the shutdown that aborts
     * (the page is not the child's; the process exits 7 in both) */
    for (int how = 0; how < 3; how++) {
        child = fork();
        if (child == 0) {
            tml_progress *c = tml__progress_create(run);
            if (how == 1)
                signal(SIGABRT, SIG_IGN);
            tml__progress_watch_exit(c);
            if (how == 2) {
                pid_t g = fork();
                if (g == 0)
                    abort();
                int gs = 0;
                waitpid(g, &gs, 0);
                _exit(WIFSIGNALED(gs) && WTERMSIG(gs) == SIGABRT ? 7 : 1);
            }
            if (how == 1)
                _exit(7);
            abort();
        }
        CHECK(waitpid(child, &st, 0) == child);
        if (how)
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
        else
            CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    }
    tml__progress_read(run, &sum);
    CHECK_EQ_INT(sum.processes, 5);
    CHECK_EQ_INT(sum.nexits, 1);
    CHECK_EQ_INT(sum.exits[0].signal, SIGABRT);
    CHECK(sum.exits[0].pid > 0 && sum.exits[0].pid != getpid());
    tml__progress_release(p);
    /* ours but no progress file; another host's (a shared run folder) */
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            snprintf(path, sizeof(path), "%s/progress/%s.junk", run, host);
        else
            snprintf(path, sizeof(path), "%s/progress/other-host.1", run);
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
    }
    tml__progress_read(run, &sum);
    CHECK_EQ_INT(sum.processes, 5);
    tml__progress_remove(run);
    snprintf(path, sizeof(path), "%s/progress/other-host.1", run);
    CHECK(access(path, F_OK) == 0);   /* its host removes it */
    unlink(path);
    tml__progress_remove(run);
    snprintf(path, sizeof(path), "%s/progress", run);
    CHECK(access(path, F_OK) != 0);
    CHECK(tml__progress_create("") == NULL);
}

/* A progress file made on a full disk: no progress file, never a SIGBUS
 * in the training at its first store (a sparse page the disk cannot back).
 * Needs a tmpfs of its own (root); skipped where none can be mounted. */
static void test_progress_full_disk(void)
{
    char mnt[512], path[600];
    snprintf(mnt, sizeof(mnt), "%s/fulldisk", tmp());
    CHECK_EQ_INT(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
        printf("  test_progress_full_disk: skipped (cannot mount a tmpfs: %s)\n",
               strerror(errno));
        return;
    }
    snprintf(path, sizeof(path), "%s/fill", mnt);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    char block[4096] = {0};
    while (fd >= 0 && write(fd, block, sizeof(block)) == (ssize_t)sizeof(block))
        ;
    if (fd >= 0)
        close(fd);
    pid_t child = fork();
    if (child == 0) {
        tml_progress *p = tml__progress_create(mnt);
        if (p)
            atomic_store(&p->steps, 1);
        _exit(p ? 0 : 3);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);   /* none made; not killed */
    umount2(mnt, MNT_DETACH);
}

/* A link planted at the name of a file TraceML writes in the run folder
 * (its log, a progress page) is never written through: the file it points
 * at stays as it was. */
static void test_planted_links_not_followed(void)
{
    char run[600], victim[700], link[900], name[100];
    snprintf(run, sizeof(run), "%s/links", tmp());
    mkdir(run, 0755);
    snprintf(victim, sizeof(victim), "%s/victim", tmp());
    FILE *f = fopen(victim, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("precious\n", f);
    fclose(f);
    snprintf(link, sizeof(link), "%s/traceml.log", run);
    CHECK_EQ_INT(symlink(victim, link), 0);
    tml__run_log(run, "aggregator", "through the link?");
    /* the progress folder a link to another folder; then a link at the page's name */
    snprintf(link, sizeof(link), "%s/progress", run);
    CHECK_EQ_INT(symlink(tmp(), link), 0);
    CHECK(tml__progress_create(run) == NULL);
    CHECK_EQ_INT(unlink(link), 0);
    mkdir(link, 0755);
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(name, sizeof(name), "/%s.%d", host, (int)getpid());
    snprintf(link, sizeof(link), "%s/progress%s", run, name);
    CHECK_EQ_INT(symlink(victim, link), 0);
    CHECK(tml__progress_create(run) == NULL);
    size_t len;
    char *buf = slurp(victim, &len);
    CHECK(buf && strcmp(buf, "precious\n") == 0);
    free(buf);
}

#define TESTS X(test_name_valid) X(test_name_generate) X(test_rundir_create) \
    X(test_random_hex) X(test_manifest) X(test_failed_write_keeps_the_old_file) X(test_run_log) \
    X(test_progress) X(test_progress_full_disk) X(test_planted_links_not_followed)
#include "harness.h"
