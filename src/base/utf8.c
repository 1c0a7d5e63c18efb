/*
 * utf8.c - display width of UTF-8 text (utf8.h).
 */
#include "base/utf8.h"

size_t tml__utf8_width(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0) != 0x80)
            n++;
    return n;
}
