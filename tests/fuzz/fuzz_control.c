/* The control protocol's request handling: one request line in
 * (cr_control_handle: JSON parse, the one-value-per-line rule, command
 * lookup, argument validation, the id echo), one response out, which
 * must print as a JSON object with a boolean "ok".
 *
 * The dispatcher runs against a fake core (struct cr_ctl_ops) whose acting
 * operations succeed or fail by their arguments, so every command's
 * parsing, its success path and each error code are reached without a
 * loop, a fork or a signal. The line framing in control.c (a static
 * function on libuv streams) is not reached here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_cmd.h"

#define CHECK(x) ((x) ? (void)0 : abort())

static cJSON *f_worker_obj(int id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "state", "ready");
    return o;
}

static cJSON *f_status(void *ctx)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *ws = cJSON_AddArrayToObject(o, "workers");
    cJSON_AddItemToArray(ws, f_worker_obj(1));
    cJSON_AddObjectToObject(o, "supervisor");
    return o;
}

static cJSON *f_workers(void *ctx)
{
    cJSON *ws = cJSON_CreateArray();
    cJSON_AddItemToArray(ws, f_worker_obj(1));
    return ws;
}

static int f_worker(void *ctx, int id, cJSON **ret)
{
    if (id != 1)
        return -ENOENT;
    *ret = f_worker_obj(id);
    return 0;
}

static size_t f_history_len(void *ctx)
{
    return 2;
}

static cJSON *f_history(void *ctx, size_t i)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "worker", 1);
    /* Bytes a worker may really leave in its stderr tail. */
    cJSON_AddStringToObject(o, "stderr_tail", i ? "out of memory\n\xff\xfe" : "");
    return o;
}

static int f_scale(void *ctx, unsigned n)
{
    return n > 64 ? -EINVAL : 0;
}

static int f_restart(void *ctx, int id)
{
    return id == 0 || id == 1 ? 0 : id == 2 ? -ESRCH : -ENOENT;
}

static int f_reload(void *ctx)
{
    return 0;
}

static int f_kill(void *ctx, int id, int sig)
{
    return id == 1 ? 0 : id == 2 ? -ESRCH : -ENOENT;
}

static int f_set(void *ctx, const char *key, const char *value, char *err, size_t errlen)
{
    if (strcmp(key, "workers") == 0)
        return 0;
    snprintf(err, errlen, "%s: not settable (%s)", key, value);
    return -EINVAL;
}

static char *f_metrics(void *ctx)
{
    return strdup("corral_up 1\n");
}

static void f_stop(void *ctx)
{
}

static const struct cr_ctl_ops fake = {
    .status = f_status,
    .workers = f_workers,
    .worker = f_worker,
    .history_len = f_history_len,
    .history = f_history,
    .scale = f_scale,
    .restart = f_restart,
    .reload = f_reload,
    .kill = f_kill,
    .set = f_set,
    .metrics = f_metrics,
    .stop = f_stop,
};

static void check_response(cJSON *res)
{
    CHECK(cJSON_IsObject(res));
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(res, "ok");
    CHECK(cJSON_IsBool(ok));
    if (cJSON_IsFalse(ok)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(res, "error");
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "code")));
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    }
    /* What goes on the wire: one line that parses back. */
    char *s = cJSON_PrintUnformatted(res);
    CHECK(s != NULL && strchr(s, '\n') == NULL);
    cJSON *back = cJSON_Parse(s);
    CHECK(cJSON_IsObject(back));
    cJSON_Delete(back);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CR_CONTROL_MAX_LINE)
        return 0; /* the transport refuses longer lines before parsing */
    bool sub = true;
    cJSON *res = cr_control_handle(&fake, NULL, (const char *)data, size, &sub);
    check_response(res);
    if (sub)
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")));
    cJSON_Delete(res);
    return 0;
}
