/* The control protocol's commands: a table from name to handler; each
 * handler reads its arguments from the request object and fills the
 * response. */
#include "control.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "internal.h"
#include "metrics.h"
#include "operations.h"
#include "status.h"
#include "supervisor.h"

struct req {
    struct cr_supervisor *sup;
    const cJSON *in;
    cJSON *out;
    bool subscribe;
};

static cJSON *error_obj(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cJSON *error_obj(const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    return o;
}

/* Handlers return NULL on success (r->out filled) or an error object. */
typedef cJSON *(*handler)(struct req *r);

static const cJSON *arg(const struct req *r, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(r->in, k);
}

/* An integer in [min, max]; the range is checked before any conversion
 * (a double outside int's range must never be cast). */
static bool int_in(const cJSON *v, int min, int max)
{
    return cJSON_IsNumber(v) && v->valuedouble >= min && v->valuedouble <= max &&
           v->valuedouble == (double)(int)v->valuedouble;
}

/* A worker id: a positive integer. */
static int worker_arg(const struct req *r, const char *k, int *ret, cJSON **err)
{
    const cJSON *v = arg(r, k);
    if (!int_in(v, 1, 1 << 30)) {
        *err = error_obj(CR_E_BAD_ARGUMENT, "'%s' must be a worker id (a positive integer)", k);
        return -EINVAL;
    }
    *ret = v->valueint;
    return 0;
}

static cJSON *cmd_status(struct req *r)
{
    cJSON *st = cr_status_json(r->sup);
    cJSON *item;
    /* Move status's members into the response. */
    while ((item = st->child)) {
        cJSON_DetachItemViaPointer(st, item);
        cJSON_AddItemToObject(r->out, item->string, item);
    }
    cJSON_Delete(st);
    return NULL;
}

static cJSON *cmd_workers(struct req *r)
{
    cJSON *ws = cJSON_AddArrayToObject(r->out, "workers");
    for (struct cr_worker *w = r->sup->workers; w; w = w->next)
        cJSON_AddItemToArray(ws, cr_worker_json(w));
    return NULL;
}

static cJSON *cmd_worker(struct req *r)
{
    int id;
    cJSON *err = NULL;
    if (worker_arg(r, "worker", &id, &err) < 0)
        return err;
    struct cr_worker *w = cr_supervisor_worker(r->sup, id);
    if (!w)
        return error_obj(CR_E_NOT_FOUND, "no worker %d", id);
    cJSON_AddItemToObject(r->out, "worker", cr_worker_json(w));
    return NULL;
}

static cJSON *cmd_history(struct req *r)
{
    size_t n = cr_history_len(r->sup->history);
    const cJSON *v = arg(r, "n");
    if (v) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6)
            return error_obj(CR_E_BAD_ARGUMENT, "'n' must be a count from 0");
        if ((size_t)v->valuedouble < n)
            n = (size_t)v->valuedouble;
    }
    cJSON *h = cJSON_AddArrayToObject(r->out, "history");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(h, cr_postmortem_to_json(cr_history_get(r->sup->history, i)));
    return NULL;
}

static cJSON *cmd_scale(struct req *r)
{
    const cJSON *v = arg(r, "workers");
    if (!int_in(v, 1, 4096))
        return error_obj(CR_E_BAD_ARGUMENT, "'workers' must be an integer from 1 to 4096");
    int e = cr_supervisor_scale(r->sup, (unsigned)v->valueint);
    if (e == -ESHUTDOWN)
        return error_obj(CR_E_SHUTTING_DOWN, "corrald is stopping");
    if (e < 0)
        return error_obj(CR_E_INTERNAL, "scale failed: %s", strerror(-e));
    cJSON_AddNumberToObject(r->out, "workers", v->valueint);
    return NULL;
}

static cJSON *cmd_restart(struct req *r)
{
    const cJSON *v = arg(r, "worker");
    int id = 0;
    if (!(cJSON_IsString(v) && strcmp(v->valuestring, "all") == 0)) {
        cJSON *err = NULL;
        if (worker_arg(r, "worker", &id, &err) < 0) {
            cJSON_Delete(err);
            return error_obj(CR_E_BAD_ARGUMENT, "'worker' must be a worker id or \"all\"");
        }
    }
    int e = cr_supervisor_restart(r->sup, id, "restart requested");
    if (e == -ESHUTDOWN)
        return error_obj(CR_E_SHUTTING_DOWN, "corrald is stopping");
    if (e == -ENOENT)
        return error_obj(CR_E_NOT_FOUND, "no worker %d", id);
    return NULL;
}

static cJSON *cmd_reload(struct req *r)
{
    if (r->sup->stopping)
        return error_obj(CR_E_SHUTTING_DOWN, "corrald is stopping");
    cr_supervisor_reload(r->sup, "control socket");
    return NULL;
}

static const struct {
    const char *name;
    int sig;
} signals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ABRT", SIGABRT},
               {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
               {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"BUS", SIGBUS},
               {"ILL", SIGILL},   {"FPE", SIGFPE},   {"TRAP", SIGTRAP}, {"SYS", SIGSYS}};

static int parse_signal(const cJSON *v)
{
    if (int_in(v, 1, 64))
        return v->valueint;
    if (!cJSON_IsString(v))
        return -EINVAL;
    const char *s = v->valuestring;
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
        if (strcmp(s, signals[i].name) == 0)
            return signals[i].sig;
    return -EINVAL;
}

static cJSON *cmd_kill(struct req *r)
{
    int id;
    cJSON *err = NULL;
    if (worker_arg(r, "worker", &id, &err) < 0)
        return err;
    int sig = parse_signal(arg(r, "signal"));
    if (sig < 0)
        return error_obj(CR_E_BAD_ARGUMENT, "'signal' must be a signal name (KILL, TERM, ...) "
                                            "or number");
    int e = cr_supervisor_kill(r->sup, id, sig);
    if (e == -ENOENT)
        return error_obj(CR_E_NOT_FOUND, "no worker %d", id);
    if (e == -ESRCH)
        return error_obj(CR_E_NO_PROCESS, "worker %d has no process right now", id);
    cJSON_AddNumberToObject(r->out, "signal", sig);
    return NULL;
}

static cJSON *cmd_set(struct req *r)
{
    const cJSON *k = arg(r, "key"), *v = arg(r, "value");
    if (!cJSON_IsString(k))
        return error_obj(CR_E_BAD_ARGUMENT, "'key' must be a string");
    char buf[256];
    if (cJSON_IsString(v))
        snprintf(buf, sizeof(buf), "%s", v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble >= 0)
        snprintf(buf, sizeof(buf), "%.17g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(buf, sizeof(buf), "%s", cJSON_IsTrue(v) ? "true" : "false");
    else
        return error_obj(CR_E_BAD_ARGUMENT, "'value' must be a string, number or boolean");
    char msg[256];
    int e = cr_supervisor_set(r->sup, k->valuestring, buf, msg, sizeof(msg));
    if (e < 0)
        return error_obj(CR_E_BAD_ARGUMENT, "%s", e == -EINVAL ? msg : strerror(-e));
    cJSON_AddStringToObject(r->out, "key", k->valuestring);
    cJSON_AddStringToObject(r->out, "value", buf);
    return NULL;
}

static cJSON *cmd_events(struct req *r)
{
    r->subscribe = true;
    cJSON_AddTrueToObject(r->out, "subscribed");
    return NULL;
}

static cJSON *cmd_metrics(struct req *r)
{
    char *text = cr_metrics_text(r->sup);
    if (!text)
        return error_obj(CR_E_INTERNAL, "metrics rendering failed");
    cJSON_AddStringToObject(r->out, "metrics", text);
    free(text);
    return NULL;
}

static cJSON *cmd_stop(struct req *r)
{
    /* The answer is queued before the drain begins, and the connection
     * stays open until the last worker is gone. */
    cr_supervisor_stop(r->sup);
    return NULL;
}

static cJSON *cmd_ping(struct req *r)
{
    cJSON_AddStringToObject(r->out, "pong", "corral");
    return NULL;
}

static const struct {
    const char *name;
    handler fn;
} commands[] = {
    {"status", cmd_status},   {"workers", cmd_workers}, {"worker", cmd_worker},
    {"history", cmd_history}, {"scale", cmd_scale},     {"restart", cmd_restart},
    {"reload", cmd_reload},   {"kill", cmd_kill},       {"set", cmd_set},
    {"events", cmd_events},   {"metrics", cmd_metrics}, {"stop", cmd_stop},
    {"ping", cmd_ping},
};

static void echo_id(cJSON *out, const cJSON *in)
{
    const cJSON *id = in ? cJSON_GetObjectItemCaseSensitive(in, "id") : NULL;
    if (id)
        cJSON_AddItemToObject(out, "id", cJSON_Duplicate(id, true));
}

cJSON *cr_control_handle(struct cr_supervisor *sup, const char *line, size_t len,
                         bool *ret_subscribe)
{
    *ret_subscribe = false;
    const char *end = NULL;
    cJSON *in = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!in)
        return error_obj(CR_E_BAD_JSON, "not valid JSON (near byte %ld)",
                         end ? (long)(end - line) : 0L);
    /* One value per line: anything but blanks after it is an error (cJSON
     * stops at the end of the first value and would ignore the rest). */
    size_t used = (size_t)(end - line);
    while (used < len && line[used] && strchr(" \t\r", line[used]))
        used++;
    if (used < len) {
        cJSON_Delete(in);
        return error_obj(CR_E_BAD_JSON, "trailing data after the request (byte %zu)", used);
    }
    cJSON *res = NULL;
    if (!cJSON_IsObject(in)) {
        res = error_obj(CR_E_BAD_REQUEST, "a request is a JSON object");
        goto out;
    }
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(in, "cmd");
    if (!cJSON_IsString(cmd)) {
        res = error_obj(CR_E_BAD_REQUEST, "a request needs \"cmd\": a string");
        goto out;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(cmd->valuestring, commands[i].name) != 0)
            continue;
        struct req r = {.sup = sup, .in = in, .out = cJSON_CreateObject()};
        cJSON_AddTrueToObject(r.out, "ok");
        cJSON *err = commands[i].fn(&r);
        if (err) {
            cJSON_Delete(r.out);
            res = err;
        } else {
            res = r.out;
            *ret_subscribe = r.subscribe;
        }
        goto out;
    }
    res = error_obj(CR_E_UNKNOWN_COMMAND, "unknown command '%.64s'", cmd->valuestring);
out:
    echo_id(res, in);
    cJSON_Delete(in);
    return res;
}
