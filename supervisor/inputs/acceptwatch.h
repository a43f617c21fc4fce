/* cr_acceptwatch: samples the accept queue of the listening socket corrald
 * owns (or, with --balance reuseport, of each accepting worker's own
 * socket) on a timer, keeps its figures in the core (model/acceptq.h: the
 * queue's length, its backlog, how long connections have waited) for the
 * views, and publishes a saturation and its end through the core's events.
 * An input: it reads and calls down into the core. */
#pragma once

#include <uv.h>

struct cr_supervisor;
struct cr_acceptwatch;
struct cr_event;

/* The sample periods. One getsockopt per socket (1.9 µs here), but each
 * period is also a wake-up of corrald's loop: at 40 a second an idle
 * corrald with one worker went from 0.03 % to 0.22 % of a core. So an
 * empty queue is read every CR_ACCEPTWATCH_IDLE_MS (100 ms: 0.08 %), and a
 * queue holding connections every CR_ACCEPTWATCH_PERIOD_MS (25 ms) until
 * it is seen empty again: that is the resolution of waited_ms and
 * nonempty_ms while connections wait, a quarter of the default
 * --saturated-after, below anything a client notices. The gap before the
 * first non-empty sample only widens waited_ms (the upper bound); the
 * saturation is judged on nonempty_ms, which it does not touch
 * (model/acceptq.h). With more than CR_ACCEPTWATCH_BATCH sockets (--balance
 * reuseport, one per worker) both periods stretch by ⌈sockets / 64⌉:
 * 1000 workers are read every 400 ms while connections wait (0.5 % of a
 * core), not every 25 ms (8 %). */
#define CR_ACCEPTWATCH_PERIOD_MS 25
#define CR_ACCEPTWATCH_IDLE_MS 100
#define CR_ACCEPTWATCH_BATCH 64

/* Prepares the timer (not started yet). -ENOMEM. */
int cr_acceptwatch_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_acceptwatch **ret);
/* Starts sampling (once the listener is open). */
void cr_acceptwatch_start(struct cr_acceptwatch *aw);
/* Subscriber: closes the timer when the core finishes. */
void cr_acceptwatch_on_event(void *aw, const struct cr_event *ev);
/* Frees it once the loop has ended; returns NULL. */
struct cr_acceptwatch *cr_acceptwatch_free(struct cr_acceptwatch *aw);
