/* cr_notify: the worker → corrald protocol (sd_notify's KEY=VALUE lines).
 *
 * The parser is pure and shared by both transports: datagrams on corrald's
 * worker-notify socket (sender attributed by SCM_CREDENTIALS pid) and the
 * stream form on an inherited fd (CORRAL_NOTIFY_FD), where a message ends at
 * an empty line. docs/worker-protocol.md is the reference.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "notify_proto.h" /* CR_NOTIFY_MAX and the keys, shared with the worker */

enum cr_notify_field {
    CR_NF_READY = 1u << 0,
    CR_NF_WATCHDOG = 1u << 1,
    CR_NF_STOPPING = 1u << 2,
    CR_NF_STATUS = 1u << 3,
    CR_NF_FATAL = 1u << 4,
    CR_NF_HEAP_USED = 1u << 5,
    CR_NF_HEAP_TOTAL = 1u << 6,
    CR_NF_HEAP_LIMIT = 1u << 7,
    CR_NF_EXTERNAL = 1u << 8,
    CR_NF_RSS = 1u << 9,
    CR_NF_DELAY_P50 = 1u << 10,
    CR_NF_DELAY_P99 = 1u << 11,
    CR_NF_DELAY_MAX = 1u << 12,
    CR_NF_ELU = 1u << 13,
    CR_NF_INFLIGHT = 1u << 14,
    CR_NF_REQUESTS = 1u << 15,
    CR_NF_POOL_QUEUE = 1u << 16,
    CR_NF_HEAP_SPACES = 1u << 17,
};

/* One space of the managed heap (X_HEAP_SPACES). */
struct cr_heap_space {
    char name[CR_NOTIFY_SPACE_NAME_MAX];
    uint64_t used, size; /* bytes */
};

struct cr_notify_msg {
    unsigned present; /* cr_notify_field bits */
    char status[CR_NOTIFY_STATUS_MAX];
    char fatal[CR_NOTIFY_FATAL_MAX];
    uint64_t heap_used, heap_total, heap_limit, external, rss;
    uint64_t delay_p50_us, delay_p99_us, delay_max_us;
    uint64_t inflight, requests, pool_queue;
    double elu;
    unsigned nspaces; /* X_HEAP_SPACES: spaces[0..nspaces) */
    struct cr_heap_space spaces[CR_NOTIFY_SPACES_MAX];
};

/* Parses one message. Unknown keys are ignored (forward compatible); a
 * known key with a bad value is ignored too and counted in ret_bad. */
void cr_notify_parse(const char *buf, size_t len, struct cr_notify_msg *ret, unsigned *ret_bad);

/* Stream framing: appends data to a per-worker buffer and hands out whole
 * messages (ending in "\n\n"). Returns the number of bytes consumed from buf
 * into ret_msg (>0, a message is ready: parse buf[0..len)), 0 when more data
 * is needed, or -EMSGSIZE when a message outgrew CR_NOTIFY_MAX. */
struct cr_notify_stream {
    char buf[CR_NOTIFY_MAX + 2];
    size_t len;
};
int cr_notify_stream_feed(struct cr_notify_stream *s, const char *data, size_t len,
                          size_t *ret_used, char *ret_msg, size_t *ret_msg_len);
