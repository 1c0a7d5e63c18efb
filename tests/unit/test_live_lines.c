/*
 * test_live_lines.c - the live view's output panel lines (cli/live_lines.c):
 * what a terminal would show of each line the training writes.
 */
#include <string.h>

#include "../../cli/live_lines.h"
#include "harness.h"

static void feed(tml_out_lines *o, const char *s)
{
    tml__out_lines_feed(o, s, strlen(s));
}

/* The k-th of the last `max` lines shown, oldest first ("" past them). */
static const char *shown(const tml_out_lines *o, size_t max, size_t k)
{
    size_t show = tml__out_lines_tail(o, max);
    return k < show ? tml__out_lines_at(o, show, k) : "";
}

static void test_lines_and_the_one_being_written(void)
{
    tml_out_lines o;
    CHECK_EQ_INT(tml__out_lines_init(&o), 0);
    CHECK_EQ_INT(tml__out_lines_tail(&o, 10), 0);
    feed(&o, "epoch 1\nepoch 2\n");
    CHECK_EQ_INT(tml__out_lines_tail(&o, 10), 2);   /* the empty line being written: not shown */
    CHECK_STR(shown(&o, 10, 0), "epoch 1");
    CHECK_STR(shown(&o, 10, 1), "epoch 2");
    feed(&o, "loss 0.5");
    CHECK_EQ_INT(tml__out_lines_tail(&o, 10), 3);   /* now it is */
    CHECK_STR(shown(&o, 10, 2), "loss 0.5");
    CHECK_EQ_INT(tml__out_lines_tail(&o, 2), 2);    /* the last two */
    CHECK_STR(shown(&o, 2, 0), "epoch 2");
    CHECK_STR(shown(&o, 2, 1), "loss 0.5");
    tml__out_lines_release(&o);
}

/* A progress bar: CR rewrites the line; colours and titles are dropped;
 * a tab goes to the next multiple of 8; other controls vanish. */
static void test_terminal_text(void)
{
    tml_out_lines o;
    CHECK_EQ_INT(tml__out_lines_init(&o), 0);
    feed(&o, " 10%|#   |\r 50%|##  |\r100%|####|\n");
    feed(&o, "\033[1;31mred\033[0m \033]0;a title\007done \033]2;t\033\\!\n");
    feed(&o, "a\tb\x01\x7f" "c\n");
    CHECK_STR(shown(&o, 3, 0), "100%|####|");
    CHECK_STR(shown(&o, 3, 1), "red done !");
    CHECK_STR(shown(&o, 3, 2), "a       bc");
    tml__out_lines_release(&o);
}

/* Lines are cut at TML_OUT_COLS - 1 bytes; the ring keeps the last
 * TML_OUT_LINES lines. */
static void test_bounds(void)
{
    tml_out_lines o;
    CHECK_EQ_INT(tml__out_lines_init(&o), 0);
    char long_line[2 * TML_OUT_COLS];
    memset(long_line, 'x', sizeof(long_line) - 1);
    long_line[sizeof(long_line) - 1] = '\0';
    feed(&o, long_line);
    CHECK_EQ_INT(strlen(shown(&o, 1, 0)), TML_OUT_COLS - 1);
    feed(&o, "\n");
    char num[32];
    for (int i = 0; i < TML_OUT_LINES + 5; i++) {
        snprintf(num, sizeof(num), "line %d\n", i);
        feed(&o, num);
    }
    CHECK_EQ_INT(tml__out_lines_tail(&o, 100000), TML_OUT_LINES);
    snprintf(num, sizeof(num), "line %d", TML_OUT_LINES + 4);
    CHECK_STR(shown(&o, 3, 2), num);
    tml__out_lines_release(&o);
}

/* Without its lines (out of memory, or never made) nothing is kept. */
static void test_no_lines(void)
{
    tml_out_lines o = {0};
    feed(&o, "text\n");
    CHECK_EQ_INT(tml__out_lines_tail(&o, 10), 0);
    tml__out_lines_release(&o);
}

#define TESTS X(test_lines_and_the_one_being_written) X(test_terminal_text) X(test_bounds) \
    X(test_no_lines)
#include "harness.h"
