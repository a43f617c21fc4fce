/* cr_control: the control socket — AF_UNIX stream, mode 0660, peers checked
 * with SO_PEERCRED, newline-delimited JSON (one request per line, one
 * response per line), bounded in every direction. docs/control-protocol.md
 * is normative. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

struct cr_supervisor;
struct cr_control;

#define CR_CONTROL_MAX_LINE (64 * 1024)
#define CR_CONTROL_MAX_OUTPUT (4u << 20) /* queued bytes before a client is dropped */
#define CR_CONTROL_PAUSE_OUTPUT (256u << 10) /* queued bytes that pause reading a client's requests */
#define CR_CONTROL_IDLE_MS 60000

/* Opens the socket named by the config (or the default). Logs on failure. */
int cr_control_open(struct cr_supervisor *sup);
void cr_control_close(struct cr_control *c);
/* Sends one event line to every `events` subscriber. Does not take obj. */
void cr_control_broadcast(struct cr_control *c, const cJSON *obj);
const char *cr_control_path(const struct cr_control *c);

/* The request handler, apart from the socket: one parsed request in, one
 * response object out (caller frees). ret_subscribe is set for `events`;
 * `stop` is answered first and the drain begins, and the connection closes
 * when corrald exits. Pure apart from calling the supervisor's operations. */
cJSON *cr_control_handle(struct cr_supervisor *sup, const char *line, size_t len,
                         bool *ret_subscribe);

/* Error codes, fixed: see docs/control-protocol.md. */
#define CR_E_BAD_JSON "bad-json"
#define CR_E_BAD_REQUEST "bad-request"
#define CR_E_UNKNOWN_COMMAND "unknown-command"
#define CR_E_BAD_ARGUMENT "bad-argument"
#define CR_E_NOT_FOUND "not-found"
#define CR_E_NO_PROCESS "no-process"
#define CR_E_LINE_TOO_LONG "line-too-long"
#define CR_E_FORBIDDEN "forbidden"
#define CR_E_BUSY "busy"
#define CR_E_SHUTTING_DOWN "shutting-down"
#define CR_E_INTERNAL "internal"
