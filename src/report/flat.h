/*
 * flat.h - a summary flattened to `traceml/...` scalars for experiment
 * trackers (rules in flat.c; the public entry is tml_summary_flatten()).
 *
 * Ownership: appends to the caller's buffer; doc is only read.
 */
#ifndef TML_FLAT_H
#define TML_FLAT_H

#include "base/json.h"
#include "base/strbuf.h"

/* Appends one JSON object of "traceml/..." keys. 0, TML_EINVAL (doc is not
 * an object) or TML_ENOMEM. */
int tml__summary_flatten(const tml_json *doc, tml_strbuf *out);

#endif
