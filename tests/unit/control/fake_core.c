/* The fake core of the control dispatcher's unit tests (fake_core.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_core.h"

static cJSON *f_status(void *ctx)
{
    struct fake *f = ctx;
    f->calls++;
    if (f->fail_json)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(o, "supervisor");
    cJSON_AddNumberToObject(s, "pid", 42);
    cJSON_AddStringToObject(s, "state", f->status_text ? f->status_text : "running");
    cJSON_AddArrayToObject(o, "workers");
    return o;
}

static cJSON *worker_obj(int id)
{
    cJSON *w = cJSON_CreateObject();
    cJSON_AddNumberToObject(w, "id", id);
    cJSON_AddStringToObject(w, "state", "ready");
    return w;
}

static cJSON *f_workers(void *ctx)
{
    struct fake *f = ctx;
    f->calls++;
    if (f->fail_json)
        return NULL;
    cJSON *a = cJSON_CreateArray();
    for (int i = 1; i <= f->workers_max; i++)
        cJSON_AddItemToArray(a, worker_obj(i));
    return a;
}

static int f_worker(void *ctx, int id, cJSON **ret)
{
    struct fake *f = ctx;
    f->calls++;
    if (id > f->workers_max)
        return -ENOENT;
    *ret = f->fail_json ? NULL : worker_obj(id);
    return 0;
}

static size_t f_history_len(void *ctx)
{
    return ((struct fake *)ctx)->nhistory;
}

static const struct cr_postmortem *f_history(void *ctx, size_t i)
{
    struct fake *f = ctx;
    if (f->fail_json || i >= f->nhistory)
        return NULL;
    return &f->hist[i];
}

static int f_scale(void *ctx, unsigned n)
{
    struct fake *f = ctx;
    f->calls++;
    f->scaled = n;
    return f->ret;
}

static int f_restart(void *ctx, int id)
{
    struct fake *f = ctx;
    f->calls++;
    f->restarted = id;
    return id > f->workers_max ? -ENOENT : f->ret;
}

static int f_reload(void *ctx)
{
    struct fake *f = ctx;
    f->reloads++;
    return f->ret;
}

static int f_kill(void *ctx, int id, int sig)
{
    struct fake *f = ctx;
    f->calls++;
    f->killed = id;
    f->sig = sig;
    return id > f->workers_max ? -ENOENT : f->ret;
}

static int f_set(void *ctx, const char *key, const char *value, char *err, size_t errlen)
{
    struct fake *f = ctx;
    f->calls++;
    snprintf(f->key, sizeof(f->key), "%s", key);
    snprintf(f->value, sizeof(f->value), "%s", value);
    if (strcmp(key, "no-such-key") == 0) {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -EINVAL;
    }
    return f->ret;
}

static char *f_metrics(void *ctx)
{
    struct fake *f = ctx;
    return f->fail_json ? NULL : strdup("corral_up 1\n");
}

static int f_stack(void *ctx, int id, uint32_t request, cJSON **ret)
{
    struct fake *f = ctx;
    f->calls++;
    if (id > f->workers_max)
        return -ENOENT;
    f->killed = id; /* the worker asked about */
    f->stack_request = request;
    *ret = f->fail_json ? NULL : cJSON_CreateObject();
    if (*ret && f->stack_state)
        cJSON_AddStringToObject(*ret, "state", f->stack_state);
    if (*ret)
        cJSON_AddNumberToObject(*ret, "request", request ? request : 7);
    return f->ret;
}

static void f_stop(void *ctx)
{
    ((struct fake *)ctx)->stops++;
}

const struct cr_ctl_ops fake_ops = {
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
    .stack = f_stack,
};

struct fake fake(void)
{
    /* Three deaths, newest first: worker 2 at 3000 ms, worker 1 at 2000,
     * worker 2 at 1000; their pids 103, 102, 101. */
    struct fake f = {.workers_max = 2, .nhistory = 3};
    for (int i = 0; i < 3; i++)
        f.hist[i] = (struct cr_postmortem){.worker_id = i == 1 ? 1 : 2,
                                           .pid = 103 - i,
                                           .generation = 1,
                                           .end_ms = 3000 - 1000 * i,
                                           .category = CR_DEATH_SIGNAL};
    return f;
}

/* Error codes the tests have seen come out of the dispatcher. */
static const char *seen_codes[32];
static size_t nseen;

size_t fake_codes_seen(const char ***ret)
{
    *ret = seen_codes;
    return nseen;
}

static void note_code(const char *code)
{
    for (size_t i = 0; i < nseen; i++)
        if (strcmp(seen_codes[i], code) == 0)
            return;
    assert_true(nseen < 32);
    seen_codes[nseen++] = strdup(code);
}

/* Runs one request (length given, so NULs and odd bytes pass through) and
 * checks what every response must be: printable as one valid UTF-8 line
 * that parses back as JSON. The printed line goes to ret_line if asked. */
cJSON *run_n(struct fake *f, const char *line, size_t len, bool *ret_sub, char **ret_line)
{
    memset(&f->turn, 0xff, sizeof(f->turn)); /* every member must be set */
    cJSON *res = cr_control_handle(&fake_ops, f, line, len, &f->turn);
    assert_non_null(res);
    size_t n = 0;
    char *text = cr_control_print_line(res, &n);
    assert_non_null(text);
    assert_int_equal(strlen(text), n);
    assert_int_equal(text[n - 1], '\n');
    assert_null(memchr(text, '\n', n - 1));
    assert_int_equal(cr_utf8_valid_prefix(text, n), n);
    cJSON *back = cJSON_Parse(text);
    assert_non_null(back);
    cJSON_Delete(back);
    if (ret_line)
        *ret_line = text;
    else
        free(text);
    if (ret_sub)
        *ret_sub = f->turn.subscribe;
    return res;
}

cJSON *run(struct fake *f, const char *line, bool *ret_sub)
{
    return run_n(f, line, strlen(line), ret_sub, NULL);
}

void assert_ok(cJSON *res)
{
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")));
}

const char *error_code(const cJSON *res)
{
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(res, "ok")));
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(res, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    assert_true(cJSON_IsString(code));
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    note_code(code->valuestring);
    return code->valuestring;
}

void expect_error_n(struct fake *f, const char *line, size_t len, const char *code)
{
    bool sub;
    cJSON *res = run_n(f, line, len, &sub, NULL);
    assert_string_equal(error_code(res), code);
    assert_false(sub);
    assert_int_equal(f->turn.hold_ms, 0);
    cJSON_Delete(res);
}

void expect_error(struct fake *f, const char *line, const char *code)
{
    expect_error_n(f, line, strlen(line), code);
}

double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}
