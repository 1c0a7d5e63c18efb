/*
 * store.h - telemetry.sqlite: every rank, every step record and (from a
 * later issue) every resource sample of a run, on disk in the run folder.
 *
 * The aggregator is the only writer. Step records, samples and the
 * counters of running ranks (STATS) are queued in memory and written in
 * one transaction per batch: tml__store_tick() writes the batch when it is
 * TML_STORE_FLUSH_MS old or TML_STORE_BATCH entries long;
 * tml__store_flush() writes it now. Ranks, a rank's last counters (ended)
 * and run metadata are rare and written at once. The schema is docs/sqlite-schema.md
 * (a unit test keeps the two equal).
 *
 * Missing values (-1 in a step record) are stored as NULL and come back as
 * -1, so a round trip through the store is exact.
 *
 * Ownership: the store copies what it is given; tml__store_close frees it.
 */
#ifndef TML_STORE_H
#define TML_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "model/run.h"
#include "model/record.h"

#define TML_STORE_SCHEMA_VERSION 5
#define TML_STORE_FLUSH_MS 200
#define TML_STORE_BATCH 2048
/* With a writer thread: queued entries past which tick waits for it. */
#define TML_STORE_QUEUE_MAX (16 * TML_STORE_BATCH)

typedef struct tml_store tml_store;

/* The CREATE statements, in order, ";\n"-separated (what docs show). */
extern const char tml__store_schema_sql[];

/* create=1: makes a new database (the file must not exist) with the schema;
 * create=0: opens an existing one, read only when it is of an older schema
 * version (TML_EIO when missing or not ours, with
 * errno saying why: ENOSPC on a full disk, EEXIST, ...). */
int tml__store_open(const char *path, int create, tml_store **out);
/* Flushes what is queued and closes (and stops the writer thread). NULL
 * is fine. */
void tml__store_close(tml_store *s);
/* From now on tick hands each due batch to a writer thread of the
 * store's (started with the first batch) and returns without waiting:
 * the caller's loop stops paying for SQLite. The writer owns the
 * database while it writes a batch; every other call waits for it first,
 * flush included, so what a call returns is as without it. The queue
 * fills meanwhile; past TML_STORE_QUEUE_MAX entries tick waits. A
 * writer's failure is returned by the next tick or flush. Not for a
 * store used from a forked child. 0, TML_EINVAL. */
int tml__store_background(tml_store *s);

/* The run row (one per database): identity, expected size, wall times. */
int tml__store_put_run(tml_store *s, const tml_run *run);
int tml__store_put_meta(tml_store *s, const char *key, const char *value);
int tml__store_put_rank(tml_store *s, const tml_rank_info *info);
int tml__store_put_stats(tml_store *s, int32_t rank, const tml_rank_stats *st, int ended);

/* Queued; written by tick/flush. incarnation: which process of the rank
 * (0 for the first; a restarted one counts on), recs with that process's
 * own step ids. */
int tml__store_put_steps(tml_store *s, int32_t rank, uint32_t incarnation,
                         const tml_step_record *recs, size_t n);
/* rank or node -1: not rank/node specific (stored as NULL). */
int tml__store_put_sample(tml_store *s, int64_t ts_unix_ms, int32_t node, int32_t rank,
                          const char *metric, double value);

/* Queues resource samples (model/sample.h); unknown metric ids are
 * skipped. */
struct tml_sample;
int tml__store_put_samples(tml_store *s, const struct tml_sample *v, size_t n);

/* Writes the queue when it is due; now_ms is any monotonic milliseconds. */
int tml__store_tick(tml_store *s, int64_t now_ms);
int tml__store_flush(tml_store *s);

/* Why the last call that returned TML_EIO failed, in the system's words
 * where it has some ("No space left on device"), else SQLite's; valid
 * until the next call on s. */
const char *tml__store_error(const tml_store *s);

/* Loads run, ranks and steps into run (initialized by the caller; its name
 * and id are overwritten from the database). */
int tml__store_load(tml_store *s, tml_run *run);

/* Every step record, rank by rank, each rank's processes (incarnation 0,
 * 1, ...) in order and each one's steps in order, as that process
 * numbered them (tml__run_restart numbers a later one's on), to fn
 * without keeping any: constant memory whatever the run's length. A
 * nonzero return from fn stops the walk and is returned; else 0 or
 * TML_EIO. */
typedef int (*tml_store_step_fn)(void *ctx, int32_t rank, uint32_t incarnation,
                                 const tml_step_record *r);
int tml__store_each_step(tml_store *s, tml_store_step_fn fn, void *ctx);

/* ---- digest.c: what a telemetry.sqlite holds, read-only ------------ */

typedef struct tml_store_rank_digest {
    int32_t rank, local_rank, node, pid;   /* -1 when out of range */
    char host[64];
    uint64_t steps;                        /* step rows */
    int64_t first_step, last_step;         /* -1 without steps */
    double span_s;                         /* last - first step start, CPU clock; NAN */
    uint64_t records_dropped, events_dropped;
    int ended;                             /* said goodbye */
    uint32_t incarnations;                 /* processes that sent its steps (restarts + 1) */
} tml_store_rank_digest;

typedef struct tml_store_digest {
    int64_t schema_version;                /* run.schema_version; -1 unknown */
    char traceml_version[32];
    char run_name[128], run_id[40];
    int64_t world_size, nnodes;            /* -1 unknown */
    int64_t start_unix_ms, end_unix_ms;    /* 0 unknown */
    char status[16], exit_code[16], profile[16];   /* meta; "" unknown */
    uint64_t rows_run, rows_meta, rows_ranks, rows_steps, rows_samples;
    int64_t samples_first_ms, samples_last_ms;     /* 0 without samples */
    uint64_t sample_metrics;               /* distinct metric names */
    tml_store_rank_digest *ranks;          /* malloc'd, by rank */
    size_t nranks;
} tml_store_digest;

/*
 * Opens path read-only (and, without a -wal file beside it, immutable: no
 * WAL index is created next to it) and summarizes it. Returns 0; TML_EPROTO with a
 * reason in why ("not a SQLite database", "not a TraceML telemetry.sqlite
 * (no run table)"); TML_EIO when it cannot be opened (errno); TML_ENOMEM.
 * Release with tml__store_digest_release either way.
 */
int tml__store_digest(const char *path, tml_store_digest *out, char *why, size_t cap);
void tml__store_digest_release(tml_store_digest *d);

#endif
