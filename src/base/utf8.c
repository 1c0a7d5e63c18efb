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

size_t tml__utf8_printable(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] >= 0x80 &&
            (unsigned char)s[i + 1] <= 0x9f) {
            s[o++] = '?';
            i++;
        } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            s[o++] = '?';
        } else {
            s[o++] = (char)c;
        }
    }
    if (n)
        s[o] = '\0';
    return o;
}
