/*
 * python.h - the interpreter that runs a training script (python.c).
 */
#ifndef TML_CLI_PYTHON_H
#define TML_CLI_PYTHON_H

typedef struct tml_python {
    char path[4096];          /* the executable, as found (not resolved) */
    const char *source;       /* where the choice came from, for messages */
    int probed;               /* it ran and answered */
    int has_torch, has_traceml;
    char torch_version[64];   /* "2.13.0+cpu"; empty when unknown */
    int torch_major;          /* 0 when unknown */
} tml_python;

/* Picks the interpreter: option (--python), $TRACEML_PYTHON, the
 * environment's Python ($TRACEML_ENV_PYTHON, set by the pip entry point),
 * python3 on PATH; option_from says where option came from (NULL:
 * "--python"; kept in py->source). With need, also checks that it runs
 * and can import torch and traceml_ai. Prints one error line and returns TML_EXIT_USAGE
 * when it cannot be used; 0 otherwise. */
int tml__python_find(tml_python *py, const char *option, const char *option_from, int need);

#endif
