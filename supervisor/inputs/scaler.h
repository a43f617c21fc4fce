/* cr_scaler: --workers MIN..MAX. Every CR_SCALER_TICK_MS it measures what
 * the decision (model/autoscale.h) reads — the accept queue, the serving
 * loops' utilization and CPU, the idle cores, the memory budget — and
 * applies the decision through the core's scale, the way `corralctl scale`
 * does. A change, or a wanted change held (saturated CPU, MAX, the memory
 * budget), is a `scale` event and a log line with its reasons. An input:
 * it reads and calls down into the core; idle while N is fixed. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "autoscale.h"

struct cr_supervisor;
struct cr_scaler;
struct cr_event;

/* Often enough that a step follows a queue within a fraction of a second,
 * seldom enough that a worker's CPU over a tick means something. */
#define CR_SCALER_TICK_MS 500
/* After a change, no decision for this long: the new worker is ready in
 * milliseconds, its effect on the queue takes a few ticks to show. */
#define CR_SCALER_SETTLE_MS 1000

/* Prepares the timer. -ENOMEM. */
int cr_scaler_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_scaler **ret);
/* Starts ticking when --workers is a range (and whenever `set workers`
 * makes it one). */
void cr_scaler_start(struct cr_scaler *sc);
/* Subscriber: follows `set workers`, closes the timer when the core ends. */
void cr_scaler_on_event(void *sc, const struct cr_event *ev);
/* What it has done (autoscale.h), for status; NULL-safe. */
const struct cr_scale_status *cr_scaler_status(const struct cr_scaler *sc);
/* Frees it once the loop has ended; returns NULL. */
struct cr_scaler *cr_scaler_free(struct cr_scaler *sc);
