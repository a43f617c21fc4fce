/* cr_memwatch: every sample period, for each worker, RSS, the cgroup's
 * usage and the last heap report go into a bounded ring; the trend module
 * reads a verdict off it, and the soft limit and --max-lifetime ask the
 * core for a rolling replacement. An input: it calls down into the core. */
#pragma once

#include <uv.h>

struct cr_supervisor;
struct cr_memwatch;
struct cr_event;

/* Prepares the sample timer (not started yet). -ENOMEM. */
int cr_memwatch_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_memwatch **ret);
/* Starts sampling every --sample-interval. */
void cr_memwatch_start(struct cr_memwatch *mw);
/* Subscriber: follows `set sample-interval`; closes the timer at the end. */
void cr_memwatch_on_event(void *mw, const struct cr_event *ev);
/* Frees it once the loop has ended; returns NULL. */
struct cr_memwatch *cr_memwatch_free(struct cr_memwatch *mw);
