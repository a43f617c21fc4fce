/* cr_control: the control socket — AF_UNIX stream, mode 0660, peers checked
 * with SO_PEERCRED, newline-delimited JSON (one request per line, one
 * response per line), bounded in every direction. The path is owned: a
 * lock file beside it (flock) says whether a live corrald holds it.
 * docs/control-protocol.md is normative; the requests themselves are
 * answered by the dispatcher (control_cmd.h). */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "control_cmd.h"

struct cr_config;
struct cr_control;
struct cr_supervisor;
struct cr_scale_status;
struct cr_ondeath;

#define CR_CONTROL_MAX_LINE (64 * 1024)
#define CR_CONTROL_MAX_OUTPUT (4u << 20) /* queued bytes before a client is dropped */
/* Queued bytes that pause reading a client's requests. */
#define CR_CONTROL_PAUSE_OUTPUT (256u << 10)
#define CR_CONTROL_IDLE_MS 60000

/* Opens the socket named by cfg (or the default) on loop; its requests are
 * answered through ops with ops_ctx. Refuses (-EADDRINUSE) when another
 * live corrald owns the path; replaces a stale socket file. Logs on
 * failure. cfg is read for the control options (and later the client
 * bound) while the socket lives. */
int cr_control_open(uv_loop_t *loop, const struct cr_config *cfg, const struct cr_ctl_ops *ops,
                    void *ops_ctx, struct cr_control **ret);
void cr_control_close(struct cr_control *c);
/* Sends one event line to every `events` subscriber. Does not take obj. */
void cr_control_broadcast(struct cr_control *c, const cJSON *obj);
const char *cr_control_path(const struct cr_control *c);

/* The dispatcher's operations on the real supervisor (control_core.c);
 * their ctx is a struct cr_control_core. */
extern const struct cr_ctl_ops cr_control_core_ops;
struct cr_control_core {
    struct cr_supervisor *sup;
    /* How deaths are noticed before the reap, for `status` (exitwatch.h). */
    const char *(*exit_notice)(const void *ctx);
    const void *exit_notice_ctx;
    /* The --on-death runner, for `status`. */
    const struct cr_ondeath *on_death;
    /* What the scaler (--workers MIN..MAX) did, for `status`. */
    const struct cr_scale_status *scale;
    /* The metrics listener's bound address ("" = none), for `status`. */
    char metrics_addr[80];
};
