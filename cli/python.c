/*
 * python.c - which Python runs the training, and whether it can.
 *
 * `traceml run train.py` must run the Python of the environment TraceML
 * was installed in: a user in a venv or a conda environment expects their
 * own interpreter, with their own torch. The order is
 *
 *     --python PATH  >  $TRACEML_PYTHON  >  the environment's Python  >  python3 on PATH
 *
 * "The environment's Python" comes from the `traceml` entry point that pip
 * writes into the environment's bin/ (python/traceml_ai/_cli.py): it runs
 * under that very interpreter and passes sys.executable on in
 * $TRACEML_ENV_PYTHON. A `traceml` built with make and started directly has
 * no environment of its own and takes python3 from PATH.
 *
 * The chosen interpreter is then asked, in one short child process, what
 * it can import (torch and its version, traceml_ai), without importing
 * torch: find_spec and torch/version.py only. When it is the entry
 * point's own interpreter, the entry point has answered already
 * ($TRACEML_ENV_PYTHON_PROBE, the same line) and nothing is started: that
 * saves an interpreter start-up (~15 ms) per launch. A wrong choice is one clear
 * line naming the interpreter, where it came from and how to pick
 * another, before anything is created; the torch version decides whether
 * torch.distributed.run needs the 1.x work-around (dist.c).
 */
#include "cli.h"
#include "python.h"

#include "base/env.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Prints "torch VERSION|- traceml_ai 0|1". Never imports torch. */
static const char probe_code[] =
    "import os\n"
    "from importlib.util import find_spec\n"
    "def v():\n"
    "    s = find_spec('torch')\n"
    "    if s is None:\n"
    "        return '-'\n"
    "    for d in s.submodule_search_locations or ():\n"
    "        try:\n"
    "            with open(os.path.join(d, 'version.py')) as f:\n"
    "                for line in f:\n"
    "                    if line.startswith('__version__'):\n"
    "                        return line.split('=', 1)[1].strip().strip('\\'\"') or '?'\n"
    "        except OSError:\n"
    "            pass\n"
    "    return '?'\n"
    "print('torch', v(), 'traceml_ai', int(find_spec('traceml_ai') is not None))\n";

#define PROBE_TIMEOUT_MS 60000

/* Runs `python -c probe_code`; its last output line into out (before it
 * the interpreter's sitecustomize may have printed anything). 0 or -1. */
static int run_probe(const char *python, char *out, size_t cap)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(python, python, "-c", probe_code, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    int64_t deadline = tml__mono_ms() + PROBE_TIMEOUT_MS;
    for (;;) {
        int left = (int)(deadline - tml__mono_ms());
        struct pollfd p = {fd[0], POLLIN, 0};
        int r = left > 0 ? poll(&p, 1, left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        ssize_t n = read(fd[0], out + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) {   /* full: only the last line matters */
            out[len] = '\0';
            char *last = strrchr(out, '\n');
            size_t keep = last ? len - (size_t)(last + 1 - out) : 0;
            memmove(out, out + len - keep, keep);
            len = keep;
        }
    }
    close(fd[0]);
    out[len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int ended = len > 0 && out[len - 1] == '\n';
    if (ended) {
        out[len - 1] = '\0';
        char *nl = strrchr(out, '\n');
        if (nl)
            memmove(out, nl + 1, strlen(nl + 1) + 1);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && ended ? 0 : -1;
}

static void parse_probe(tml_python *py, const char *line)
{
    char ver[sizeof(py->torch_version)];
    int have_pkg = 0;
    if (sscanf(line, "torch %63s traceml_ai %d", ver, &have_pkg) != 2)
        return;
    py->probed = 1;
    py->has_traceml = have_pkg == 1;
    if (strcmp(ver, "-") == 0)
        return;
    py->has_torch = 1;
    snprintf(py->torch_version, sizeof(py->torch_version), "%s", ver);
    py->torch_major = (int)strtol(ver, NULL, 10);
}

int tml__python_find(tml_python *py, const char *option, const char *option_from, int need)
{
    memset(py, 0, sizeof(*py));
    const char *name = option, *env;
    py->source = option_from ? option_from : "--python";
    if (!name || !*name) {
        name = tml__env_str(TML_ENV_PYTHON);
        py->source = tml__env_name(TML_ENV_PYTHON);
    }
    const char *answered = NULL;
    if ((!name || !*name) && (env = tml__env_str(TML_ENV_ENV_PYTHON))) {
        name = env;
        py->source = "the environment TraceML is installed in";
        answered = tml__env_str(TML_ENV_ENV_PYTHON_PROBE);
    }
    if (!name || !*name) {
        name = "python3";
        py->source = "PATH";
    }
    static const char how[] = "choose one with --python PATH or TRACEML_PYTHON";
    if (tml__cli_which(name, py->path, sizeof(py->path)) < 0)
        return tml__cli_error("Python interpreter '%s' (from %s) not found or not executable; %s",
                              name, py->source, how);
    if (!need)
        return 0;
    char line[256];
    if (answered && *answered)
        parse_probe(py, answered);
    else if (run_probe(py->path, line, sizeof(line)) == 0)
        parse_probe(py, line);
    if (!py->probed)
        return tml__cli_error("'%s' (from %s) does not run as a Python interpreter; %s",
                              py->path, py->source, how);
    if (!py->has_torch)
        return tml__cli_error("Python '%s' (from %s) cannot import torch: install it there "
                              "('%s -m pip install torch') or %s", py->path, py->source,
                              py->path, how);
    if (!py->has_traceml)
        return tml__cli_error("Python '%s' (from %s) cannot import traceml_ai: install this "
                              "TraceML there ('%s -m pip install DIR', DIR its checkout or "
                              "wheel; 'traceml-ai' on the registry is TraceML 0.5.0) or %s",
                              py->path, py->source, py->path, how);
    return 0;
}
