/*
 * signals.c - the launcher as the training's transparent parent: which
 * signals it passes on, the dispositions it inherited, the witness that
 * tells a signal sent to the launcher alone from one sent to the whole
 * process group, and dying as the training died.
 *
 * Every signal a training could handle (SIGHUP, SIGINT, SIGQUIT, SIGTERM,
 * SIGUSR1/2, SIGALRM, SIGCONT, SIGWINCH, SIGURG, SIGIO, SIGPWR, SIGPROF,
 * SIGVTALRM and the real-time ones) is caught and passed on, unless the
 * launcher inherited it ignored: then it stays ignored, here and in the
 * training (`nohup traceml run`, a `&` in a script). The training starts
 * with the dispositions and the signal mask the launcher was given. The
 * job-control stops (SIGTSTP, SIGTTIN, SIGTTOU) stop the launcher as
 * they stop the training (a shell waits for its job to stop); the faults
 * (SIGSEGV, ...) are the launcher's own.
 *
 * Passed on only when it did not reach the training already. A terminal's
 * Ctrl-C, `kill -TERM -PGID` (Slurm) and a cgroup-wide kill reach every
 * process of the group, the training included; a second copy would run a
 * checkpointing handler twice. So the launcher keeps a witness: a small
 * child in its process group that blocks all those signals and does
 * nothing else. A signal sent to the group is then pending in the witness;
 * 20 ms after the launcher caught one, it asks the witness (a byte on a
 * pipe), which takes the signal out of its pending set with a zero-timeout
 * sigtimedwait and answers whether it was there. Sent to the launcher
 * alone, it was not: the launcher sends it on. Without a witness (fork
 * failed) a Ctrl-C from the terminal (si_code SI_KERNEL) is the group's
 * and anything else is passed on. The witness has no descriptor but its
 * pipes and dies with the launcher (PR_SET_PDEATHSIG).
 *
 * The launcher never kills the training on a clock of its own: a job's
 * preemption handler may take a minute to write its checkpoint. It waits
 * for the training, which may take as long as it needs, unless the user
 * set a grace period (--kill-after S): S seconds after a SIGINT, SIGTERM,
 * SIGHUP or SIGQUIT, a training still running gets SIGKILL, as `timeout
 * -k` and torchrun do.
 *
 * At the end, a training that died of a signal makes the launcher die of
 * the same signal once the summary is written (a shell still sees 128+N,
 * and a parent's waitpid sees WIFSIGNALED), without a core file of its
 * own.
 *
 * The handler's counters are file-scope statics of type volatile
 * sig_atomic_t (a handler has no parameter to reach anything else).
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define NSIGS 65   /* Linux: signals 1..64 */

static volatile sig_atomic_t caught[NSIGS], int_code;
static sigset_t passed, inherited_mask;
static unsigned char ignored[NSIGS];   /* inherited as SIG_IGN: left so */
static unsigned char handled[NSIGS];   /* our handler is installed */
static struct {
    pid_t pid;
    int req, resp;   /* our ends */
} witness = {0, -1, -1};

static const int standard[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2,   SIGALRM, SIGTERM,
                               SIGCONT, SIGWINCH, SIGURG, SIGIO,   SIGPWR, SIGPROF, SIGVTALRM};

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (sig <= 0 || sig >= NSIGS)
        return;
    if (sig == SIGINT && !caught[sig])
        int_code = info ? info->si_code : 0;
    caught[sig]++;
}

static int ends_training(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

int tml__launch_asked_to_end(void)
{
    return caught[SIGINT] || caught[SIGTERM] || caught[SIGHUP] || caught[SIGQUIT];
}

/* The witness: blocks every passed signal and answers, for a signal
 * number read from req, 1 when it was pending (and takes it), else 0. */
__attribute__((noreturn))
static void witness_main(int req, int resp, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    prctl(PR_SET_NAME, "traceml-witness");
    if (getppid() != parent)
        _exit(0);
    int keep[2] = {req, resp};
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0)
        for (int fd = 0; fd < 3; fd++)
            dup2(nul, fd);
    tml__cli_close_all_but(keep, 2);
    for (;;) {
        unsigned char s;
        ssize_t n = read(req, &s, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            _exit(0);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, s);
        struct timespec zero = {0, 0};
        unsigned char was = sigtimedwait(&one, NULL, &zero) == s;
        if (write(resp, &was, 1) != 1)
            _exit(0);
    }
}

static void witness_start(void)
{
    int a[2], b[2];
    if (pipe2(a, O_CLOEXEC) < 0)
        return;
    if (pipe2(b, O_CLOEXEC) < 0) {
        close(a[0]);
        close(a[1]);
        return;
    }
    pid_t parent = getpid();
    pid_t pid = fork();   /* passed signals are blocked here: its mask from the start */
    if (pid == 0)
        witness_main(a[0], b[1], parent);
    close(a[0]);
    close(b[1]);
    if (pid < 0) {
        close(a[1]);
        close(b[0]);
        return;
    }
    witness.pid = pid;
    witness.req = a[1];
    witness.resp = b[0];
}

/* 1: sig reached the whole process group (the training too); 0: the
 * launcher alone. */
static int sent_to_group(int sig)
{
    if (witness.pid > 0) {
        unsigned char s = (unsigned char)sig, was = 0;
        struct pollfd p = {witness.resp, POLLIN, 0};
        if (write(witness.req, &s, 1) == 1 && poll(&p, 1, 500) == 1 &&
            read(witness.resp, &was, 1) == 1)
            return was;
        witness.pid = -witness.pid;   /* gone or stuck: ask it no more */
    }
    return sig == SIGINT && int_code == SI_KERNEL;
}

void tml__launch_install_handlers(void)
{
    sigprocmask(SIG_SETMASK, NULL, &inherited_mask);
    sigemptyset(&passed);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;   /* no SA_RESTART: waits wake up */
    sigemptyset(&sa.sa_mask);
    int n = (int)(sizeof(standard) / sizeof(standard[0]));
    for (int k = 0; k < n + (SIGRTMAX - SIGRTMIN + 1); k++) {
        int sig = k < n ? standard[k] : SIGRTMIN + (k - n);
        if (sig <= 0 || sig >= NSIGS || sigaction(sig, NULL, &old) < 0)
            continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) {
            ignored[sig] = 1;
            continue;
        }
        sigaddset(&passed, sig);
    }
    /* the witness is forked with them blocked, before any handler */
    sigset_t was;
    sigprocmask(SIG_BLOCK, &passed, &was);
    witness_start();
    for (int sig = 1; sig < NSIGS; sig++)
        if (sigismember(&passed, sig) == 1) {
            sigaction(sig, &sa, NULL);
            handled[sig] = 1;
        }
    struct sigaction pipe_old;
    sigaction(SIGPIPE, NULL, &pipe_old);
    ignored[SIGPIPE] = pipe_old.sa_handler == SIG_IGN;
    signal(SIGPIPE, SIG_IGN);   /* ours: a reader gone is an error, not a death */
    sigprocmask(SIG_SETMASK, &was, NULL);
}

void tml__launch_signals_block(sigset_t *was)
{
    sigprocmask(SIG_BLOCK, &passed, was);
}

void tml__launch_signals_restore(const sigset_t *was)
{
    sigprocmask(SIG_SETMASK, was, NULL);
}

void tml__launch_signals_for_child(void)
{
    for (int sig = 1; sig < NSIGS; sig++)
        if (handled[sig] || sig == SIGPIPE)
            signal(sig, ignored[sig] ? SIG_IGN : SIG_DFL);
    sigprocmask(SIG_SETMASK, &inherited_mask, NULL);
}

void tml__launch_signals_for_aggregator(void)
{
    for (int sig = 1; sig < NSIGS; sig++)
        if (handled[sig])
            signal(sig, SIG_DFL);
    sigprocmask(SIG_SETMASK, &passed, NULL);   /* the launcher decides its end */
}

int tml__launch_pass_signals(pid_t train, int64_t now_ms)
{
    static sig_atomic_t seen[NSIGS], done[NSIGS];
    static int64_t noticed_ms[NSIGS];
    int ending = 0;
    for (int sig = 1; sig < NSIGS; sig++) {
        if (caught[sig] != seen[sig]) {   /* 20 ms for a group's signal to reach everyone */
            seen[sig] = caught[sig];
            noticed_ms[sig] = now_ms;
        }
        if (caught[sig] == done[sig] || now_ms - noticed_ms[sig] < 20)
            continue;
        done[sig] = caught[sig];
        if (!sent_to_group(sig))
            kill(train, sig);
        if (ends_training(sig))
            ending = sig;
    }
    return ending;
}

void tml__launch_witness_end(void)
{
    if (witness.req >= 0)
        close(witness.req);
    if (witness.resp >= 0)
        close(witness.resp);
    witness.req = witness.resp = -1;
    pid_t pid = witness.pid < 0 ? -witness.pid : witness.pid;
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    witness.pid = 0;
}

int tml__launch_die_as(int sig, int code)
{
    if (sig <= 0 || sig >= NSIGS)
        return code;
    fflush(stdout);
    fflush(stderr);
    tml__launch_witness_end();
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);   /* the training's core file, not ours */
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    return code;   /* a signal that does not kill (SIGCONT, ...) */
}
