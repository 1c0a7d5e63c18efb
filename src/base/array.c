/*
 * array.c - the growable-array helper (array.h).
 */
#include "base/array.h"

#include <stdint.h>
#include <stdlib.h>

int tml__grow(void **ptr, size_t elem, size_t need, size_t *cap)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return -1;
    void *p = realloc(*ptr, c * elem);
    if (!p)
        return -1;
    *ptr = p;
    *cap = c;
    return 0;
}
