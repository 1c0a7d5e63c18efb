/*
 * live_draw.h - one frame of the full-screen live view (live_draw.c),
 * drawn from the last /api/live document; live_view.c decides when.
 */
#ifndef TML_CLI_LIVE_DRAW_H
#define TML_CLI_LIVE_DRAW_H

#include "live_lines.h"
#include "screen.h"
#include "base/json.h"

typedef struct tml_live_frame {
    const tml_json *doc;          /* the last /api/live; NULL: none yet */
    const char *run_name;
    const char *status;           /* why there is no document ("" or NULL: waiting) */
    const tml_out_lines *output;  /* the training output panel's lines */
} tml_live_frame;

/* Erases scr, draws the frame at scr's size, sends it (refresh). */
void tml__live_draw(tml_screen *scr, const tml_live_frame *f);

#endif
