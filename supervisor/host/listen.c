#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

int cr_listen_split(const char *hostport, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || !colon[1])
        return -EINVAL;
    const char *h = hostport;
    size_t hl = (size_t)(colon - hostport);
    if (h[0] == '[') {
        if (hl < 3 || h[hl - 1] != ']')
            return -EINVAL;
        h++;
        hl -= 2;
    }
    if (hl >= hostlen || strlen(colon + 1) >= portlen)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    strcpy(port, colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return -EINVAL;
    return atoi(port) <= 65535 ? 0 : -EINVAL;
}

static void format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        port = ntohs(s4->sin_port);
        snprintf(buf, len, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        port = ntohs(s6->sin6_port);
        snprintf(buf, len, "[%s]:%u", host, port);
    } else {
        snprintf(buf, len, "family-%d", sa->sa_family);
    }
}

void cr_listen_describe(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        format_addr((struct sockaddr *)&ss, buf, len);
    else
        snprintf(buf, len, "fd %d", fd);
}

int cr_listen_from_systemd(struct cr_listener *ret)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0) {
        free(names);
        return n;
    }
    int got = 0;
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        if (!got && sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0) {
            *ret = (struct cr_listener){.fd = fd, .from_systemd = true};
            cr_listen_describe(fd, ret->addr, sizeof(ret->addr));
            snprintf(ret->name, sizeof(ret->name), "%s", names && names[i] ? names[i] : "");
            /* It must not leak into workers under its systemd number; they
             * get a fresh fd 3 of it from the spawn code. */
            fcntl(fd, F_SETFD, FD_CLOEXEC);
            got = 1;
        }
        free(names ? names[i] : NULL);
    }
    free(names);
    return got;
}

int cr_listen_bind(const char *hostport, bool reuseport, bool do_listen, struct cr_listener *ret)
{
    char host[256], port[8];
    int r = cr_listen_split(hostport, host, sizeof(host), port, sizeof(port));
    if (r < 0)
        return r;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *ai = NULL;
    r = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (r != 0)
        return r == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r = -errno;
        goto out;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
        goto fail;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
        goto fail;
    if (do_listen && listen(fd, 1024) < 0)
        goto fail;
    *ret = (struct cr_listener){.fd = fd};
    cr_listen_describe(fd, ret->addr, sizeof(ret->addr));
    snprintf(ret->name, sizeof(ret->name), "corral");
    r = 0;
    goto out;
fail:
    r = -errno;
    close(fd);
out:
    freeaddrinfo(ai);
    return r;
}

int cr_listen_queue(int fd, uint32_t *length, uint32_t *max)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    if (fd < 0)
        return 0;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
        return errno == EOPNOTSUPP || errno == ENOPROTOOPT ? 0 : -errno;
    if (len < offsetof(struct tcp_info, tcpi_sacked) + sizeof(ti.tcpi_sacked) ||
        ti.tcpi_state != TCP_LISTEN)
        return 0;
    *length = ti.tcpi_unacked;
    *max = ti.tcpi_sacked;
    return 1;
}

void cr_listen_close(struct cr_listener *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}
