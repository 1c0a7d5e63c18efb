/*
 * fs.h - whole files in and out: reading a file TraceML (or the user)
 * wrote, and writing an artifact so that a reader never sees half of it.
 */
#ifndef TML_FS_H
#define TML_FS_H

#include <stdarg.h>
#include <stddef.h>

/* The whole file into a malloc'd NUL-terminated buffer (caller frees);
 * 0, or -1 with errno set (EFBIG over max bytes, EISDIR for a folder). */
int tml__read_file(const char *path, size_t max, char **buf, size_t *len);
/* Writes data to `path` through a new temporary file beside it and
 * rename(2): a reader never sees half of it, and a symlink planted at
 * `path` is replaced, never followed. `mode` is masked by the umask (0666
 * for what the user asked for, 0644 for artifacts, 0600 for secrets).
 * 0 or TML_EIO with errno kept (the temporary file removed). */
int tml__write_file(const char *path, const char *data, size_t len, unsigned mode);
/* The same, written piece by piece (a file larger than memory should
 * hold): begin, write as often as needed, then commit (the rename) or
 * abort (the temporary file removed, `path` untouched). 0 or TML_EIO with
 * errno kept; a failed write leaves the file to abort. */
typedef struct tml_file_out {
    int fd;
    char path[4096], tmp[4200];
} tml_file_out;
int tml__file_begin(tml_file_out *f, const char *path, unsigned mode);
int tml__file_write(tml_file_out *f, const char *data, size_t len);
int tml__file_commit(tml_file_out *f);
void tml__file_abort(tml_file_out *f);
/* The same for dir/name. */
int tml__write_file_atomic(const char *dir, const char *name, const char *data, size_t len,
                           unsigned mode);
/* Appends one line "<UTC ISO time> <who>[pid]: <message>" to the file at
 * path (created 0644): one write(2) with O_APPEND, so processes writing
 * the same log interleave whole lines; a newline inside the message
 * becomes a space. Failures are ignored: logging must not break a run.
 * TraceML's own log (traceml.log) is written only through this. */
void tml__log_line(const char *path, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tml__log_vline(const char *path, const char *who, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* All n bytes to fd, again after EINTR: 0, or -1 (errno set; EIO when
 * write(2) wrote nothing). Only write(2): safe in a signal handler. */
int tml__write_all(int fd, const void *data, size_t n);

#endif
