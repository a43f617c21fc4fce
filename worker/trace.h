/* The worker's page (common/wpage.h), the reference worker's side: the
 * request it serves now, written with plain stores on every start and end
 * of a request (no system call), and the stack of its loop thread on
 * corrald's request, answered by a thread of its own that sleeps on the
 * page's futex: the loop thread may be the one that is stuck. Without
 * CORRAL_PAGE_FD every call is a no-op. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Maps the page corrald passed (CORRAL_PAGE_FD) and starts the stack
 * thread. 0 when there is none; -errno when it cannot be used (the worker
 * runs on without). Call from the loop thread: its stack is the one
 * answered. */
int cr_trace_open(void);

/* The request now being served: method, path and query (query "" when
 * none), started at started_ns (CLOCK_MONOTONIC), inflight in flight,
 * count since start. */
void cr_trace_request(uint32_t inflight, uint64_t count, uint64_t started_ns, const char *method,
                      const char *path, const char *query);
/* None is being served (inflight may still be waiting on timers). */
void cr_trace_idle(uint32_t inflight, uint64_t count);
