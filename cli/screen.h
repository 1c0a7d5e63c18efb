/*
 * screen.h - a full-screen terminal for the live view (live_view.c): the
 * small part of curses it needs, on any ANSI (VT100-compatible) terminal,
 * without a terminal database.
 *
 *     tml_screen *s = tml__screen_new(0, 1, utf8);   // NULL: not a terminal
 *     for (;;) {
 *         tml__screen_erase(s);
 *         tml__screen_attron(s, TML_ATTR_BOLD);
 *         tml__screen_put(s, y, x, "text", 4);
 *         tml__screen_attroff(s, TML_ATTR_BOLD);
 *         tml__screen_refresh(s);                     // sends what changed
 *         int key = tml__screen_key(s);               // TML_KEY_NONE, a byte, TML_KEY_RESIZE
 *     }
 *     tml__screen_end(s);                             // the terminal back as it was
 *     tml__screen_free(s);
 *
 * Positions are (row, column) from (0, 0); text is UTF-8, a code point a
 * column (one that a terminal draws wider or narrower shows as '?'), cut
 * at the right edge. One screen at a time per process (the signal
 * handlers find it through a static pointer).
 *
 * Ownership: the screen is the caller's (tml__screen_free); it keeps no
 * pointer to the text it is given.
 */
#ifndef TML_CLI_SCREEN_H
#define TML_CLI_SCREEN_H

#include <stddef.h>

/* attributes, or-ed; at most one colour (the foreground, on the
 * terminal's own background) */
enum {
    TML_ATTR_BOLD = 1 << 0,
    TML_ATTR_DIM = 1 << 1,
    TML_ATTR_REVERSE = 1 << 2,
    TML_ATTR_RED = 1 << 3,
    TML_ATTR_YELLOW = 1 << 4,
    TML_ATTR_GREEN = 1 << 5,
};

enum { TML_KEY_NONE = -1, TML_KEY_RESIZE = 0x100 };

/* The bytes that leave full screen (attributes off, the cursor shown,
 * line wrapping back on, the normal screen back): what tml__screen_end
 * writes, for a process that must do it in the launcher's stead. */
#define TML_SCREEN_LEAVE "\033[0m\033[?25h\033[?7h\033[?1049l"

typedef struct tml_screen tml_screen;

/* Takes the terminal: in_fd in cbreak mode (no echo, no line editing;
 * Ctrl-C still signals), the alternate screen on out_fd, the cursor
 * hidden. utf8 0: box characters and text outside ASCII drawn as ASCII.
 * NULL when in_fd or out_fd is not a terminal, or out of memory. */
tml_screen *tml__screen_new(int in_fd, int out_fd, int utf8);
void tml__screen_free(tml_screen *s);
/* Gives the terminal back (idempotent; also at exit and on Ctrl-Z). */
void tml__screen_end(tml_screen *s);

int tml__screen_rows(const tml_screen *s);
int tml__screen_cols(const tml_screen *s);
int tml__screen_utf8(const tml_screen *s);

/* Blanks the next frame. */
void tml__screen_erase(tml_screen *s);
void tml__screen_attron(tml_screen *s, int attrs);
void tml__screen_attroff(tml_screen *s, int attrs);
/* At most len bytes of text from (y, x), in the current attributes;
 * returns the column after the last one written. */
int tml__screen_put(tml_screen *s, int y, int x, const char *text, size_t len);
/* n copies of one glyph (a UTF-8 character) from (y, x) rightwards. */
void tml__screen_fill(tml_screen *s, int y, int x, const char *glyph, int n);
/* Sends the rows of the frame that differ from what the terminal shows. */
void tml__screen_refresh(tml_screen *s);
/* The next key typed (a byte; escape sequences, such as arrow and
 * function keys, are skipped), TML_KEY_RESIZE once after the terminal
 * changed size (or came back from Ctrl-Z): the next refresh redraws it
 * all at the new size; TML_KEY_NONE when there is none. Never blocks. */
int tml__screen_key(tml_screen *s);

#endif
