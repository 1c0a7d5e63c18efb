/*
 * main.c - `traceml`: finds the subcommand in a table and runs it.
 *
 * Each subcommand lives in its own file (cmd_<name>.c) with its usage
 * text, so adding one (compare, a later issue) is one file and one line
 * here. `traceml` alone prints the help to stderr and exits 2 (a command
 * is required); `traceml help` / `--help` print it to stdout, exit 0;
 * `--version` prints the version.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "traceml/traceml.h"

const tml_cli_cmd tml__cli_cmds[] = {
    {"run", tml__cmd_run, "Run a training script under TraceML and print its summary",
     tml__usage_run},
    {"watch", tml__cmd_watch, "Run a script with system and process metrics only (no step tracing)",
     tml__usage_watch},
    {"view", tml__cmd_view, "Print a stored run summary again", tml__usage_view},
    {"serve", tml__cmd_serve, "Run the aggregator alone, for scripts launched another way",
     tml__usage_serve},
    {"tune", tml__cmd_tune, "Try performance settings in short trials and measure what they gain",
     tml__usage_tune},
    {"compare", tml__cmd_compare, "Compare two run summaries: improvement, regression, ...",
     tml__usage_compare},
    {"inspect", tml__cmd_inspect, "Describe a run folder, telemetry.sqlite, a summary or a manifest",
     tml__usage_inspect},
    {"export", tml__cmd_export, "Export a run's steps as a Chrome/Perfetto trace",
     tml__usage_export},
    {"config", tml__cmd_config, "Compiler and linker flags for the C API (--cflags --libs)",
     tml__usage_config},
    {"help", tml__cmd_help, "Show help for traceml or one command", tml__usage_help},
    {"__aggregate", tml__cmd_aggregate, NULL, NULL},
    {NULL, NULL, NULL, NULL},
};

const tml_cli_cmd *tml__cli_find(const char *name)
{
    for (const tml_cli_cmd *c = tml__cli_cmds; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {   /* a command is required: the help on stderr, exit 2 (as argparse) */
        tml__cli_print_help(stderr);
        return TML_EXIT_USAGE;
    }
    const char *a = argv[1];
    if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
        printf("traceml %s\n", TML_VERSION_STRING);
        return 0;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
        return tml__cmd_help(argc - 1, argv + 1);
    if (a[0] == '-')
        return tml__cli_error("unknown option '%s' (see 'traceml help')", a);
    const tml_cli_cmd *c = tml__cli_find(a);
    if (!c) {
        char hint[96];
        tml__cli_suggest_command(a, hint, sizeof(hint));
        return tml__cli_error("unknown command '%s'%s (see 'traceml help')", a, hint);
    }
    tml__cli_abbrev(c, argc - 1, argv + 1);
    return c->fn(argc - 1, argv + 1);
}
