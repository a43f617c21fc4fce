/* cr_exitwatch: the kernel's exit notices, listened to while spares are
 * kept (they let a spare take a dying worker's slot before the kernel has
 * freed its memory) and not otherwise: the kernel sends one for every exit
 * on the machine. Opened when spares are first wanted, closed when none
 * are; an input: each notice goes down to the core. */
#pragma once

#include <uv.h>

struct cr_supervisor;
struct cr_exitnotice;
struct cr_event;

struct cr_exitwatch {
    struct cr_supervisor *sup;
    uv_loop_t *loop;
    struct cr_exitnotice *en; /* open while spares are kept */
    char failed[128];         /* why it could not be opened (not tried again) */
    char state[160];          /* "taskstats", "off", "unavailable: <why>", "stopped: <why>" */
};

/* Opens or closes the listener as the configuration asks (spares, and not
 * --no-exit-notice, and not stopping), logging what it does once. */
void cr_exitwatch_sync(struct cr_exitwatch *x);
/* Subscriber: follows `set spares` and the stop; closes at the end. */
void cr_exitwatch_on_event(void *x, const struct cr_event *ev);
/* What `status` shows of it (a const void * for cr_control_core). */
const char *cr_exitwatch_state(const void *x);
