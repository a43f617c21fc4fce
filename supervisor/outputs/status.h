/* JSON views of the supervisor, its workers and its events, for `status`,
 * `worker` and the `events` stream. Units are in the key names. */
#pragma once

struct cJSON;
struct cr_supervisor;
struct cr_worker;
struct cr_event;
struct cr_ondeath;

/* New trees (caller owns), NULL when out of memory. */
/* {"supervisor":{…},"workers":[…]}, the workers as cr_workers_json gives them. */
/* What `status` shows that the core does not hold: how the inputs learn of
 * deaths before the reap (exitwatch.h). */
struct cr_status_extra {
    const char *exit_notice; /* "taskstats", "off", "unavailable: <why>" or "stopped: <why>" */
    const char *metrics_addr; /* the metrics listener's bound HOST:PORT, or NULL */
    const struct cr_ondeath *on_death; /* the --on-death runner's counters, or NULL */
    const struct cr_scale_status *scale; /* what the scaler did, or NULL */
};

struct cJSON *cr_status_json(const struct cr_supervisor *sup, const struct cr_status_extra *x);
/* [worker, …] in table order. Each worker is already printed: a cJSON raw
 * item holding its object's text, to be printed, not inspected. Built a
 * worker at a time, so the tree never holds more than one worker's nodes:
 * at 1000 workers a whole tree (60,000 nodes) spent a third of a status
 * request in malloc and free. */
struct cJSON *cr_workers_json(const struct cr_supervisor *sup);
/* One worker's object, as a tree. */
struct cJSON *cr_worker_json(const struct cr_worker *w);
/* The `events` stream's line for a worker event; NULL for events that
 * the stream does not carry. */
struct cJSON *cr_event_json(const struct cr_event *ev);
