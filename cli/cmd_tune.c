/*
 * cmd_tune.c - `traceml tune SCRIPT [args]`: runs the unmodified script in
 * short trials, each a `traceml run` with one performance setting applied
 * by the start-up code (TRACEML_TUNE_SETTINGS, docs/tune.md), and reports
 * what each setting really gains (judge/tune.h does the reckoning,
 * report/tune.h prints it).
 *
 * A trial is stopped once it has run its warm-up and measured steps: this
 * process reads the trial's progress files (model/progress.h) and sends its
 * `traceml run` a SIGINT, which that forwards to the training. Its steps
 * are then read back from the trial's telemetry.sqlite: one number per
 * process, the mean time from one step's start to the next over the
 * measured steps of the lowest rank. Baseline and setting processes
 * alternate, so that drift on the machine falls on both.
 *
 * Everything a trial writes goes under the tune folder (logs/tune_<script>_
 * <time>/trials/), W&B runs are disabled and MLflow's go to the folder's
 * scratch/; what the script itself writes to paths of its own it writes
 * in every trial (the README says so).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/json.h"
#include "judge/tune.h"
#include "model/progress.h"
#include "model/run.h"
#include "report/html.h"
#include "report/tune.h"
#include "run/run.h"
#include "store/store.h"
#include "base/env.h"

const char tml__usage_tune[] =
    "usage: traceml tune [options] SCRIPT [script args...]\n"
    "\n"
    "Runs the script (unmodified) in short trials, each with one performance\n"
    "setting changed at start-up (DataLoader workers, pin_memory,\n"
    "persistent_workers, prefetch_factor, intra-op threads, DDP buckets and\n"
    "comm hooks, cudnn.benchmark; never batch size or learning rate), chosen\n"
    "from the baseline's diagnosis, and prints what each one gains with a 95%\n"
    "interval. Writes logs/tune_<script>_<time>/ (tune.json, tune.txt,\n"
    "tune.html, the trials' run folders). `traceml run --apply\n"
    "<that folder>/tune.json SCRIPT` runs with the recommended settings.\n"
    "\n"
    "Options:\n"
    "  --budget TIME       time for all trials, e.g. 300, 90s, 5m [5m]\n"
    "  --repeats N         processes per setting and per baseline round, 2-16 [3]\n"
    "  --warmup N          steps of a trial left out as warm-up [10]\n"
    "  --steps N           steps of a trial measured [50]\n"
    "  --only GROUPS       try only these: loader, threads, ddp, cudnn (comma-\n"
    "                      separated) [what the diagnosis points at, then the rest]\n"
    "and `traceml run`'s (--nproc-per-node, --python, --logs-dir, ...).\n";

typedef struct tune_ctx {
    tml_run_ctx run;            /* the options of `traceml run`, checked */
    char **runargv;             /* "tune", the user's run options, SCRIPT, args */
    int nopts;                  /* of which options: runargv[1..nopts] */
    int nrunargv;
    int repeats, warmup, steps;
    int repeats_set;            /* --repeats given: not lowered to fit the budget */
    double budget_s;
    const char *only;           /* --only: groups of directions, NULL all */
    tml_cli_run dir;            /* the tune folder */
    char trials[4200], scratch[4200];
    int64_t start_ns;
    double trial_s;             /* a trial's mean duration (since trials were fitted) */
    int ntimed;                 /* trials in that mean */
    const char *doing;          /* for the progress line: "round 2/3" */
    int spare_base;             /* the baseline's first trial not yet in a round */
    char command[1024];
    char base_dir[4400];        /* the first baseline trial's run folder */
    tml_tune_result res;
} tune_ctx;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static double since_s(int64_t t0)
{
    return (double)(tml__mono_ns() - t0) / 1e9;
}

static double parse_budget(const char *v)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || x <= 0)
        tml__cli_die(TML_EXIT_USAGE, "--budget must be a time such as 300, 90s or 5m, got '%s'", v);
    if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        x *= 60;
    else if (strcmp(end, "h") == 0)
        x *= 3600;
    else if (*end && strcmp(end, "s") != 0)
        tml__cli_die(TML_EXIT_USAGE, "--budget must be a time such as 300, 90s or 5m, got '%s'", v);
    return x;
}

/* --only's groups and the directions (report/tune.c's names) in each */
static const struct {
    const char *group, *dir;
} groups[] = {
    {"loader", "DataLoader workers"}, {"loader", "no DataLoader workers"},
    {"loader", "DataLoader settings"}, {"threads", "intra-op threads"},
    {"ddp", "DDP communication"}, {"cudnn", "cuDNN autotuner"},
};
#define NGROUPS (sizeof(groups) / sizeof(groups[0]))

static int in_list(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, word, n) == 0)
            return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

static void check_only(const char *list)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        int known = 0;
        for (size_t k = 0; k < NGROUPS && !known; k++)
            known = strlen(groups[k].group) == len && strncmp(groups[k].group, p, len) == 0;
        if (!known)
            tml__cli_die(TML_EXIT_USAGE, "--only takes loader, threads, ddp or cudnn, got "
                         "'%.*s'", (int)len, p);
        p += len + (p[len] == ',');
    }
}

static int wanted(const tune_ctx *t, const char *dir)
{
    for (size_t k = 0; k < NGROUPS; k++)
        if (strcmp(groups[k].dir, dir) == 0)
            return !t->only || in_list(t->only, groups[k].group);
    return !t->only;
}

/* tune's own options; `traceml run`'s are kept for the trials in order */
static void parse(tune_ctx *t, int argc, char **argv)
{
    t->repeats = 3;
    t->warmup = 10;
    t->steps = 50;
    t->budget_s = 300;
    t->runargv = calloc((size_t)argc + 1, sizeof(char *));
    if (!t->runargv)
        tml__cli_die(1, "out of memory");
    t->runargv[t->nrunargv++] = "tune";
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(tml__usage_tune, stdout);
            exit(0);
        }
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == '\0')
            break;
        if (tml__cli_opt(argc, argv, &i, "--budget", &v))
            t->budget_s = parse_budget(v);
        else if (tml__cli_opt(argc, argv, &i, "--repeats", &v))
        {
            t->repeats = (int)tml__cli_long("--repeats", v, 2, 16);
            t->repeats_set = 1;
        }
        else if (tml__cli_opt(argc, argv, &i, "--warmup", &v))
            t->warmup = (int)tml__cli_long("--warmup", v, 0, 100000);
        else if (tml__cli_opt(argc, argv, &i, "--only", &t->only))
            check_only(t->only);
        else if (tml__cli_opt(argc, argv, &i, "--steps", &v))
            t->steps = (int)tml__cli_long("--steps", v, 5, 1000000);
        else {   /* traceml run's: with its value unless it is a flag */
            t->runargv[t->nrunargv++] = argv[i];
            if (!strchr(a, '=') && !tml__launch_is_flag(a) && i + 1 < argc)
                t->runargv[t->nrunargv++] = argv[++i];
        }
    }
    t->nopts = t->nrunargv - 1;
    if (i < argc && strcmp(argv[i], "--") == 0)
        tml__cli_die(TML_EXIT_USAGE, "traceml tune runs a Python SCRIPT (its settings are "
                     "applied in Python), not -- COMMAND");
    for (; i < argc; i++)
        t->runargv[t->nrunargv++] = argv[i];
}

/* `traceml run`'s checks on the same options; tune's own refusals */
static int validate(tune_ctx *t)
{
    tml_run_ctx *c = &t->run;
    c->cmd_name = "tune";
    c->live_port_wanted = c->live_port_got = -1;
    tml__launch_parse(c, t->nrunargv, t->runargv);
    const tml_run_opts *o = &c->o;
    if (o->apply)
        return tml__cli_error("--apply is for traceml run; tune applies its own settings");
    if (o->disabled || o->no_auto_trace)
        return tml__cli_error("traceml tune needs TraceML in the script's process: not with %s",
                              o->disabled ? "--disable-traceml" : "--no-auto-trace");
    if (o->nnodes > 1)
        return tml__cli_error("traceml tune runs on one node (--nnodes 1)");
    if (tml__launch_validate(c))
        return TML_EXIT_USAGE;
    size_t len = 0;
    for (int k = 0; k < o->ncmd && len < sizeof(t->command) - 1; k++)
        len += (size_t)snprintf(t->command + len, sizeof(t->command) - len, "%s%s",
                                k ? " " : "", o->cmd[k]);
    return 0;
}

static void child_env(const tune_ctx *t, const char *name, const char *settings)
{
    char v[4400];
    snprintf(v, sizeof(v), "%s/%s.fetch", t->trials, name);   /* the fetch's CPU share */
    setenv(tml__env_name(TML_ENV_TUNE_FETCH), v, 1);
    setenv(tml__env_name(TML_ENV_TUNE_TRIAL), "1", 1);   /* its SIGINT is tune's stop (meta.stopped_by) */
    if (*settings)
        setenv(tml__env_name(TML_ENV_TUNE_SETTINGS), settings, 1);
    else
        unsetenv(tml__env_name(TML_ENV_TUNE_SETTINGS));
    const char *th = strstr(settings, "threads=");
    if (th && (th == settings || th[-1] == ',')) {   /* the pools made before the script runs too */
        snprintf(v, sizeof(v), "%.*s", (int)strcspn(th + 8, ","), th + 8);
        setenv("OMP_NUM_THREADS", v, 1);
    }
    setenv("WANDB_MODE", "disabled", 1);
    setenv("WANDB_DIR", t->scratch, 1);
    snprintf(v, sizeof(v), "file:%s/mlruns", t->scratch);
    setenv("MLFLOW_TRACKING_URI", v, 1);
}

/* Starts `traceml run <options> --mode summary --logs-dir TRIALS --run-name
 * NAME --kill-after 1 SCRIPT args`, its output into TRIALS/NAME.log. */
static pid_t trial_start(const tune_ctx *t, const char *name, const char *settings)
{
    char log[4400];
    snprintf(log, sizeof(log), "%s/%s.log", t->trials, name);
    char **argv = calloc((size_t)t->nrunargv + 10, sizeof(char *));
    if (!argv)
        return -1;
    int n = 0;
    argv[n++] = "traceml";
    argv[n++] = "run";
    for (int k = 1; k <= t->nopts; k++)
        argv[n++] = t->runargv[k];
    /* a trial's training that lingers after tune's SIGINT is killed 1 s later */
    const char *ours[] = {"--mode", "summary",   "--logs-dir",   t->trials,
                          "--run-name", name, "--kill-after", "1"};
    for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++)
        argv[n++] = (char *)ours[k];
    for (int k = t->nopts + 1; k < t->nrunargv; k++)
        argv[n++] = t->runargv[k];
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (in >= 0)
            dup2(in, 0);
        signal(SIGINT, SIG_DFL);
        child_env(t, name, settings);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    free(argv);
    return pid;
}

/* Waits for the trial, stopping it (SIGINT, then SIGKILL 20 s later) once
 * it ran its steps, ran past its time, or tune is interrupted. */
static int trial_wait(const tune_ctx *t, pid_t pid, const char *run_dir)
{
    uint64_t need = (uint64_t)(t->warmup + t->steps + 1);
    double limit = t->trial_s > 0 ? fmax(60, 5 * t->trial_s) : fmax(600, t->budget_s);
    int64_t t0 = tml__mono_ns(), sent_ns = 0;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            return status;
        if (!sent_ns) {
            tml_progress_sum ps;
            tml__progress_read(run_dir, &ps);
            if (ps.steps >= need || since_s(t0) > limit || interrupted) {
                kill(pid, SIGINT);
                sent_ns = tml__mono_ns();
            }
        } else if (since_s(sent_ns) > 20) {
            kill(pid, SIGKILL);
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The mean step start-to-start time (ms) over the measured steps of the
 * lowest rank with steps; the warm-up shrinks for a script that ended
 * early. 0, or -1 with why. */
static int steady_ms(const tml_run *run, const tune_ctx *t, double *ms, char *why, size_t cap)
{
    const tml_rank *r = NULL;
    for (size_t k = 0; k < run->nranks && !r; k++)
        if (run->ranks[k].nsteps > 0)
            r = &run->ranks[k];
    if (!r) {
        snprintf(why, cap, "no step was traced");
        return -1;
    }
    size_t n = r->nsteps, first = (size_t)t->warmup, last = first + (size_t)t->steps;
    if (n < first + 6)
        first = n / 3;   /* a short script: its first third as warm-up */
    if (last >= n)
        last = n - 1;
    if (last < first + 5) {
        snprintf(why, cap, "only %zu steps ran", n);
        return -1;
    }
    *ms = (double)(r->steps[last].start_ns - r->steps[first].start_ns) / 1e6 /
          (double)(last - first);
    return 0;
}

static const tml_json *path(const tml_json *doc, const char *p)
{
    return tml__json_path(doc, p);
}

#define TUNE_FETCH_MIN_NS 1e6

/* The fetch's CPU share in trial NAME: the sums its processes wrote
 * (TRACEML_TUNE_FETCH, python/_traceml.c) to TRIALS/NAME.fetch.<pid>;
 * NAN without any. */
static double fetch_share(const tune_ctx *t, const char *name)
{
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s.fetch.", name);
    DIR *d = opendir(t->trials);
    double cpu = 0, wall = 0, count = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char file[4500];
        snprintf(file, sizeof(file), "%s/%s", t->trials, e->d_name);
        FILE *f = fopen(file, "r");
        long long c, w, n;
        if (f && fscanf(f, "%lld %lld %lld", &c, &w, &n) == 3 && c >= 0 && w > 0) {
            cpu += (double)c;
            wall += (double)w;
            count += (double)n;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    /* a fetch under TUNE_FETCH_MIN_NS is too short to plan workers by
     * (and its share, mostly the call's own cost, means little) */
    if (!(wall > 0) || !(count > 0) || wall / count < TUNE_FETCH_MIN_NS)
        return NAN;
    return fmin(1.0, cpu / wall);
}

/* What the baseline's first trial said, for the plan. */
static void learn_base(tune_ctx *t, const tml_run *run, const char *run_dir)
{
    tml_tune_base *b = &t->res.base;
    b->workers = -1;
    b->fetch_cpu_share = fetch_share(t, strrchr(run_dir, '/') + 1);
    b->ranks_here = (int)t->run.o.nproc;
    b->comm_bytes_per_step = b->comm_share = NAN;
    if (run->nranks) {
        const tml_rank_info *i = &run->ranks[0].info;
        b->cores = i->cpu_count;
        if (i->loader_known) {
            b->workers = i->loader_workers;
            b->pin_memory = i->loader_pin_memory;
        }
    }
    b->ddp = run->nranks > 1;
    char file[4500];
    snprintf(file, sizeof(file), "%s/final_summary.json", run_dir);
    tml_json *doc = NULL;
    if (tml__cli_read_json(file, "summary", &doc, NULL, NULL))
        return;
    const char *kind = tml__json_str(path(doc, "primary_diagnosis.kind"));
    const char *label = tml__json_str(path(doc, "primary_diagnosis.label"));
    const char *sev = tml__json_str(path(doc, "primary_diagnosis.severity"));
    snprintf(b->verdict, sizeof(b->verdict), "%s", kind ? kind : "");
    snprintf(b->label, sizeof(b->label), "%s%s%s%s", label ? label : "", sev ? " (" : "",
             sev ? sev : "", sev ? ")" : "");
    const tml_json *issues = path(doc, "system.issues");
    for (size_t k = 0; issues && k < issues->n; k++) {
        const char *ik = tml__json_str(tml__json_get(tml__json_at(issues, k), "kind"));
        b->host_cpu_high |= ik && strcmp(ik, "HIGH_CPU") == 0;
    }
    const char *clock = tml__json_str(path(doc, "meta.clock"));
    b->gpu = clock && strcmp(clock, "gpu") == 0;
    double bytes, comm, step;
    if (tml__json_num(path(doc, "step_time.median.communication_bytes_per_step"), &bytes))
        b->comm_bytes_per_step = bytes;
    if (tml__json_num(path(doc, "step_time.median.communication_ms"), &comm) &&
        tml__json_num(path(doc, "step_time.median.step_time_ms"), &step) && step > 0)
        b->comm_share = comm / step;
    tml__json_free(doc);
}

/* One trial: started, stopped after its steps, measured. 0 and *ms, or -1
 * with why. */
static int trial(tune_ctx *t, const char *settings, double *ms, char *why, size_t cap,
                 int learn)
{
    char name[32], run_dir[4400];
    snprintf(name, sizeof(name), "t%03d", ++t->res.trials);
    snprintf(run_dir, sizeof(run_dir), "%s/%s", t->trials, name);
    int64_t t0 = tml__mono_ns();
    fprintf(stderr, "traceml tune: %s %s%s%s, %.0f s of %.0f s\n", name,
            *settings ? settings : "baseline", t->doing ? ", " : "", t->doing ? t->doing : "",
            since_s(t->start_ns), t->budget_s);
    pid_t pid = trial_start(t, name, settings);
    if (pid < 0) {
        snprintf(why, cap, "could not start: %s", strerror(errno));
        return -1;
    }
    int status = trial_wait(t, pid, run_dir);
    double took = since_s(t0);
    t->trial_s = (t->trial_s * t->ntimed + took) / (t->ntimed + 1);
    t->ntimed++;
    char db[4500];
    snprintf(db, sizeof(db), "%s/telemetry.sqlite", run_dir);
    tml_store *s = NULL;
    tml_run run;
    tml__run_init(&run, name, NULL);
    run.keep_all = 1;
    int rc = -1;
    if (tml__store_open(db, 0, &s) < 0 || tml__store_load(s, &run) < 0)
        snprintf(why, cap, "no telemetry (%s; see trials/%s.log)",
                 WIFEXITED(status) ? "it exited" : "it was killed", name);
    else if ((rc = steady_ms(&run, t, ms, why, cap)) < 0)
        snprintf(why + strlen(why), cap - strlen(why), "; see trials/%s.log", name);
    if (rc == 0 && learn) {
        learn_base(t, &run, run_dir);
        snprintf(t->base_dir, sizeof(t->base_dir), "%s", run_dir);
    }
    if (s)
        tml__store_close(s);
    tml__run_release(&run);
    return rc;
}

static tml_tune_arm *arm_new(tune_ctx *t, const char *settings, const char *direction)
{
    if (t->res.narms >= TML_TUNE_ARMS)
        return NULL;
    tml_tune_arm *a = &t->res.arms[t->res.narms++];
    memset(a, 0, sizeof(*a));
    snprintf(a->settings, sizeof(a->settings), "%s", settings);
    snprintf(a->direction, sizeof(a->direction), "%.39s", direction);
    a->over = -1;
    return a;
}

static void arm_add(tml_tune_arm *a, double ms)
{
    if (a->n < TML_TUNE_RUNS)
        a->step_ms[a->n++] = ms;
}

static void compare(tune_ctx *t, tml_tune_arm *a)
{
    const tml_tune_arm *b = &t->res.arms[0];
    tml__tune_compare(b->step_ms, b->n, a->step_ms, a->n, &a->cmp);
    if (a->over >= 0) {
        const tml_tune_arm *u = &t->res.arms[a->over];
        tml__tune_compare(u->step_ms, u->n, a->step_ms, a->n, &a->vs_over);
    }
}

/* One trial of the baseline or of arm a; a failure is kept in a->why. */
static void run_one(tune_ctx *t, tml_tune_arm *a)
{
    double ms;
    char why[200];
    if (trial(t, a->settings, &ms, why, sizeof(why), 0) == 0) {
        arm_add(a, ms);
    } else {
        a->failures++;
        snprintf(a->why, sizeof(a->why), "%s", why);
    }
}

/* One round: a baseline process and one of a, in the order the arm's
 * count gives (swapped each round), so that drift falls on both. */
static void round_of(tune_ctx *t, tml_tune_arm *a, int k, int of)
{
    tml_tune_arm *b = &t->res.arms[0];
    char doing[48];
    if (of > 0)
        snprintf(doing, sizeof(doing), "round %d/%d", k + 1, of);
    else
        snprintf(doing, sizeof(doing), "round %d (added: undecided)", k + 1);
    t->doing = doing;
    int swap = (a->n + (size_t)a->failures) % 2;
    if (t->spare_base) {   /* the baseline's first trial is this round's baseline */
        t->spare_base = 0;
        run_one(t, a);
    } else {
        run_one(t, swap ? a : b);
        if (!interrupted)
            run_one(t, swap ? b : a);
    }
    t->doing = NULL;
}

/* ROUNDS rounds of the setting and the baseline; a setting that fails
 * twice is given up. */
static void measure(tune_ctx *t, tml_tune_arm *a, int rounds)
{
    for (int k = 0; k < rounds && !interrupted && a->failures < 2; k++)
        round_of(t, a, k, rounds);
    compare(t, a);
}

static void progress_line(const tune_ctx *t, const tml_tune_arm *a)
{
    char ch[48] = "";
    if (!isnan(a->cmp.change))
        snprintf(ch, sizeof(ch), " %+.1f%% (%+.1f%% .. %+.1f%%)", a->cmp.change * 100,
                 a->cmp.lo * 100, a->cmp.hi * 100);
    const char *word = !a->n ? "failed" : a->cmp.verdict == TML_TUNE_GAIN ? "gain"
                       : a->cmp.verdict == TML_TUNE_LOSS ? "loss" : "inconclusive";
    fprintf(stderr, "traceml tune: %-32s %s%s [%.0f s of %.0f s]\n", a->settings, word, ch,
            since_s(t->start_ns), t->budget_s);
}

/* Measures a in --repeats rounds when they fit in what is left of the
 * budget, else in two (the fewest an interval needs), else marks it not
 * tried. */
static void measure_in_budget(tune_ctx *t, tml_tune_arm *a)
{
    /* the baseline's first trial, when not yet in a round, is one trial less */
    double left = t->budget_s - since_s(t->start_ns) + (t->spare_base ? t->trial_s : 0);
    int rounds = left >= 2.0 * t->repeats * t->trial_s ? t->repeats : 2;
    if (left < 2.0 * rounds * t->trial_s) {
        a->skipped = 1;
        snprintf(a->why, sizeof(a->why), "the budget");
        return;
    }
    measure(t, a, rounds);
    progress_line(t, a);
}

/* The directions of the plan in order; a ladder stops at the first step
 * that does not beat its best so far. best[d]: the arm of direction d that
 * gained most, -1 none. */
static void explore(tune_ctx *t, const tml_tune_dir *dirs, size_t nd, int *best)
{
    for (size_t d = 0; d < nd && !interrupted; d++) {
        const tml_tune_dir *dir = &dirs[d];
        const char *on = "";
        int under = -1;
        best[d] = -1;
        if (!wanted(t, dir->name))
            continue;
        if (dir->on_best_of >= 0) {
            under = best[dir->on_best_of];
            on = under >= 0 ? t->res.arms[under].settings : "";
            if (under < 0 && t->res.base.workers <= 0)
                continue;   /* these settings need workers, and more did not pay */
        }
        for (size_t s = 0; s < dir->n && !interrupted; s++) {
            char settings[TML_TUNE_SETTING];
            tml__tune_merge(on, dir->steps[s], settings, sizeof(settings));
            tml_tune_arm *a = arm_new(t, settings, dir->name);
            if (!a)
                return;
            a->over = under;
            measure_in_budget(t, a);
            if (a->skipped)
                continue;
            /* a ladder climbs while each step is faster than the one
             * before it (by its point estimate: the interval decides what
             * is recommended, not how far to look) */
            int idx = (int)(a - t->res.arms);
            double prev = s == 0 ? a->cmp.base_ms : a[-1].cmp.ms;
            if (a->cmp.verdict == TML_TUNE_GAIN &&
                (a->over < 0 || a->vs_over.verdict == TML_TUNE_GAIN) &&
                (best[d] < 0 || a->cmp.ms < t->res.arms[best[d]].cmp.ms))
                best[d] = idx;
            if (dir->ladder && (int)s + 1 >= dir->min_steps && !(a->n && a->cmp.ms < prev * 0.97))
                break;   /* this direction stopped paying */
        }
    }
}

/* Settings tune expects to try: the wanted directions' steps, a ladder's
 * first min_steps + 1 (it stops where more stop paying). */
static int planned(const tune_ctx *t, const tml_tune_dir *dirs, size_t nd)
{
    int n = 0;
    for (size_t d = 0; d < nd; d++) {
        int k = (int)dirs[d].n, most = (dirs[d].min_steps > 1 ? dirs[d].min_steps : 1) + 1;
        if (wanted(t, dirs[d].name))
            n += dirs[d].ladder && k > most ? most : k;
    }
    return n;
}

/* Trials that fit the budget: when the plan's settings, each in --repeats
 * rounds of two trials, would take more than 3/4 of what is left after
 * the baseline's trial, the trials are shrunk (warm-up and measured steps
 * in proportion, to at least TUNE_MIN_WARMUP + TUNE_MIN_STEPS) and, unless
 * --repeats was given, the first rounds lowered to two. A trial's time is
 * its start-up (the baseline trial's time less its steps) plus its steps. */
#define TUNE_MIN_WARMUP 3
#define TUNE_MIN_STEPS 15
static void fit_trials(tune_ctx *t, int settings, double took, double ms)
{
    tml_tune_result *r = &t->res;
    r->warmup_asked = t->warmup;
    r->steps_asked = t->steps;
    if (settings <= 0 || !(ms > 0))
        return;
    double step_s = ms / 1000.0, left = t->budget_s - since_s(t->start_ns);
    int ran = t->warmup + t->steps + 1;
    double start_s = fmax(0, took - ran * step_s);
    double per_trial = 0.75 * left / (2.0 * t->repeats * settings);
    if (start_s + ran * step_s > per_trial) {
        double f = (per_trial - start_s) / (ran * step_s);
        f = f > 0 ? f : 0;
        int w = (int)floor(t->warmup * f), n = (int)floor(t->steps * f);
        t->warmup = w > TUNE_MIN_WARMUP ? w : TUNE_MIN_WARMUP < t->warmup ? TUNE_MIN_WARMUP : t->warmup;
        t->steps = n > TUNE_MIN_STEPS ? n : TUNE_MIN_STEPS < t->steps ? TUNE_MIN_STEPS : t->steps;
    }
    double trial_s = start_s + (t->warmup + t->steps + 1) * step_s;
    if (!t->repeats_set && t->repeats > 2 && trial_s > per_trial)
        t->repeats = 2;
    t->trial_s = trial_s;   /* the estimate until shrunk trials have run */
    t->ntimed = 1;
    r->warmup = t->warmup;
    r->steps = t->steps;
    r->repeats = t->repeats;
    if (t->warmup != r->warmup_asked || t->steps != r->steps_asked)
        fprintf(stderr, "traceml tune: the baseline trial took %.0f s; trials shrunk to %d + %d "
                "steps (%.0f s each) so that %d settings fit in the budget\n", took, t->warmup,
                t->steps, trial_s, settings);
}

/* The rounds more an undecided arm needs by its spread (its own change,
 * or, for a setting on top of another that gained, the change against
 * that one); 0 when decided or not measured. */
static int undecided(const tml_tune_arm *a)
{
    if (a->skipped || a->n < 2 || a->failures >= 2)
        return 0;
    if (a->cmp.verdict == TML_TUNE_UNSURE)
        return a->cmp.more > 0 ? a->cmp.more : 0;
    if (a->over >= 0 && a->cmp.verdict == TML_TUNE_GAIN && a->vs_over.verdict == TML_TUNE_UNSURE)
        return a->vs_over.more > 0 ? a->vs_over.more : 0;
    return 0;
}

/* The budget used to decide: while time is left, one more round to the
 * undecided setting closest to a decision (fewest rounds more by its
 * spread; the larger gain first), until every one is decided. */
static void decide(tune_ctx *t)
{
    tml_tune_result *r = &t->res;
    while (!interrupted && r->arms[0].n + 1 < TML_TUNE_RUNS) {
        double left = t->budget_s - since_s(t->start_ns);
        if (left < 2.0 * t->trial_s)
            break;
        int pick = -1, need = 0;
        for (size_t i = 1; i < r->narms; i++) {
            int m = undecided(&r->arms[i]);
            if (m <= 0 || r->arms[i].n + 1 >= TML_TUNE_RUNS)
                continue;
            if (pick < 0 || m < need ||
                (m == need && r->arms[i].cmp.change < r->arms[pick].cmp.change)) {
                pick = (int)i;
                need = m;
            }
        }
        if (pick < 0)
            break;
        tml_tune_arm *a = &r->arms[pick];
        round_of(t, a, (int)a->n, 0);
        r->rounds_added++;
        for (size_t i = 1; i < r->narms; i++)   /* the baseline grew: every comparison */
            compare(t, &r->arms[i]);
        progress_line(t, a);
    }
}

/* The best of each direction that gained, together, measured again. */
static void combine(tune_ctx *t, const int *best, size_t nd)
{
    char all[TML_TUNE_SETTING] = "", tmp[TML_TUNE_SETTING];
    int gained = 0;
    for (size_t d = 0; d < nd; d++) {
        if (best[d] < 0)
            continue;
        tml__tune_merge(all, t->res.arms[best[d]].settings, tmp, sizeof(tmp));
        if (strcmp(tmp, all) != 0)
            gained++;
        snprintf(all, sizeof(all), "%s", tmp);
    }
    t->res.combo = -1;
    if (strstr(all, "num_workers=0,") && (strstr(all, "persistent_workers") ||
                                          strstr(all, "prefetch_factor")))
        return;   /* no workers and settings of workers: the better one alone */
    for (size_t i = 1; i < t->res.narms; i++)
        if (strcmp(t->res.arms[i].settings, all) == 0)
            return;   /* measured already (the loader's settings on the best workers) */
    if (gained < 2 || interrupted)
        return;
    tml_tune_arm *a = arm_new(t, all, "the best together");
    if (!a)
        return;
    t->res.combo = (int)(a - t->res.arms);
    measure_in_budget(t, a);
}

static int write_out(const tune_ctx *t, const char *file, const tml_strbuf *sb)
{
    char p[4400];
    snprintf(p, sizeof(p), "%s/%s", t->dir.dir, file);
    if (tml__write_file(p, sb->buf ? sb->buf : "", sb->len, 0644) < 0) {
        tml__cli_warn("could not write %s: %s", p, strerror(errno));
        return -1;
    }
    return 0;
}

/* tune.html: the baseline trial's own report (final_summary.json, drawn
 * by web/report.js) with the tune as its first section ("tune": tune.json);
 * without that summary, tune's page alone. */
static void tune_html(const tune_ctx *t, const tml_strbuf *json, tml_strbuf *html)
{
    char p[4500], *sum = NULL;
    size_t len = 0;
    snprintf(p, sizeof(p), "%s/final_summary.json", t->base_dir);
    if (t->base_dir[0] && tml__read_file(p, (size_t)256 << 20, &sum, &len) == 0)
        while (len > 0 && sum[len - 1] != '}')
            len--;
    if (len < 2) {
        tml__tune_html(&t->res, html);
    } else {
        tml_strbuf doc = {0};
        tml__sb_add(&doc, sum, len - 1);
        tml__sb_adds(&doc, ",\n\"tune\": ");
        tml__sb_add(&doc, json->buf, json->len);
        tml__sb_adds(&doc, "}\n");
        tml__html_render(doc.buf, doc.len, html);
        tml__sb_release(&doc);
    }
    free(sum);
}

static void report(tune_ctx *t)
{
    tml_tune_result *r = &t->res;
    for (size_t i = 1; i < r->narms; i++)   /* against every baseline process */
        compare(t, &r->arms[i]);
    compare(t, &r->arms[0]);
    r->pick = tml__tune_pick(r);
    r->elapsed_s = since_s(t->start_ns);
    r->trial_s = t->trial_s;
    tml_strbuf text = {0}, json = {0}, html = {0};
    tml__tune_text(r, &text);
    tml__tune_json(r, &json);
    tune_html(t, &json, &html);
    fputs("\n", stdout);
    tml__cli_print_summary(text.buf);
    write_out(t, "tune.txt", &text);
    write_out(t, "tune.html", &html);
    if (write_out(t, "tune.json", &json) == 0)
        printf("Tune folder: %s/ (tune.json, tune.html, trials/)\n", t->dir.dir);
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__sb_release(&html);
}

static int tune(tune_ctx *t)
{
    const char *stem = strrchr(t->run.o.cmd[0], '/');
    char name[96];
    snprintf(name, sizeof(name), "tune_%.60s", stem ? stem + 1 : t->run.o.cmd[0]);
    char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".py") == 0)
        *dot = '\0';
    if (tml__cli_run_create(&t->dir, t->run.o.logs_dir, NULL, name))
        return TML_EXIT_USAGE;
    snprintf(t->trials, sizeof(t->trials), "%s/trials", t->dir.abs_dir);
    snprintf(t->scratch, sizeof(t->scratch), "%s/scratch", t->dir.abs_dir);
    if (mkdir(t->trials, 0755) < 0 || mkdir(t->scratch, 0755) < 0)
        return tml__cli_error("cannot create %s: %s", t->trials, strerror(errno));
    tml_tune_result *r = &t->res;
    r->command = t->command;
    r->dir = t->dir.dir;
    r->repeats = t->repeats;
    r->warmup = r->warmup_asked = t->warmup;
    r->steps = r->steps_asked = t->steps;
    r->budget_s = t->budget_s;
    r->combo = r->pick = -1;
    t->start_ns = tml__mono_ns();
    fprintf(stderr, "traceml tune: %s, trials of %d + %d steps, budget %.0f s; output in %s/\n",
            t->command, t->warmup, t->steps, t->budget_s, t->dir.dir);
    tml_tune_arm *b = arm_new(t, "", "baseline");
    double ms;
    char why[200];
    if (trial(t, "", &ms, why, sizeof(why), 1) < 0)
        return tml__cli_error("the baseline trial gave no steady steps: %s (in %s)", why,
                              t->dir.dir);
    arm_add(b, ms);
    t->spare_base = 1;
    fprintf(stderr, "traceml tune: baseline %.2f ms a step, %s [%.0f s]\n", ms,
            r->base.label[0] ? r->base.label : "no verdict", since_s(t->start_ns));
    if (!isnan(r->base.fetch_cpu_share))
        fprintf(stderr, "traceml tune: the fetch used the CPU %.0f%% of its time%s\n",
                r->base.fetch_cpu_share * 100,
                r->base.fetch_cpu_share < TML_TUNE_WAIT_SHARE && r->base.workers <= 0
                    ? ": it waits, so worker counts beyond the cores are tried" : "");
    tml_tune_dir dirs[TML_TUNE_DIRS];
    int best[TML_TUNE_DIRS];
    size_t nd = tml__tune_plan(&r->base, dirs, TML_TUNE_DIRS);
    fit_trials(t, planned(t, dirs, nd), since_s(t->start_ns), ms);
    explore(t, dirs, nd, best);
    combine(t, best, nd);
    decide(t);
    report(t);
    return interrupted ? 130 : 0;
}

int tml__cmd_tune(int argc, char **argv)
{
    tune_ctx *t = calloc(1, sizeof(*t));
    if (!t)
        return tml__cli_error("out of memory");
    parse(t, argc, argv);
    int rc = validate(t);
    if (rc == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        rc = tune(t);
    }
    tml__launch_opts_release(&t->run.o, t->nrunargv, t->runargv);
    free(t->runargv);
    free(t);
    return rc;
}
