/* The worker → corrald notify protocol, written once for both ends: the
 * limits and the keys. The format is sd_notify's (KEY=VALUE lines; in the
 * stream form a message ends with an empty line); docs/worker-protocol.md
 * is the reference. Header only: no code, no dependencies.
 */
#pragma once

/* One message, either transport, framing included. */
#define CR_NOTIFY_MAX 4096
/* Longest STATUS= and X_FATAL= values a receiver keeps (NUL included). */
#define CR_NOTIFY_STATUS_MAX 256
#define CR_NOTIFY_FATAL_MAX  32
/* X_HEAP_SPACES: at most this many spaces, each name at most this long
 * (NUL included); V8 has 9 to 13 spaces (Node 18 to 24), named up to 33
 * bytes ("shared_trusted_large_object_space", sent without its "_space":
 * 27). */
#define CR_NOTIFY_SPACES_MAX 16
#define CR_NOTIFY_SPACE_NAME_MAX 32

/* systemd's own keys. */
#define CR_NK_READY    "READY"
#define CR_NK_WATCHDOG "WATCHDOG"
#define CR_NK_STOPPING "STOPPING"
#define CR_NK_STATUS   "STATUS"

/* corral's keys: sizes in bytes, delays in microseconds, ELU in 0..1. */
#define CR_NK_FATAL      "X_FATAL"
#define CR_NK_HEAP_USED  "X_HEAP_USED"
#define CR_NK_HEAP_TOTAL "X_HEAP_TOTAL"
#define CR_NK_HEAP_LIMIT "X_HEAP_LIMIT"
#define CR_NK_EXTERNAL   "X_EXTERNAL"
#define CR_NK_RSS        "X_RSS"
#define CR_NK_DELAY_P50  "X_LOOP_DELAY_P50_US"
#define CR_NK_DELAY_P99  "X_LOOP_DELAY_P99_US"
#define CR_NK_DELAY_MAX  "X_LOOP_DELAY_MAX_US"
#define CR_NK_ELU        "X_ELU"
#define CR_NK_INFLIGHT   "X_INFLIGHT"
#define CR_NK_REQUESTS   "X_REQUESTS"
#define CR_NK_POOL_QUEUE "X_POOL_QUEUE"
/* The managed heap's spaces, "name:used/size,..." in bytes (V8's
 * getHeapSpaceStatistics(), names without "_space"). */
#define CR_NK_HEAP_SPACES "X_HEAP_SPACES"

/* The X_FATAL value a worker sends just before a heap-limit abort. */
#define CR_NOTIFY_FATAL_HEAP_LIMIT "heap-limit"
