/*
 * fs.c - whole files in and out (fs.h).
 */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/strbuf.h"
#include "traceml/traceml.h"

int tml__read_file(const char *path, size_t max, char **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0;
    *buf = NULL;
    if (!f)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return -1;
    }
    for (;;) {
        /* room for 4 KiB more and the NUL, in doubling steps */
        if (TML_GROW(b, n + 4096 + 1, cap) < 0) {
            free(b);
            fclose(f);
            errno = ENOMEM;
            return -1;
        }
        size_t r = fread(b + n, 1, cap - 1 - n, f);
        n += r;
        if (n > max) {
            free(b);
            fclose(f);
            errno = EFBIG;
            return -1;
        }
        if (r == 0) {
            if (ferror(f)) {
                int e = errno;
                free(b);
                fclose(f);
                errno = e ? e : EIO;
                return -1;
            }
            break;
        }
    }
    fclose(f);
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int tml__file_begin(tml_file_out *f, const char *path, unsigned mode)
{
    static atomic_uint seq;   /* threads of one process write too */
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    f->fd = -1;
    int n = snprintf(f->tmp, sizeof(f->tmp), "%.*s.%s.%d.%u.tmp", dl, path,
                     slash ? slash + 1 : path, (int)getpid(), atomic_fetch_add(&seq, 1));
    if (n < 0 || (size_t)n >= sizeof(f->tmp) || strlen(path) >= sizeof(f->path)) {
        errno = ENAMETOOLONG;
        return TML_EIO;
    }
    memcpy(f->path, path, strlen(path) + 1);
    /* O_EXCL: never through a link or a file planted under that name */
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    return f->fd < 0 ? TML_EIO : 0;
}

int tml__file_write(tml_file_out *f, const char *data, size_t len)
{
    return f->fd >= 0 && tml__write_all(f->fd, data, len) == 0 ? 0 : TML_EIO;
}

void tml__file_abort(tml_file_out *f)
{
    int saved = errno;
    if (f->fd >= 0) {
        close(f->fd);
        unlink(f->tmp);
    }
    f->fd = -1;
    errno = saved;
}

int tml__file_commit(tml_file_out *f)
{
    if (f->fd < 0)
        return TML_EIO;
    int fd = f->fd;
    f->fd = -1;
    /* rename replaces a link at `path`, never follows it */
    if (close(fd) == 0 && rename(f->tmp, f->path) == 0)
        return 0;
    int saved = errno;
    unlink(f->tmp);
    errno = saved;
    return TML_EIO;
}

int tml__write_file(const char *path, const char *data, size_t len, unsigned mode)
{
    tml_file_out f;
    if (tml__file_begin(&f, path, mode) < 0 || tml__file_write(&f, data, len) < 0) {
        tml__file_abort(&f);
        return TML_EIO;
    }
    return tml__file_commit(&f);
}

int tml__write_file_atomic(const char *dir, const char *name, const char *data, size_t len,
                           unsigned mode)
{
    char dst[4096];
    int n = snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof(dst)) {
        errno = ENAMETOOLONG;
        return TML_EIO;
    }
    return tml__write_file(dst, data, len, mode);
}

int tml__write_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void tml__log_vline(const char *path, const char *who, const char *fmt, va_list ap)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    char iso[64];
    tml__iso_time(tml__unix_ms(), iso, sizeof(iso));
    tml__sb_addf(&sb, "%s %s[%d]: ", iso, who, (int)getpid());
    tml__sb_vaddf(&sb, fmt, ap);
    /* one line per event, whatever the message held */
    for (size_t i = 0; i < sb.len; i++)
        if (sb.buf[i] == '\n' || sb.buf[i] == '\r')
            sb.buf[i] = ' ';
    tml__sb_addc(&sb, '\n');
    if (!sb.failed) {
        /* O_NOFOLLOW: a link planted at the log's name is not written through */
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            ssize_t w = write(fd, sb.buf, sb.len);
            (void)w;
            close(fd);
        }
    }
    tml__sb_release(&sb);
}

void tml__log_line(const char *path, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tml__log_vline(path, who, fmt, ap);
    va_end(ap);
}
