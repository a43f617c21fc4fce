/* Blocking line I/O on the control socket (corralctl is a one-shot client;
 * only `top` and `events` wait, and they poll). */
#include "client.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

const char *ctl_default_socket(void)
{
    static char path[4096];
    const char *rd = getenv("RUNTIME_DIRECTORY");
    struct stat st;
    if (rd && *rd) {
        snprintf(path, sizeof(path), "%.*s/control.sock", (int)strcspn(rd, ":"), rd);
        return path;
    }
    if (stat("/run/corral/control.sock", &st) == 0)
        return "/run/corral/control.sock";
    return "corral.sock";
}

int ctl_connect(struct ctl_conn *c, const char *path)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    c->fd = fd;
    return 0;
}

void ctl_close(struct ctl_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

int ctl_send(struct ctl_conn *c, const cJSON *req)
{
    char *s = cJSON_PrintUnformatted(req);
    if (!s)
        return -ENOMEM;
    size_t n = strlen(s);
    s[n] = '\n'; /* overwrites the terminator: written by length below */
    int r = 0;
    for (size_t off = 0; off < n + 1;) {
        ssize_t w = send(c->fd, s + off, n + 1 - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            r = -errno;
            break;
        }
        off += (size_t)w;
    }
    free(s);
    return r;
}

long ctl_read_line(struct ctl_conn *c, int timeout_ms, char **ret)
{
    /* Drop the line handed out last time. */
    if (c->taken) {
        memmove(c->buf, c->buf + c->taken, c->len - c->taken);
        c->len -= c->taken;
        c->taken = 0;
    }
    char *nl;
    for (;;) {
        nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        if (nl) {
            *nl = '\0';
            c->taken = (size_t)(nl - c->buf) + 1;
            *ret = c->buf;
            return (long)(nl - c->buf);
        }
        if (c->len >= CTL_MAX_LINE)
            return -EMSGSIZE;
        if (c->cap - c->len < 65536) {
            size_t cap = c->cap ? c->cap * 2 : 131072;
            char *nb = realloc(c->buf, cap);
            if (!nb)
                return -ENOMEM;
            c->buf = nb;
            c->cap = cap;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&p, 1, timeout_ms);
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EPIPE;
        c->len += (size_t)n;
    }
}

int ctl_call(struct ctl_conn *c, const cJSON *req, int timeout_ms, cJSON **ret, char **ret_raw)
{
    int r = ctl_send(c, req);
    if (r < 0)
        return r;
    char *line;
    long n = ctl_read_line(c, timeout_ms, &line);
    if (n < 0)
        return (int)n;
    cJSON *o = cJSON_ParseWithLengthOpts(line, (size_t)n, NULL, false);
    if (!o)
        return -EBADMSG;
    *ret = o;
    if (ret_raw)
        *ret_raw = line;
    return 0;
}
