/*
 * cmd_export.c - `traceml export --chrome-trace RUN [-o OUT]`: a run's
 * step records (telemetry.sqlite) as a Chrome / Perfetto trace.
 *
 * It reads the run folder's database, not the summary: the trace shows
 * every step of every rank, which the summary deliberately does not keep.
 * The layout of the trace is in src/report/chrome_trace.c.
 */
#include "cli.h"
#include "base/fs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/run.h"
#include "report/chrome_trace.h"
#include "store/store.h"
#include "traceml/traceml.h"
#include "base/strbuf.h"

const char tml__usage_export[] =
    "usage: traceml export --chrome-trace RUN [-o OUT]\n"
    "\n"
    "Writes every rank's steps and phases from RUN (a run folder such as\n"
    "logs/<run>, or its telemetry.sqlite) as a Chrome / Perfetto trace: one\n"
    "track per rank, each step a slice with its phases inside, the input wait\n"
    "before the bracket. Open it in https://ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "  --chrome-trace   the format (the only one today)\n"
    "  -o, --output OUT where to write [RUN/chrome_trace.json]\n";

int tml__cmd_export(int argc, char **argv)
{
    const char *run_arg = NULL, *out_path = NULL;
    int chrome = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (tml__cli_help(a, tml__usage_export))
            return 0;
        if (tml__cli_opt(argc, argv, &i, "--chrome-trace", NULL)) {
            chrome = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "-o", &out_path) ||
            tml__cli_opt(argc, argv, &i, "--output", &out_path))
            continue;
        if (tml__cli_operand("export", "RUN", a, &run_arg))
            return TML_EXIT_USAGE;
    }
    if (!chrome)
        return tml__cli_error("export needs a format: --chrome-trace "
                              "(usage: traceml export --chrome-trace RUN [-o OUT])");
    if (!run_arg)
        return tml__cli_error("export needs a RUN folder (usage: traceml export "
                              "--chrome-trace RUN [-o OUT])");

    char db[4200], dir[4096], def_out[4200];
    struct stat st;
    if (stat(run_arg, &st) < 0)
        return tml__cli_error("cannot read '%s': %s", run_arg, strerror(errno));
    size_t al = strnlen(run_arg, sizeof(dir) - 1);
    memcpy(dir, run_arg, al);
    dir[al] = '\0';
    if (S_ISDIR(st.st_mode)) {
        while (al > 1 && dir[al - 1] == '/')
            dir[--al] = '\0';
        snprintf(db, sizeof(db), "%s/telemetry.sqlite", dir);
    } else {
        snprintf(db, sizeof(db), "%s", dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof(dir), ".");
    }
    if (stat(db, &st) < 0)
        return tml__cli_error("'%s' has no telemetry.sqlite (is it a TraceML run folder?)",
                              run_arg);
    if (!out_path) {
        snprintf(def_out, sizeof(def_out), "%s/chrome_trace.json", dir);
        out_path = def_out;
    }

    tml_store *store = NULL;
    tml_run run;
    tml__run_init(&run, NULL, NULL);
    run.keep_all = 1;    /* every step becomes slices */
    int rc = tml__store_open(db, 0, &store);
    if (rc == 0)
        rc = tml__store_load(store, &run);
    tml__store_close(store);
    if (rc < 0) {
        tml__run_release(&run);
        return tml__cli_error("'%s' is not a readable TraceML database: %s", db,
                              tml_strerror(rc));
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    size_t nslices = 0, nsteps = 0;
    for (size_t i = 0; i < run.nranks; i++)
        nsteps += run.ranks[i].nsteps;
    rc = tml__chrome_trace(&run, &sb, &nslices);
    size_t nranks = run.nranks;
    tml__run_release(&run);
    if (rc < 0) {
        tml__sb_release(&sb);
        tml__cli_die(1, "out of memory");
    }
    int bad = tml__write_file(out_path, sb.buf, sb.len, 0666) < 0;
    tml__sb_release(&sb);
    if (bad)
        return tml__cli_error("cannot write '%s': %s", out_path, strerror(errno));
    fprintf(stderr, "traceml: wrote %s (%zu rank%s, %zu steps, %zu slices)\n", out_path, nranks,
            nranks == 1 ? "" : "s", nsteps, nslices);
    return 0;
}
