/*
 * cmd_help.c - `traceml help [COMMAND]`: the command list, or one
 * command's usage (each command file owns its usage text).
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "traceml/traceml.h"

const char tml__usage_help[] =
    "usage: traceml help [COMMAND]\n"
    "\n"
    "Shows the list of commands, or the options of one command.\n";

int tml__cmd_help(int argc, char **argv)
{
    if (argc > 2)
        return tml__cli_error("help takes at most one COMMAND (see 'traceml help')");
    if (argc == 2 && strcmp(argv[1], "--help") != 0 && strcmp(argv[1], "-h") != 0) {
        const tml_cli_cmd *c = tml__cli_find(argv[1]);
        if (!c || !c->summary) {
            char hint[96];
            tml__cli_suggest_command(argv[1], hint, sizeof(hint));
            return tml__cli_error("unknown command '%s'%s (see 'traceml help')", argv[1], hint);
        }
        fputs(c->usage, stdout);
        return 0;
    }
    tml__cli_print_help(stdout);
    return 0;
}

void tml__cli_print_help(FILE *out)
{
    fprintf(out, "traceml %s - why does a training step take as long as it does?\n\n"
                 "usage: traceml COMMAND [options]\n\n"
                 "Commands:\n",
            TML_VERSION_STRING);
    for (const tml_cli_cmd *c = tml__cli_cmds; c->name; c++)
        if (c->summary)
            fprintf(out, "  %-8s %s\n", c->name, c->summary);
    fprintf(out, "\n"
                 "  traceml --version        print the version\n"
                 "  traceml help COMMAND     options of one command\n"
                 "\n"
                 "Example:\n"
                 "  traceml run train.py     prints the run summary and writes logs/<run>/\n");
}
