/* phases.h - the phases of a plain single-process step in hand-made
 * records: every phase but communication (a run of one process never
 * communicates). */
#ifndef TML_TEST_PHASES_H
#define TML_TEST_PHASES_H
#include "traceml/traceml.h"
#define TEST_PHASES (TML_PHASES_ALL & ~TML_PHASE_BIT(TML_PHASE_COMM))
#endif
