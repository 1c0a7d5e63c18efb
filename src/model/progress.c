/*
 * progress.c - the progress files (progress.h): one page per training
 * process, shared with the file, so that what the markers stored is on
 * the file whatever way the process ends.
 */
#include "model/progress.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DIR_NAME "progress"

/* "<host>.": this host's files. Several nodes may share a run folder (a
 * shared file system); each reads and removes only its own. */
static void host_prefix(char *out, size_t cap)
{
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    snprintf(out, cap, "%s.", host);
}

static int is_ours(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

tml_progress *tml__progress_create(const char *run_dir)
{
    char path[4200], name[128];
    if (!run_dir || !*run_dir)
        return NULL;
    snprintf(path, sizeof(path), "%s/" DIR_NAME, run_dir);
    mkdir(path, 0755);   /* EEXIST: another rank made it */
    /* the folder and the file opened without following a link planted at
     * either name: the page is written into the run folder or nowhere */
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return NULL;
    char prefix[80];
    host_prefix(prefix, sizeof(prefix));
    snprintf(name, sizeof(name), "%s%d", prefix, (int)getpid());
    int fd = openat(dfd, name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        close(dfd);
        return NULL;
    }
    /* the page's blocks allocated now: a store into a mapped page a full
     * disk cannot back would be SIGBUS in the training */
    void *m = MAP_FAILED;
    if (posix_fallocate(fd, 0, (off_t)sizeof(tml_progress)) == 0)
        m = mmap(NULL, sizeof(tml_progress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        unlinkat(dfd, name, 0);
    close(dfd);
    if (m == MAP_FAILED)
        return NULL;
    tml_progress *p = m;
    p->pid = (int32_t)getpid();
    atomic_store(&p->steps, 0);
    atomic_store(&p->last_end_ns, 0);
    p->exit_signal = 0;
    p->magic = TML_PROGRESS_MAGIC;
    return p;
}

void tml__progress_release(tml_progress *p)
{
    if (p)
        munmap(p, sizeof(*p));
}

/* The page tml__progress_watch_exit's handler writes to. */
static tml_progress *volatile watched;

static void on_fatal_at_exit(int sig)
{
    tml_progress *p = watched;
    if (p && p->pid == (int32_t)getpid())   /* not a child forked after the shutdown */
        p->exit_signal = sig;
    raise(sig);   /* SA_RESETHAND | SA_NODEFER: the default action, now */
}

void tml__progress_watch_exit(tml_progress *p)
{
    static const int fatal[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    if (!p)
        return;
    watched = p;
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
        struct sigaction old, sa;
        if (sigaction(fatal[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_fatal_at_exit;
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal[i], &sa, NULL);
    }
}

/* One file's numbers; 0 when it is not a progress file. */
static int read_one(const char *path, tml_progress *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, out, sizeof(*out));
    close(fd);
    return n == (ssize_t)sizeof(*out) && out->magic == TML_PROGRESS_MAGIC;
}

/* Calls fn(path, arg) for each of this host's files in the run's folder. */
static void each_ours(const char *run_dir, void (*fn)(const char *path, void *arg), void *arg)
{
    char path[4200], prefix[80];
    host_prefix(prefix, sizeof(prefix));
    snprintf(path, sizeof(path), "%s/" DIR_NAME, run_dir);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (is_ours(e->d_name, prefix)) {
            snprintf(path, sizeof(path), "%s/" DIR_NAME "/%s", run_dir, e->d_name);
            fn(path, arg);
        }
    closedir(d);
}

static void add_one(const char *path, void *arg)
{
    tml_progress_sum *out = arg;
    tml_progress p;
    if (!read_one(path, &p))
        return;
    out->processes++;
    if (p.exit_signal > 0) {
        if (out->nexits < TML_PROGRESS_EXITS) {
            out->exits[out->nexits].pid = p.pid;
            out->exits[out->nexits].signal = p.exit_signal;
        }
        out->nexits++;
    }
    uint64_t steps = atomic_load(&p.steps);
    if (steps > out->steps) {
        out->steps = steps;
        out->last_end_ns = atomic_load(&p.last_end_ns);
    }
}

void tml__progress_read(const char *run_dir, tml_progress_sum *out)
{
    memset(out, 0, sizeof(*out));
    each_ours(run_dir, add_one, out);
}

static void remove_one(const char *path, void *arg)
{
    (void)arg;
    unlink(path);
}

void tml__progress_remove(const char *run_dir)
{
    char path[4200];
    each_ours(run_dir, remove_one, NULL);
    snprintf(path, sizeof(path), "%s/" DIR_NAME, run_dir);
    rmdir(path);   /* fails while another host's files are there */
}
