/* test_store.c - telemetry.sqlite: write, reopen, load back equal; NULL for
 * missing values; batching by time; the documented schema is the real one;
 * the writer thread (background) writes the same file, and its failures
 * are reported. */
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/run.h"
#include "store/store.h"
#include "traceml/traceml.h"
#include "base/strbuf.h"

#include "harness.h"

static char dir[256];

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* A fresh temporary folder per test binary, removed at exit. */
static void mkpath(char *out, size_t cap, const char *name)
{
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/tml_test_store_XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(teardown);
    }
    snprintf(out, cap, "%s/%s", dir, name);
}

static char *query_text(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    char *out = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            out = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return out;
}

static tml_step_record make_step(uint64_t i, int missing)
{
    tml_step_record r;
    memset(&r, 0, sizeof(r));
    r.step = i;
    r.start_ns = 1000000000 + (int64_t)i * 5000000;
    r.traced_ns = 4000000 + (int64_t)i;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r.phase_ns[p] = 100000 * (p + 1) + (int64_t)i;
    r.phase_ns[TML_PHASE_H2D] = 0;   /* a measured zero stays zero */
    r.gpu_traced_ns = missing ? TML_MISSING : 3900000;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r.gpu_phase_ns[p] = missing ? TML_MISSING : 90000 * (p + 1);
    r.gap_ns = i == 0 ? TML_MISSING : 12345;
    r.rss_bytes = missing ? TML_MISSING : 1000000 + (int64_t)i;
    r.cuda_allocated_peak_bytes = TML_MISSING;
    r.cuda_reserved_peak_bytes = missing ? TML_MISSING : 7;
    r.observed = TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_H2D);
    r.flags = i == 3 ? TML_STEP_ABORTED : 0;
    if (!missing) {
        r.samples = 32;
        r.tokens = 32 * 512;
        r.flops = 32 * 6000000000LL;
        r.peak_flops = 989400000000000LL;
        r.flops_how = TML_FLOPS_COUNTED | TML_FLOPS_16BIT;
    }
    return r;
}

static long long count_rows(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    long long n = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

static void test_roundtrip(void)
{
    char path[512];
    mkpath(path, sizeof(path), "rt.sqlite");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    if (!s)
        return;
    tml_run run;
    tml__run_init(&run, "bert", "abc123");
    run.world_size = 2;
    run.nnodes = 1;
    run.start_unix_ms = 1700000000000;
    CHECK_EQ_INT(tml__store_put_run(s, &run), 0);
    CHECK_EQ_INT(tml__store_put_meta(s, "status", "completed"), 0);

    tml_rank_info a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    a.rank = 1; a.local_rank = 1; a.world_size = 2; a.node_rank = 0; a.nnodes = 1;
    a.pid = 4242; a.instrumented = TML_PHASES_ALL;
    snprintf(a.host, sizeof(a.host), "node-a");
    a.loader_known = 1; a.loader_workers = 0; a.loader_pin_memory = 1; a.cpu_count = 16;
    b = a;
    b.rank = 0; b.local_rank = 0; b.pid = 4241;
    b.loader_known = 0; b.loader_workers = 0; b.loader_pin_memory = 0; b.cpu_count = 0;
    CHECK_EQ_INT(tml__store_put_rank(s, &a), 0);
    CHECK_EQ_INT(tml__store_put_rank(s, &b), 0);

    tml_step_record recs[10];
    for (int i = 0; i < 10; i++)
        recs[i] = make_step((uint64_t)i, i % 2);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, recs, 10), 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 1, 0, recs, 4), 0);
    /* a resent record: a second row in the file (arrival order, no key),
     * and the later one when read back */
    CHECK_EQ_INT(tml__store_put_steps(s, 1, 0, recs + 3, 1), 0);
    /* a record no rank can measure (a hand-made file) is not loaded back */
    tml_step_record odd = make_step(99, 0);
    odd.phase_ns[TML_PHASE_FORWARD] = INT64_MAX;
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &odd, 1), 0);
    CHECK_EQ_INT(tml__store_put_sample(s, 1700000000500, 0, -1, "host.cpu_percent", 42.5), 0);

    tml_rank_stats st = {3, 2, 14, 850, TML_MISSING};
    CHECK_EQ_INT(tml__store_put_stats(s, 1, &st, 1), 0);
    tml__store_close(s);   /* flushes */

    /* missing values are NULL in the file (16 rows: 15 records, one twice) */
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), 16);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps WHERE gpu_traced_ns IS NULL"), 8);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps WHERE cuda_allocated_peak_bytes IS NULL"), 16);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps WHERE h2d_ns = 0"), 16);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps WHERE gap_ns IS NULL"), 2);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM samples WHERE rank IS NULL AND node = 0"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT shipper_cpu_ns IS NULL FROM ranks WHERE rank = 1"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT ended FROM ranks WHERE rank = 1"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT ended FROM ranks WHERE rank = 0"), 0);
    /* loader settings: a measured 0 workers is 0, unknown is NULL */
    CHECK_EQ_INT(count_rows(path, "SELECT loader_num_workers = 0 FROM ranks WHERE rank = 1"), 1);
    CHECK_EQ_INT(count_rows(path, "SELECT loader_num_workers IS NULL AND cpu_count IS NULL FROM ranks WHERE rank = 0"), 1);

    /* reopen and load: equal to what was written */
    CHECK_EQ_INT(tml__store_open(path, 0, &s), 0);
    tml_run back;
    tml__run_init(&back, NULL, NULL);
    CHECK_EQ_INT(tml__store_load(s, &back), 0);
    tml__store_close(s);
    CHECK_STR(back.name, "bert");
    CHECK_STR(back.id, "abc123");
    CHECK_EQ_INT(back.world_size, 2);
    CHECK_EQ_INT(back.start_unix_ms, 1700000000000);
    CHECK_EQ_INT(back.nranks, 2);
    if (back.nranks == 2) {
        tml_rank *r0 = &back.ranks[0], *r1 = &back.ranks[1];
        CHECK_EQ_INT(r0->info.rank, 0);
        CHECK_EQ_INT(r1->info.rank, 1);
        CHECK_EQ_INT(r1->info.pid, 4242);
        CHECK_STR(r1->info.host, "node-a");
        CHECK_EQ_INT(r1->info.instrumented, TML_PHASES_ALL);
        CHECK_EQ_INT(r1->info.loader_known, 1);
        CHECK_EQ_INT(r1->info.loader_workers, 0);
        CHECK_EQ_INT(r1->info.loader_pin_memory, 1);
        CHECK_EQ_INT(r1->info.cpu_count, 16);
        CHECK_EQ_INT(r0->info.loader_known, 0);
        CHECK_EQ_INT(r0->info.cpu_count, 0);
        CHECK_EQ_INT(r1->ended, 1);
        CHECK_EQ_INT(r0->ended, 0);
        CHECK_EQ_INT(r1->stats.events_dropped, 3);
        CHECK_EQ_INT(r1->stats.records_dropped, 2);
        CHECK_EQ_INT(r1->stats.records_sent, 14);
        CHECK_EQ_INT(r1->stats.overhead_ns_per_step, 850);
        CHECK_EQ_INT(r1->stats.shipper_cpu_ns, TML_MISSING);
        CHECK_EQ_INT(r0->stats.overhead_ns_per_step, TML_MISSING);
        CHECK_EQ_INT(r0->nsteps, 10);
        CHECK_EQ_INT(r1->nsteps, 4);
        for (size_t i = 0; i < r0->nsteps && i < 10; i++)
            CHECK(memcmp(&r0->steps[i], &recs[i], sizeof(recs[i])) == 0);
        for (size_t i = 0; i < r1->nsteps && i < 4; i++)
            CHECK(memcmp(&r1->steps[i], &recs[i], sizeof(recs[i])) == 0);
    }
    tml__run_release(&back);
    tml__run_release(&run);
}

static void test_open_rules(void)
{
    char path[512];
    tml_store *s = NULL;
    mkpath(path, sizeof(path), "missing.sqlite");
    CHECK_EQ_INT(tml__store_open(path, 0, &s), TML_EIO);
    CHECK(s == NULL);
    CHECK(access(path, F_OK) != 0);   /* opening never creates */
    mkpath(path, sizeof(path), "exists.sqlite");
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    tml__store_close(s);
    s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), TML_EIO);   /* never reuse */
    /* nor create through a link planted at the name, dangling or not */
    char target[512];
    mkpath(target, sizeof(target), "elsewhere.sqlite");
    mkpath(path, sizeof(path), "planted.sqlite");
    CHECK_EQ_INT(symlink(target, path), 0);
    CHECK_EQ_INT(tml__store_open(path, 1, &s), TML_EIO);
    CHECK(s == NULL);
    CHECK(access(target, F_OK) != 0);
    /* not our database */
    mkpath(path, sizeof(path), "other.sqlite");
    sqlite3 *db;
    sqlite3_open(path, &db);
    sqlite3_exec(db, "CREATE TABLE x (a)", NULL, NULL, NULL);
    sqlite3_close(db);
    CHECK_EQ_INT(tml__store_open(path, 0, &s), TML_EIO);
    /* a file that is not SQLite at all */
    mkpath(path, sizeof(path), "garbage.sqlite");
    FILE *f = fopen(path, "w");
    fputs("this is not a database, just text that goes on for a while........", f);
    fclose(f);
    CHECK_EQ_INT(tml__store_open(path, 0, &s), TML_EIO);
    CHECK(s == NULL);
}

static void test_batching(void)
{
    char path[512];
    mkpath(path, sizeof(path), "batch.sqlite");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    if (!s)
        return;
    tml_rank_info a;
    memset(&a, 0, sizeof(a));
    tml__store_put_rank(s, &a);
    tml_step_record r = make_step(0, 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &r, 1), 0);
    CHECK_EQ_INT(tml__store_tick(s, 1000), 0);   /* stamps the batch */
    CHECK_EQ_INT(tml__store_tick(s, 1000 + TML_STORE_FLUSH_MS - 1), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), 0);
    CHECK_EQ_INT(tml__store_tick(s, 1000 + TML_STORE_FLUSH_MS), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), 1);
    /* a full batch goes at once */
    tml_step_record *many = malloc(TML_STORE_BATCH * sizeof(*many));
    for (int i = 0; i < TML_STORE_BATCH; i++)
        many[i] = make_step((uint64_t)i + 1, 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, many, TML_STORE_BATCH), 0);
    CHECK_EQ_INT(tml__store_tick(s, 5000), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), TML_STORE_BATCH + 1);
    free(many);
    char *mode = query_text(path, "PRAGMA journal_mode");
    CHECK_STR(mode, "wal");
    free(mode);
    tml__store_close(s);
}

static void normalize(tml_strbuf *out, const char *s, size_t n)
{
    int space = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            space = out->len > 0;
            continue;
        }
        if (space)
            tml__sb_addc(out, ' ');
        space = 0;
        tml__sb_addc(out, c);
    }
}

static char *read_doc(void)
{
    /* __FILE__ is tests/unit/test_store.c relative to the repository root */
    char path[1024];
    const char *f = __FILE__;
    const char *cut = strstr(f, "tests/unit/");
    snprintf(path, sizeof(path), "%.*sdocs/sqlite-schema.md", cut ? (int)(cut - f) : 0, f);
    FILE *fp = fopen(path, "r");
    if (!fp) {
        fprintf(stderr, "cannot open %s\n", path);
        return NULL;
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), fp)) > 0)
        tml__sb_add(&sb, buf, n);
    fclose(fp);
    return tml__sb_detach(&sb, NULL);
}

static void test_doc_matches_schema(void)
{
    char *doc = read_doc();
    CHECK(doc != NULL);
    if (!doc)
        return;
    const char *b = strstr(doc, "<!-- schema:begin -->");
    const char *e = b ? strstr(b, "<!-- schema:end -->") : NULL;
    const char *open = b ? strstr(b, "```sql\n") : NULL;
    CHECK(b && e && open && open < e);
    if (!(b && e && open && open < e)) {
        free(doc);
        return;
    }
    open += 7;
    const char *close = strstr(open, "```");
    /* the doc's statements, normalized, ';'-separated */
    tml_strbuf want = TML_STRBUF_INIT, got = TML_STRBUF_INIT;
    normalize(&want, open, (size_t)(close - open));

    char path[512];
    mkpath(path, sizeof(path), "schema.sqlite");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    tml__store_close(s);
    sqlite3 *db;
    sqlite3_stmt *st;
    sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid",
                       -1, &st, NULL);
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *sql = (const char *)sqlite3_column_text(st, 0);
        if (n++)
            tml__sb_addc(&got, ' ');
        normalize(&got, sql, strlen(sql));
        tml__sb_addc(&got, ';');
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    CHECK_EQ_INT(n, 6);
    CHECK_STR(got.buf, want.buf);
    /* and the constant the code runs is the same text */
    tml_strbuf code = TML_STRBUF_INIT;
    normalize(&code, tml__store_schema_sql, strlen(tml__store_schema_sql));
    CHECK_STR(code.buf, want.buf);
    tml__sb_release(&want);
    tml__sb_release(&got);
    tml__sb_release(&code);
    free(doc);
}

/* A file of an older schema version at path: today's tables, then sql
 * (which remakes them as that version had them). */
static void old_file(char *path, size_t cap, const char *name, const char *sql)
{
    sqlite3 *db;
    mkpath(path, cap, name);
    CHECK(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, tml__store_schema_sql, NULL, NULL, NULL) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
}

/* A telemetry.sqlite written before communication was measured (schema
 * version 1: no comm_* columns) still loads, with communication not
 * measured, and is never written to. */
static void test_reads_version_1(void)
{
    char path[512];
    old_file(path, sizeof(path), "v1.sqlite",
        "DROP TABLE steps;"
        "CREATE TABLE steps (rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER,"
        " traced_ns INTEGER, input_ns INTEGER, h2d_ns INTEGER, forward_ns INTEGER,"
        " backward_ns INTEGER, optimizer_ns INTEGER, gpu_traced_ns INTEGER,"
        " gpu_input_ns INTEGER, gpu_h2d_ns INTEGER, gpu_forward_ns INTEGER,"
        " gpu_backward_ns INTEGER, gpu_optimizer_ns INTEGER, gap_ns INTEGER,"
        " rss_bytes INTEGER, cuda_allocated_peak_bytes INTEGER,"
        " cuda_reserved_peak_bytes INTEGER, observed INTEGER NOT NULL,"
        " flags INTEGER NOT NULL, PRIMARY KEY (rank, step)) WITHOUT ROWID;"
        "INSERT INTO run VALUES ('id1', 'old', 1, 1, 1700000000000, NULL, '0.1.0', 1);"
        "INSERT INTO steps VALUES (0, 7, 1000, 5000, 100, 200, 300, 400, 500,"
        " NULL, NULL, NULL, NULL, NULL, NULL, 12, 99, NULL, NULL, 31, 0);");

    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 0, &s), 0);
    if (!s)
        return;
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    CHECK_STR(run.name, "old");
    CHECK_EQ_INT((long long)run.nranks, 1);
    if (run.nranks == 1) {
        const tml_rank *r = &run.ranks[0];
        CHECK_EQ_INT((long long)r->nsteps, 1);
        const tml_step_record *x = &r->steps[0];
        CHECK_EQ_INT((long long)x->step, 7);
        CHECK_EQ_INT((long long)x->phase_ns[TML_PHASE_FORWARD], 300);
        CHECK_EQ_INT((long long)x->phase_ns[TML_PHASE_OPTIMIZER], 500);
        CHECK_EQ_INT((long long)x->phase_ns[TML_PHASE_COMM], TML_MISSING);
        CHECK_EQ_INT((long long)x->gpu_phase_ns[TML_PHASE_COMM], TML_MISSING);
        CHECK_EQ_INT((long long)x->gap_ns, 12);
        CHECK_EQ_INT((long long)x->observed, 31);
        CHECK_EQ_INT((long long)x->comm_ns, 0);
        CHECK_EQ_INT((long long)x->comm_count, 0);
    }
    tml_step_record more = make_step(8, 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &more, 1), TML_EIO);
    CHECK_EQ_INT(tml__store_put_meta(s, "status", "completed"), TML_EIO);
    tml__store_close(s);
    tml__run_release(&run);
    char *n = query_text(path, "SELECT count(*) FROM steps");
    CHECK_STR(n ? n : "", "1");
    free(n);
}

/* A version-2 file (before incarnations: no incarnation column, steps
 * keyed by (rank, step)) still loads, every step in incarnation 0, and is
 * never written to. */
static void test_reads_version_2(void)
{
    char path[512];
    old_file(path, sizeof(path), "v2.sqlite",
        "CREATE TABLE s2 AS SELECT * FROM steps;"
        "ALTER TABLE s2 DROP COLUMN incarnation;"
        "ALTER TABLE s2 DROP COLUMN samples; ALTER TABLE s2 DROP COLUMN tokens;"
        "ALTER TABLE s2 DROP COLUMN flops; ALTER TABLE s2 DROP COLUMN flops_how;"
        "ALTER TABLE s2 DROP COLUMN peak_flops;"
        "DROP TABLE steps; ALTER TABLE s2 RENAME TO steps;"
        "INSERT INTO run VALUES ('id2', 'old2', 1, 1, 1700000000000, NULL, '0.1.0', 2);"
        "INSERT INTO steps (rank, step, start_ns, traced_ns, observed, flags)"
        " VALUES (0, 0, 0, 1000, 31, 0), (0, 1, 1000, 1000, 31, 0);");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 0, &s), 0);
    if (!s)
        return;
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    CHECK_EQ_INT((long long)run.nranks, 1);
    if (run.nranks == 1) {
        CHECK_EQ_INT((long long)run.ranks[0].nsteps, 2);
        CHECK_EQ_INT((long long)run.ranks[0].incarnation, 0);
    }
    CHECK_EQ_INT((long long)run.nconflicts, 0);
    tml_step_record more = make_step(2, 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &more, 1), TML_EIO);
    tml__store_close(s);
    tml__run_release(&run);
}

/* A version-3 file (steps keyed by (rank, incarnation, step), WITHOUT
 * ROWID) is still read and written: a resent record replaces there. */
static void test_reads_and_writes_version_3(void)
{
    char path[512];
    old_file(path, sizeof(path), "v3.sqlite",
        "CREATE TABLE s3 (rank INTEGER NOT NULL, step INTEGER NOT NULL, start_ns, traced_ns,"
        " input_ns, h2d_ns, forward_ns, backward_ns, optimizer_ns, comm_exposed_ns,"
        " gpu_traced_ns, gpu_input_ns, gpu_h2d_ns, gpu_forward_ns, gpu_backward_ns,"
        " gpu_optimizer_ns, gpu_comm_exposed_ns, gap_ns, rss_bytes, cuda_allocated_peak_bytes,"
        " cuda_reserved_peak_bytes, observed INTEGER NOT NULL, flags INTEGER NOT NULL, comm_ns,"
        " comm_bytes, comm_count, incarnation INTEGER NOT NULL DEFAULT 0,"
        " PRIMARY KEY (rank, incarnation, step)) WITHOUT ROWID;"
        "DROP TABLE steps; ALTER TABLE s3 RENAME TO steps;"
        "INSERT INTO run VALUES ('id3', 'old3', 1, 1, 1700000000000, NULL, '0.9.0', 3);");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 0, &s), 0);
    if (!s)
        return;
    tml_step_record r[3] = {make_step(0, 0), make_step(1, 0), make_step(2, 0)};
    tml_step_record again = make_step(1, 0);
    again.traced_ns = 77;
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, r, 3), 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &again, 1), 0);
    CHECK_EQ_INT(tml__store_flush(s), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), 3);
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    CHECK_EQ_INT((long long)run.nranks, 1);
    if (run.nranks == 1 && run.ranks[0].nsteps == 3)
        CHECK_EQ_INT(run.ranks[0].steps[1].traced_ns, 77);
    else
        CHECK(0);
    tml__store_close(s);
    tml__run_release(&run);
}

/* A version-4 file (before throughput) is still read, its steps with no
 * samples, and written, without them. */
static void test_reads_and_writes_version_4(void)
{
    char path[512];
    old_file(path, sizeof(path), "v4.sqlite",
        "ALTER TABLE steps DROP COLUMN samples; ALTER TABLE steps DROP COLUMN tokens;"
        "ALTER TABLE steps DROP COLUMN flops; ALTER TABLE steps DROP COLUMN flops_how;"
        "ALTER TABLE steps DROP COLUMN peak_flops;"
        "INSERT INTO run VALUES ('id4', 'old4', 1, 1, 1700000000000, NULL, '0.9.1', 4);");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 0, &s), 0);
    if (!s)
        return;
    tml_step_record r[2] = {make_step(0, 0), make_step(1, 0)};
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, r, 2), 0);
    CHECK_EQ_INT(tml__store_flush(s), 0);
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    if (run.nranks == 1 && run.ranks[0].nsteps == 2) {
        CHECK_EQ_INT(run.ranks[0].steps[1].traced_ns, r[1].traced_ns);
        CHECK_EQ_INT(run.ranks[0].steps[1].samples, 0);
        CHECK_EQ_INT(run.ranks[0].steps[1].flops, 0);
    } else {
        CHECK(0);
    }
    tml__store_close(s);
    tml__run_release(&run);
}

/* Two incarnations of one rank with the same step ids: both kept on
 * disk, and loaded back numbered on (0..2, then 3..4) with the restart
 * noted. */
static void test_incarnations_kept(void)
{
    char path[512];
    mkpath(path, sizeof(path), "inc.sqlite");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    if (!s)
        return;
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    info.world_size = 1;
    info.pid = 7;
    CHECK_EQ_INT(tml__store_put_rank(s, &info), 0);
    tml_step_record r[3] = {make_step(0, 0), make_step(1, 0), make_step(2, 0)};
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, r, 3), 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 1, r, 2), 0);
    CHECK_EQ_INT(tml__store_flush(s), 0);
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    CHECK_EQ_INT((long long)run.nranks, 1);
    if (run.nranks == 1) {
        CHECK_EQ_INT((long long)run.ranks[0].nsteps, 5);
        CHECK_EQ_INT((long long)run.ranks[0].incarnation, 1);
        for (size_t i = 0; i < run.ranks[0].nsteps; i++)
            CHECK_EQ_INT((long long)run.ranks[0].steps[i].step, (long long)i);
    }
    CHECK_EQ_INT((long long)run.nconflicts, 1);
    CHECK_EQ_INT(run.conflicts[0].kind, TML_CONFLICT_RESTARTED);
    CHECK_EQ_INT((long long)run.conflicts[0].first_step, 3);
    tml__store_close(s);
    tml__run_release(&run);
    char *n = query_text(path, "SELECT count(*) FROM steps");
    CHECK_STR(n ? n : "", "5");
    free(n);
}

/* Batches written by the writer thread: the same rows as written in
 * place, a rank's queued counters never overwrite its last ones, a resent
 * record still replaces, and every other call waits for the writer. */
static void test_background(void)
{
    char path[512];
    mkpath(path, sizeof(path), "background.sqlite");
    tml_store *s = NULL;
    CHECK_EQ_INT(tml__store_open(path, 1, &s), 0);
    if (!s)
        return;
    CHECK_EQ_INT(tml__store_background(s), 0);
    tml_rank_info info;
    memset(&info, 0, sizeof(info));
    for (int r = 0; r < 4; r++) {
        info.rank = r;
        CHECK_EQ_INT(tml__store_put_rank(s, &info), 0);
    }
    enum { STEPS = 3000 };
    int64_t now = 1000;
    for (int i = 0; i < STEPS; i++) {
        tml_step_record rec = make_step((uint64_t)i, i % 2);
        CHECK_EQ_INT(tml__store_put_steps(s, i % 4, 0, &rec, 1), 0);
        if (i % 100 == 99) {
            tml_rank_stats st = {0, 0, (uint64_t)i, 900, TML_MISSING};
            CHECK_EQ_INT(tml__store_put_stats(s, 1, &st, 0), 0);
        }
        now += 1;
        CHECK_EQ_INT(tml__store_tick(s, now), 0);   /* hands over; never waits */
    }
    tml_step_record again = make_step(8, 0);
    again.traced_ns = 77;
    CHECK_EQ_INT(tml__store_put_steps(s, 0, 0, &again, 1), 0);   /* step 8 of rank 0, resent */
    tml_rank_stats last = {1, 2, STEPS, 800, 5};
    CHECK_EQ_INT(tml__store_put_stats(s, 1, &last, 1), 0);   /* written at once, after the queue */
    CHECK_EQ_INT(tml__store_put_meta(s, "status", "running"), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), STEPS + 1);
    CHECK_EQ_INT(count_rows(path, "SELECT traced_ns FROM steps WHERE rank = 0 AND step = 8"
                                  " ORDER BY rowid DESC LIMIT 1"), 77);
    CHECK_EQ_INT(count_rows(path, "SELECT ended * 1000000 + records_sent FROM ranks WHERE rank = 1"),
                 1000000 + STEPS);
    /* more, then flush: written when it returns */
    tml_step_record more = make_step(STEPS, 0);
    CHECK_EQ_INT(tml__store_put_steps(s, 3, 0, &more, 1), 0);
    CHECK_EQ_INT(tml__store_tick(s, now + TML_STORE_FLUSH_MS), 0);
    CHECK_EQ_INT(tml__store_flush(s), 0);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM steps"), STEPS + 2);
    tml_run run;
    tml__run_init(&run, "", "");
    CHECK_EQ_INT(tml__store_load(s, &run), 0);
    CHECK_EQ_INT((long long)run.nranks, 4);
    /* read back, the resent record is the later row, and only it */
    size_t eights = 0;
    for (size_t i = 0; run.nranks && i < run.ranks[0].nsteps; i++)
        if (run.ranks[0].steps[i].step == 8) {
            eights++;
            CHECK_EQ_INT(run.ranks[0].steps[i].traced_ns, 77);
        }
    CHECK_EQ_INT((long long)eights, 1);
    tml__run_release(&run);
    tml__store_close(s);
    CHECK_EQ_INT(count_rows(path, "SELECT COUNT(*) FROM meta WHERE value = 'running'"), 1);
}

/* A writer that cannot write (a full disk; here a file size limit, in a
 * child) says so through the next tick or flush, with the reason. */
static void test_background_failure_reported(void)
{
    char path[512];
    mkpath(path, sizeof(path), "background-full.sqlite");
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {256 * 1024, 256 * 1024};
        tml_store *s = NULL;
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0 || tml__store_open(path, 1, &s) < 0)
            _exit(2);
        tml__store_background(s);
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        tml__store_put_rank(s, &info);
        int rc = 0;
        for (int i = 0; i < 20000 && rc == 0; i++) {
            tml_step_record rec = make_step((uint64_t)i, 0);
            tml__store_put_steps(s, 0, 0, &rec, 1);
            rc = tml__store_tick(s, 1000 + i);
        }
        if (rc == 0)
            rc = tml__store_flush(s);
        int ok = rc == TML_EIO && strstr(tml__store_error(s), "too large") != NULL;
        if (!ok)
            fprintf(stderr, "rc %d: %s\n", rc, tml__store_error(s));
        tml__store_close(s);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#define TESTS X(test_roundtrip) X(test_open_rules) X(test_reads_version_1) X(test_reads_version_2) X(test_reads_and_writes_version_3) \
    X(test_reads_and_writes_version_4) \
    X(test_incarnations_kept) X(test_batching) X(test_doc_matches_schema) X(test_background) \
    X(test_background_failure_reported)
#include "harness.h"
