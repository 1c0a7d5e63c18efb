/*
 * env.h - reading a yes/no environment variable the one way TraceML does:
 * set, and not empty, "0", "false", "no" or "off" (any case). The engine,
 * the launcher and the Python package read TRACEML_DISABLED like this.
 */
#ifndef TML_ENV_H
#define TML_ENV_H

#include <string.h>
#include <strings.h>

static inline int tml__env_yes(const char *v)
{
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 &&
           strcasecmp(v, "no") != 0 && strcasecmp(v, "off") != 0;
}

#endif
