/* The config parser: flags, JSON, live `set`, cross-field rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <cmocka.h>

#include "config.h"

static int parse(struct cr_config *c, char **argv, char *err)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    char action;
    int r = cr_config_parse_args(c, argc, argv, &action, err, 256);
    return r < 0 ? r : cr_config_finish(c, err, 256);
}

static void test_defaults(void **state)
{
    struct cr_config c;
    cr_config_init(&c);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_int_equal(c.stop_timeout_ms, 10000);
    assert_int_equal(c.backoff_initial_ms, 100);
    assert_int_equal(c.sample_interval_ms, 250);
    assert_int_equal(c.soft_samples, 4);
    assert_int_equal(c.heap_headroom_pct, 25);
    assert_int_equal(c.history, 256);
    assert_int_equal(c.workers, 0);        /* auto: one per core */
    assert_int_equal(c.spawn_parallel, 0); /* twice the cores, at least 4 */
    assert_null(c.control);                /* $RUNTIME_DIRECTORY/control.sock, else ./corral.sock */
    assert_int_equal(c.balance, CR_BALANCE_SHARED);
    assert_int_equal(c.ready, CR_READY_AUTO);
    assert_string_equal(c.log_level, "info");
    assert_int_equal(c.control_idle_ms, 60000);
    assert_int_equal(c.priority_boost, 10);
    assert_int_equal(c.memory_max, 0);
    assert_false(c.node_agent);
    assert_int_equal(cr_config_heap_limit(&c), 0);
    cr_config_done(&c);
}

static void test_flags(void **state)
{
    struct cr_config c;
    char err[256];
    cr_config_init(&c);
    char *argv[] = {"corrald", "-w", "3", "--listen=127.0.0.1:0", "--memory-max", "128M",
                    "--memory-soft", "75%", "--stop-timeout", "500ms", "--watchdog", "1",
                    "--hang-timeout", "2s", "--backoff-max", "5000", "--no-cgroups",
                    "--balance", "reuseport", "--", "/bin/prog", "--its-own-flag", NULL};
    assert_int_equal(parse(&c, argv, err), 0);
    assert_int_equal(c.workers, 3);
    assert_string_equal(c.listen, "127.0.0.1:0");
    assert_int_equal(c.memory_max, 128u << 20);
    assert_int_equal(c.memory_soft, (128u << 20) / 100 * 75);
    assert_int_equal(c.stop_timeout_ms, 500);
    assert_int_equal(c.watchdog_ms, 1000);
    assert_int_equal(c.hang_timeout_ms, 2000);
    assert_int_equal(c.backoff_max_ms, 5000);
    assert_true(c.no_cgroups);
    assert_int_equal(c.balance, CR_BALANCE_REUSEPORT);
    assert_int_equal(c.argc, 2);
    assert_string_equal(c.argv[0], "/bin/prog");
    assert_string_equal(c.argv[1], "--its-own-flag");
    assert_int_equal(cr_config_heap_limit(&c), (128u << 20) - (128u << 20) / 100 * 25);
    cr_config_done(&c);
}

static void bad(char **argv, const char *needle)
{
    struct cr_config c;
    char err[256] = "";
    cr_config_init(&c);
    assert_true(parse(&c, argv, err) < 0);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not name '%s'", err, needle);
    cr_config_done(&c);
}

static void test_bad_flags(void **state)
{
    bad((char *[]){"corrald", "--wrokers", "2", NULL}, "--wrokers");
    bad((char *[]){"corrald", "--workers", "two", NULL}, "two");
    bad((char *[]){"corrald", "--workers", "-1", NULL}, "--workers");
    bad((char *[]){"corrald", "--memory-max", "12Q", NULL}, "12Q");
    bad((char *[]){"corrald", "--memory-max", "1M", NULL}, "4M minimum");
    bad((char *[]){"corrald", "--memory-soft", "150%", "--memory-max", "64M", NULL}, "150%");
    bad((char *[]){"corrald", "--memory-soft", "50%", NULL}, "needs --memory-max");
    bad((char *[]){"corrald", "--memory-max", "64M", "--memory-soft", "64M", NULL}, "below");
    bad((char *[]){"corrald", "--stop-timeout", "soon", NULL}, "soon");
    bad((char *[]){"corrald", "--balance", "random", NULL}, "random");
    bad((char *[]){"corrald", "--workers", NULL}, "needs a value");
    bad((char *[]){"corrald", "stray", NULL}, "stray");
    bad((char *[]){"corrald", "--watchdog", "10", "--hang-timeout", "5", NULL}, "hang-timeout");
    bad((char *[]){"corrald", "--log-level", "loud", NULL}, "loud");
    bad((char *[]){"corrald", "--heap-snapshot", "--diag-dir", "none", NULL}, "needs a --diag-dir");
    /* One grammar: whole numbers only, no sign, blank, fraction or hex. */
    bad((char *[]){"corrald", "--memory-max", "1.5G", NULL}, "'1.5G' is not a size");
    bad((char *[]){"corrald", "--memory-max", "0x10M", NULL}, "'0x10M' is not a size");
    bad((char *[]){"corrald", "--memory-max", " 64M", NULL}, "is not a size");
    bad((char *[]){"corrald", "--stop-timeout", "1.5s", NULL}, "'1.5s' is not a duration");
    bad((char *[]){"corrald", "--max-requests", " -1", NULL}, "not a whole number");
}

/* Issue 13 finding 7: a value the daemon would not honour is refused, and
 * the message gives the range. */
/* --ready's modes and --workers auto. */
static void test_ready_modes(void **state)
{
    struct cr_config c;
    char err[256] = "", buf[48];
    cr_config_init(&c);
    assert_int_equal(c.ready, CR_READY_AUTO); /* the default */
    assert_int_equal(c.min_uptime_ms, 1000);
    assert_int_equal(parse(&c, (char *[]){"corrald", "--ready", "delay:1500ms", "--workers", "auto",
                                          "--min-uptime", "2", NULL}, err), 0);
    assert_int_equal(c.ready, CR_READY_DELAY);
    assert_int_equal(c.ready_delay_ms, 1500);
    assert_int_equal(c.workers, 0);
    assert_int_equal(c.min_uptime_ms, 2000);
    assert_string_equal(cr_ready_to_string(c.ready, c.ready_delay_ms, buf, sizeof(buf)),
                        "delay:1500ms");
    assert_int_equal(cr_config_set(&c, "ready", "exec", true, err, sizeof(err)), 0);
    assert_int_equal(c.ready, CR_READY_EXEC);
    assert_int_equal(cr_config_parse_json(&c, "{\"ready\": \"notify\"}", err, sizeof(err)), 0);
    assert_int_equal(c.ready, CR_READY_NOTIFY);
    cr_config_done(&c);
}

static void test_ranges(void **state)
{
    bad((char *[]){"corrald", "--crash-budget", "1000", NULL},
        "--crash-budget: '1000' is out of range (1 to 64)");
    bad((char *[]){"corrald", "--crash-budget", "0", NULL}, "out of range (1 to 64)");
    bad((char *[]){"corrald", "--history", "100000", NULL},
        "--history: '100000' is out of range (1 to 65536)");
    bad((char *[]){"corrald", "--sample-interval", "5", NULL}, "out of range (10ms to 720h)");
    bad((char *[]){"corrald", "--memory-max", "2048T", NULL}, "out of range (0 to 1024T)");
    bad((char *[]){"corrald", "--workers", "5000", NULL}, "--workers: 5000 is out of range 1..4096");
    bad((char *[]){"corrald", "--listen", "127.0.0.1:99999", NULL},
        "--listen: port 99999 is out of range 1..65535");
    bad((char *[]){"corrald", "--listen", "localhost", NULL}, "--listen: 'localhost' is not HOST:PORT");
    bad((char *[]){"corrald", "--listen", "[::1:80", NULL}, "--listen");
    bad((char *[]){"corrald", "--listen", "127.0.0.1:http", NULL}, "--listen: port 'http'");
    /* 0 is not a silent "one per core": that is spelled auto. */
    bad((char *[]){"corrald", "--workers", "0", NULL}, "--workers: 0 is out of range 1..4096");
    bad((char *[]){"corrald", "--ready", "sometimes", NULL}, "--ready: 'sometimes' is not");
    bad((char *[]){"corrald", "--ready", "delay:", NULL}, "delay:DURATION");
    bad((char *[]){"corrald", "--ready", "delay:fast", NULL}, "--ready");

    struct cr_config c;
    char err[256] = "";
    cr_config_init(&c);
    assert_int_equal(parse(&c, (char *[]){"corrald", "--crash-budget", "64", "--history",
                                          "65536", NULL}, err),
                     0);
    assert_int_equal(c.crash_budget, 64);
    assert_int_equal(c.history, 65536);
    /* `set` goes through the same table: status can never show a budget
     * the restart policy would cap. */
    assert_true(cr_config_set(&c, "crash-budget", "1000", true, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "(1 to 64)"));
    assert_int_equal(c.crash_budget, 64);
    assert_true(cr_config_parse_json(&c, "{\"history\": 100000}", err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "(1 to 65536)"));
    cr_config_done(&c);
}

/* --workers MIN..MAX: corrald decides N within; a number fixes N again. */
static void test_workers_range(void **state)
{
    bad((char *[]){"corrald", "--workers", "4..1", NULL}, "'4..1' is not MIN..MAX with 1 <= MIN");
    bad((char *[]){"corrald", "--workers", "0..3", NULL}, "is not MIN..MAX");
    bad((char *[]){"corrald", "--workers", "1..5000", NULL}, "MAX <= 4096");
    bad((char *[]){"corrald", "--workers", "..4", NULL}, "is not MIN..MAX");
    bad((char *[]){"corrald", "--workers", "2..", NULL}, "is not MIN..MAX");
    bad((char *[]){"corrald", "--workers", "2..x", NULL}, "is not MIN..MAX");
    struct cr_config c;
    char err[256] = "";
    cr_config_init(&c);
    assert_int_equal(parse(&c, (char *[]){"corrald", "--workers", "2..6", NULL}, err), 0);
    assert_int_equal(c.workers_min, 2);
    assert_int_equal(c.workers_max, 6);
    assert_int_equal(c.workers, 2); /* a start begins at MIN */
    cJSON *j = cJSON_CreateObject();
    cr_config_to_json(&c, j);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(j, "workers")->valuestring, "2..6");
    cJSON_Delete(j);
    /* The count asked for stays within new bounds, clamped into them. */
    c.workers = 5;
    assert_int_equal(cr_config_set(&c, "workers", "1..4", true, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);
    assert_int_equal(cr_config_set(&c, "workers", "3..8", true, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);
    /* A number (or auto) ends it. */
    assert_int_equal(cr_config_set(&c, "workers", "3", true, err, sizeof(err)), 0);
    assert_int_equal(c.workers_min + c.workers_max, 0);
    j = cJSON_CreateObject();
    cr_config_to_json(&c, j);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(j, "workers")->valueint, 3);
    cJSON_Delete(j);
    assert_int_equal(cr_config_set(&c, "workers", "1..2", true, err, sizeof(err)), 0);
    assert_int_equal(cr_config_set(&c, "workers", "auto", true, err, sizeof(err)), 0);
    assert_int_equal(c.workers_max, 0);
    assert_true(cr_config_parse_json(&c, "{\"workers\": \"1..3\"}", err, sizeof(err)) == 0);
    assert_int_equal(c.workers_max, 3);
    cr_config_done(&c);
}

static void test_help(void **state)
{
    struct cr_config c;
    char err[256], action = 0;
    cr_config_init(&c);
    char *argv[] = {"corrald", "--help", NULL};
    assert_int_equal(cr_config_parse_args(&c, 2, argv, &action, err, sizeof(err)), 1);
    assert_int_equal(action, 'h');
    cr_config_done(&c);

    /* Every numeric option states its range. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    cr_config_usage(f, "corrald");
    fclose(f);
    static const char *const want[] = {
        "--crash-budget N", "(range 1 to 64)", "--history N", "(range 1 to 65536)",
        "--memory-max SIZE", "(range 0 to 1024T)", "--stop-timeout SEC", "(range 1ms to 720h)",
        "--workers N|MIN..MAX|auto", "(range 1 to 4096)", "--max-requests N", "(range 0 to 1000000000000000)",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i += 2) {
        const char *line = strstr(text, want[i]);
        assert_non_null(line);
        const char *eol = strchr(line, '\n');
        const char *hit = strstr(line, want[i + 1]);
        if (!hit || hit > eol)
            fail_msg("--help line of %s lacks %s", want[i], want[i + 1]);
    }
    size_t lines = 0, ranged = 0;
    for (const char *p = text; (p = strstr(p, "\n  ")); p++) {
        const char *eol = strchr(p + 1, '\n');
        const char *arg = strstr(p, " N ");
        lines++;
        if (strstr(p, "(range ") && strstr(p, "(range ") < eol)
            ranged++;
        else if ((arg && arg < eol) || (strstr(p, "SIZE ") && strstr(p, "SIZE ") < eol) ||
                 (strstr(p, "SEC ") && strstr(p, "SEC ") < eol) ||
                 (strstr(p, " MS ") && strstr(p, " MS ") < eol))
            fail_msg("a numeric option without a range: %.*s", (int)(eol - p - 1), p + 1);
    }
    assert_true(ranged >= 25);
    /* Every option's default, one way: "(default: X)", once per line. */
    static const char *const defaults[] = {
        "--stop-timeout SEC", "(default: 10)", "--backoff-initial MS", "(default: 100)",
        "--workers N|MIN..MAX|auto", "(default: auto = one per core)", "--listen HOST:PORT",
        "(default: 127.0.0.1:8080)", "--memory-max SIZE", "(default: none)", "--pss",
        "(default: off)", "--control PATH",
        "(default: $RUNTIME_DIRECTORY/control.sock, else ./corral.sock)",
    };
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i += 2) {
        const char *line = strstr(text, defaults[i]);
        assert_non_null(line);
        const char *eol = strchr(line, '\n');
        const char *hit = strstr(line, defaults[i + 1]);
        if (!hit || hit > eol)
            fail_msg("--help line of %s lacks %s", defaults[i], defaults[i + 1]);
    }
    size_t with_default = 0;
    for (const char *p = text; (p = strstr(p, "\n  ")); p++) {
        const char *eol = strchr(p + 1, '\n');
        const char *d = strstr(p + 1, "(default: ");
        if (strncmp(p + 1, "  -h, --help", 12) == 0)
            break;
        if (!d || d > eol)
            fail_msg("an option without its default: %.*s", (int)(eol - p - 1), p + 1);
        if (strstr(d + 1, "(default") && strstr(d + 1, "(default") < eol)
            fail_msg("a default stated twice: %.*s", (int)(eol - p - 1), p + 1);
        with_default++;
    }
    assert_true(with_default >= 45);
    free(text);
}

static void test_json(void **state)
{
    struct cr_config c;
    char err[256];
    cr_config_init(&c);
    const char *j = "{\"workers\": 4, \"memory-max\": \"256M\", \"node-heap\": true, "
                    "\"stop-timeout\": 3, \"command\": [\"node\", \"server.js\"]}";
    assert_int_equal(cr_config_parse_json(&c, j, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 4);
    assert_int_equal(c.memory_max, 256u << 20);
    assert_true(c.node_heap);
    assert_int_equal(c.stop_timeout_ms, 3000);
    assert_int_equal(c.argc, 2);
    assert_string_equal(c.argv[1], "server.js");
    /* Flags win over the file. */
    char *argv[] = {"corrald", "--workers", "2", NULL};
    char action;
    assert_int_equal(cr_config_parse_args(&c, 3, argv, &action, err, sizeof(err)), 0);
    assert_int_equal(c.workers, 2);
    cr_config_done(&c);
}

static void bad_json(const char *j, const char *needle)
{
    struct cr_config c;
    char err[256] = "";
    cr_config_init(&c);
    assert_true(cr_config_parse_json(&c, j, err, sizeof(err)) < 0);
    if (!strstr(err, needle))
        fail_msg("error '%s' does not name '%s'", err, needle);
    cr_config_done(&c);
}

static void test_bad_json(void **state)
{
    bad_json("{\"workers\": 2,", "invalid JSON");
    bad_json("[1,2]", "object");
    bad_json("{\"wrokers\": 2}", "wrokers");
    bad_json("{\"workers\": -2}", "workers");
    bad_json("{\"workers\": 2.5}", "workers");
    bad_json("{\"listen\": [1]}", "listen");
    bad_json("{\"command\": []}", "command");
    bad_json("{\"command\": [\"a\", 3]}", "command");
    bad_json("{\"config\": \"x.json\"}", "config");
    bad_json("{\"workers\": 2} trailing", "invalid JSON");
}

static void test_set_live(void **state)
{
    struct cr_config c;
    char err[256];
    cr_config_init(&c);
    assert_int_equal(cr_config_set(&c, "memory-max", "64M", true, err, sizeof(err)), 0);
    assert_int_equal(c.memory_max, 64u << 20);
    assert_int_equal(cr_config_set(&c, "memory-soft", "50%", true, err, sizeof(err)), 0);
    assert_int_equal(c.memory_soft, (64u << 20) / 100 * 50);
    /* Raising the hard limit moves a percentage soft limit with it. */
    assert_int_equal(cr_config_set(&c, "memory-max", "128M", true, err, sizeof(err)), 0);
    assert_int_equal(c.memory_soft, (128u << 20) / 100 * 50);
    /* A value that breaks a rule is refused and changes nothing. */
    assert_true(cr_config_set(&c, "memory-soft", "200M", true, err, sizeof(err)) < 0);
    assert_int_equal(c.memory_soft, (128u << 20) / 100 * 50);
    assert_true(cr_config_set(&c, "listen", "0.0.0.0:1", true, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "run time"));
    assert_true(cr_config_set(&c, "nope", "1", true, err, sizeof(err)) < 0);
    /* Bounded: a jitter of UINT64_MAX would make max + 1 wrap to 0. */
    assert_true(cr_config_set(&c, "max-requests-jitter", "18446744073709551615", true, err,
                              sizeof(err)) < 0);
    assert_true(cr_config_set(&c, "backoff-max", "9999999999999", true, err, sizeof(err)) < 0);
    assert_true(cr_config_set(&c, "memory-max", "99999T", true, err, sizeof(err)) < 0);
    assert_int_equal(cr_config_set(&c, "log-level", "debug", true, err, sizeof(err)), 0);
    assert_string_equal(c.log_level, "debug");
    cr_config_done(&c);
}

/* --on-death: an absolute path, or none; from a flag, the file and `set`
 * (live), with its limits' defaults and ranges. */
static void test_on_death(void **state)
{
    struct cr_config c;
    char err[256] = "";
    cr_config_init(&c);
    assert_null(c.on_death);
    assert_int_equal(c.on_death_timeout_ms, 10000);
    assert_int_equal(c.on_death_parallel, 4);
    char *argv[] = {"corrald", "--on-death", "/usr/local/bin/page-me", "--on-death-timeout",
                    "500ms", "--on-death-parallel", "2", NULL};
    assert_int_equal(parse(&c, argv, err), 0);
    assert_string_equal(c.on_death, "/usr/local/bin/page-me");
    assert_int_equal(c.on_death_timeout_ms, 500);
    assert_int_equal(c.on_death_parallel, 2);
    /* Relative: refused, and nothing changes. */
    assert_true(cr_config_set(&c, "on-death", "bin/page-me", true, err, sizeof(err)) < 0);
    assert_non_null(strstr(err, "absolute path"));
    assert_string_equal(c.on_death, "/usr/local/bin/page-me");
    assert_int_equal(cr_config_set(&c, "on-death", "/bin/true", true, err, sizeof(err)), 0);
    assert_string_equal(c.on_death, "/bin/true");
    assert_int_equal(cr_config_set(&c, "on-death", "none", true, err, sizeof(err)), 0);
    assert_null(c.on_death);
    assert_int_equal(cr_config_set(&c, "on-death", "/bin/true", true, err, sizeof(err)), 0);
    assert_int_equal(cr_config_set(&c, "on-death", "", true, err, sizeof(err)), 0);
    assert_null(c.on_death);
    assert_true(cr_config_set(&c, "on-death-parallel", "65", true, err, sizeof(err)) < 0);
    assert_true(cr_config_set(&c, "on-death-parallel", "0", true, err, sizeof(err)) < 0);
    assert_true(cr_config_set(&c, "on-death-timeout", "10ms", true, err, sizeof(err)) < 0);
    assert_int_equal(cr_config_set(&c, "on-death-timeout", "2m", true, err, sizeof(err)), 0);
    assert_int_equal(c.on_death_timeout_ms, 120000);
    assert_int_equal(cr_config_parse_json(&c, "{\"on-death\": \"/opt/hook\"}", err, sizeof(err)),
                     0);
    assert_string_equal(c.on_death, "/opt/hook");
    assert_true(cr_config_parse_json(&c, "{\"on-death\": \"hook\"}", err, sizeof(err)) < 0);
    cr_config_done(&c);
}

/* Which options were set explicitly: a flag, the file or `set` count, even
 * to the default's own value; a default does not, nor a refused value. */
static void test_given(void **state)
{
    struct cr_config c;
    char err[256] = "", action;
    cr_config_init(&c);
    assert_false(cr_config_given(&c, "stop-timeout")); /* defaulted */
    assert_false(cr_config_given(&c, "listen"));      /* a default string too */
    assert_false(cr_config_given(&c, "nope"));        /* no such option */
    assert_false(cr_config_given(&c, ""));
    assert_false(cr_config_given(&c, NULL));
    assert_false(cr_config_given(&c, "command"));     /* a file key, no option */

    /* On the command line, long, short and --key=value, at the default's value. */
    char *argv[] = {"corrald", "--stop-timeout", "10", "-w", "2", "--pss", "--log-level=info",
                    "--env", "A=1", NULL};
    assert_int_equal(cr_config_parse_args(&c, 9, argv, &action, err, sizeof(err)), 0);
    assert_int_equal(c.stop_timeout_ms, 10000);
    assert_true(cr_config_given(&c, "stop-timeout"));
    assert_true(cr_config_given(&c, "workers"));
    assert_true(cr_config_given(&c, "pss"));
    assert_true(cr_config_given(&c, "log-level"));
    assert_true(cr_config_given(&c, "env"));
    assert_false(cr_config_given(&c, "start-timeout"));
    assert_false(cr_config_given(&c, "stop")); /* a prefix is no name */
    cr_config_done(&c);

    /* In the config file, a list even when empty. */
    cr_config_init(&c);
    assert_int_equal(cr_config_parse_json(&c, "{\"stop-timeout\": 10, \"balance\": \"shared\", "
                                              "\"pass-env\": [], \"command\": [\"x\"]}",
                                          err, sizeof(err)),
                     0);
    assert_true(cr_config_given(&c, "stop-timeout"));
    assert_true(cr_config_given(&c, "balance"));
    assert_true(cr_config_given(&c, "pass-env"));
    assert_false(cr_config_given(&c, "watchdog"));
    assert_false(cr_config_given(&c, "command"));
    cr_config_done(&c);

    /* By `set`; a refused value leaves it not given. */
    cr_config_init(&c);
    assert_true(cr_config_set(&c, "stop-timeout", "soon", true, err, sizeof(err)) < 0);
    assert_false(cr_config_given(&c, "stop-timeout"));
    assert_true(cr_config_set(&c, "hang-timeout", "1", true, err, sizeof(err)) < 0); /* < watchdog */
    assert_false(cr_config_given(&c, "hang-timeout"));
    assert_true(cr_config_set(&c, "listen", "127.0.0.1:1", true, err, sizeof(err)) < 0);
    assert_false(cr_config_given(&c, "listen"));
    assert_int_equal(cr_config_set(&c, "stop-timeout", "8", true, err, sizeof(err)), 0);
    assert_true(cr_config_given(&c, "stop-timeout"));
    assert_int_equal(cr_config_set(&c, "log-level", "debug", true, err, sizeof(err)), 0);
    assert_true(cr_config_given(&c, "log-level"));
    assert_false(cr_config_given(&c, "min-uptime"));
    /* A failed parse keeps what was given before it. */
    char *bad_argv[] = {"corrald", "--watchdog", "2", "--wrokers", "2", NULL};
    assert_true(cr_config_parse_args(&c, 5, bad_argv, &action, err, sizeof(err)) < 0);
    assert_true(cr_config_given(&c, "watchdog"));
    assert_true(cr_config_given(&c, "stop-timeout"));
    cr_config_done(&c);
}

static void test_values(void **state)
{
    uint64_t v;
    assert_int_equal(cr_parse_size("4096", &v), 0);
    assert_int_equal(v, 4096);
    assert_int_equal(cr_parse_size("64M", &v), 0);
    assert_int_equal(v, 64u << 20);
    assert_true(cr_parse_size("1.5G", &v) < 0);
    assert_true(cr_parse_size("0x10M", &v) < 0);
    assert_int_equal(cr_parse_size("2KiB", &v), 0);
    assert_int_equal(v, 2048);
    assert_true(cr_parse_size("", &v) < 0);
    assert_true(cr_parse_size("M", &v) < 0);
    assert_true(cr_parse_size("-1M", &v) < 0);
    assert_true(cr_parse_size("99999999999T", &v) < 0);
    assert_int_equal(cr_parse_duration_ms("10", &v), 0);
    assert_int_equal(v, 10000);
    assert_int_equal(cr_parse_duration_ms("250ms", &v), 0);
    assert_int_equal(v, 250);
    assert_true(cr_parse_duration_ms("1.5s", &v) < 0);
    assert_int_equal(cr_parse_duration_ms("2m", &v), 0);
    assert_int_equal(v, 120000);
    assert_true(cr_parse_duration_ms("2 weeks", &v) < 0);
    assert_int_equal(cr_parse_uint("42", 100, &v), 0);
    assert_true(cr_parse_uint("420", 100, &v) < 0);
    assert_true(cr_parse_uint("4x", 0, &v) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_flags),
        cmocka_unit_test(test_bad_flags), cmocka_unit_test(test_help),
        cmocka_unit_test(test_ranges),
        cmocka_unit_test(test_workers_range),
        cmocka_unit_test(test_ready_modes),
        cmocka_unit_test(test_json),     cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_set_live), cmocka_unit_test(test_values),
        cmocka_unit_test(test_given),    cmocka_unit_test(test_on_death),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
