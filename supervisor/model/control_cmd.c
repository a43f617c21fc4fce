/* The control protocol's dispatcher: a table from command name to handler.
 * Each handler reads its arguments from the request object, asks corrald
 * through struct cr_ctl_ops, and fills the response. Nothing here knows
 * the supervisor or the socket (tests/unit/control drives it alone). */
#include "control_cmd.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"

/* ---- UTF-8 ---- */

/* Every invalid byte of s[0..n) becomes '?', in place. */
static void utf8_scrub(char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        i += cr_utf8_valid_prefix(s + i, n - i);
        if (i < n)
            s[i++] = '?';
    }
}

/* s cut to at most max bytes, at a character boundary, and scrubbed. */
static void utf8_fit(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max) {
        n = max;
        /* Back off over a cut character's continuation bytes. */
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
        s[n] = '\0';
    }
    utf8_scrub(s, n);
}

cJSON *cr_control_error(const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    utf8_fit(msg, sizeof(msg) - 1);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "ok");
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    return o;
}

char *cr_control_print_line(const cJSON *obj, size_t *ret_len)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    if (!s)
        return NULL;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    /* cJSON copies string bytes >= 0x80 as they are: only string contents
     * can be invalid here, and '?' keeps them strings. */
    utf8_scrub(t, n);
    t[n] = '\n';
    t[n + 1] = '\0';
    if (ret_len)
        *ret_len = n + 1;
    return t;
}

/* ---- The request's text ---- */

/* What the lexical check found: the request is valid UTF-8 and has no raw
 * control character inside a string (JSON forbids both; cJSON would copy
 * them through). nul_escapes counts "\u0000" escapes, which cJSON cuts. */
struct lex {
    size_t bad_at; /* byte offset of the first offence, or SIZE_MAX */
    const char *why;
    unsigned nul_escapes;
};

static struct lex lex_check(const char *s, size_t n)
{
    struct lex r = {.bad_at = SIZE_MAX};
    bool in_string = false;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = cr_utf8_seq((const unsigned char *)s + i, n - i);
        if (!k) {
            r.bad_at = i, r.why = "not valid UTF-8";
            return r;
        }
        if (in_string && c < 0x20) {
            r.bad_at = i, r.why = "a raw control character inside a string";
            return r;
        }
        /* Outside strings too: cJSON skips any byte <= 0x20 as blank, the
         * id finder only JSON's four (fuzz-control: an id was dropped). */
        if (!in_string && c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
            r.bad_at = i, r.why = "a control character outside a string";
            return r;
        }
        if (in_string && c == '\\' && i + 1 < n) {
            if (n - i >= 6 && memcmp(s + i + 1, "u0000", 5) == 0)
                r.nul_escapes++;
            /* Skip the escaped character if it is ASCII (a valid escape
             * always is; anything else is checked as text, then refused
             * by the parser). */
            i += (unsigned char)s[i + 1] < 0x80 ? 2 : 1;
            continue;
        }
        if (c == '"')
            in_string = !in_string;
        i += k;
    }
    return r;
}

static size_t skip_ws(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* s[i] is '"': the index after the closing quote. */
static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

/* The index after the JSON value starting at s[i] (known to be valid). */
static size_t skip_value(const char *s, size_t i, size_t n)
{
    if (i < n && s[i] == '"')
        return skip_string(s, i, n);
    if (i < n && (s[i] == '{' || s[i] == '[')) {
        unsigned depth = 0;
        while (i < n) {
            if (s[i] == '"') {
                i = skip_string(s, i, n);
                continue;
            }
            if (s[i] == '{' || s[i] == '[')
                depth++;
            else if ((s[i] == '}' || s[i] == ']') && --depth == 0)
                return i + 1;
            i++;
        }
        return n;
    }
    while (i < n && !strchr(",}] \t\r\n", s[i]))
        i++;
    return i;
}

/* Whether the member name s[a..b) (with its quotes) is "id" as cJSON reads
 * it, escapes decoded, so this finds the member cJSON finds. */
static bool key_is_id(const char *s, size_t a, size_t b)
{
    if (b - a == 4 && memcmp(s + a, "\"id\"", 4) == 0)
        return true;
    if (!memchr(s + a, '\\', b - a))
        return false;
    cJSON *k = cJSON_ParseWithLength(s + a, b - a);
    bool yes = cJSON_IsString(k) && strcmp(k->valuestring, "id") == 0;
    cJSON_Delete(k);
    return yes;
}

/* The exact text of the first "id" member's value in the request object
 * s[0..n) (already parsed by cJSON, so valid). false when there is none. */
static bool find_id(const char *s, size_t n, size_t *ret_at, size_t *ret_len)
{
    size_t i = skip_ws(s, 0, n);
    if (i >= n || s[i] != '{')
        return false;
    for (i = skip_ws(s, i + 1, n); i < n && s[i] == '"';) {
        size_t k0 = i, k1 = skip_string(s, i, n);
        i = skip_ws(s, k1, n);
        if (i >= n || s[i] != ':')
            return false;
        size_t v0 = skip_ws(s, i + 1, n), v1 = skip_value(s, v0, n);
        if (key_is_id(s, k0, k1)) {
            *ret_at = v0;
            *ret_len = v1 - v0;
            return true;
        }
        i = skip_ws(s, v1, n);
        if (i >= n || s[i] != ',')
            return false;
        i = skip_ws(s, i + 1, n);
    }
    return false;
}

/* The id goes back as the very text the client sent: a number keeps every
 * digit (cJSON holds numbers as doubles) and a string keeps its escapes,
 * \u0000 included (cJSON cuts strings there). */
static void echo_id(cJSON *out, const char *line, size_t at, size_t len)
{
    char *text = malloc(len + 1);
    if (!text)
        return;
    memcpy(text, line + at, len);
    text[len] = '\0';
    cJSON_AddRawToObject(out, "id", text);
    free(text);
}

/* ---- Commands ---- */

struct req {
    const struct cr_ctl_ops *ops;
    void *ctx;
    const cJSON *in;
    cJSON *out;
    struct cr_control_turn turn;
};

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
        *err =
            cr_control_error(CR_E_BAD_ARGUMENT, "'%s' must be a worker id (a positive integer)", k);
        return -EINVAL;
    }
    *ret = v->valueint;
    return 0;
}

static cJSON *oom(void)
{
    return cr_control_error(CR_E_INTERNAL, "out of memory");
}

/* The error for an operation's -errno; NULL for 0. */
static cJSON *op_error(int e, int id, const char *what)
{
    switch (e) {
    case 0:
        return NULL;
    case -ESHUTDOWN:
        return cr_control_error(CR_E_SHUTTING_DOWN, "corrald is stopping");
    case -ENOENT:
        return cr_control_error(CR_E_NOT_FOUND, "no worker %d", id);
    case -ESRCH:
        return cr_control_error(CR_E_NO_PROCESS, "worker %d has no process right now", id);
    case -ESTALE:
        return cr_control_error(CR_E_NO_PROCESS,
                                "worker %d: the process that was asked has exited", id);
    default:
        return cr_control_error(CR_E_INTERNAL, "%s failed: %s", what, strerror(e < 0 ? -e : e));
    }
}

static cJSON *cmd_status(struct req *r)
{
    cJSON *st = r->ops->status(r->ctx);
    if (!st)
        return oom();
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
    cJSON *ws = r->ops->workers(r->ctx);
    if (!ws)
        return oom();
    cJSON_AddItemToObject(r->out, "workers", ws);
    return NULL;
}

static cJSON *cmd_worker(struct req *r)
{
    int id;
    cJSON *err = NULL, *w = NULL;
    if (worker_arg(r, "worker", &id, &err) < 0)
        return err;
    int e = r->ops->worker(r->ctx, id, &w);
    if (e < 0)
        return op_error(e, id, "worker");
    if (!w)
        return oom();
    cJSON_AddItemToObject(r->out, "worker", w);
    return NULL;
}

/* The newest `n` records (all by default) that match every filter given:
 * `since_ms` (ended at or after that wall-clock time), `worker`, `pid`.
 * Filtered here, before rendering: a record is up to ~12 KiB of JSON, and
 * `corralctl why` asks for one among hundreds. Every record is looked at
 * (the wall clock may step back, so end_ms need not fall with the index). */
static cJSON *cmd_history(struct req *r)
{
    size_t len = r->ops->history_len(r->ctx), want = SIZE_MAX;
    const cJSON *v = arg(r, "n");
    if (v) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6)
            return cr_control_error(CR_E_BAD_ARGUMENT, "'n' must be a count from 0");
        want = (size_t)v->valuedouble;
    }
    double since = -1;
    if ((v = arg(r, "since_ms"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9e15)
            return cr_control_error(CR_E_BAD_ARGUMENT,
                                    "'since_ms' must be a Unix time in milliseconds");
        since = v->valuedouble;
    }
    int worker = 0, pid = 0;
    cJSON *err = NULL;
    if (arg(r, "worker") && worker_arg(r, "worker", &worker, &err) < 0)
        return err;
    if ((v = arg(r, "pid"))) {
        if (!int_in(v, 1, 0x7fffffff))
            return cr_control_error(CR_E_BAD_ARGUMENT, "'pid' must be a positive integer");
        pid = v->valueint;
    }
    cJSON *h = cJSON_AddArrayToObject(r->out, "history");
    if (!h)
        return oom();
    size_t got = 0;
    for (size_t i = 0; i < len && got < want; i++) {
        const struct cr_postmortem *pm = r->ops->history(r->ctx, i);
        if (!pm)
            return cr_control_error(CR_E_INTERNAL, "death record %zu is missing", i);
        if ((since >= 0 && (double)pm->end_ms < since) ||
            (worker && pm->worker_id != (unsigned)worker) || (pid && pm->pid != pid))
            continue;
        cJSON *rec = cr_postmortem_to_json(pm);
        if (!rec)
            return oom();
        cJSON_AddItemToArray(h, rec);
        got++;
    }
    return NULL;
}

static cJSON *cmd_scale(struct req *r)
{
    const cJSON *v = arg(r, "workers");
    if (!int_in(v, 1, 4096))
        return cr_control_error(CR_E_BAD_ARGUMENT, "'workers' must be an integer from 1 to 4096");
    int e = r->ops->scale(r->ctx, (unsigned)v->valueint);
    if (e == -EDOM)
        return cr_control_error(CR_E_BAD_ARGUMENT,
                                "'workers' is outside --workers MIN..MAX; `set workers MIN..MAX` "
                                "moves the bounds");
    cJSON *err = op_error(e, 0, "scale");
    if (err)
        return err;
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
            return cr_control_error(CR_E_BAD_ARGUMENT, "'worker' must be a worker id or \"all\"");
        }
    }
    return op_error(r->ops->restart(r->ctx, id), id, "restart");
}

static cJSON *cmd_reload(struct req *r)
{
    return op_error(r->ops->reload(r->ctx), 0, "reload");
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
        return cr_control_error(CR_E_BAD_ARGUMENT,
                                "'signal' must be a signal name (KILL, TERM, ...) or number");
    if ((err = op_error(r->ops->kill(r->ctx, id, sig), id, "kill")))
        return err;
    cJSON_AddNumberToObject(r->out, "signal", sig);
    return NULL;
}

/* The error for a stack operation's -errno (NULL: none); -EINVAL is a
 * number this corrald never asked. */
static cJSON *stack_error(int e, int id, uint32_t request)
{
    if (e == -EINVAL)
        return cr_control_error(CR_E_BAD_ARGUMENT, "'request' %u was never asked", request);
    return op_error(e, id, "stack");
}

/* An answer still asked-for or pending, with a wait: the transport holds
 * it and looks again (cr_control_handle_again). */
static void stack_turn(const cJSON *st, int id, uint32_t wait_ms, struct cr_control_turn *turn)
{
    const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "state"));
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(st, "request");
    if (wait_ms && state && (strcmp(state, "asked") == 0 || strcmp(state, "pending") == 0) &&
        cJSON_IsNumber(n) && n->valuedouble >= 1 && n->valuedouble <= UINT32_MAX) {
        turn->hold_ms = wait_ms;
        turn->worker = id;
        turn->again = (uint32_t)n->valuedouble;
    }
}

static cJSON *cmd_stack(struct req *r)
{
    int id;
    cJSON *err = NULL, *st = NULL;
    if (worker_arg(r, "worker", &id, &err) < 0)
        return err;
    const cJSON *q = arg(r, "request"), *wait = arg(r, "wait");
    if (q && (!cJSON_IsNumber(q) || q->valuedouble < 1 || q->valuedouble > UINT32_MAX ||
              q->valuedouble != (double)(uint32_t)q->valuedouble))
        return cr_control_error(CR_E_BAD_ARGUMENT,
                                "'request' must be the number a first `stack` answered");
    if (wait && !int_in(wait, 0, CR_CONTROL_MAX_WAIT_MS))
        return cr_control_error(CR_E_BAD_ARGUMENT, "'wait' must be 0..%d (ms)",
                                CR_CONTROL_MAX_WAIT_MS);
    uint32_t request = q ? (uint32_t)q->valuedouble : 0;
    if ((err = stack_error(r->ops->stack(r->ctx, id, request, &st), id, request))) {
        cJSON_Delete(st);
        return err;
    }
    if (!st)
        return oom();
    cJSON_AddItemToObject(r->out, "stack", st);
    stack_turn(st, id, wait ? (uint32_t)wait->valueint : 0, &r->turn);
    return NULL;
}

static cJSON *cmd_set(struct req *r)
{
    const cJSON *k = arg(r, "key"), *v = arg(r, "value");
    if (!cJSON_IsString(k))
        return cr_control_error(CR_E_BAD_ARGUMENT, "'key' must be a string");
    char buf[256];
    int n;
    if (cJSON_IsString(v))
        n = snprintf(buf, sizeof(buf), "%s", v->valuestring);
    else if (cJSON_IsNumber(v) && v->valuedouble >= 0)
        n = snprintf(buf, sizeof(buf), "%.17g", v->valuedouble);
    else if (cJSON_IsBool(v))
        n = snprintf(buf, sizeof(buf), "%s", cJSON_IsTrue(v) ? "true" : "false");
    else
        return cr_control_error(CR_E_BAD_ARGUMENT, "'value' must be a string, number or boolean");
    /* A value cut short would be a different value. */
    if (n < 0 || (size_t)n >= sizeof(buf))
        return cr_control_error(CR_E_BAD_ARGUMENT, "'value' is limited to %zu bytes",
                                sizeof(buf) - 1);
    char msg[256] = "";
    int e = r->ops->set(r->ctx, k->valuestring, buf, msg, sizeof(msg));
    if (e == -EINVAL)
        return cr_control_error(CR_E_BAD_ARGUMENT, "%s", msg[0] ? msg : "bad key or value");
    if (e == -ESHUTDOWN) /* `set workers` is a scale */
        return op_error(e, 0, "set");
    if (e < 0)
        return cr_control_error(CR_E_BAD_ARGUMENT, "%s", strerror(-e));
    cJSON_AddStringToObject(r->out, "key", k->valuestring);
    cJSON_AddStringToObject(r->out, "value", buf);
    return NULL;
}

static cJSON *cmd_events(struct req *r)
{
    r->turn.subscribe = true;
    cJSON_AddTrueToObject(r->out, "subscribed");
    return NULL;
}

static cJSON *cmd_metrics(struct req *r)
{
    char *text = r->ops->metrics(r->ctx);
    if (!text)
        return cr_control_error(CR_E_INTERNAL, "metrics rendering failed");
    cJSON_AddStringToObject(r->out, "metrics", text);
    free(text);
    return NULL;
}

static cJSON *cmd_stop(struct req *r)
{
    /* The answer is queued before the drain begins, and the connection
     * stays open until the last worker is gone. */
    r->ops->stop(r->ctx);
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
    {"ping", cmd_ping},       {"stack", cmd_stack},
};

static cJSON *dispatch(const struct cr_ctl_ops *ops, void *ctx, const cJSON *in,
                       struct cr_control_turn *turn)
{
    if (!cJSON_IsObject(in))
        return cr_control_error(CR_E_BAD_REQUEST, "a request is a JSON object");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(in, "cmd");
    if (!cJSON_IsString(cmd))
        return cr_control_error(CR_E_BAD_REQUEST, "a request needs \"cmd\": a string");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(cmd->valuestring, commands[i].name) != 0)
            continue;
        struct req r = {.ops = ops, .ctx = ctx, .in = in, .out = cJSON_CreateObject()};
        if (!r.out)
            return oom();
        cJSON_AddTrueToObject(r.out, "ok");
        cJSON *err = commands[i].fn(&r);
        if (err) {
            cJSON_Delete(r.out);
            return err;
        }
        *turn = r.turn;
        return r.out;
    }
    return cr_control_error(CR_E_UNKNOWN_COMMAND, "unknown command '%.64s'", cmd->valuestring);
}

cJSON *cr_control_handle(const struct cr_ctl_ops *ops, void *ctx, const char *line, size_t len,
                         struct cr_control_turn *turn)
{
    *turn = (struct cr_control_turn){0};
    /* JSON text is UTF-8 with no raw control characters in strings; cJSON
     * checks neither, and what it lets through would be echoed. */
    struct lex lx = lex_check(line, len);
    if (lx.bad_at != SIZE_MAX)
        return cr_control_error(CR_E_BAD_JSON, "%s (byte %zu)", lx.why, lx.bad_at);
    const char *end = NULL;
    cJSON *in = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!in)
        return cr_control_error(CR_E_BAD_JSON, "not valid JSON (near byte %ld)",
                                end ? (long)(end - line) : 0L);
    /* One value per line: anything but blanks after it is an error (cJSON
     * stops at the end of the first value and would ignore the rest). */
    size_t used = skip_ws(line, (size_t)(end - line), len);
    if (used < len) {
        cJSON_Delete(in);
        return cr_control_error(CR_E_BAD_JSON, "trailing data after the request (byte %zu)", used);
    }
    size_t id_at = 0, id_len = 0;
    bool has_id = cJSON_IsObject(in) && find_id(line, len, &id_at, &id_len);
    cJSON *res;
    /* cJSON ends a string at \u0000: a command, key or value holding one
     * would silently mean a shorter one. Only the id, copied as text, may. */
    if (lx.nul_escapes > (has_id ? lex_check(line + id_at, id_len).nul_escapes : 0))
        res = cr_control_error(CR_E_BAD_REQUEST, "\\u0000 is allowed only inside \"id\"");
    else
        res = dispatch(ops, ctx, in, turn);
    if (res && has_id)
        echo_id(res, line, id_at, id_len);
    cJSON_Delete(in);
    return res;
}

cJSON *cr_control_handle_again(const struct cr_ctl_ops *ops, void *ctx, cJSON *held,
                               const struct cr_control_turn *was, struct cr_control_turn *turn)
{
    *turn = (struct cr_control_turn){0};
    cJSON *st = NULL, *err;
    int e = ops->stack(ctx, was->worker, was->again, &st);
    if ((err = stack_error(e, was->worker, was->again)) || (!st && (err = oom()))) {
        cJSON_Delete(st);
        /* The id the client gave goes with whatever answers it. */
        cJSON *id = cJSON_DetachItemFromObjectCaseSensitive(held, "id");
        if (id && !cJSON_AddItemToObject(err, "id", id))
            cJSON_Delete(id);
        cJSON_Delete(held);
        return err;
    }
    if (!cJSON_ReplaceItemInObjectCaseSensitive(held, "stack", st)) {
        cJSON_Delete(st);
        return held; /* not a stack answer: nothing to look for */
    }
    stack_turn(st, was->worker, was->hold_ms, turn);
    return held;
}
