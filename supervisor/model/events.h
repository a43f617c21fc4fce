/* cr_events: what the supervisor core tells the rest of corrald.
 *
 * The core (supervisor.c, operations.c and the files below them) publishes
 * typed events; the outputs (sd.c, the control socket's `events` stream,
 * the journal line of a death, the memory watch's timer) subscribe once at
 * start-up, in main.c. The core never names an output: adding one is a
 * subscription, not an edit of the core.
 *
 * A subscriber runs synchronously inside the core's call, so it must not
 * change a worker (that would re-enter the table); it reads and reports.
 * Pointers in an event are valid only during the call.
 *
 * A leaf module: no I/O, no dependency on the rest of corrald.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "lifecycle.h"

struct cr_postmortem;
struct cr_config;
struct cr_acceptq_figures;
struct cr_scale_decision;

enum cr_event_type {
    CR_EV_WORKER_STATE,   /* a worker changed state; `name` is the protocol's word for it */
    CR_EV_WORKER_RECYCLE, /* a rolling replacement was queued for a worker; `reason` says why */
    CR_EV_WORKER_DIED,    /* a worker was reaped and classified; `postmortem` is set */
    CR_EV_TABLE,          /* the worker table changed (readiness, counts) */
    CR_EV_CONFIG,         /* a setting changed at run time: `key`, `value`, `config` */
    CR_EV_RELOAD,         /* reload progress: `phase`, `failed`, `reason` */
    CR_EV_LAME_DUCK,      /* a stop began with --stop-delay: serving on, /readyz failing */
    CR_EV_STOPPING,       /* the drain began: every worker is draining */
    CR_EV_FINISHED,       /* stopping and the table is empty: close inputs and outputs */
    CR_EV_QUEUE_SATURATED, /* the accept queue held connections for --saturated-after: `queue` */
    CR_EV_QUEUE_DRAINED,   /* ... and was seen empty again: `queue` */
    CR_EV_SCALE,          /* --workers MIN..MAX: N changed, or a wanted change was held: `scale` */
    _CR_EV_MAX,
};

enum cr_reload_phase {
    CR_RELOAD_STARTED,  /* every worker was queued for a rolling replacement */
    CR_RELOAD_FINISHED, /* no replacement is pending any more; `failed` died before ready */
};

struct cr_event {
    enum cr_event_type type;
    uint64_t time_ms; /* wall clock, ms since the epoch */

    /* Worker events (CR_EV_WORKER_*). */
    int worker; /* slot id */
    pid_t pid;
    unsigned generation;
    enum cr_wstate from, to; /* CR_EV_WORKER_STATE */
    const char *name;        /* "spawned", "ready", "blocked", "unblocked", "draining", "failed" */
    const char *reason;      /* or NULL */
    const struct cr_postmortem *postmortem; /* CR_EV_WORKER_DIED */

    /* CR_EV_CONFIG */
    const char *key, *value;
    const struct cr_config *config; /* the whole configuration after the change */

    /* CR_EV_RELOAD */
    enum cr_reload_phase phase;
    unsigned failed;

    /* CR_EV_QUEUE_*: the accept queue's figures at the round that changed */
    const struct cr_acceptq_figures *queue;

    /* CR_EV_SCALE: the decision, its figures and its sentence */
    const struct cr_scale_decision *scale;
};

typedef void (*cr_event_fn)(void *userdata, const struct cr_event *ev);

#define CR_EVENTS_MAX_SUBSCRIBERS 12

/* The subscriber list; embedded in whoever publishes (zero = empty). */
struct cr_events {
    struct {
        cr_event_fn fn;
        void *userdata;
    } sub[CR_EVENTS_MAX_SUBSCRIBERS];
    unsigned n;
};

/* Adds a subscriber; they are called in the order they subscribed.
 * -ENOSPC when the list is full. */
int cr_events_subscribe(struct cr_events *bus, cr_event_fn fn, void *userdata);

/* Calls every subscriber with ev (the publisher stamps ev->time_ms). */
void cr_events_publish(const struct cr_events *bus, struct cr_event *ev);

const char *cr_event_type_to_string(enum cr_event_type t);
