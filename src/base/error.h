/*
 * error.h - the error codes beyond the public ones (TML_E* in
 * include/traceml/traceml.h): internal codes, named by the same table,
 * tml_strerror() (error.c).
 */
#ifndef TML_ERROR_H
#define TML_ERROR_H

#include "traceml/traceml.h"

#define TML_EEXIST -20   /* the run folder exists already */

#endif
