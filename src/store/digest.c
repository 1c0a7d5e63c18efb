/*
 * digest.c - what a telemetry.sqlite holds, for `traceml inspect`: the
 * run row, the meta the aggregator wrote (status, exit code, profile),
 * every rank with its step count and span, and the row count of each
 * table.
 *
 * The file may belong to a run still going, or be someone's only copy, so
 * it is opened read-only (immutable when its run has ended: no side file
 * appears) and queried with plain aggregates; nothing is
 * loaded into memory beyond one row per rank. The file is input: every
 * integer is checked against its range before it is kept, text is copied
 * into bounded fields, and a database that is not TraceML's says so
 * instead of failing somewhere in the middle.
 */
#include "store/store.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "traceml/traceml.h"

static int64_t col_i64(sqlite3_stmt *st, int c, int64_t lo, int64_t hi, int64_t dflt)
{
    if (sqlite3_column_type(st, c) != SQLITE_INTEGER)
        return dflt;
    int64_t v = sqlite3_column_int64(st, c);
    return v < lo || v > hi ? dflt : v;
}

static void col_text(sqlite3_stmt *st, int c, char *out, size_t cap)
{
    const unsigned char *t = sqlite3_column_text(st, c);
    snprintf(out, cap, "%s", t ? (const char *)t : "");
}

/* One query's first row through fn; 0, or TML_EPROTO when it failed. */
typedef void (*row_fn)(sqlite3_stmt *st, void *ctx);

static int query(sqlite3 *db, const char *sql, row_fn fn, void *ctx, int all)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return TML_EPROTO;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        fn(st, ctx);
        if (!all)
            break;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : TML_EPROTO;
}

static void run_row(sqlite3_stmt *st, void *ctx)
{
    tml_store_digest *d = ctx;
    col_text(st, 0, d->run_name, sizeof(d->run_name));
    col_text(st, 1, d->run_id, sizeof(d->run_id));
    d->world_size = col_i64(st, 2, 0, TML_MAX_WORLD_SIZE, -1);
    d->nnodes = col_i64(st, 3, 0, TML_MAX_WORLD_SIZE, -1);
    d->start_unix_ms = col_i64(st, 4, 1, INT64_C(1) << 50, 0);
    d->end_unix_ms = col_i64(st, 5, 1, INT64_C(1) << 50, 0);
    col_text(st, 6, d->traceml_version, sizeof(d->traceml_version));
    d->schema_version = col_i64(st, 7, 0, 1 << 20, -1);
}

static void meta_row(sqlite3_stmt *st, void *ctx)
{
    tml_store_digest *d = ctx;
    const unsigned char *k = sqlite3_column_text(st, 0);
    if (!k)
        return;
    if (strcmp((const char *)k, "status") == 0)
        col_text(st, 1, d->status, sizeof(d->status));
    else if (strcmp((const char *)k, "exit_code") == 0)
        col_text(st, 1, d->exit_code, sizeof(d->exit_code));
    else if (strcmp((const char *)k, "profile") == 0)
        col_text(st, 1, d->profile, sizeof(d->profile));
}

static void count_row(sqlite3_stmt *st, void *ctx)
{
    *(uint64_t *)ctx = (uint64_t)col_i64(st, 0, 0, INT64_MAX, 0);
}

static void samples_row(sqlite3_stmt *st, void *ctx)
{
    tml_store_digest *d = ctx;
    d->samples_first_ms = col_i64(st, 0, 1, INT64_C(1) << 50, 0);
    d->samples_last_ms = col_i64(st, 1, 1, INT64_C(1) << 50, 0);
    d->sample_metrics = (uint64_t)col_i64(st, 2, 0, INT64_MAX, 0);
}

static void rank_row(sqlite3_stmt *st, void *ctx)
{
    tml_store_digest *d = ctx;
    if (d->nranks >= TML_MAX_WORLD_SIZE)
        return;
    if (d->nranks % 64 == 0) {
        void *p = realloc(d->ranks, (d->nranks + 64) * sizeof(*d->ranks));
        if (!p)
            return;
        d->ranks = p;
    }
    tml_store_rank_digest *r = &d->ranks[d->nranks++];
    memset(r, 0, sizeof(*r));
    r->rank = (int32_t)col_i64(st, 0, 0, TML_MAX_WORLD_SIZE, -1);
    r->local_rank = (int32_t)col_i64(st, 1, 0, TML_MAX_WORLD_SIZE, -1);
    r->node = (int32_t)col_i64(st, 2, 0, TML_MAX_WORLD_SIZE, -1);
    r->pid = (int32_t)col_i64(st, 3, 0, INT32_MAX, -1);
    col_text(st, 4, r->host, sizeof(r->host));
    r->records_dropped = (uint64_t)col_i64(st, 5, 0, INT64_MAX, 0);
    r->events_dropped = (uint64_t)col_i64(st, 6, 0, INT64_MAX, 0);
    r->ended = col_i64(st, 7, 0, 1, 0) != 0;
    r->steps = (uint64_t)col_i64(st, 8, 0, INT64_MAX, 0);
    r->first_step = col_i64(st, 9, 0, INT64_MAX, -1);
    r->last_step = col_i64(st, 10, 0, INT64_MAX, -1);
    int64_t a = col_i64(st, 11, INT64_MIN, INT64_MAX, 0);
    int64_t b = col_i64(st, 12, INT64_MIN, INT64_MAX, 0);
    r->span_s = r->steps > 1 && b >= a ? ((double)b - (double)a) / 1e9 : NAN;
}

/* A rank whose process restarted (schema 3's steps.incarnation). */
static void incarnations_row(sqlite3_stmt *st, void *ctx)
{
    tml_store_digest *d = ctx;
    int64_t rank = col_i64(st, 0, 0, TML_MAX_WORLD_SIZE, -1);
    for (size_t i = 0; i < d->nranks; i++)
        if (d->ranks[i].rank == rank)
            d->ranks[i].incarnations = (uint32_t)col_i64(st, 1, 1, UINT32_MAX, 1);
}

static const char sql_ranks[] =
    "SELECT r.rank, r.local_rank, r.node_rank, r.pid, r.host, r.records_dropped,"
    " r.events_dropped, r.ended, COUNT(s.step), MIN(s.step), MAX(s.step),"
    " MIN(s.start_ns), MAX(s.start_ns)"
    " FROM ranks r LEFT JOIN steps s ON s.rank = r.rank GROUP BY r.rank ORDER BY r.rank";

static int tables(sqlite3 *db, tml_store_digest *d)
{
    static const struct { const char *sql; size_t off; } counts[] = {
        { "SELECT COUNT(*) FROM run", offsetof(tml_store_digest, rows_run) },
        { "SELECT COUNT(*) FROM meta", offsetof(tml_store_digest, rows_meta) },
        { "SELECT COUNT(*) FROM ranks", offsetof(tml_store_digest, rows_ranks) },
        { "SELECT COUNT(*) FROM steps", offsetof(tml_store_digest, rows_steps) },
        { "SELECT COUNT(*) FROM samples", offsetof(tml_store_digest, rows_samples) },
    };
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        if (query(db, counts[i].sql, count_row, (char *)d + counts[i].off, 0) < 0)
            return TML_EPROTO;
    if (query(db, "SELECT name, id, world_size, nnodes, start_unix_ms, end_unix_ms,"
              " traceml_version, schema_version FROM run LIMIT 1", run_row, d, 0) < 0 ||
        query(db, "SELECT key, value FROM meta", meta_row, d, 1) < 0 ||
        query(db, "SELECT MIN(ts_unix_ms), MAX(ts_unix_ms), COUNT(DISTINCT metric)"
              " FROM samples", samples_row, d, 0) < 0 ||
        query(db, sql_ranks, rank_row, d, 1) < 0)
        return TML_EPROTO;
    for (size_t i = 0; i < d->nranks; i++)
        d->ranks[i].incarnations = 1;
    /* files before schema 3 have no incarnation column: one each */
    query(db, "SELECT rank, COUNT(DISTINCT incarnation) FROM steps GROUP BY rank",
          incarnations_row, d, 1);
    return 0;
}

/* "file:<path>?mode=ro" (percent-encoded), with immutable=1 when no
 * -wal file is beside it: a finished run's database is then read without
 * SQLite creating its WAL index (-shm) next to it, even for a moment. A
 * live run's is read through its WAL. NULL when the path is too long. */
static char *uri_of(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    char wal[4200];
    size_t n = strlen(path), k = 0;
    if (n > 4000)
        return NULL;
    snprintf(wal, sizeof(wal), "%s-wal", path);
    int immutable = access(wal, F_OK) != 0;
    char *u = malloc(n * 3 + 40);
    if (!u)
        return NULL;
    k += (size_t)snprintf(u, 8, "file:");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)path[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("/-._~", c)) {
            u[k++] = (char)c;
        } else {
            u[k++] = '%';
            u[k++] = hex[c >> 4];
            u[k++] = hex[c & 15];
        }
    }
    snprintf(u + k, 32, "?mode=ro%s", immutable ? "&immutable=1" : "");
    return u;
}

int tml__store_digest(const char *path, tml_store_digest *d, char *why, size_t cap)
{
    sqlite3 *db = NULL;
    memset(d, 0, sizeof(*d));
    d->schema_version = d->world_size = d->nnodes = -1;
    char *uri = uri_of(path);
    if (!uri) {
        snprintf(why, cap, "path too long");
        return TML_EIO;
    }
    int rc = sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        snprintf(why, cap, "cannot open it: %s", db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return TML_EIO;
    }
    sqlite3_busy_timeout(db, 1000);
    sqlite3_stmt *st = NULL;
    rc = sqlite3_prepare_v2(db, "SELECT schema_version FROM run LIMIT 0", -1, &st, NULL);
    sqlite3_finalize(st);
    if (rc == SQLITE_NOTADB) {
        snprintf(why, cap, "not a SQLite database");
        rc = TML_EPROTO;
    } else if (rc != SQLITE_OK) {
        snprintf(why, cap, "not a TraceML telemetry.sqlite (%s)", sqlite3_errmsg(db));
        rc = TML_EPROTO;
    } else if (tables(db, d) < 0) {
        snprintf(why, cap, "not a TraceML telemetry.sqlite (%s)", sqlite3_errmsg(db));
        rc = TML_EPROTO;
    }
    sqlite3_close(db);
    return rc;
}

void tml__store_digest_release(tml_store_digest *d)
{
    free(d->ranks);
    d->ranks = NULL;
    d->nranks = 0;
}
