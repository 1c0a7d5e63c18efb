/*
 * progress.h - how far each training process on this host got, in a
 * file that outlives it.
 *
 * Step records reach the aggregator through the shipper, every 10-80 ms;
 * a process that dies between two passes (a SIGSEGV) or whose aggregator
 * is gone leaves steps no summary saw. So a process under a launcher
 * also maps a small file, run_dir/progress/<host>.<pid>, into memory, and its
 * markers store two numbers there at each step's end (plain stores, no
 * system call): the page survives the process however it ends, and the
 * launcher and its aggregator read the files after the training ended.
 *
 * Files are named <host>.<pid>: nodes sharing a run folder each read and
 * remove only their own (last_end_ns is this host's monotonic clock).
 */
#ifndef TML_PROGRESS_H
#define TML_PROGRESS_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#define TML_PROGRESS_MAGIC 0x474f5250u   /* "PROG" */

typedef struct tml_progress {
    uint32_t magic;
    int32_t pid;
    _Atomic uint64_t steps;          /* steps this process ended (the thread that ended the last) */
    _Atomic int64_t last_end_ns;     /* tml__mono_ns() at that step's end, 0 none */
    /* The fatal signal the process died of after TraceML's shutdown (its
     * goodbye), stored by tml__progress_watch_exit's handler; 0 none. */
    volatile sig_atomic_t exit_signal;
    int32_t reserved;
} tml_progress;

/* Maps run_dir/progress/<host>.<pid> (creating both), zeroed; NULL on any
 * failure (then nothing is tracked). The mapping lives until the process
 * ends (tml__progress_release unmaps it earlier); the file stays. */
tml_progress *tml__progress_create(const char *run_dir);
void tml__progress_release(tml_progress *p);

/* After the process's last step and goodbye: a process that then dies of
 * a fatal signal at exit (PyTorch's gloo abort while the interpreter
 * finalizes, docs/distributed.md) stores it in p->exit_signal and dies of
 * it as it would have. Only signals whose disposition is still the
 * default are watched (a handler of the script's, or faulthandler's, is
 * left alone); the handler restores the default and raises the signal
 * again, so the exit status and core dump are the same. */
void tml__progress_watch_exit(tml_progress *p);

#define TML_PROGRESS_EXITS 64

/* What this host's processes reported: how many files, and the one that
 * got furthest (steps, last_end_ns); all 0 when there is none. And the
 * processes that died of a signal after their goodbye (the first
 * TML_PROGRESS_EXITS; nexits counts them all). */
typedef struct tml_progress_sum {
    int processes;
    uint64_t steps;
    int64_t last_end_ns;
    int nexits;
    struct { int32_t pid, signal; } exits[TML_PROGRESS_EXITS];
} tml_progress_sum;

void tml__progress_read(const char *run_dir, tml_progress_sum *out);
/* Removes this host's files from run_dir/progress/ (and the folder, once
 * empty) when the run's summary is out. */
void tml__progress_remove(const char *run_dir);

#endif
