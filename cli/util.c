/*
 * util.c - what every subcommand needs: error lines, strict option and
 * number parsing, file reading, PATH lookup, and setting up a run folder.
 *
 * Argument parsing is deliberately strict (whole-string strtol/strtod with
 * range checks, no silent defaults for bad values): a typo in a flag must
 * stop the launch with one clear line before anything is created, not
 * start a run the user did not ask for.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"
#include "base/json.h"
#include "base/utf8.h"
#include "live/http.h"
#include "report/report.h"
#include "agg/rundir.h"
#include "traceml/traceml.h"

static const char *origin;

void tml__cli_origin(const char *where)
{
    origin = where;
}

__attribute__((format(printf, 2, 0)))
static void vline(const char *kind, const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, "traceml: %s: ", kind);
    if (origin && strcmp(kind, "error") == 0)
        fprintf(stderr, "%s: ", origin);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int tml__cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("error", fmt, ap);
    va_end(ap);
    return TML_EXIT_USAGE;
}

void tml__cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("warning", fmt, ap);
    va_end(ap);
}

void tml__cli_warn_exposed(const char *bind, const char *from)
{
    if (!bind || !*bind || strcmp(bind, "::1") == 0 || tml__http_host_is_loopback(bind))
        return;
    tml__cli_warn("the dashboard listens on %s%s, set by %s: whoever can reach this machine "
                  "can read the run's live data and summary (no password); the default, "
                  "127.0.0.1, keeps it to this machine (reach it with ssh -L)", bind,
                  strcmp(bind, "0.0.0.0") == 0 || strcmp(bind, "::") == 0 ? " (every interface)"
                                                                        : "",
                  from);
}

int tml__cli_legacy_opt(int argc, char **argv, int *i, const tml_cli_legacy *table, size_t n)
{
    const char *v;
    for (size_t k = 0; k < n; k++) {
        if (tml__cli_opt(argc, argv, i, table[k].name, table[k].value ? &v : NULL)) {
            fprintf(stderr, "traceml: note: %s has no meaning here (%s); ignored\n",
                    table[k].name, table[k].why);
            return 1;
        }
    }
    return 0;
}

_Noreturn void tml__cli_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline("error", fmt, ap);
    va_end(ap);
    exit(code);
}

int tml__cli_opt(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (!value) {
        if (a[n] == '\0')
            return 1;
        if (a[n] == '=')
            tml__cli_die(TML_EXIT_USAGE, "option %s takes no value", name);
        return 0;
    }
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        tml__cli_die(TML_EXIT_USAGE, "option %s needs a value", name);
    *value = argv[++*i];
    return 1;
}

int tml__cli_help(const char *a, const char *usage)
{
    if (strcmp(a, "-h") != 0 && strcmp(a, "--help") != 0)
        return 0;
    fputs(usage, stdout);
    return 1;
}

int tml__cli_unknown(const char *cmd, const char *a)
{
    char hint[96];
    tml__cli_suggest_option(cmd, a, hint, sizeof(hint));
    return tml__cli_error("unknown option '%s' for 'traceml %s'%s (see 'traceml help %s')", a,
                          cmd, hint, cmd);
}

int tml__cli_operand(const char *cmd, const char *what, const char *a, const char **slot)
{
    if (a[0] == '-' && a[1] != '\0')
        return tml__cli_unknown(cmd, a);
    if (*slot)
        return tml__cli_error("%s takes one %s, got '%s' and '%s'", cmd, what, *slot, a);
    *slot = a;
    return 0;
}

long tml__cli_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max)
        tml__cli_die(TML_EXIT_USAGE, "%s expects an integer from %ld to %ld, got '%s'", opt,
                     min, max, s);
    return v;
}

double tml__cli_double(const char *opt, const char *s, double min, double max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= min && v <= max))
        tml__cli_die(TML_EXIT_USAGE, "%s expects a number from %g to %g, got '%s'", opt, min,
                     max, s);
    return v;
}


static int is_exec_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int tml__cli_which(const char *name, char *out, size_t cap)
{
    if (!name || !*name)
        return -1;
    if (strchr(name, '/')) {
        if (!is_exec_file(name))
            return -1;
        int n = snprintf(out, cap, "%s", name);
        return n > 0 && (size_t)n < cap ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        int k = snprintf(out, cap, "%.*s/%s", (int)n, n ? path : ".", name);
        if (k > 0 && (size_t)k < cap && is_exec_file(out))
            return 0;
        path += n + (colon ? 1 : 0);
    }
    return -1;
}

int tml__cli_exe_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return -1;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

int tml__cli_term_width(void)
{
    return tml__report_term_width(STDOUT_FILENO, tml__env_count("COLUMNS", 0));
}

void tml__cli_agg_env(const char **thresholds, int *window_steps, int *memory_mb)
{
    char bad[160];
    *thresholds = tml__env_str(TML_ENV_THRESHOLDS);
    bad[0] = '\0';
    if (!*window_steps)   /* not given as an option */
        *window_steps = (int)tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad));
    if (bad[0])
        tml__cli_warn("%s", bad);
    *memory_mb = (int)tml__env_int(TML_ENV_MEMORY_MB, bad, sizeof(bad));
    if (bad[0])
        tml__cli_warn("%s", bad);
}

/* The nearest existing folder at or above path must be writable. */
static int writable_dir(const char *path, char *why, size_t cap)
{
    char buf[4096];
    int n = snprintf(buf, sizeof(buf), "%s", path);
    if (n <= 0 || (size_t)n >= sizeof(buf)) {
        snprintf(why, cap, "path too long");
        return 0;
    }
    for (;;) {
        struct stat st;
        if (stat(buf, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) {
                snprintf(why, cap, "'%s' is not a directory", buf);
                return 0;
            }
            if (access(buf, W_OK | X_OK) != 0) {
                snprintf(why, cap, "'%s' is not writable", buf);
                return 0;
            }
            return 1;
        }
        if (errno != ENOENT) {
            snprintf(why, cap, "'%s': %s", buf, strerror(errno));
            return 0;
        }
        char *slash = strrchr(buf, '/');
        while (slash && slash > buf && slash[1] == '\0') {   /* trailing slashes */
            *slash = '\0';
            slash = strrchr(buf, '/');
        }
        if (!slash) {
            snprintf(buf, sizeof(buf), ".");
        } else if (slash == buf) {
            buf[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
}

int tml__cli_run_check(const char *logs_dir, const char *name)
{
    char why[4200];
    if (!logs_dir || !*logs_dir)
        return tml__cli_error("--logs-dir must not be empty");
    if (name && !tml__run_name_valid(name))
        return tml__cli_error("invalid run name '%s': use 1-100 of [A-Za-z0-9_.-]", name);
    if (!writable_dir(logs_dir, why, sizeof(why)))
        return tml__cli_error("logs directory '%s' is not usable: %s", logs_dir, why);
    if (name) {
        char p[4096];
        struct stat st;
        int n = snprintf(p, sizeof(p), "%s/%s", logs_dir, name);
        if (n <= 0 || (size_t)n >= sizeof(p))
            return tml__cli_error("run folder path too long");
        if (lstat(p, &st) == 0)
            return tml__cli_error("run folder '%s' already exists; choose another --run-name",
                                  p);
    }
    return 0;
}

int tml__cli_run_create(tml_cli_run *r, const char *logs_dir, const char *name,
                        const char *stem)
{
    memset(r, 0, sizeof(*r));
    snprintf(r->logs_dir, sizeof(r->logs_dir), "%s", logs_dir);
    r->start_unix_ms = tml__unix_ms();
    r->start_mono_ns = tml__mono_ns();
    int rc = TML_EEXIST;
    if (name) {
        snprintf(r->name, sizeof(r->name), "%s", name);
        rc = tml__rundir_create(logs_dir, r->name, r->dir, sizeof(r->dir));
    } else {
        char base[96];
        tml__run_name_generate(stem, base, sizeof(base));
        for (int k = 1; k < 1000 && rc == TML_EEXIST; k++) {
            if (k == 1)
                snprintf(r->name, sizeof(r->name), "%s", base);
            else
                snprintf(r->name, sizeof(r->name), "%s_%d", base, k);
            rc = tml__rundir_create(logs_dir, r->name, r->dir, sizeof(r->dir));
        }
    }
    if (rc == TML_EEXIST)
        return tml__cli_error("run folder '%s' already exists; choose another --run-name",
                              r->dir);
    if (rc < 0)
        return tml__cli_error("cannot create run folder '%s/%s': %s", logs_dir, r->name,
                              strerror(errno));
    if (!realpath(r->dir, r->abs_dir))
        snprintf(r->abs_dir, sizeof(r->abs_dir), "%s", r->dir);
    /* 16 and 24 random bytes: hex fits the wire's fields with their NUL */
    if (tml__random_hex(r->id, 16) < 0 || tml__random_hex(r->secret, 24) < 0) {
        rmdir(r->dir);
        return tml__cli_error("cannot read /dev/urandom for the run secret");
    }
    return 0;
}

void tml__cli_run_remove(const tml_cli_run *r)
{
    DIR *d = opendir(r->dir);
    if (d) {
        struct dirent *e;
        char path[4400];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", r->dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(r->dir);
}

const char *tml__cli_summary_path(const char *arg, char *buf, size_t cap)
{
    struct stat st;
    size_t n = strlen(arg);
    if (n == 0 || stat(arg, &st) < 0 || !S_ISDIR(st.st_mode))
        return arg;
    int w = snprintf(buf, cap, "%s%sfinal_summary.json", arg, arg[n - 1] == '/' ? "" : "/");
    return w > 0 && (size_t)w < cap ? buf : arg;
}

void tml__cli_print_summary(const char *text)
{
    if (!text)
        return;
    /* A summary may have been edited by hand: no control sequence of it
     * reaches the terminal (base/utf8.h). */
    char *safe = strdup(text);
    if (!safe)
        return;
    size_t n = tml__utf8_printable(safe, strlen(safe));
    fwrite(safe, 1, n, stdout);
    if (n && safe[n - 1] != '\n')
        fputc('\n', stdout);
    fflush(stdout);
    free(safe);
}

static const char *const launch_words[] = {
    [TML_LAUNCH_UNKNOWN] = "unknown", [TML_LAUNCH_ZERO_EDIT] = "zero-edit",
    [TML_LAUNCH_NO_AUTO_TRACE] = "no-auto-trace", [TML_LAUNCH_COMMAND] = "command",
};

const char *tml__launch_word(tml_launch how)
{
    return how >= TML_LAUNCH_UNKNOWN && how <= TML_LAUNCH_COMMAND ? launch_words[how] : "unknown";
}

tml_launch tml__launch_kind(const char *word)
{
    for (int k = TML_LAUNCH_ZERO_EDIT; k <= TML_LAUNCH_COMMAND; k++)
        if (strcmp(word, launch_words[k]) == 0)
            return (tml_launch)k;
    return TML_LAUNCH_UNKNOWN;
}

int tml__cli_read_json(const char *path, const char *what, tml_json **doc, char **buf_out,
                       size_t *len_out)
{
    char *buf;
    size_t len;
    tml_json_error err = {0, NULL};
    *doc = NULL;
    if (buf_out)
        *buf_out = NULL;
    if (tml__read_file(path, TML_CLI_JSON_MAX, &buf, &len) < 0)
        return tml__cli_error("cannot read '%s': %s", path, strerror(errno));
    int rc = tml__json_parse(buf, len, doc, &err);
    if (rc == 0 && buf_out) {
        *buf_out = buf;
        *len_out = len;
    } else {
        free(buf);
    }
    if (rc == 0)
        return 0;
    if (rc == TML_ENOMEM)
        return tml__cli_error("'%s': out of memory", path);
    if (len == 0)
        return tml__cli_error("'%s' is empty, not a TraceML %s", path, what);
    if (err.offset >= len && err.msg && strcmp(err.msg, "unexpected end of input") == 0)
        return tml__cli_error("'%s' is truncated (the JSON ends early at byte %zu)", path, len);
    return tml__cli_error("'%s' is not valid JSON: %s at byte %zu", path,
                          err.msg ? err.msg : "invalid", err.offset);
}

/* close_range(2) by its number: glibc's wrapper is 2.34's, and the wheel
 * runs on 2.28 (a kernel before 5.9 says ENOSYS: the loop). */
static void close_range_or_loop(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
    if (lo > hi || syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
#else
    if (lo > hi)
        return;
#endif
    long max = sysconf(_SC_OPEN_MAX);
    unsigned top = max > 0 && max < 65536 ? (unsigned)max - 1 : 65535;
    for (unsigned fd = lo; fd <= hi && fd <= top; fd++)
        close((int)fd);
}

void tml__cli_close_all_but(int *keep, int n)
{
    for (int i = 1; i < n; i++)   /* insertion sort */
        for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned lo = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < (int)lo)
            continue;
        if ((unsigned)keep[i] > lo)
            close_range_or_loop(lo, (unsigned)keep[i] - 1);
        lo = (unsigned)keep[i] + 1;
    }
    close_range_or_loop(lo, ~0u);
}
