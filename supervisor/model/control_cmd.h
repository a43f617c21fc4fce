/* cr_control_cmd: the control protocol's dispatcher, apart from the socket
 * and apart from the supervisor. One request line in, one response object
 * out; everything it does to corrald goes through struct cr_ctl_ops, so a
 * unit test can drive it with a fake core. docs/control-protocol.md is
 * normative. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "utf8.h" /* cr_utf8_valid_prefix, for the tests and fuzzers */

struct cr_postmortem;

/* Error codes, fixed: see docs/control-protocol.md. */
#define CR_E_BAD_JSON        "bad-json"
#define CR_E_BAD_REQUEST     "bad-request"
#define CR_E_UNKNOWN_COMMAND "unknown-command"
#define CR_E_BAD_ARGUMENT    "bad-argument"
#define CR_E_NOT_FOUND       "not-found"
#define CR_E_NO_PROCESS      "no-process"
#define CR_E_LINE_TOO_LONG   "line-too-long"
#define CR_E_FORBIDDEN       "forbidden"
#define CR_E_BUSY            "busy"
#define CR_E_SHUTTING_DOWN   "shutting-down"
#define CR_E_INTERNAL        "internal"

/* What the dispatcher may ask of corrald. ctx is handed back unchanged.
 * Functions returning cJSON * give the caller a new object (NULL: out of
 * memory, answered `internal`); int functions return 0 or -errno:
 * -ESHUTDOWN (corrald is stopping), -ENOENT (no such worker), -ESRCH (the
 * worker has no process), -ESTALE (stack: the process asked has exited),
 * -EINVAL (set: bad key or value, text in err; stack: a number never
 * asked), anything else is `internal`. */
struct cr_ctl_ops {
    cJSON *(*status)(void *ctx);                   /* {"supervisor":{…},"workers":[…]} */
    cJSON *(*workers)(void *ctx);                  /* [worker, …] */
    int (*worker)(void *ctx, int id, cJSON **ret); /* -ENOENT or one worker object */
    size_t (*history_len)(void *ctx); /* death records kept */
    /* Record i, 0 = newest (NULL: answered `internal`); the dispatcher
     * filters and renders it (history.h). */
    const struct cr_postmortem *(*history)(void *ctx, size_t i);
    int (*scale)(void *ctx, unsigned n);
    int (*restart)(void *ctx, int id); /* id 0 = every worker */
    int (*reload)(void *ctx);
    int (*kill)(void *ctx, int id, int sig);
    int (*set)(void *ctx, const char *key, const char *value, char *err, size_t errlen);
    char *(*metrics)(void *ctx); /* Prometheus text, caller frees */
    /* The stack of a worker's main thread (docs/control-protocol.md,
     * "stack"): request 0 asks for a new one, request n looks for the
     * answer to n. -ENOENT, -ESRCH, or 0 with *ret the object to send. */
    int (*stack)(void *ctx, int id, uint32_t request, cJSON **ret);
    void (*stop)(void *ctx);     /* begin the drain; the answer goes out first */
};

/* What the transport does after an answer. */
struct cr_control_turn {
    bool subscribe; /* `events`: send this client every event from now on */
    /* A `stack` with "wait" whose stack is not in yet: the transport holds
     * the answer up to hold_ms, looking again (cr_control_handle_again)
     * until an answer comes without hold_ms, then sends that one, or the
     * last one at the deadline. The client's later lines wait. */
    uint32_t hold_ms;
    int worker;     /* the held stack request: its worker */
    uint32_t again; /* and its number */
};

/* Bounds a `stack` request's "wait", in ms. */
#define CR_CONTROL_MAX_WAIT_MS 60000

/* The request handler: one line (without its '\n') in, one response object
 * out (caller frees, never NULL unless out of memory), and the transport's
 * next step in *turn. */
cJSON *cr_control_handle(const struct cr_ctl_ops *ops, void *ctx, const char *line, size_t len,
                         struct cr_control_turn *turn);

/* A held answer (was: the turn it came with) looked at again: no line is
 * parsed, the stack request was->again of worker was->worker is asked
 * after. held is consumed; the result, never NULL, is the answer as it
 * stands now (an error keeps held's "id"), *turn as for cr_control_handle. */
cJSON *cr_control_handle_again(const struct cr_ctl_ops *ops, void *ctx, cJSON *held,
                               const struct cr_control_turn *was, struct cr_control_turn *turn);

/* {"ok":false,"error":{"code":code,"message":…}}; the message is cut to
 * whole UTF-8 characters and any invalid byte becomes '?'. */
cJSON *cr_control_error(const char *code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One response or event as a line: compact JSON, then '\n', then NUL.
 * Invalid UTF-8 (a worker's STATUS= text or stderr tail may hold any
 * bytes) becomes '?', so every line is valid UTF-8 and valid JSON. Caller
 * frees; NULL when out of memory. */
char *cr_control_print_line(const cJSON *obj, size_t *ret_len);

