/*
 * cmd_watch.c - `traceml watch SCRIPT`: TraceML 0.5.0's lightweight mode.
 *
 * A watch run is `traceml run` with step tracing switched off: the same
 * launch (options, torchrun, --, the run folder, the aggregator), but the
 * training's processes start TraceML's engine without instrumenting
 * anything (TRACEML_PROFILE=watch, read by the Python glue), and the
 * aggregator drops any step record that still comes (a script that calls
 * trace_step itself). What is left is the system and process telemetry,
 * and the summary is the watch box: those two panels, no verdict, and how
 * to get step timing.
 */
#include "cli.h"

const char tml__usage_watch[] =
    "usage: traceml watch [options] SCRIPT [script args...]\n"
    "       traceml watch [options] -- COMMAND [args...]\n"
    "\n"
    "Runs a training like `traceml run` but records only system and process\n"
    "metrics (host CPU and RAM, GPUs, each rank's CPU, RSS and GPU memory):\n"
    "no step is traced, so there is no step-time verdict. The summary box\n"
    "shows the SYSTEM and PROCESS panels (TraceML 0.5.0's watch mode).\n"
    "\n"
    "Options: those of `traceml run` (see 'traceml help run').\n";

int tml__cmd_watch(int argc, char **argv)
{
    return tml__cmd_run_profile(argc, argv, 1);
}
