/* cr_supervisor operations: what the outside asks of the core (control
 * commands, signals wired in main.c) and the core's own start-up and
 * shut-down. Each returns 0 or -errno; none of them calls an output: what
 * changes is published as events. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

struct cr_supervisor;
struct cr_gen_sink;

/* The core's start-up, in steps so main.c can subscribe and open its
 * outputs in between: init cannot fail (the loop, the clocks, the core's
 * timers; what the generations' descriptors deliver goes to sink); open
 * binds the listener, decides how workers start, prepares the cgroups and
 * opens the worker notify socket; spawn_all starts the configured workers.
 * open and spawn_all log what goes wrong and return -errno. */
void cr_supervisor_init(struct cr_supervisor *sup, uv_loop_t *loop,
                        const struct cr_gen_sink *sink);
int cr_supervisor_open(struct cr_supervisor *sup);
int cr_supervisor_spawn_all(struct cr_supervisor *sup);
/* Frees what open made (after the loop ended). */
void cr_supervisor_done(struct cr_supervisor *sup);

/* Drains every worker and exits once the table is empty. With
 * --stop-delay and not at_once, a running corrald first serves that long
 * as a lame duck (/readyz failing); a call during the delay drains at once.
 * why: what asked (the first call's is kept, and published with the stop). */
void cr_supervisor_stop(struct cr_supervisor *sup, bool at_once, const char *why);

void cr_supervisor_reload(struct cr_supervisor *sup, const char *why);
/* N workers: 0, -ESHUTDOWN, -ERANGE (not 1..4096), -EDOM (outside
 * --workers MIN..MAX: an operator's scale stays within the bounds). */
int cr_supervisor_scale(struct cr_supervisor *sup, unsigned n);
/* The same without the check against --workers MIN..MAX (the scaler,
 * `set workers`): 0, -ESHUTDOWN, -ERANGE, -ENOMEM. */
int cr_supervisor_scale_auto(struct cr_supervisor *sup, unsigned n);
/* --workers auto: one per CPU the workers may use (host/self.h: the
 * affinity mask, or the cgroup CPU quota when smaller), logged with the
 * figure that decided. */
unsigned cr_supervisor_auto_workers(void);
int cr_supervisor_restart(struct cr_supervisor *sup, int id, const char *why);
int cr_supervisor_kill(struct cr_supervisor *sup, int id, int sig);
int cr_supervisor_set(struct cr_supervisor *sup, const char *key, const char *value, char *err,
                      size_t errlen);

/* Compares the memory budget (budget.h) with the enclosing limit and logs
 * one line: at start-up always (when there is a limit), later only when it
 * does not fit, or fits again. */
void cr_supervisor_check_budget(struct cr_supervisor *sup, bool startup);
