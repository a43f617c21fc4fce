/* The worker-notify datagram socket: see notify_socket.h. */
#include "notify_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int cr_notify_open(const char *path, int *ret_fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
        goto fail;
    /* Enough buffer for a burst of reports from hundreds of workers. */
    int rcv = 4 << 20;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        goto fail;
    *ret_fd = fd;
    return 0;
fail:;
    int e = errno;
    close(fd);
    return -e;
}

ssize_t cr_notify_recv(int fd, char *buf, size_t len, pid_t *ret_pid)
{
    /* Bounded: anyone may send to the socket, and dropped datagrams must
     * not hold the loop. */
    for (int dropped = 0; dropped < 64; dropped++) {
        union {
            struct cmsghdr h;
            char b[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 8)];
        } ctl;
        struct iovec iov = {buf, len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
                            .msg_controllen = sizeof(ctl)};
        ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
        pid_t pid = 0;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                struct ucred uc;
                memcpy(&uc, CMSG_DATA(c), sizeof(uc));
                pid = uc.pid;
            } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                /* Nobody may park descriptors on us. */
                int nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                for (int i = 0; i < nfd; i++) {
                    int x;
                    memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                    close(x);
                }
            }
        }
        if (pid <= 0 || (size_t)n > len)
            continue; /* no credentials, or truncated: drop it */
        *ret_pid = pid;
        return n;
    }
    return 0;
}
