/* The sd_notify channel to corrald (or systemd): AF_UNIX datagrams through
 * libsystemd when NOTIFY_SOCKET is set, else the stream form on the fd in
 * CORRAL_NOTIFY_FD (KEY=VALUE lines, a message ends with an empty line),
 * else nothing. See docs/worker-protocol.md. */
#pragma once

#include <stdbool.h>

#include "notify_proto.h" /* CR_NOTIFY_MAX and the keys, shared with corrald */

enum cr_notify_kind { CR_NOTIFY_NONE, CR_NOTIFY_DATAGRAM, CR_NOTIFY_STREAM };

struct cr_notify {
    enum cr_notify_kind kind;
    int fd; /* stream form only, else -1 */
};

/* Picks the channel from the environment. Returns 0, or -EBADF when
 * CORRAL_NOTIFY_FD names no usable fd (the channel is then NONE). */
int cr_notify_init(struct cr_notify *n);
void cr_notify_done(struct cr_notify *n);

/* Sends one message: lines separated by '\n', no trailing empty line.
 * Returns 1 sent, 0 no channel, -errno on failure (-EMSGSIZE when over
 * CR_NOTIFY_MAX, -EAGAIN when a stream reader is too slow). */
int cr_notify_send(struct cr_notify *n, const char *msg);
