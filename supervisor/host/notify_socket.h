/* cr_notify socket: the datagram form of the worker -> corrald protocol
 * (the parser is model/notify.h). */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* The worker-notify datagram socket, bound at path (AF_UNIX, SO_PASSCRED,
 * non-blocking, CLOEXEC). The caller makes path unreachable to strangers:
 * it lives in a 0700 directory (an abstract socket would be visible to, and
 * floodable by, every local user). */
int cr_notify_open(const char *path, int *ret_fd);

/* Receives one datagram: >0 bytes, with the sender's pid; 0 = nothing left
 * (EAGAIN); -errno on error. Datagrams without credentials are dropped. */
ssize_t cr_notify_recv(int fd, char *buf, size_t len, pid_t *ret_pid);
