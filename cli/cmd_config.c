/*
 * cmd_config.c - `traceml config --cflags --libs`: how a C or C++ training
 * loop compiles and links against this TraceML, pkg-config style.
 *
 * Every installed TraceML has the same shape around its binary:
 * ROOT/bin/traceml, ROOT/include/traceml/traceml.h, ROOT/lib/libtraceml.so.
 * ROOT is the prefix of `make install` (/usr/local), the package folder of
 * a pip-installed traceml-ai (site-packages/traceml_ai, where `traceml` on
 * PATH is the entry point that runs this binary), or a build tree
 * (build/). So the answer is derived from where this binary is, and the
 * link line carries an rpath: a program built against a venv's TraceML
 * runs without LD_LIBRARY_PATH.
 */
#include "cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char tml__usage_config[] =
    "usage: traceml config [--cflags] [--libs] [--prefix]\n"
    "\n"
    "Prints the compiler and linker flags for the C API of this TraceML:\n"
    "\n"
    "  cc train.c $(traceml config --cflags --libs)\n"
    "\n"
    "  --cflags   -I for <traceml/traceml.h>\n"
    "  --libs     -L, an rpath and -ltraceml\n"
    "  --prefix   the folder holding bin/, include/ and lib/\n";

int tml__cmd_config(int argc, char **argv)
{
    int cflags = 0, libs = 0, prefix = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cflags") == 0)
            cflags = 1;
        else if (strcmp(argv[i], "--libs") == 0)
            libs = 1;
        else if (strcmp(argv[i], "--prefix") == 0)
            prefix = 1;
        else if (tml__cli_help(argv[i], tml__usage_config))
            return 0;
        else
            return tml__cli_unknown("config", argv[i]);
    }
    if (!cflags && !libs && !prefix)
        return tml__cli_error("say what to print: --cflags, --libs or --prefix "
                              "(see 'traceml help config')");
    char exe[PATH_MAX], up[PATH_MAX + 4], root[PATH_MAX], header[PATH_MAX + 32],
        lib[PATH_MAX + 32];
    if (tml__cli_exe_dir(exe, sizeof(exe)) < 0)
        return tml__cli_error("cannot tell where this traceml is (/proc/self/exe)");
    snprintf(up, sizeof(up), "%s/..", exe);
    if (!realpath(up, root))
        return tml__cli_error("cannot resolve %s", up);
    snprintf(header, sizeof(header), "%s/include/traceml/traceml.h", root);
    snprintf(lib, sizeof(lib), "%s/lib/libtraceml.so", root);
    if ((cflags && access(header, R_OK) < 0) || (libs && access(lib, R_OK) < 0))
        return tml__cli_error("this traceml (%s/bin) has no C header and library beside it "
                              "(%s, %s); reinstall it, or build with make", root,
                              header, lib);
    const char *sep = "";
    if (prefix) {
        printf("%s", root);
        sep = " ";
    }
    if (cflags) {
        printf("%s-I%s/include", sep, root);
        sep = " ";
    }
    if (libs)
        printf("%s-L%s/lib -Wl,-rpath,%s/lib -ltraceml", sep, root, root);
    printf("\n");
    return 0;
}
