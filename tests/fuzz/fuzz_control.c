/* The control protocol's request handling: one request line in
 * (cr_control_handle: the lexical check, JSON parse, the one-value-per-line
 * rule, command lookup, argument validation, the id echo), one response
 * out. Every response must print (cr_control_print_line) as one line of
 * valid UTF-8 holding a JSON object with a boolean "ok" and, on failure, a
 * known error code; an "id" comes back equal to the request's.
 *
 * Each input runs twice:
 *  1. against the real core (cr_control_core_ops on a real supervisor) in
 *     a state where no command can fork or signal anything: stopping, one
 *     worker slot without a process, cgroups off, the loop never run. The
 *     read-only views (status, workers, worker, history, metrics) run for
 *     real; scale/restart/reload answer shutting-down, kill no-process.
 *  2. against a fuzz-driven core (struct cr_ctl_ops): every operation
 *     answers what the input selects (success, each -errno the interface
 *     documents, an unexpected one, NULL, text with invalid UTF-8), so the
 *     dispatcher's acting paths and its mapping of results to answers are
 *     fuzzed without a process being touched.
 * The socket transport (control.c: framing, limits, subscribers) is not
 * reached here. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_cmd.h"
#include "history.h"
#include "fixture_sup.h"

#define CHECK(x) ((x) ? (void)0 : abort())

static struct cr_supervisor *sup;

static const char *const codes[] = {CR_E_BAD_JSON,      CR_E_BAD_REQUEST, CR_E_UNKNOWN_COMMAND,
                                    CR_E_BAD_ARGUMENT,  CR_E_NOT_FOUND,   CR_E_NO_PROCESS,
                                    CR_E_LINE_TOO_LONG, CR_E_FORBIDDEN,   CR_E_BUSY,
                                    CR_E_SHUTTING_DOWN, CR_E_INTERNAL,    NULL};

static bool known_code(const char *c)
{
    for (const char *const *k = codes; *k; k++)
        if (strcmp(*k, c) == 0)
            return true;
    return false;
}

/* Equal as cJSON reads them: compared printed, because cJSON_Compare
 * finds 1e400 (inf) unequal to itself. */
static bool same_json(const cJSON *a, const cJSON *b)
{
    char *x = cJSON_PrintUnformatted(a), *y = cJSON_PrintUnformatted(b);
    CHECK(x && y);
    bool same = strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

/* req: the request as cJSON reads it (NULL if it does not parse). */
static void check_response(const cJSON *res, const cJSON *req, bool req_utf8)
{
    CHECK(cJSON_IsObject(res));
    /* What goes on the wire: one line of valid UTF-8 that parses back. */
    size_t n = 0;
    char *line = cr_control_print_line(res, &n);
    CHECK(line && n >= 3 && line[n - 1] == '\n' && !memchr(line, '\n', n - 1));
    CHECK(cr_utf8_valid_prefix(line, n) == n);
    cJSON *back = cJSON_ParseWithLength(line, n - 1);
    CHECK(cJSON_IsObject(back));
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(back, "ok");
    CHECK(cJSON_IsBool(ok));
    if (cJSON_IsFalse(ok)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(back, "error");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
        CHECK(cJSON_IsString(code) && known_code(code->valuestring));
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    }
    /* The id is copied unchanged: a successful request's always, and any
     * echoed one equal to what the client sent. */
    const cJSON *in_id = cJSON_IsObject(req) ? cJSON_GetObjectItemCaseSensitive(req, "id") : NULL;
    const cJSON *out_id = cJSON_GetObjectItemCaseSensitive(back, "id");
    if (in_id && cJSON_IsTrue(ok))
        CHECK(out_id != NULL);
    if (in_id && out_id && req_utf8)
        CHECK(same_json(in_id, out_id));
    cJSON_Delete(back);
    free(line);
}

/* ---- The fuzz-driven core ---- */

struct fcore {
    unsigned sel; /* picks every operation's answer */
    unsigned calls;
};

/* The next answer: a few bits of sel per call, so one input fixes them
 * all and a mutation of its length or last byte changes them. */
static unsigned pick(void *ctx, unsigned n)
{
    struct fcore *f = ctx;
    unsigned v = (f->sel >> (3 * (f->calls++ % 10))) % n;
    return v;
}

static int errno_of(void *ctx)
{
    static const int e[] = {0, -ESHUTDOWN, -ENOENT, -ESRCH, -EINVAL, -ENOMEM, -EIO, 0};
    return e[pick(ctx, 8)];
}

static cJSON *object(void *ctx)
{
    switch (pick(ctx, 4)) {
    case 0:
        return NULL; /* out of memory */
    case 1: {
        /* A worker's STATUS= text may hold any bytes. */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "status", "bad \xc3\x28 \xff utf-8 \xe2\x82");
        return o;
    }
    default: {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", 1);
        cJSON_AddStringToObject(o, "state", "ready");
        return o;
    }
    }
}

static cJSON *f_status(void *ctx)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *sup_o = object(ctx), *ws = cJSON_CreateArray();
    if (sup_o)
        cJSON_AddItemToObject(o, "supervisor", sup_o);
    cJSON_AddItemToObject(o, "workers", ws);
    if (pick(ctx, 4) == 0) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *f_workers(void *ctx)
{
    if (pick(ctx, 4) == 0)
        return NULL;
    cJSON *a = cJSON_CreateArray();
    for (unsigned i = pick(ctx, 3); i > 0; i--) {
        cJSON *w = object(ctx);
        if (w)
            cJSON_AddItemToArray(a, w);
    }
    return a;
}

static int f_worker(void *ctx, int id, cJSON **ret)
{
    int e = errno_of(ctx);
    if (e == 0 && !(*ret = object(ctx)))
        e = -ENOMEM;
    return e;
}

static size_t f_history_len(void *ctx)
{
    return pick(ctx, 4);
}

/* A record whose stderr tail holds any bytes (rendered as valid UTF-8). */
static const struct cr_postmortem *f_history(void *ctx, size_t i)
{
    static struct cr_postmortem pm = {.worker_id = 1,
                                      .pid = 42,
                                      .generation = 1,
                                      .end_ms = 1000,
                                      .category = CR_DEATH_CRASH,
                                      .stderr_len = 9,
                                      .stderr_tail = "bad \xc3\x28 \xff\n"};
    pm.worker_id = 1 + pick(ctx, 2);
    return pick(ctx, 8) == 0 ? NULL : &pm;
}

static int f_scale(void *ctx, unsigned n)
{
    CHECK(n >= 1 && n <= 4096);
    return errno_of(ctx);
}

static int f_restart(void *ctx, int id)
{
    CHECK(id >= 0);
    return errno_of(ctx);
}

static int f_reload(void *ctx)
{
    return errno_of(ctx);
}

static int f_kill(void *ctx, int id, int sig)
{
    CHECK(id >= 1 && sig >= 1 && sig <= 64);
    return errno_of(ctx);
}

static int f_set(void *ctx, const char *key, const char *value, char *err, size_t errlen)
{
    CHECK(key && value && errlen > 0);
    int e = errno_of(ctx);
    if (e == -EINVAL)
        snprintf(err, errlen, "bad value '%s' for %s \xff", value, key);
    return e;
}

static char *f_metrics(void *ctx)
{
    switch (pick(ctx, 3)) {
    case 0:
        return NULL;
    case 1:
        return strdup("corral_up 1\n# \xff\xfe not utf-8\n");
    default:
        return strdup("corral_up 1\n");
    }
}

static int f_stack(void *ctx, int id, uint32_t request, cJSON **ret)
{
    CHECK(id > 0);
    (void)request;
    int e = errno_of(ctx);
    if (e == 0 && !(*ret = object(ctx)))
        e = -ENOMEM;
    return e;
}

static void f_stop(void *ctx)
{
    ((struct fcore *)ctx)->calls++;
}

static const struct cr_ctl_ops fuzz_ops = {
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

static void run(const struct cr_ctl_ops *ops, void *ctx, const uint8_t *data, size_t size,
                const cJSON *req, bool req_utf8)
{
    struct cr_control_turn turn;
    cJSON *res = cr_control_handle(ops, ctx, (const char *)data, size, &turn);
    CHECK(res != NULL);
    check_response(res, req, req_utf8);
    if (turn.subscribe || turn.hold_ms)
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")));
    CHECK(turn.hold_ms <= CR_CONTROL_MAX_WAIT_MS && (turn.hold_ms == 0) == (turn.again == 0));
    CHECK(!turn.hold_ms || turn.worker > 0);
    cJSON_Delete(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sup)
        sup = fuzz_sup_stopping();
    if (size > CR_CONTROL_MAX_LINE)
        return 0; /* the transport refuses longer lines before parsing */
    cJSON *req = cJSON_ParseWithLength((const char *)data, size);
    bool utf8 = cr_utf8_valid_prefix((const char *)data, size) == size;

    run(&cr_control_core_ops, fuzz_sup_core(), data, size, req, utf8);
    fuzz_sup_check(sup);

    struct fcore f = {.sel = (unsigned)size * 2654435761u ^ (size ? data[size - 1] : 0u)};
    run(&fuzz_ops, &f, data, size, req, utf8);
    cJSON_Delete(req);
    return 0;
}
