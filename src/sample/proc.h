/*
 * proc.h - parsers for the few /proc files the sampler reads.
 *
 * Every parser takes (buf, len), needs no NUL terminator, never reads past
 * len and returns 0 or TML_EPROTO; they are unit-tested on captured files
 * (tests/fixtures/proc). Reading the files is tml__proc_read(), the only
 * function here that does I/O.
 */
#ifndef TML_PROC_H
#define TML_PROC_H

#include <stddef.h>
#include <stdint.h>

/* The aggregate "cpu " line of /proc/stat, in clock ticks. */
typedef struct tml_cpu_times {
    uint64_t busy;     /* user + nice + system + irq + softirq + steal */
    uint64_t total;    /* busy + idle + iowait */
} tml_cpu_times;

/* MemTotal and MemAvailable (kernels before 3.14: MemFree + Buffers +
 * Cached), in bytes. */
typedef struct tml_meminfo {
    int64_t total_bytes;
    int64_t available_bytes;
} tml_meminfo;

/* The fields of /proc/<pid>/stat the sampler uses. The process name may
 * hold spaces and parentheses: it runs to the *last* ')' of the line. */
typedef struct tml_pid_stat {
    int32_t pid;
    char comm[64];         /* truncated */
    char state;
    uint64_t utime_ticks, stime_ticks;
    /* the CPU time of its children that ended and were waited for */
    uint64_t cutime_ticks, cstime_ticks;
    int32_t ppid;
    int64_t rss_pages;
} tml_pid_stat;

int tml__proc_parse_stat(const char *buf, size_t len, tml_cpu_times *out);
int tml__proc_parse_meminfo(const char *buf, size_t len, tml_meminfo *out);
int tml__proc_parse_pid_stat(const char *buf, size_t len, tml_pid_stat *out);
/* /proc/<pid>/statm: the second field, resident pages. */
int tml__proc_parse_statm(const char *buf, size_t len, int64_t *rss_pages);
/* /proc/<pid>/schedstat (the task's main thread): nanoseconds it ran on a
 * CPU and waited on a run queue, runnable but not running (its wait for a
 * core). */
int tml__proc_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns);

/* Host CPU % between two readings (100 = every logical core busy); NAN
 * when no tick passed or the counters went backwards. */
double tml__cpu_busy_percent(const tml_cpu_times *before, const tml_cpu_times *after);

/* /proc/<pid>/task/<tid>/children: the pids, space-separated. Puts up
 * to cap of them in out and returns how many there were (may be > cap). */
size_t tml__proc_parse_children(const char *buf, size_t len, int32_t *out, size_t cap);

/*
 * The CPU time, in clock ticks, of process `pid` and its descendants (the
 * training's process tree: a rank and its DataLoader workers). Each
 * process counts utime + stime + cutime + cstime: a child that ends and is
 * waited for moves its time into its parent's cutime, so the total runs on
 * without a jump. Descendants are found through
 * /proc/<pid>/task/<tid>/children (every thread's, since any thread may
 * fork), at most TML_PROC_TREE_MAX processes. *nprocs gets the count
 * walked. 0, or TML_EIO when pid's own stat cannot be read (no
 * CONFIG_PROC_CHILDREN: the descendants are then missing, not an error;
 * *nprocs says 1).
 */
#define TML_PROC_TREE_MAX 512
int tml__proc_tree_ticks(int32_t pid, uint64_t *ticks, size_t *nprocs);
/* The same figure by scanning every /proc/<pid>/stat for parent links
 * (what a kernel without the children files allows); for the bench. */
int tml__proc_tree_ticks_scan(int32_t pid, uint64_t *ticks, size_t *nprocs);

/* 1 when process `pid` is `root` or one of its descendants (its parent
 * links, read from /proc/<pid>/stat, lead to root within
 * TML_PROC_ANCESTRY_MAX hops), else 0 (also when a process on the way
 * has ended or cannot be read). */
#define TML_PROC_ANCESTRY_MAX 64
int tml__proc_descends_from(int32_t pid, int32_t root);

/* Reads a whole (small) file into buf; *len gets the byte count. 0 or
 * TML_EIO. Used on /proc files, which report size 0, so it reads until EOF. */
int tml__proc_read(const char *path, char *buf, size_t cap, size_t *len);

#endif
