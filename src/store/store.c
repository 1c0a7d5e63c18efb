/*
 * store.c - the run's telemetry in SQLite.
 *
 * Why SQLite: the user can query a run with the sqlite3 shell, and the
 * launcher can rebuild a run from the file after the aggregator process
 * died. Why batches: one INSERT per step in autocommit mode is one fsync-ish
 * journal write per step; the aggregator instead queues records and writes
 * them in one transaction every TML_STORE_FLUSH_MS (or every
 * TML_STORE_BATCH records), so the cost per record is a prepared-statement
 * step. WAL with synchronous=NORMAL keeps a crash of the aggregator from
 * losing committed batches and lets a reader open the file while it runs.
 *
 * A rank's counters (STATS, once a second per rank) go the same way: at
 * 10,000 ranks, one autocommitted UPDATE each was 10,000 transactions a
 * second (a WAL frame and file locks apiece), the aggregator's largest
 * cost; queued, they are written after the batch's steps in its
 * transaction, so a reader still never sees counters ahead of records. A
 * rank's last counters (its goodbye) are written at once, after the queue.
 *
 * What is in the queue when the aggregator is SIGKILLed is lost (at most one
 * flush interval); that is the price of batching and is documented.
 *
 * An aggregator of its own process (tml__store_background) has the
 * batches written by a thread of the store's, so that SQLite is never the
 * loop's cost. The loop hands the queue over and goes on filling a fresh
 * one; the writer owns the database until it is done, and every other
 * call waits for it first, so nothing else changes (a SIGKILL may also
 * lose the batch being written).
 *
 * The steps table is in arrival order, with no key (schema version 4;
 * version 5 added the samples, tokens and FLOPs of a step):
 * kept in (rank, incarnation, step) order (version 3), a batch rewrote a
 * page per rank it touched, and at 10,000 ranks the writer could not keep
 * up (~5 us a record and the loop waiting on it; appended, ~1 us). A
 * record is identified by (rank, incarnation, step): a rank whose process
 * restarted (a re-exec under the same pid starts its step ids again) is a
 * new incarnation, and both incarnations' rows stay. A record seen twice
 * within one incarnation (no rank of ours sends one twice; a hand-made
 * client may) is two rows, and every reader here takes the later
 * (tml__store_each_step), as a version-3 file's INSERT OR REPLACE kept it.
 */
#include "store/store.h"
#include "base/array.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traceml/traceml.h"
#include "model/sample.h"
#include "model/series.h"

/* The exact statements docs/sqlite-schema.md shows (tests compare them
 * with sqlite_master). */
const char tml__store_schema_sql[] =
    "CREATE TABLE run (\n"
    "    id              TEXT PRIMARY KEY,\n"
    "    name            TEXT NOT NULL,\n"
    "    world_size      INTEGER NOT NULL,\n"
    "    nnodes          INTEGER NOT NULL,\n"
    "    start_unix_ms   INTEGER,\n"
    "    end_unix_ms     INTEGER,\n"
    "    traceml_version TEXT NOT NULL,\n"
    "    schema_version  INTEGER NOT NULL\n"
    ");\n"
    "CREATE TABLE meta (\n"
    "    key   TEXT PRIMARY KEY,\n"
    "    value TEXT\n"
    ");\n"
    "CREATE TABLE ranks (\n"
    "    rank                 INTEGER PRIMARY KEY,\n"
    "    local_rank           INTEGER NOT NULL,\n"
    "    world_size           INTEGER NOT NULL,\n"
    "    node_rank            INTEGER NOT NULL,\n"
    "    nnodes               INTEGER NOT NULL,\n"
    "    pid                  INTEGER NOT NULL,\n"
    "    host                 TEXT NOT NULL,\n"
    "    instrumented         INTEGER NOT NULL,\n"
    "    loader_num_workers   INTEGER,\n"
    "    loader_pin_memory    INTEGER,\n"
    "    cpu_count            INTEGER,\n"
    "    events_dropped       INTEGER NOT NULL DEFAULT 0,\n"
    "    records_dropped      INTEGER NOT NULL DEFAULT 0,\n"
    "    records_sent         INTEGER NOT NULL DEFAULT 0,\n"
    "    overhead_ns_per_step INTEGER,\n"
    "    shipper_cpu_ns       INTEGER,\n"
    "    ended                INTEGER NOT NULL DEFAULT 0\n"
    ");\n"
    "CREATE TABLE steps (\n"
    "    rank                      INTEGER NOT NULL,\n"
    "    step                      INTEGER NOT NULL,\n"
    "    start_ns                  INTEGER,\n"
    "    traced_ns                 INTEGER,\n"
    "    input_ns                  INTEGER,\n"
    "    h2d_ns                    INTEGER,\n"
    "    forward_ns                INTEGER,\n"
    "    backward_ns               INTEGER,\n"
    "    optimizer_ns              INTEGER,\n"
    "    comm_exposed_ns           INTEGER,\n"
    "    gpu_traced_ns             INTEGER,\n"
    "    gpu_input_ns              INTEGER,\n"
    "    gpu_h2d_ns                INTEGER,\n"
    "    gpu_forward_ns            INTEGER,\n"
    "    gpu_backward_ns           INTEGER,\n"
    "    gpu_optimizer_ns          INTEGER,\n"
    "    gpu_comm_exposed_ns       INTEGER,\n"
    "    gap_ns                    INTEGER,\n"
    "    rss_bytes                 INTEGER,\n"
    "    cuda_allocated_peak_bytes INTEGER,\n"
    "    cuda_reserved_peak_bytes  INTEGER,\n"
    "    observed                  INTEGER NOT NULL,\n"
    "    flags                     INTEGER NOT NULL,\n"
    "    comm_ns                   INTEGER,\n"
    "    comm_bytes                INTEGER,\n"
    "    comm_count                INTEGER,\n"
    "    incarnation               INTEGER NOT NULL DEFAULT 0,\n"
    "    samples                   INTEGER,\n"
    "    tokens                    INTEGER,\n"
    "    flops                     INTEGER,\n"
    "    peak_flops                INTEGER,\n"
    "    flops_how                 INTEGER\n"
    ");\n"
    "CREATE TABLE samples (\n"
    "    ts_unix_ms INTEGER NOT NULL,\n"
    "    node       INTEGER,\n"
    "    rank       INTEGER,\n"
    "    gpu        INTEGER,\n"
    "    metric     TEXT NOT NULL,\n"
    "    value      REAL\n"
    ");\n"
    "CREATE INDEX samples_by_metric ON samples (metric, ts_unix_ms);\n";

#define STEP_COLS 32
#define STEP_COLS_V4 27

static const char sql_insert_step[] =
    "INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
    "?,?,?,?,?)";
/* A version-3 or 4 file (before throughput) is still written, without it. */
static const char sql_insert_step_v4[] =
    "INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
static const char sql_insert_sample[] = "INSERT INTO samples VALUES (?,?,?,?,?,?)";
static const char sql_update_stats[] =
    "UPDATE ranks SET events_dropped=?, records_dropped=?, records_sent=?,"
    " overhead_ns_per_step=?, shipper_cpu_ns=?, ended=? WHERE rank=?";
/* Version 4 keeps steps in arrival order (no key; see the top): a
 * record sent twice is two rows, and the later is the one read. A
 * version-3 file (keyed by (rank, incarnation, step), WITHOUT ROWID) is
 * still read and written: the same INSERT OR REPLACE replaces there. */
static const char sql_select_steps[] =
    "SELECT * FROM steps ORDER BY rank, incarnation, step, rowid";
static const char sql_select_steps_v4[] =
    "SELECT *, 0, 0, 0, 0, 0 FROM steps ORDER BY rank, incarnation, step, rowid";
static const char sql_select_steps_v3[] =
    "SELECT *, 0, 0, 0, 0, 0 FROM steps ORDER BY rank, incarnation, step";

/* Older files are read, never written to: a version-2 file (before
 * incarnations) has every step in incarnation 0; a version-1 file (before
 * communication was measured) also lacks the five communication columns,
 * read as not measured. */
#define STEP_COLS_V2 26
#define STEP_COLS_V1 21
static const char sql_select_steps_v2[] = "SELECT *, 0, 0, 0, 0, 0, 0 FROM steps ORDER BY rank, step";
static const char sql_select_steps_v1[] =
    "SELECT rank, step, start_ns, traced_ns, input_ns, h2d_ns, forward_ns, backward_ns,"
    " optimizer_ns, NULL, gpu_traced_ns, gpu_input_ns, gpu_h2d_ns, gpu_forward_ns,"
    " gpu_backward_ns, gpu_optimizer_ns, NULL, gap_ns, rss_bytes, cuda_allocated_peak_bytes,"
    " cuda_reserved_peak_bytes, observed, flags, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0 FROM steps"
    " ORDER BY rank, step";

typedef struct queued_step {
    int32_t rank;
    uint32_t incarnation;
    tml_step_record rec;
} queued_step;

typedef struct queued_stats {
    int32_t rank;
    tml_rank_stats stats;
} queued_stats;

typedef struct queued_sample {
    int64_t ts_unix_ms;
    int32_t node, rank, gpu;
    double value;
    char metric[48];
} queued_sample;

/* What one transaction writes. */
typedef struct batch {
    queued_step *steps;
    size_t nsteps, capsteps;
    queued_stats *stats;     /* counters of ranks that have not ended */
    size_t nstats, capstats;
    queued_sample *samples;
    size_t nsamples, capsamples;
} batch;

struct tml_store {
    sqlite3 *db;
    sqlite3_stmt *ins_step, *ins_sample, *upd_stats;
    int step_cols;               /* what ins_step writes: STEP_COLS, or an older file's */
    batch q;                 /* the queue, filled by the owner's thread */
    int64_t oldest_ms;       /* tick time when the queue became non-empty, -1 empty */
    char err[160];           /* why the last write failed (tml__store_error) */
    int err_errno;           /* the same as an errno value */
    /* The writer thread (tml__store_background): it owns the database
     * while `busy`, writing `w`; the owner's thread touches neither then. */
    int background, started, busy, quit;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    batch w;
    int wrc;                 /* the writer's failure, until a tick or flush reports it */
    char werr[160];
    int werr_errno;
};

/* Set on a writer thread: failed() keeps its reasons apart. */
static _Thread_local int on_writer;

/* Keeps why the last call on the database failed, before a ROLLBACK or a
 * finalize replaces SQLite's message, in the system's words where there
 * are some: SQLite reports a write that found no space as SQLITE_FULL and
 * keeps no errno for it, and no page limit is set here, so it is ENOSPC. */
static int failed(tml_store *s)
{
    int code = sqlite3_extended_errcode(s->db) & 0xff, sys = sqlite3_system_errno(s->db);
    char *err = on_writer ? s->werr : s->err;
    int *err_errno = on_writer ? &s->werr_errno : &s->err_errno;
    *err_errno = code == SQLITE_FULL ? ENOSPC : sys ? sys : EIO;
    if (code == SQLITE_FULL || (sys && (code == SQLITE_IOERR || code == SQLITE_CANTOPEN)))
        snprintf(err, sizeof(s->err), "%s", strerror(*err_errno));
    else
        snprintf(err, sizeof(s->err), "%s", sqlite3_errmsg(s->db));
    return TML_EIO;
}

static int exec(tml_store *s, const char *sql)
{
    return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : failed(s);
}

/* After a failure: never replaces the reason failed() kept. */
static void rollback(tml_store *s)
{
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

const char *tml__store_error(const tml_store *s)
{
    return s && s->err[0] ? s->err : "unknown error";
}

/* The steps table's version from its width: 5, 4, 3, 2, 1, or 0 (not ours). */
static int steps_version(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT * FROM steps LIMIT 0", -1, &st, NULL) == SQLITE_OK)
        n = sqlite3_column_count(st);
    sqlite3_finalize(st);
    if (n == STEP_COLS)
        return 5;
    if (n == STEP_COLS_V4) {    /* a WITHOUT ROWID table (version 3) has no rowid */
        int rowid = sqlite3_prepare_v2(db, "SELECT rowid FROM steps LIMIT 0", -1, &st, NULL) ==
                    SQLITE_OK;
        sqlite3_finalize(st);
        return rowid ? 4 : 3;
    }
    return n == STEP_COLS_V2 ? 2 : n == STEP_COLS_V1 ? 1 : 0;
}

static void bind_opt(sqlite3_stmt *st, int col, int64_t v)
{
    if (v == TML_MISSING)
        sqlite3_bind_null(st, col);
    else
        sqlite3_bind_int64(st, col, v);
}

static int64_t col_opt(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return TML_MISSING;
    return sqlite3_column_int64(st, col);
}

/* sql as a statement, or NULL with the reason kept (failed()). */
static sqlite3_stmt *prepare(tml_store *s, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK)
        return st;
    failed(s);
    sqlite3_finalize(st);
    return NULL;
}

/* Runs a bound statement that returns no row, then finalizes it: 0, or
 * TML_EIO with the reason kept. */
static int run_once(tml_store *s, sqlite3_stmt *st)
{
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : failed(s);
    sqlite3_finalize(st);
    return rc;
}

/* After a SELECT's rows (step: sqlite3_step's last answer, rc what reading
 * them gave): finalizes st; rc, or TML_EIO when the rows ended in an error. */
static int rows_end(tml_store *s, sqlite3_stmt *st, int step, int rc)
{
    if (rc == 0 && step != SQLITE_DONE)
        rc = failed(s);
    sqlite3_finalize(st);
    return rc;
}

static void batch_release(batch *b)
{
    free(b->steps);
    free(b->stats);
    free(b->samples);
}

static int writer_idle(tml_store *s, int report);

int tml__store_open(const char *path, int create, tml_store **out)
{
    tml_store *s = NULL;
    *out = NULL;
    struct stat st;
    if (create && lstat(path, &st) == 0) {
        errno = EEXIST;   /* never reuse a file someone else wrote, nor a link */
        return TML_EIO;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return TML_ENOMEM;
    s->oldest_ms = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* a new store: a link planted at the name is refused, never written
     * through (an existing one is the user's, links and all) */
    int flags = SQLITE_OPEN_READWRITE |
                (create ? SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW : 0);
    if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK)
        goto fail;
    sqlite3_busy_timeout(s->db, 1000);
    if (exec(s, "PRAGMA journal_mode=WAL") < 0 || exec(s, "PRAGMA synchronous=NORMAL") < 0)
        goto fail;
    if (create) {
        if (exec(s, "BEGIN") < 0 || exec(s, tml__store_schema_sql) < 0) {
            rollback(s);
            goto fail;
        }
        if (exec(s, "COMMIT") < 0)
            goto fail;
    }
    if (sqlite3_prepare_v2(s->db, sql_insert_sample, -1, &s->ins_sample, NULL) != SQLITE_OK)
        goto fail;   /* also catches a database without our tables */
    int version = steps_version(s->db);
    s->step_cols = version == 5 ? STEP_COLS : STEP_COLS_V4;
    if (version >= 3 &&
        (sqlite3_prepare_v2(s->db, version == 5 ? sql_insert_step : sql_insert_step_v4, -1,
                            &s->ins_step, NULL) != SQLITE_OK ||
         sqlite3_prepare_v2(s->db, sql_update_stats, -1, &s->upd_stats, NULL) != SQLITE_OK))
        goto fail;
    if (!s->ins_step && (create || !steps_version(s->db) || exec(s, "PRAGMA query_only=1") < 0))
        goto fail;   /* an older version is read only; anything else is not ours */
    *out = s;
    return 0;
fail: {
        int e = s->err_errno;
        if (!e && s->db) {
            failed(s);
            e = s->err_errno;
        }
        sqlite3_finalize(s->ins_step);
        sqlite3_finalize(s->ins_sample);
        sqlite3_finalize(s->upd_stats);
        sqlite3_close(s->db);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        errno = e ? e : ENOMEM;   /* no handle at all: SQLite could not allocate one */
    }
    return TML_EIO;
}

void tml__store_close(tml_store *s)
{
    if (!s)
        return;
    tml__store_flush(s);
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    sqlite3_finalize(s->ins_step);
    sqlite3_finalize(s->ins_sample);
    sqlite3_finalize(s->upd_stats);
    sqlite3_close(s->db);
    batch_release(&s->q);
    batch_release(&s->w);
    free(s);
}

int tml__store_put_run(tml_store *s, const tml_run *run)
{
    if (!s)
        return TML_EINVAL;
    writer_idle(s, 0);
    sqlite3_stmt *st = prepare(s, "INSERT OR REPLACE INTO run VALUES (?,?,?,?,?,?,?,?)");
    if (!st)
        return TML_EIO;
    sqlite3_bind_text(st, 1, run->id, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, run->name, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 3, run->world_size);
    sqlite3_bind_int(st, 4, run->nnodes);
    if (run->start_unix_ms > 0)
        sqlite3_bind_int64(st, 5, run->start_unix_ms);
    else
        sqlite3_bind_null(st, 5);
    if (run->end_unix_ms > 0)
        sqlite3_bind_int64(st, 6, run->end_unix_ms);
    else
        sqlite3_bind_null(st, 6);
    sqlite3_bind_text(st, 7, TML_VERSION_STRING, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 8, TML_STORE_SCHEMA_VERSION);
    return run_once(s, st);
}

int tml__store_put_meta(tml_store *s, const char *key, const char *value)
{
    if (!s || !key)
        return TML_EINVAL;
    writer_idle(s, 0);
    sqlite3_stmt *st = prepare(s, "INSERT OR REPLACE INTO meta VALUES (?,?)");
    if (!st)
        return TML_EIO;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
    if (value)
        sqlite3_bind_text(st, 2, value, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 2);
    return run_once(s, st);
}

int tml__store_put_rank(tml_store *s, const tml_rank_info *i)
{
    if (!s || !i)
        return TML_EINVAL;
    writer_idle(s, 0);
    /* An upsert keeps the counters of a rank that says hello again. */
    sqlite3_stmt *st = prepare(s,
            "INSERT INTO ranks (rank, local_rank, world_size, node_rank, nnodes, pid, host,"
            " instrumented, loader_num_workers, loader_pin_memory, cpu_count)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(rank) DO UPDATE SET"
            " local_rank=excluded.local_rank, world_size=excluded.world_size,"
            " node_rank=excluded.node_rank, nnodes=excluded.nnodes, pid=excluded.pid,"
            " host=excluded.host, instrumented=excluded.instrumented,"
            " loader_num_workers=excluded.loader_num_workers,"
            " loader_pin_memory=excluded.loader_pin_memory, cpu_count=excluded.cpu_count, ended=0");
    if (!st)
        return TML_EIO;
    sqlite3_bind_int(st, 1, i->rank);
    sqlite3_bind_int(st, 2, i->local_rank);
    sqlite3_bind_int(st, 3, i->world_size);
    sqlite3_bind_int(st, 4, i->node_rank);
    sqlite3_bind_int(st, 5, i->nnodes);
    sqlite3_bind_int(st, 6, i->pid);
    sqlite3_bind_text(st, 7, i->host, (int)strnlen(i->host, sizeof(i->host)), SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 8, i->instrumented);
    if (i->loader_known) {          /* unknown stays NULL */
        sqlite3_bind_int(st, 9, i->loader_workers);
        sqlite3_bind_int(st, 10, i->loader_pin_memory);
    }
    if (i->cpu_count > 0)
        sqlite3_bind_int(st, 11, i->cpu_count);
    return run_once(s, st);
}

static void bind_stats(sqlite3_stmt *st, int32_t rank, const tml_rank_stats *x, int ended)
{
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, (int64_t)x->events_dropped);
    sqlite3_bind_int64(st, 2, (int64_t)x->records_dropped);
    sqlite3_bind_int64(st, 3, (int64_t)x->records_sent);
    bind_opt(st, 4, x->overhead_ns_per_step);
    bind_opt(st, 5, x->shipper_cpu_ns);
    sqlite3_bind_int(st, 6, ended ? 1 : 0);
    sqlite3_bind_int(st, 7, rank);
}

static void note_queued(tml_store *s);

/* A rank's counters: queued while it runs (written with the next batch),
 * written at once when it ended, after what is queued, so that its
 * earlier counters never overwrite its last ones. */
int tml__store_put_stats(tml_store *s, int32_t rank, const tml_rank_stats *x, int ended)
{
    if (!s || !x)
        return TML_EINVAL;
    if (!ended && s->upd_stats) {
        if (TML_GROW(s->q.stats, s->q.nstats + 1, s->q.capstats) < 0)
            return TML_ENOMEM;
        s->q.stats[s->q.nstats].rank = rank;
        s->q.stats[s->q.nstats].stats = *x;
        s->q.nstats++;
        note_queued(s);
        return 0;
    }
    int rc = s->q.nstats || s->started ? tml__store_flush(s) : 0;
    if (rc < 0)
        return rc;
    if (s->upd_stats) {
        bind_stats(s->upd_stats, rank, x, ended);
        rc = sqlite3_step(s->upd_stats) == SQLITE_DONE ? 0 : failed(s);
        sqlite3_reset(s->upd_stats);
        return rc;
    }
    sqlite3_stmt *st = prepare(s, sql_update_stats);   /* an older file: refused */
    if (!st)
        return TML_EIO;
    bind_stats(st, rank, x, ended);
    return run_once(s, st);
}

static void note_queued(tml_store *s)
{
    if (s->oldest_ms < 0)
        s->oldest_ms = 0;   /* stamped by the next tick */
}

int tml__store_put_steps(tml_store *s, int32_t rank, uint32_t incarnation,
                         const tml_step_record *recs, size_t n)
{
    if (!s)
        return TML_EINVAL;
    if (!s->ins_step) {      /* an older version's file: read only */
        snprintf(s->err, sizeof(s->err), "a telemetry.sqlite of an older version is read only");
        s->err_errno = EROFS;
        return TML_EIO;
    }
    if (TML_GROW(s->q.steps, s->q.nsteps + n, s->q.capsteps) < 0)
        return TML_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        s->q.steps[s->q.nsteps].rank = rank;
        s->q.steps[s->q.nsteps].incarnation = incarnation;
        s->q.steps[s->q.nsteps].rec = recs[i];
        s->q.nsteps++;
    }
    note_queued(s);
    return 0;
}

static int put_sample(tml_store *s, int64_t ts_unix_ms, int32_t node, int32_t rank,
                      int32_t gpu, const char *metric, double value);

int tml__store_put_sample(tml_store *s, int64_t ts_unix_ms, int32_t node, int32_t rank,
                          const char *metric, double value)
{
    return put_sample(s, ts_unix_ms, node, rank, -1, metric, value);
}

int tml__store_put_samples(tml_store *s, const tml_sample *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *name = tml__sample_metric_name(v[i].metric);
        if (!name)
            continue;       /* a metric of a newer version: not ours to name */
        int rc = put_sample(s, v[i].ts_unix_ms, v[i].node, v[i].rank, v[i].gpu, name,
                            v[i].value);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int put_sample(tml_store *s, int64_t ts_unix_ms, int32_t node, int32_t rank,
                      int32_t gpu, const char *metric, double value)
{
    if (!s || !metric)
        return TML_EINVAL;
    if (TML_GROW(s->q.samples, s->q.nsamples + 1, s->q.capsamples) < 0)
        return TML_ENOMEM;
    queued_sample *q = &s->q.samples[s->q.nsamples++];
    q->ts_unix_ms = ts_unix_ms;
    q->node = node;
    q->rank = rank;
    q->gpu = gpu;
    q->value = value;
    snprintf(q->metric, sizeof(q->metric), "%s", metric);
    note_queued(s);
    return 0;
}

static int write_step(tml_store *s, const queued_step *q)
{
    sqlite3_stmt *st = s->ins_step;
    const tml_step_record *r = &q->rec;
    int c = 1;
    sqlite3_reset(st);
    sqlite3_bind_int(st, c++, q->rank);
    sqlite3_bind_int64(st, c++, (int64_t)r->step);
    bind_opt(st, c++, r->start_ns);
    bind_opt(st, c++, r->traced_ns);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        bind_opt(st, c++, r->phase_ns[p]);
    bind_opt(st, c++, r->gpu_traced_ns);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        bind_opt(st, c++, r->gpu_phase_ns[p]);
    bind_opt(st, c++, r->gap_ns);
    bind_opt(st, c++, r->rss_bytes);
    bind_opt(st, c++, r->cuda_allocated_peak_bytes);
    bind_opt(st, c++, r->cuda_reserved_peak_bytes);
    sqlite3_bind_int64(st, c++, r->observed);
    sqlite3_bind_int64(st, c++, r->flags);
    int comm = (r->observed & TML_PHASE_BIT(TML_PHASE_COMM)) != 0;
    bind_opt(st, c++, comm ? r->comm_ns : TML_MISSING);
    bind_opt(st, c++, comm ? r->comm_bytes : TML_MISSING);
    bind_opt(st, c++, comm ? (int64_t)r->comm_count : TML_MISSING);
    sqlite3_bind_int64(st, c++, q->incarnation);
    if (s->step_cols == STEP_COLS) {
        sqlite3_bind_int64(st, c++, r->samples);
        sqlite3_bind_int64(st, c++, r->tokens);
        sqlite3_bind_int64(st, c++, r->flops);
        sqlite3_bind_int64(st, c++, r->peak_flops);
        sqlite3_bind_int64(st, c++, r->flops_how);
    }
    return sqlite3_step(st) == SQLITE_DONE ? 0 : failed(s);
}

static int write_sample(tml_store *s, const queued_sample *q)
{
    sqlite3_stmt *st = s->ins_sample;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, q->ts_unix_ms);
    if (q->node < 0)
        sqlite3_bind_null(st, 2);
    else
        sqlite3_bind_int(st, 2, q->node);
    if (q->rank < 0)
        sqlite3_bind_null(st, 3);
    else
        sqlite3_bind_int(st, 3, q->rank);
    if (q->gpu < 0)
        sqlite3_bind_null(st, 4);
    else
        sqlite3_bind_int(st, 4, q->gpu);
    sqlite3_bind_text(st, 5, q->metric, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 6, q->value);
    return sqlite3_step(st) == SQLITE_DONE ? 0 : failed(s);
}

/* One transaction: the batch's steps, samples and counters; the batch is
 * emptied, written or not (a batch that cannot be written is dropped
 * rather than retried forever: the in-memory run still has it for the
 * summary). */
static int write_batch(tml_store *s, batch *b)
{
    if (b->nsteps == 0 && b->nsamples == 0 && b->nstats == 0)
        return 0;
    int rc = exec(s, "BEGIN");
    for (size_t i = 0; rc == 0 && i < b->nsteps; i++) {
        /* at most TML_STORE_BATCH steps a transaction: a bigger one
         * outgrows SQLite's page cache and costs more a record */
        if (i && i % TML_STORE_BATCH == 0 && (rc = exec(s, "COMMIT")) == 0)
            rc = exec(s, "BEGIN");
        if (rc == 0)
            rc = write_step(s, &b->steps[i]);
    }
    for (size_t i = 0; rc == 0 && i < b->nsamples; i++)
        rc = write_sample(s, &b->samples[i]);
    for (size_t i = 0; rc == 0 && i < b->nstats; i++) {
        bind_stats(s->upd_stats, b->stats[i].rank, &b->stats[i].stats, 0);
        rc = sqlite3_step(s->upd_stats) == SQLITE_DONE ? 0 : failed(s);
    }
    if (s->upd_stats)
        sqlite3_reset(s->upd_stats);
    if (rc == 0)
        rc = exec(s, "COMMIT");
    if (rc < 0)
        rollback(s);
    b->nsteps = b->nsamples = b->nstats = 0;
    return rc;
}

static void *writer_main(void *arg)
{
    tml_store *s = arg;
    on_writer = 1;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->busy && !s->quit)
            pthread_cond_wait(&s->cv, &s->mu);
        if (!s->busy)
            break;   /* quit, and nothing handed over */
        pthread_mutex_unlock(&s->mu);
        int rc = write_batch(s, &s->w);
        pthread_mutex_lock(&s->mu);
        if (rc < 0)
            s->wrc = rc;
        s->busy = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Waits until the writer has written what it was handed: the database is
 * the caller's again. Its failure, if any, is the caller's to report
 * (report = 1; then its reason is tml__store_error's), or stays for the
 * next tick or flush. */
static int writer_idle(tml_store *s, int report)
{
    int rc = 0;
    if (!s->started)
        return 0;
    pthread_mutex_lock(&s->mu);
    while (s->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    if (report && s->wrc < 0) {
        rc = s->wrc;
        s->wrc = 0;
        memcpy(s->err, s->werr, sizeof(s->err));
        s->err_errno = s->werr_errno;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The queue to the writer thread (started on first use), when it is
 * free; while it writes the last batch the queue goes on filling, and
 * past TML_STORE_QUEUE_MAX the caller waits for it (the back-pressure the
 * synchronous flush gave). 1 handed over (*rc: the writer's last failure),
 * 0 not yet, -1 no thread (write here). */
static int hand_over(tml_store *s, int *rc)
{
    *rc = 0;
    if (!s->started) {
        if (pthread_create(&s->thread, NULL, writer_main, s) != 0) {
            s->background = 0;
            return -1;
        }
        s->started = 1;
    }
    size_t queued = s->q.nsteps + s->q.nsamples + s->q.nstats;
    pthread_mutex_lock(&s->mu);
    int busy = s->busy;
    pthread_mutex_unlock(&s->mu);
    if (busy && queued < TML_STORE_QUEUE_MAX)
        return 0;
    *rc = writer_idle(s, 1);
    batch b = s->w;           /* the written batch's arrays become the queue's */
    s->w = s->q;
    s->q = b;
    pthread_mutex_lock(&s->mu);
    s->busy = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    s->oldest_ms = -1;
    return 1;
}

int tml__store_background(tml_store *s)
{
    if (!s)
        return TML_EINVAL;
    if (s->ins_step)         /* else read only: nothing to write */
        s->background = 1;
    return 0;
}

int tml__store_tick(tml_store *s, int64_t now_ms)
{
    if (!s || s->oldest_ms < 0)
        return 0;
    if (s->oldest_ms == 0)
        s->oldest_ms = now_ms > 0 ? now_ms : 1;
    if (s->q.nsteps + s->q.nsamples + s->q.nstats < TML_STORE_BATCH &&
        now_ms - s->oldest_ms < TML_STORE_FLUSH_MS)
        return 0;
    int rc;
    if (s->background && hand_over(s, &rc) >= 0)
        return rc;
    return tml__store_flush(s);
}

int tml__store_flush(tml_store *s)
{
    if (!s)
        return TML_EINVAL;
    int rc = writer_idle(s, 1);
    int rc2 = write_batch(s, &s->q);
    s->oldest_ms = -1;
    return rc < 0 ? rc : rc2;
}

static int load_ranks(tml_store *s, tml_run *run)
{
    sqlite3_stmt *st = prepare(s,
            "SELECT rank, local_rank, world_size, node_rank, nnodes, pid, host, instrumented,"
            " events_dropped, records_dropped, records_sent, overhead_ns_per_step,"
            " shipper_cpu_ns, ended, loader_num_workers, loader_pin_memory, cpu_count"
            " FROM ranks ORDER BY rank");
    if (!st)
        return TML_EIO;
    int step, rc = 0;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = sqlite3_column_int(st, 0);
        info.local_rank = sqlite3_column_int(st, 1);
        info.world_size = sqlite3_column_int(st, 2);
        info.node_rank = sqlite3_column_int(st, 3);
        info.nnodes = sqlite3_column_int(st, 4);
        info.pid = sqlite3_column_int(st, 5);
        const unsigned char *host = sqlite3_column_text(st, 6);
        if (host)
            snprintf(info.host, sizeof(info.host), "%s", (const char *)host);
        info.instrumented = (uint32_t)sqlite3_column_int64(st, 7);
        if (sqlite3_column_type(st, 14) != SQLITE_NULL) {
            info.loader_known = 1;
            info.loader_workers = sqlite3_column_int(st, 14);
            info.loader_pin_memory = sqlite3_column_int(st, 15);
        }
        info.cpu_count = sqlite3_column_int(st, 16);   /* NULL reads as 0: unknown */
        tml_rank *r = tml__run_rank(run, &info);
        if (!r) {
            rc = TML_ENOMEM;
            break;
        }
        r->stats.events_dropped = (uint64_t)sqlite3_column_int64(st, 8);
        r->stats.records_dropped = (uint64_t)sqlite3_column_int64(st, 9);
        r->stats.records_sent = (uint64_t)sqlite3_column_int64(st, 10);
        r->stats.overhead_ns_per_step = col_opt(st, 11);
        r->stats.shipper_cpu_ns = col_opt(st, 12);
        r->ended = sqlite3_column_int(st, 13);
    }
    return rows_end(s, st, step, rc);
}

/* One row of the steps table: its rank, its process (incarnation) and the
 * record as that process numbered it. */
static int32_t read_step(sqlite3_stmt *st, tml_step_record *r, uint32_t *inc)
{
    memset(r, 0, sizeof(*r));
    int c = 1;
    r->step = (uint64_t)sqlite3_column_int64(st, c++);
    r->start_ns = col_opt(st, c++);
    r->traced_ns = col_opt(st, c++);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->phase_ns[p] = col_opt(st, c++);
    r->gpu_traced_ns = col_opt(st, c++);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = col_opt(st, c++);
    r->gap_ns = col_opt(st, c++);
    r->rss_bytes = col_opt(st, c++);
    r->cuda_allocated_peak_bytes = col_opt(st, c++);
    r->cuda_reserved_peak_bytes = col_opt(st, c++);
    r->observed = (uint32_t)sqlite3_column_int64(st, c++);
    r->flags = (uint32_t)sqlite3_column_int64(st, c++);
    r->comm_ns = col_opt(st, c++);
    r->comm_bytes = col_opt(st, c++);
    int64_t count = col_opt(st, c++);
    r->comm_count = count > 0 ? (uint32_t)count : 0;
    if (r->comm_ns < 0)
        r->comm_ns = 0;
    if (r->comm_bytes < 0)
        r->comm_bytes = 0;
    int64_t i = sqlite3_column_int64(st, c++);
    *inc = i < 0 ? 0 : i > UINT32_MAX ? UINT32_MAX : (uint32_t)i;
    r->samples = sqlite3_column_int64(st, c++);
    r->tokens = sqlite3_column_int64(st, c++);
    r->flops = sqlite3_column_int64(st, c++);
    r->peak_flops = sqlite3_column_int64(st, c++);
    r->flops_how = (uint32_t)sqlite3_column_int64(st, c++);
    return sqlite3_column_int(st, 0);
}

int tml__store_each_step(tml_store *s, tml_store_step_fn fn, void *ctx)
{
    int version = steps_version(s->db);
    const char *sql = version == 1 ? sql_select_steps_v1 : version == 2 ? sql_select_steps_v2
                    : version == 3 ? sql_select_steps_v3 : version == 4 ? sql_select_steps_v4
                    : sql_select_steps;
    int rc = tml__store_flush(s);
    if (rc < 0)
        return rc;
    sqlite3_stmt *st = version ? prepare(s, sql) : NULL;
    if (!st)
        return TML_EIO;
    /* a row is passed on when the next is another record: of rows with
     * one (rank, incarnation, step), the last (version 4 keeps them all) */
    tml_step_record r, held;
    uint32_t inc, held_inc = 0;
    int32_t held_rank = 0;
    int have = 0, step = SQLITE_DONE;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        int32_t rank = read_step(st, &r, &inc);
        /* a hand-made file: what the aggregator would have dropped */
        if (!tml__record_possible(&r))
            continue;
        if (have && (rank != held_rank || inc != held_inc || r.step != held.step))
            rc = fn(ctx, held_rank, held_inc, &held);
        held = r;
        held_rank = rank;
        held_inc = inc;
        have = 1;
    }
    if (rc == 0 && have && step == SQLITE_DONE)
        rc = fn(ctx, held_rank, held_inc, &held);
    return rows_end(s, st, step, rc);
}

typedef struct load_ctx {
    tml_run *run;
    tml_rank *cur;
} load_ctx;

static int load_step(void *ctx, int32_t rank, uint32_t inc, const tml_step_record *r)
{
    load_ctx *l = ctx;
    if (!l->cur || l->cur->info.rank != rank) {
        l->cur = tml__run_find(l->run, rank);
        if (!l->cur) {
            /* steps of a rank whose hello row is missing: keep them */
            tml_rank_info info;
            memset(&info, 0, sizeof(info));
            info.rank = rank;
            info.world_size = l->run->world_size;
            l->cur = tml__run_rank(l->run, &info);
            if (!l->cur)
                return TML_ENOMEM;
        }
    }
    while (inc > l->cur->incarnation)
        tml__run_restart(l->run, l->cur);   /* numbered as the aggregator did */
    return tml__run_add_steps(l->cur, r, 1) < 0 ? TML_ENOMEM : 0;
}

static int load_steps(tml_store *s, tml_run *run)
{
    load_ctx l = {run, NULL};
    return tml__store_each_step(s, load_step, &l);
}

/* Samples back into the run's per-place aggregates. */
static int load_samples(tml_store *s, tml_run *run)
{
    int rc = 0;
    sqlite3_stmt *st = prepare(s, "SELECT ts_unix_ms, node, rank, gpu, metric, value FROM samples"
                                  " ORDER BY ts_unix_ms");
    if (!st)
        return TML_EIO;
    while (rc == 0 && sqlite3_step(st) == SQLITE_ROW) {
        tml_sample x;
        x.ts_unix_ms = sqlite3_column_int64(st, 0);
        x.node = sqlite3_column_type(st, 1) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 1);
        x.rank = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 2);
        x.gpu = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 3);
        x.metric = tml__sample_metric_id((const char *)sqlite3_column_text(st, 4));
        x.value = sqlite3_column_double(st, 5);
        if (x.metric)
            rc = tml__series_add(&run->samples, &x);
    }
    sqlite3_finalize(st);
    return rc;
}

int tml__store_load(tml_store *s, tml_run *run)
{
    if (!s || !run)
        return TML_EINVAL;
    int rc = tml__store_flush(s);
    if (rc < 0)
        return rc;
    sqlite3_stmt *st = prepare(s, "SELECT id, name, world_size, nnodes, start_unix_ms, end_unix_ms"
                                  " FROM run LIMIT 1");
    if (!st)
        return TML_EIO;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(st, 0);
        const unsigned char *name = sqlite3_column_text(st, 1);
        if (id)
            snprintf(run->id, sizeof(run->id), "%s", (const char *)id);
        if (name)
            snprintf(run->name, sizeof(run->name), "%s", (const char *)name);
        run->world_size = sqlite3_column_int(st, 2);
        run->nnodes = sqlite3_column_int(st, 3);
        run->start_unix_ms = sqlite3_column_int64(st, 4);
        run->end_unix_ms = sqlite3_column_int64(st, 5);
    }
    sqlite3_finalize(st);
    rc = load_ranks(s, run);
    if (rc == 0)
        rc = load_steps(s, run);
    if (rc == 0)
        rc = load_samples(s, run);
    return rc;
}
