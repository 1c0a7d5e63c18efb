/*
 * fs.h - whole files in and out: reading a file TraceML (or the user)
 * wrote, and writing an artifact so that a reader never sees half of it.
 */
#ifndef TML_FS_H
#define TML_FS_H

#include <stddef.h>

/* The whole file into a malloc'd NUL-terminated buffer (caller frees);
 * 0, or -1 with errno set (EFBIG over max bytes, EISDIR for a folder). */
int tml__read_file(const char *path, size_t max, char **buf, size_t *len);
/* Writes data to dir/name through dir/.name.tmp and rename(2), with the
 * given permission bits (0644 for artifacts, 0600 for secrets). 0 or
 * TML_EIO (the temporary file removed). */
int tml__write_file_atomic(const char *dir, const char *name, const char *data, size_t len,
                           unsigned mode);

#endif
