/* JSON views of the supervisor, its workers and its events, for `status`,
 * `worker` and the `events` stream. Units are in the key names. */
#pragma once

struct cJSON;
struct cr_supervisor;
struct cr_worker;
struct cr_event;

struct cJSON *cr_status_json(const struct cr_supervisor *sup);
struct cJSON *cr_worker_json(const struct cr_worker *w);
/* The `events` stream's line for a worker event; NULL for events that
 * the stream does not carry. */
struct cJSON *cr_event_json(const struct cr_event *ev);
