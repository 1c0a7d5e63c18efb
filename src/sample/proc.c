/*
 * proc.c - /proc parsers.
 *
 * /proc text looks easy to parse with sscanf, and that is how tools go
 * wrong: a process called "python3 train (v2).py" has spaces and a ')' in
 * its name, so "%d (%s) %c" reads garbage; meminfo lines can come in any
 * order and old kernels lack MemAvailable. These parsers walk a bounded
 * cursor over (buf, len), never need a terminating NUL (a read of /proc can
 * fill the buffer exactly) and fail with TML_EPROTO rather than guess.
 */
#include "sample/proc.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "traceml/traceml.h"

typedef struct cur {
    const char *p, *end;
} cur;

static void skip_spaces(cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

/* An unsigned decimal; 0 on success. */
static int take_u64(cur *c, uint64_t *out)
{
    uint64_t v = 0;
    const char *start;

    skip_spaces(c);
    start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        c->p++;
    }
    if (c->p == start)
        return -1;
    *out = v;
    return 0;
}

/* A signed decimal (rss in stat may be negative on broken kernels). */
static int take_i64(cur *c, int64_t *out)
{
    int neg = 0;
    uint64_t v;

    skip_spaces(c);
    if (c->p < c->end && *c->p == '-') {
        neg = 1;
        c->p++;
    }
    if (take_u64(c, &v) < 0 || v > (uint64_t)INT64_MAX)
        return -1;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* Skips one space-separated field. */
static int skip_field(cur *c)
{
    skip_spaces(c);
    const char *start = c->p;
    while (c->p < c->end && *c->p != ' ' && *c->p != '\n')
        c->p++;
    return c->p == start ? -1 : 0;
}

static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

int tml__proc_parse_stat(const char *buf, size_t len, tml_cpu_times *out)
{
    const char *p = buf, *end = buf + len;

    while (p < end) {
        const char *le = line_end(p, end);
        if (le - p > 4 && memcmp(p, "cpu ", 4) == 0) {
            cur c = { p + 4, le };
            uint64_t v[8] = {0};
            int n = 0;
            /* user nice system idle iowait irq softirq steal [guest guest_nice];
             * guest time is already counted in user. At least the first four
             * exist on every kernel. */
            while (n < 8 && take_u64(&c, &v[n]) == 0)
                n++;
            if (n < 4)
                return TML_EPROTO;
            out->busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
            out->total = out->busy + v[3] + v[4];
            return 0;
        }
        p = le + 1;
    }
    return TML_EPROTO;
}

int tml__proc_parse_meminfo(const char *buf, size_t len, tml_meminfo *out)
{
    static const char *keys[5] = { "MemTotal:", "MemAvailable:", "MemFree:", "Buffers:", "Cached:" };
    int64_t v[5];
    const char *p = buf, *end = buf + len;

    for (int k = 0; k < 5; k++)
        v[k] = -1;
    while (p < end) {
        const char *le = line_end(p, end);
        for (int k = 0; k < 5; k++) {
            size_t kl = strlen(keys[k]);
            if ((size_t)(le - p) > kl && memcmp(p, keys[k], kl) == 0) {
                cur c = { p + kl, le };
                int64_t x;
                if (take_i64(&c, &x) < 0 || x < 0 || x > INT64_MAX / 1024)
                    return TML_EPROTO;
                skip_spaces(&c);
                /* the unit is kB on every kernel; anything else is not ours */
                if (c.end - c.p >= 2 && memcmp(c.p, "kB", 2) == 0)
                    x *= 1024;
                else if (c.p != c.end)
                    return TML_EPROTO;
                v[k] = x;
            }
        }
        p = le + 1;
    }
    if (v[0] < 0)
        return TML_EPROTO;
    out->total_bytes = v[0];
    if (v[1] >= 0)
        out->available_bytes = v[1];
    else if (v[2] >= 0)
        out->available_bytes = v[2] + (v[3] > 0 ? v[3] : 0) + (v[4] > 0 ? v[4] : 0);
    else
        return TML_EPROTO;
    if (out->available_bytes > out->total_bytes)
        out->available_bytes = out->total_bytes;
    return 0;
}

int tml__proc_parse_pid_stat(const char *buf, size_t len, tml_pid_stat *out)
{
    const char *end = buf + len;
    const char *open = memchr(buf, '(', len);
    const char *close = NULL;
    int64_t pid;

    memset(out, 0, sizeof(*out));
    if (!open)
        return TML_EPROTO;
    /* the name runs to the last ')' */
    for (const char *q = end; q > open; q--)
        if (q[-1] == ')') {
            close = q - 1;
            break;
        }
    if (!close)
        return TML_EPROTO;
    cur c = { buf, open };
    if (take_i64(&c, &pid) < 0 || pid <= 0 || pid > INT32_MAX)
        return TML_EPROTO;
    out->pid = (int32_t)pid;
    size_t n = (size_t)(close - open - 1);
    if (n >= sizeof(out->comm))
        n = sizeof(out->comm) - 1;
    memcpy(out->comm, open + 1, n);
    out->comm[n] = '\0';

    c.p = close + 1;
    c.end = end;
    skip_spaces(&c);
    if (c.p >= c.end)
        return TML_EPROTO;
    out->state = *c.p++;
    /* ppid (4), fields 5..13 (pgrp .. cmajflt), then utime (14), stime (15) */
    int64_t ppid;
    if (take_i64(&c, &ppid) < 0 || ppid < 0 || ppid > INT32_MAX)
        return TML_EPROTO;
    out->ppid = (int32_t)ppid;
    for (int f = 5; f <= 13; f++)
        if (skip_field(&c) < 0)
            return TML_EPROTO;
    if (take_u64(&c, &out->utime_ticks) < 0 || take_u64(&c, &out->stime_ticks) < 0)
        return TML_EPROTO;
    /* cutime (16), cstime (17): signed in the kernel's format, never
     * negative in practice */
    int64_t cu, cs;
    if (take_i64(&c, &cu) < 0 || take_i64(&c, &cs) < 0)
        return TML_EPROTO;
    out->cutime_ticks = cu > 0 ? (uint64_t)cu : 0;
    out->cstime_ticks = cs > 0 ? (uint64_t)cs : 0;
    /* 18..23 (priority .. vsize), then rss (24) */
    for (int f = 18; f <= 23; f++)
        if (skip_field(&c) < 0)
            return TML_EPROTO;
    if (take_i64(&c, &out->rss_pages) < 0)
        return TML_EPROTO;
    return 0;
}

int tml__proc_parse_statm(const char *buf, size_t len, int64_t *rss_pages)
{
    cur c = { buf, buf + len };
    uint64_t size, res;
    if (take_u64(&c, &size) < 0 || take_u64(&c, &res) < 0 || res > (uint64_t)INT64_MAX)
        return TML_EPROTO;
    *rss_pages = (int64_t)res;
    return 0;
}

int tml__proc_parse_schedstat(const char *buf, size_t len, uint64_t *run_ns, uint64_t *wait_ns)
{
    cur c = { buf, buf + len };
    uint64_t run, wait;
    if (take_u64(&c, &run) < 0 || take_u64(&c, &wait) < 0)
        return TML_EPROTO;
    *run_ns = run;
    *wait_ns = wait;
    return 0;
}

double tml__cpu_busy_percent(const tml_cpu_times *a, const tml_cpu_times *b)
{
    if (b->total <= a->total || b->busy < a->busy)
        return NAN;
    double busy = (double)(b->busy - a->busy), total = (double)(b->total - a->total);
    double pct = 100.0 * busy / total;
    return pct > 100.0 ? 100.0 : pct;
}

int tml__proc_read(const char *path, char *buf, size_t cap, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;

    *len = 0;
    if (fd < 0)
        return TML_EIO;
    while (n < cap) {
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return TML_EIO;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    *len = n;
    return 0;
}

size_t tml__proc_parse_children(const char *buf, size_t len, int32_t *out, size_t cap)
{
    cur c = { buf, buf + len };
    size_t n = 0;
    for (;;) {
        uint64_t v;
        while (c.p < c.end && (*c.p == ' ' || *c.p == '\n' || *c.p == '\t'))
            c.p++;
        if (c.p >= c.end || take_u64(&c, &v) < 0)
            break;
        if (v == 0 || v > INT32_MAX)
            continue;
        if (n < cap)
            out[n] = (int32_t)v;
        n++;
    }
    return n;
}

/* utime + stime + cutime + cstime of one process; 0 or TML_EIO. */
static int pid_ticks(int32_t pid, uint64_t *ticks, int32_t *ppid)
{
    char path[64], buf[1024];
    size_t n;
    tml_pid_stat ps;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (tml__proc_read(path, buf, sizeof(buf), &n) < 0 ||
        tml__proc_parse_pid_stat(buf, n, &ps) < 0)
        return TML_EIO;
    *ticks = ps.utime_ticks + ps.stime_ticks + ps.cutime_ticks + ps.cstime_ticks;
    if (ppid)
        *ppid = ps.ppid;
    return 0;
}

static int is_pid_name(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int tml__proc_tree_ticks(int32_t pid, uint64_t *ticks, size_t *nprocs)
{
    int32_t q[TML_PROC_TREE_MAX];
    size_t nq = 0, at = 0;
    uint64_t total = 0;

    *ticks = 0;
    *nprocs = 0;
    if (pid_ticks(pid, &total, NULL) < 0)
        return TML_EIO;
    q[nq++] = pid;
    while (at < nq) {
        int32_t p = q[at++];
        char path[64];
        if (p != pid) {
            uint64_t t;
            if (pid_ticks(p, &t, NULL) < 0)
                continue;       /* ended since its parent listed it */
            total += t;
        }
        snprintf(path, sizeof(path), "/proc/%d/task", (int)p);
        DIR *d = opendir(path);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && nq < TML_PROC_TREE_MAX) {
            char cpath[96], buf[1024];
            size_t n;
            if (!is_pid_name(e->d_name))
                continue;
            snprintf(cpath, sizeof(cpath), "/proc/%d/task/%.16s/children", (int)p, e->d_name);
            if (tml__proc_read(cpath, buf, sizeof(buf), &n) < 0 || n == 0)
                continue;
            size_t k = tml__proc_parse_children(buf, n, q + nq, TML_PROC_TREE_MAX - nq);
            nq += k < TML_PROC_TREE_MAX - nq ? k : TML_PROC_TREE_MAX - nq;
        }
        closedir(d);
    }
    *ticks = total;
    *nprocs = nq;
    return 0;
}

int tml__proc_tree_ticks_scan(int32_t pid, uint64_t *ticks, size_t *nprocs)
{
    static int32_t pids[32768], parents[32768];
    static uint64_t t[32768];
    size_t n = 0;
    DIR *d = opendir("/proc");
    *ticks = 0;
    *nprocs = 0;
    if (!d)
        return TML_EIO;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 32768) {
        if (!is_pid_name(e->d_name))
            continue;
        int32_t p = (int32_t)strtol(e->d_name, NULL, 10);
        if (pid_ticks(p, &t[n], &parents[n]) == 0)
            pids[n++] = p;
    }
    closedir(d);
    /* mark the tree: repeat until no process joins (parents may be listed
     * after their children) */
    static unsigned char in[32768];
    memset(in, 0, n);
    int found = 0, grew = 1;
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            in[i] = 1, found = 1;
    if (!found)
        return TML_EIO;
    while (grew) {
        grew = 0;
        for (size_t i = 0; i < n; i++) {
            if (in[i])
                continue;
            for (size_t j = 0; j < n; j++)
                if (in[j] && pids[j] == parents[i]) {
                    in[i] = 1;
                    grew = 1;
                    break;
                }
        }
    }
    for (size_t i = 0; i < n; i++)
        if (in[i]) {
            *ticks += t[i];
            (*nprocs)++;
        }
    return 0;
}

int tml__proc_descends_from(int32_t pid, int32_t root)
{
    for (int hop = 0; hop < TML_PROC_ANCESTRY_MAX && pid > 1; hop++) {
        uint64_t ticks;
        int32_t ppid;
        if (pid == root)
            return 1;
        if (pid_ticks(pid, &ticks, &ppid) < 0)
            return 0;           /* ended, or not in our pid namespace */
        pid = ppid;
    }
    return pid == root;
}
