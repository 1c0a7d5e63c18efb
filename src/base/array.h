/*
 * array.h - the one growable-array helper (after git's ALLOC_GROW).
 *
 *     item *v = NULL; size_t n = 0, cap = 0;
 *     if (TML_GROW(v, n + 1, cap) < 0) return TML_ENOMEM;
 *     v[n++] = x;
 *
 * Makes room for at least `need` elements of *ptr, doubling the capacity
 * (from 16); on failure the array and cap are unchanged and it is -1.
 */
#ifndef TML_ARRAY_H
#define TML_ARRAY_H

#include <stddef.h>

int tml__grow(void **ptr, size_t elem, size_t need, size_t *cap);

#define TML_GROW(ptr, need, cap) \
    tml__grow((void **)&(ptr), sizeof(*(ptr)), (size_t)(need), &(cap))

#endif
