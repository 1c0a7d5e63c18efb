/*
 * net.c - one way to open a listening socket, for the aggregator and the
 * live server: IPv4 only (a host name binds its IPv4 address), although a
 * rank's client (core/client.c) would connect over either family;
 * SO_REUSEADDR so a restarted run can take its port back at once.
 */
#include "base/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "traceml/traceml.h"

int tml__net_listen(const char *bind_addr, int port, int backlog, int *port_out)
{
    struct addrinfo hints, *ai = NULL;
    char sport[16];
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(sport, sizeof(sport), "%d", port);
    if (getaddrinfo(bind_addr && *bind_addr ? bind_addr : "127.0.0.1", sport, &hints, &ai) != 0 ||
        !ai)
        return TML_EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &sl) < 0)
        goto fail;
    freeaddrinfo(ai);
    *port_out = ntohs(sin.sin_port);
    return fd;
fail:;
    int saved = errno;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    errno = saved;
    return TML_ECONN;
}

static long limit_of(rlim_t v)
{
    return v == RLIM_INFINITY || v > (rlim_t)LONG_MAX ? LONG_MAX : (long)v;
}

long tml__net_raise_fd_limit(long *before)
{
    struct rlimit rl;
    *before = -1;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    *before = limit_of(rl.rlim_cur);
    if (rl.rlim_cur != rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            return *before;
    }
    return limit_of(rl.rlim_cur);
}
