/*
 * fs.c - whole files in and out (fs.h).
 */
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
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

int tml__write_file_atomic(const char *dir, const char *name, const char *data, size_t len,
                           unsigned mode)
{
    char tmp[4096], dst[4096];
    int a = snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    int b = snprintf(dst, sizeof(dst), "%s/%s", dir, name);
    if (a < 0 || b < 0 || (size_t)a >= sizeof(tmp) || (size_t)b >= sizeof(dst))
        return TML_EIO;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return TML_EIO;
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    if (close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    if (rename(tmp, dst) < 0) {
        unlink(tmp);
        return TML_EIO;
    }
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return TML_EIO;
}
