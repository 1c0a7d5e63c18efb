/*
 * error.c - the one error table: what each TML_E* code means
 * (tml_strerror, public in include/traceml/traceml.h, with the codes).
 */
#include "traceml/traceml.h"

const char *tml_strerror(int err)
{
    switch (err) {
    case TML_OK: return "success";
    case TML_EINVAL: return "invalid argument";
    case TML_ENOMEM: return "out of memory";
    case TML_ESTATE: return "called in the wrong state";
    case TML_ECONN: return "aggregator unreachable";
    case TML_EAUTH: return "aggregator refused the handshake";
    case TML_EIO: return "file could not be read or written";
    case TML_EFULL: return "ring full, event dropped";
    case TML_EPROTO: return "malformed or unsupported frame";
    case TML_EDISABLED: return "TraceML is disabled";
    case TML_ECONFIG: return "conflicting second tml_init";
    case TML_EEXIST: return "run folder exists already";
    default: return "unknown error";
    }
}
