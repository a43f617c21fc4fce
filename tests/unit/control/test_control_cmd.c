/* The control dispatcher alone: every command and every error code of
 * docs/control-protocol.md, driven through cr_control_handle with a fake
 * core (struct cr_ctl_ops), no sockets and no supervisor. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control_cmd.h"
#include "fake_core.h"
#include "history.h"

/* The fake core: records what it was asked, answers what the test says. */

/* ---- every command ---- */

static void test_ping(void **state)
{
    (void)state;
    struct fake f = fake();
    bool sub;
    cJSON *r = run(&f, "{\"cmd\":\"ping\"}", &sub);
    assert_ok(r);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "pong")->valuestring, "corral");
    assert_false(sub);
    assert_int_equal(f.calls, 0);
    cJSON_Delete(r);
}

static void test_status(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"status\"}", NULL);
    assert_ok(r);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "supervisor");
    assert_int_equal(num(s, "pid"), 42);
    assert_true(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(r, "workers")));
    cJSON_Delete(r);
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"status\"}", CR_E_INTERNAL);
}

static void test_workers(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"workers\"}", NULL);
    assert_ok(r);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "workers")), 2);
    cJSON_Delete(r);
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"workers\"}", CR_E_INTERNAL);
}

static void test_worker(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"worker\",\"worker\":2}", NULL);
    assert_ok(r);
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(r, "worker"), "id"), 2);
    cJSON_Delete(r);
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":3}", CR_E_NOT_FOUND);
    expect_error(&f, "{\"cmd\":\"worker\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":0}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":1.5}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":\"1\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":1e300}", CR_E_BAD_ARGUMENT);
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"worker\",\"worker\":1}", CR_E_INTERNAL);
}

static void test_history(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"history\"}", NULL);
    assert_ok(r);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "history");
    assert_int_equal(cJSON_GetArraySize(h), 3);
    assert_int_equal(num(cJSON_GetArrayItem(h, 0), "pid"), 103); /* newest first */
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(h, 0), "category")->valuestring,
        "signal"); /* the record, rendered */
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"history\",\"n\":1}", NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "history")), 1);
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"history\",\"n\":0}", NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "history")), 0);
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"history\",\"n\":99}", NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "history")), 3);
    cJSON_Delete(r);
    expect_error(&f, "{\"cmd\":\"history\",\"n\":-1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"history\",\"n\":\"2\"}", CR_E_BAD_ARGUMENT);

    /* The filters: each alone, together, then n over what matches. */
    static const struct {
        const char *req;
        int pids[3]; /* the answer's pids, newest first; 0 ends */
    } cases[] = {
        {"{\"cmd\":\"history\",\"since_ms\":2000}", {103, 102}},
        {"{\"cmd\":\"history\",\"since_ms\":2001}", {103}},
        {"{\"cmd\":\"history\",\"since_ms\":0}", {103, 102, 101}},
        {"{\"cmd\":\"history\",\"since_ms\":9000}", {0}},
        {"{\"cmd\":\"history\",\"worker\":2}", {103, 101}},
        {"{\"cmd\":\"history\",\"worker\":2,\"n\":1}", {103}},
        {"{\"cmd\":\"history\",\"worker\":1}", {102}},
        {"{\"cmd\":\"history\",\"pid\":101}", {101}},
        {"{\"cmd\":\"history\",\"pid\":101,\"worker\":1}", {0}},
        {"{\"cmd\":\"history\",\"worker\":2,\"since_ms\":1500}", {103}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        r = run(&f, cases[c].req, NULL);
        assert_ok(r);
        h = cJSON_GetObjectItemCaseSensitive(r, "history");
        int n = 0;
        while (n < 3 && cases[c].pids[n])
            n++;
        assert_int_equal(cJSON_GetArraySize(h), n);
        for (int k = 0; k < n; k++)
            assert_int_equal(num(cJSON_GetArrayItem(h, k), "pid"), cases[c].pids[k]);
        cJSON_Delete(r);
    }
    expect_error(&f, "{\"cmd\":\"history\",\"since_ms\":-1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"history\",\"since_ms\":\"10m\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"history\",\"worker\":0}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"history\",\"pid\":1.5}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"history\",\"pid\":-3}", CR_E_BAD_ARGUMENT);
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"history\"}", CR_E_INTERNAL);
}

static void test_scale(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"scale\",\"workers\":7}", NULL);
    assert_ok(r);
    assert_int_equal(num(r, "workers"), 7);
    assert_int_equal(f.scaled, 7);
    cJSON_Delete(r);
    f.calls = 0;
    expect_error(&f, "{\"cmd\":\"scale\",\"workers\":0}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"scale\",\"workers\":4097}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"scale\"}", CR_E_BAD_ARGUMENT);
    assert_int_equal(f.calls, 0); /* a bad argument never reaches the core */
    f.ret = -ESHUTDOWN;
    expect_error(&f, "{\"cmd\":\"scale\",\"workers\":3}", CR_E_SHUTTING_DOWN);
    f.ret = -ENOMEM;
    expect_error(&f, "{\"cmd\":\"scale\",\"workers\":3}", CR_E_INTERNAL);
}

static void test_restart(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"restart\",\"worker\":2}", NULL);
    assert_ok(r);
    assert_int_equal(f.restarted, 2);
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"restart\",\"worker\":\"all\"}", NULL);
    assert_ok(r);
    assert_int_equal(f.restarted, 0);
    cJSON_Delete(r);
    expect_error(&f, "{\"cmd\":\"restart\",\"worker\":9}", CR_E_NOT_FOUND);
    expect_error(&f, "{\"cmd\":\"restart\",\"worker\":\"some\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"restart\"}", CR_E_BAD_ARGUMENT);
    f.ret = -ESHUTDOWN;
    expect_error(&f, "{\"cmd\":\"restart\",\"worker\":\"all\"}", CR_E_SHUTTING_DOWN);
}

static void test_reload(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"reload\"}", NULL);
    assert_ok(r);
    assert_int_equal(f.reloads, 1);
    cJSON_Delete(r);
    f.ret = -ESHUTDOWN;
    expect_error(&f, "{\"cmd\":\"reload\"}", CR_E_SHUTTING_DOWN);
}

static void test_kill(void **state)
{
    (void)state;
    struct fake f = fake();
    static const struct {
        const char *arg;
        int sig;
    } ok[] = {{"\"KILL\"", SIGKILL},
              {"\"SIGTERM\"", SIGTERM},
              {"\"CONT\"", SIGCONT},
              {"\"SIGSYS\"", SIGSYS},
              {"9", 9},
              {"64", 64}};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char line[128];
        snprintf(line, sizeof(line), "{\"cmd\":\"kill\",\"worker\":1,\"signal\":%s}", ok[i].arg);
        cJSON *r = run(&f, line, NULL);
        assert_ok(r);
        assert_int_equal(num(r, "signal"), ok[i].sig);
        assert_int_equal(f.sig, ok[i].sig);
        assert_int_equal(f.killed, 1);
        cJSON_Delete(r);
    }
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":1,\"signal\":\"NOPE\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":1,\"signal\":65}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"kill\",\"signal\":9}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":5,\"signal\":9}", CR_E_NOT_FOUND);
    f.ret = -ESRCH;
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":1,\"signal\":9}", CR_E_NO_PROCESS);
    f.ret = -EPERM; /* never an "ok" for a signal that was not sent */
    expect_error(&f, "{\"cmd\":\"kill\",\"worker\":1,\"signal\":9}", CR_E_INTERNAL);
}

static void test_stack(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"stack\",\"worker\":2}", NULL);
    assert_ok(r);
    assert_int_equal(f.killed, 2);
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(r, "stack"), "request"), 7);
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"stack\",\"worker\":1,\"request\":42}", NULL);
    assert_ok(r);
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(r, "stack"), "request"), 42);
    cJSON_Delete(r);
    expect_error(&f, "{\"cmd\":\"stack\"}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":0}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"request\":0}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"request\":1.5}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"request\":\"3\"}",
                 CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":5}", CR_E_NOT_FOUND);
    f.ret = -ESRCH; /* the fake made an object: it must not leak */
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1}", CR_E_NO_PROCESS);
    f.ret = 0;
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1}", CR_E_INTERNAL);
}

/* "wait": an answer still asked-for or pending is held (hold_ms, and the
 * request to look again with); a ready one, or one without a wait, is not. */
static void test_stack_wait(void **state)
{
    (void)state;
    struct fake f = fake();
    static const struct {
        const char *state, *line;
        uint32_t hold, again;
    } cases[] = {
        {"asked", "{\"cmd\":\"stack\",\"worker\":1,\"wait\":1500}", 1500, 7},
        {"pending", "{\"cmd\":\"stack\",\"worker\":1,\"request\":9,\"wait\":60000}", 60000, 9},
        {"ready", "{\"cmd\":\"stack\",\"worker\":1,\"wait\":1500}", 0, 0},
        {"unsupported", "{\"cmd\":\"stack\",\"worker\":1,\"wait\":1500}", 0, 0},
        {"asked", "{\"cmd\":\"stack\",\"worker\":1}", 0, 0},
        {"asked", "{\"cmd\":\"stack\",\"worker\":1,\"wait\":0}", 0, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        f.stack_state = cases[i].state;
        cJSON *r = run(&f, cases[i].line, NULL);
        assert_ok(r);
        assert_int_equal(f.turn.hold_ms, cases[i].hold);
        assert_int_equal(f.turn.again, cases[i].again);
        assert_false(f.turn.subscribe);
        cJSON_Delete(r);
    }
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"wait\":-1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"wait\":60001}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"wait\":1.5}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"wait\":\"1s\"}", CR_E_BAD_ARGUMENT);
    f.ret = -EINVAL; /* a number never asked */
    expect_error(&f, "{\"cmd\":\"stack\",\"worker\":1,\"request\":99}", CR_E_BAD_ARGUMENT);
}

/* The printed answer holds this text. */
static void assert_line_has(const cJSON *res, const char *text)
{
    size_t n = 0;
    char *line = cr_control_print_line(res, &n);
    assert_non_null(line);
    if (!strstr(line, text))
        fail_msg("%s not in %s", text, line);
    free(line);
}

/* A held answer looked at again: the held request's number is asked after
 * (never a new ask), with no line parsed; held again while pending, sent
 * once ready; an error (the worker died, or its process did) ends the
 * hold; the client's id goes with every one of them. */
static void test_stack_held_again(void **state)
{
    (void)state;
    static const struct {
        int ret;
        const char *state, *want; /* want: the state, or an error code */
        uint32_t hold;
    } cases[] = {
        {0, "pending", "pending", 1500},
        {0, "ready", "ready", 0},
        {-ESRCH, "pending", CR_E_NO_PROCESS, 0},
        {-ESTALE, "pending", CR_E_NO_PROCESS, 0},
        {-EINVAL, "pending", CR_E_BAD_ARGUMENT, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fake f = fake();
        f.stack_state = "asked";
        cJSON *held = run(&f, "{\"cmd\":\"stack\",\"worker\":2,\"wait\":1500,\"id\":\"x\"}",
                          NULL);
        assert_int_equal(f.stack_request, 0); /* the first one asks */
        assert_int_equal(f.turn.worker, 2);
        assert_int_equal(f.turn.again, 7);
        f.stack_state = cases[i].state;
        f.ret = cases[i].ret;
        struct cr_control_turn turn;
        memset(&turn, 0xff, sizeof(turn));
        cJSON *r = cr_control_handle_again(&fake_ops, &f, held, &f.turn, &turn);
        assert_non_null(r);
        assert_int_equal(f.stack_request, 7); /* looked for, not asked anew */
        assert_int_equal(f.killed, 2);
        assert_int_equal(turn.hold_ms, cases[i].hold);
        assert_int_equal(turn.again, cases[i].hold ? 7 : 0);
        assert_false(turn.subscribe);
        if (cases[i].ret)
            assert_string_equal(error_code(r), cases[i].want);
        else
            assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "stack"),
                                                 "state")
                    ->valuestring,
                cases[i].want);
        assert_line_has(r, "\"id\":\"x\"");
        cJSON_Delete(r);
    }
}

static void test_set(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"set\",\"key\":\"memory-max\",\"value\":\"256M\"}", NULL);
    assert_ok(r);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "key")->valuestring, "memory-max");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "value")->valuestring, "256M");
    assert_string_equal(f.value, "256M");
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"set\",\"key\":\"stop-timeout\",\"value\":12}", NULL);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "value")->valuestring, "12");
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"set\",\"key\":\"pss\",\"value\":true}", NULL);
    assert_string_equal(f.value, "true");
    cJSON_Delete(r);
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"no-such-key\",\"value\":1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"set\",\"value\":1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"workers\",\"value\":-1}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"workers\",\"value\":null}", CR_E_BAD_ARGUMENT);
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"workers\",\"value\":[1]}", CR_E_BAD_ARGUMENT);
    /* A value too long for the buffer is refused, never cut short. */
    char line[600];
    snprintf(line, sizeof(line), "{\"cmd\":\"set\",\"key\":\"log-level\",\"value\":\"%0300d\"}", 7);
    f.calls = 0;
    expect_error(&f, line, CR_E_BAD_ARGUMENT);
    assert_int_equal(f.calls, 0);
    f.ret = -ESHUTDOWN; /* `set workers` while stopping */
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"workers\",\"value\":3}", CR_E_SHUTTING_DOWN);
}

static void test_events(void **state)
{
    (void)state;
    struct fake f = fake();
    bool sub = false;
    cJSON *r = run(&f, "{\"cmd\":\"events\"}", &sub);
    assert_ok(r);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "subscribed")));
    assert_true(sub);
    cJSON_Delete(r);
}

static void test_metrics(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"metrics\"}", NULL);
    assert_ok(r);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "metrics")->valuestring,
                        "corral_up 1\n");
    cJSON_Delete(r);
    f.fail_json = true;
    expect_error(&f, "{\"cmd\":\"metrics\"}", CR_E_INTERNAL);
}

static void test_stop(void **state)
{
    (void)state;
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"stop\"}", NULL);
    assert_ok(r);
    assert_int_equal(f.stops, 1);
    cJSON_Delete(r);
}

/* ---- request-level errors ---- */

static void test_request_errors(void **state)
{
    (void)state;
    struct fake f = fake();
    expect_error(&f, "{\"cmd\":\"status\"", CR_E_BAD_JSON);
    expect_error(&f, "{\"cmd\":\"ping\"} x", CR_E_BAD_JSON);
    expect_error(&f, "{\"cmd\":\"ping\"}{}", CR_E_BAD_JSON);
    expect_error_n(&f, "{\"cmd\":\"ping\"}\0junk", 19, CR_E_BAD_JSON);
    expect_error(&f, "[1,2]", CR_E_BAD_REQUEST);
    expect_error(&f, "\"ping\"", CR_E_BAD_REQUEST);
    expect_error(&f, "{\"command\":\"ping\"}", CR_E_BAD_REQUEST);
    expect_error(&f, "{\"cmd\":7}", CR_E_BAD_REQUEST);
    expect_error(&f, "{\"cmd\":\"explode\"}", CR_E_UNKNOWN_COMMAND);
    expect_error(&f, "{\"cmd\":\"PING\"}", CR_E_UNKNOWN_COMMAND);
    /* Trailing blanks are fine. */
    cJSON *r = run(&f, "{\"cmd\":\"ping\"} \t ", NULL);
    assert_ok(r);
    cJSON_Delete(r);
}

/* line-too-long, forbidden and busy are decided by the transport before a
 * line reaches the dispatcher; it sends them with cr_control_error. */
static void test_transport_errors(void **state)
{
    (void)state;
    const char *codes[] = {CR_E_LINE_TOO_LONG, CR_E_FORBIDDEN, CR_E_BUSY};
    for (size_t i = 0; i < 3; i++) {
        cJSON *e = cr_control_error(codes[i], "message %d", (int)i);
        char *line = cr_control_print_line(e, NULL);
        cJSON *back = cJSON_Parse(line);
        assert_string_equal(error_code(back), codes[i]);
        free(line);
        cJSON_Delete(back);
        cJSON_Delete(e);
    }
}

/* ---- finding 8: responses are valid UTF-8 JSON, the id is unchanged ---- */

static void test_invalid_utf8_refused(void **state)
{
    (void)state;
    struct fake f = fake();
    /* Before: the bad bytes came back raw in "unknown command '…'". */
    expect_error(&f, "{\"cmd\":\"\xff\xfe\",\"id\":1}", CR_E_BAD_JSON);
    expect_error(&f, "{\"cmd\":\"ping\",\"id\":\"\xc0\xaf\"}", CR_E_BAD_JSON);     /* overlong */
    expect_error(&f, "{\"cmd\":\"ping\",\"id\":\"\xed\xa0\x80\"}", CR_E_BAD_JSON); /* surrogate */
    expect_error(&f, "{\"cmd\":\"ping\",\"id\":\"\xf4\x90\x80\x80\"}", CR_E_BAD_JSON);
    expect_error(&f, "{\"cmd\":\"ping\",\"id\":\"\xe2\x82\"}", CR_E_BAD_JSON); /* cut */
    /* Raw control characters inside strings are not JSON either. */
    expect_error(&f, "{\"cmd\":\"ping\",\"id\":\"a\tb\"}", CR_E_BAD_JSON);
    expect_error_n(&f, "{\"cmd\":\"pi\0ng\"}", 15, CR_E_BAD_JSON);
    /* Valid multi-byte text passes, escaped or not. */
    cJSON *r =
        run(&f, "{\"cmd\":\"ping\",\"id\":\"\xc3\xa9t\xc3\xa9 \\u00e9 \xf0\x9f\x90\x8e\"}", NULL);
    assert_ok(r);
    cJSON_Delete(r);
}

static void test_unknown_command_cut_at_a_character(void **state)
{
    (void)state;
    struct fake f = fake();
    /* 63 ASCII bytes then a 2-byte character: "%.64s" cuts it in half. */
    char line[256];
    snprintf(line, sizeof(line), "{\"cmd\":\"%063d\xc3\xa9\xc3\xa9\"}", 0);
    expect_error(&f, line, CR_E_UNKNOWN_COMMAND);
}

/* The response line for a request, with its id member's text. */
static char *id_text(const char *request)
{
    struct fake f = fake();
    char *line = NULL;
    cJSON *r = run_n(&f, request, strlen(request), NULL, &line);
    cJSON_Delete(r);
    char *at = strstr(line, ",\"id\":");
    assert_non_null(at);
    char *out = strdup(at + 6);
    out[strlen(out) - 2] = '\0'; /* drop "}\n" */
    free(line);
    return out;
}

static void check_id(const char *request, const char *want)
{
    char *got = id_text(request);
    assert_string_equal(got, want);
    free(got);
}

static void test_id_unchanged(void **state)
{
    (void)state;
    check_id("{\"cmd\":\"ping\",\"id\":\"req-42\"}", "\"req-42\"");
    /* A 30-digit integer (cJSON's double would print 1.2345678901234568e+29). */
    check_id("{\"cmd\":\"ping\",\"id\":123456789012345678901234567890}",
             "123456789012345678901234567890");
    check_id("{\"cmd\":\"ping\",\"id\":-0.10000000000000000555}", "-0.10000000000000000555");
    check_id("{\"cmd\":\"ping\",\"id\":1E+2}", "1E+2");
    /* A NUL inside the id (cJSON would cut the string there). */
    check_id("{\"cmd\":\"ping\",\"id\":\"a\\u0000b\"}", "\"a\\u0000b\"");
    check_id("{\"cmd\":\"ping\",\"id\":\"\\ud83d\\udc0e \\\" \\\\\"}",
             "\"\\ud83d\\udc0e \\\" \\\\\"");
    check_id("{ \"id\" : [1, {\"x\":\"]}\"}, null] , \"cmd\":\"ping\"}",
             "[1, {\"x\":\"]}\"}, null]");
    check_id("{\"cmd\":\"ping\",\"id\":true}", "true");
    check_id("{\"cmd\":\"ping\",\"id\":null}", "null");
    /* The member cJSON reads: escapes in the name count, the first wins. */
    check_id("{\"cmd\":\"ping\",\"\\u0069d\":7,\"id\":8}", "7");
    check_id("{\"cmd\":\"ping\",\"idx\":1,\"i\":2,\"id\":3}", "3");
    /* In error responses too, as long as the request is an object. */
    check_id("{\"cmd\":\"explode\",\"id\":99999999999999999999}", "99999999999999999999");
    check_id("{\"cmd\":\"worker\",\"worker\":0,\"id\":\"w\"}", "\"w\"");
    /* No id, no member. */
    struct fake f = fake();
    cJSON *r = run(&f, "{\"cmd\":\"ping\"}", NULL);
    assert_null(cJSON_GetObjectItemCaseSensitive(r, "id"));
    cJSON_Delete(r);
    r = run(&f, "{\"cmd\":\"ping\",\"id\":1", NULL);
    assert_null(cJSON_GetObjectItemCaseSensitive(r, "id"));
    cJSON_Delete(r);
}

static void test_nul_outside_id_refused(void **state)
{
    (void)state;
    struct fake f = fake();
    /* "ping\u0000x" must not mean "ping"; nor a key its prefix. */
    expect_error(&f, "{\"cmd\":\"ping\\u0000x\"}", CR_E_BAD_REQUEST);
    f.calls = 0;
    expect_error(&f, "{\"cmd\":\"set\",\"key\":\"workers\\u0000\",\"value\":1}", CR_E_BAD_REQUEST);
    assert_int_equal(f.calls, 0);
    /* An escaped backslash before u0000 is no NUL. */
    cJSON *r = run(&f, "{\"cmd\":\"ping\",\"x\":\"\\\\u0000\"}", NULL);
    assert_ok(r);
    cJSON_Delete(r);
}

static void test_output_scrubbed(void **state)
{
    (void)state;
    /* A worker's STATUS= text may hold any bytes; the line stays UTF-8. */
    struct fake f = fake();
    f.status_text = "ok \xff\xc3( \xe2\x82\xac";
    char *line = NULL;
    cJSON *r = run_n(&f, "{\"cmd\":\"status\"}", 16, NULL, &line);
    assert_non_null(strstr(line, "\"ok ?"
                                 "?( \xe2\x82\xac\""));
    free(line);
    cJSON_Delete(r);
}

static void test_utf8_prefix(void **state)
{
    (void)state;
    assert_int_equal(cr_utf8_valid_prefix("abc", 3), 3);
    assert_int_equal(cr_utf8_valid_prefix("a\xc3\xa9", 3), 3);
    assert_int_equal(cr_utf8_valid_prefix("a\xc3", 2), 1);
    assert_int_equal(cr_utf8_valid_prefix("\xe0\x80\x80", 3), 0);     /* overlong */
    assert_int_equal(cr_utf8_valid_prefix("\xed\xbf\xbf", 3), 0);     /* surrogate */
    assert_int_equal(cr_utf8_valid_prefix("\xf4\x8f\xbf\xbf", 4), 4); /* U+10FFFF */
    assert_int_equal(cr_utf8_valid_prefix("\xf5\x80\x80\x80", 4), 0);
    assert_int_equal(cr_utf8_valid_prefix("\x80", 1), 0);
}

/* Runs last: every documented error code came out of the tests above. */
static void test_every_code_seen(void **state)
{
    (void)state;
    const char *all[] = {CR_E_BAD_JSON,      CR_E_BAD_REQUEST, CR_E_UNKNOWN_COMMAND,
                         CR_E_BAD_ARGUMENT,  CR_E_NOT_FOUND,   CR_E_NO_PROCESS,
                         CR_E_LINE_TOO_LONG, CR_E_FORBIDDEN,   CR_E_BUSY,
                         CR_E_SHUTTING_DOWN, CR_E_INTERNAL};
    const char **seen_codes;
    size_t nseen = fake_codes_seen(&seen_codes);
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        bool found = false;
        for (size_t j = 0; j < nseen; j++)
            found |= strcmp(seen_codes[j], all[i]) == 0;
        if (!found)
            fail_msg("error code %s never exercised", all[i]);
    }
    assert_int_equal(nseen, sizeof(all) / sizeof(all[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ping),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_workers),
        cmocka_unit_test(test_worker),
        cmocka_unit_test(test_history),
        cmocka_unit_test(test_scale),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_kill),
        cmocka_unit_test(test_stack),
        cmocka_unit_test(test_stack_wait),
        cmocka_unit_test(test_stack_held_again),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_stop),
        cmocka_unit_test(test_request_errors),
        cmocka_unit_test(test_transport_errors),
        cmocka_unit_test(test_invalid_utf8_refused),
        cmocka_unit_test(test_unknown_command_cut_at_a_character),
        cmocka_unit_test(test_id_unchanged),
        cmocka_unit_test(test_nul_outside_id_refused),
        cmocka_unit_test(test_output_scrubbed),
        cmocka_unit_test(test_utf8_prefix),
        cmocka_unit_test(test_every_code_seen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
