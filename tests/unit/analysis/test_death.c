/* Unit tests of cr_death_classify: every branch, from synthetic evidence. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "death.h"

#define MIB (1024ull * 1024)
#define BIT(s) (UINT64_C(1) << (s))

static struct cr_death_evidence killed(int sig)
{
    return (struct cr_death_evidence){.cld_code = CLD_KILLED, .cld_status = sig,
                                      .uptime_ms = 1234};
}

static struct cr_death_evidence exited(int code)
{
    return (struct cr_death_evidence){.cld_code = CLD_EXITED, .cld_status = code,
                                      .uptime_ms = 1234};
}

static struct cr_death_result classify(const struct cr_death_evidence *ev)
{
    struct cr_death_result r;
    memset(&r, 0xa5, sizeof(r));
    assert_int_equal(cr_death_classify(ev, &r), 0);
    assert_non_null(memchr(r.reason, '\0', sizeof(r.reason)));
    assert_true(strlen(r.reason) > 10);
    return r;
}

#define assert_reason_has(r, s)                                                                    \
    do {                                                                                           \
        if (!strstr((r).reason, (s)))                                                              \
            fail_msg("reason \"%s\" lacks \"%s\"", (r).reason, (s));                              \
    } while (0)

static void test_strings(void **state)
{
    for (int d = 0; d < _CR_DEATH_MAX; d++) {
        const char *s = cr_death_to_string(d);
        assert_non_null(s);
        assert_int_equal(cr_death_from_string(s), d);
    }
    assert_null(cr_death_to_string(_CR_DEATH_MAX));
    assert_null(cr_death_to_string(-1));
    assert_string_equal(cr_death_to_string(CR_DEATH_OOM_ANCESTOR_LIMIT), "oom-ancestor-limit");
    assert_string_equal(cr_death_to_string(CR_DEATH_EXEC_FAILED), "exec-failed");
    assert_int_equal(cr_death_from_string("nope"), -EINVAL);
    assert_int_equal(cr_death_from_string(NULL), -EINVAL);
    for (int k = 0; k < _CR_KILL_REASON_MAX; k++)
        assert_int_equal(cr_kill_reason_from_string(cr_kill_reason_to_string(k)), k);
    assert_null(cr_kill_reason_to_string(_CR_KILL_REASON_MAX));
    assert_int_equal(cr_kill_reason_from_string("x"), -EINVAL);
}

static void test_is_planned(void **state)
{
    for (int d = 0; d < _CR_DEATH_MAX; d++)
        assert_int_equal(cr_death_is_planned(d), d == CR_DEATH_RECYCLED);
}

static void test_invalid(void **state)
{
    struct cr_death_result r = {.category = CR_DEATH_CRASH};
    struct cr_death_evidence ev = exited(0);

    assert_int_equal(cr_death_classify(NULL, &r), -EINVAL);
    assert_int_equal(cr_death_classify(&ev, NULL), -EINVAL);
    ev.cld_code = 99;
    assert_int_equal(cr_death_classify(&ev, &r), -EINVAL);
    ev = exited(256);
    assert_int_equal(cr_death_classify(&ev, &r), -EINVAL);
    ev = killed(0);
    assert_int_equal(cr_death_classify(&ev, &r), -EINVAL);
    ev = killed(SIGKILL);
    ev.kill_reason = _CR_KILL_REASON_MAX;
    assert_int_equal(cr_death_classify(&ev, &r), -EINVAL);
    ev = killed(SIGKILL);
    ev.cg = _CR_DEATH_CG_MAX;
    assert_int_equal(cr_death_classify(&ev, &r), -EINVAL);
    assert_int_equal(r.category, CR_DEATH_CRASH); /* untouched on error */
}

static void test_exec_failed(void **state)
{
    struct cr_death_evidence ev = exited(127);
    ev.exec_failed = true;
    ev.exec_errno = ENOENT;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXEC_FAILED);
    assert_int_equal(r.exit_code, 127);
    assert_reason_has(r, "could not be executed");
    assert_reason_has(r, "ENOENT");
    assert_false(r.planned);
}

static void test_exit_clean_and_error(void **state)
{
    struct cr_death_evidence ev = exited(0);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_CLEAN);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(r.signal, 0);
    assert_int_equal(r.shell_status, 0);
    assert_false(r.planned);
    assert_reason_has(r, "uptime 1234 ms");

    ev = exited(3);
    ev.uptime_ms = 65000;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_int_equal(r.exit_code, 3);
    assert_int_equal(r.shell_status, 3);
    assert_reason_has(r, "exited with 3");
    assert_reason_has(r, "uptime 65.0 s");
}

static void test_exit_during_recycle_and_stop(void **state)
{
    struct cr_death_evidence ev = exited(0);
    ev.kill_reason = CR_KILL_RECYCLE;
    ev.kill_signal = SIGTERM;
    ev.kill_text = "memory soft limit (usage 70.1 MiB > soft 64.0 MiB)";
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_RECYCLED);
    assert_true(r.planned);
    assert_reason_has(r, "soft limit (usage 70.1 MiB");

    ev.kill_reason = CR_KILL_STOP;
    ev.kill_text = NULL;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_CLEAN);
    assert_true(r.planned);
    assert_reason_has(r, "stopped by corrald");

    ev.kill_reason = CR_KILL_STOP_TIMEOUT; /* exited 0 just as the timeout hit */
    ev.kill_signal = SIGKILL;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_CLEAN);
    assert_true(r.planned);

    ev.kill_reason = CR_KILL_HANG; /* exited 0 though corrald was killing it */
    ev.kill_signal = SIGABRT;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_CLEAN);
    assert_false(r.planned);
    assert_reason_has(r, "corrald had sent SIGABRT: hang");

    ev = exited(2); /* a failed shutdown is an error, even when planned */
    ev.kill_reason = CR_KILL_RECYCLE;
    ev.kill_signal = SIGTERM;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_false(r.planned);
    assert_reason_has(r, "recycle");
}

/* ---- the shell-wrapper rule ---- */

static void test_shell_137_without_evidence_is_exit(void **state)
{
    struct cr_death_evidence ev = exited(137);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_false(r.via_shell);
    assert_int_equal(r.signal, 0);
    assert_int_equal(r.exit_code, 137);
    assert_reason_has(r, "SIGKILL, but nothing else supports it");

    ev = exited(139);
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_reason_has(r, "SIGSEGV");

    ev = exited(128); /* not 128+N for a signal */
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_null(strstr(r.reason, "shell"));
}

static void test_shell_137_with_oom(void **state)
{
    struct cr_death_evidence ev = exited(137);
    ev.cg = CR_DEATH_CG_V2;
    ev.own.oom_kill = 1;
    ev.own.oom = 1;
    ev.own.max = 5;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_true(r.via_shell);
    assert_int_equal(r.signal, SIGKILL);
    assert_int_equal(r.shell_status, 137);
    assert_int_equal(r.exit_code, 137);
    assert_reason_has(r, "through a shell wrapper");
}

static void test_shell_137_with_ledger(void **state)
{
    struct cr_death_evidence ev = exited(137);
    ev.kill_reason = CR_KILL_STOP_TIMEOUT;
    ev.kill_signal = SIGKILL;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_STOP_TIMEOUT);
    assert_true(r.via_shell);

    ev = exited(143);
    ev.kill_reason = CR_KILL_RECYCLE;
    ev.kill_signal = SIGTERM;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_RECYCLED);
    assert_true(r.via_shell);
    assert_true(r.planned);

    ev = exited(143); /* SIGTERM from outside through a shell: no support */
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_false(r.via_shell);
}

static void test_shell_134_with_heap(void **state)
{
    struct cr_death_evidence ev = exited(134);
    ev.fatal_heap_limit = true;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
    assert_true(r.via_shell);
    assert_int_equal(r.signal, SIGABRT);

    ev = exited(134);
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
}

/* ---- SIGKILL ---- */

static void test_oom_own_v1(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V1;
    ev.own = (struct cr_oom_delta){.max = 3, .oom_kill = 1};
    ev.own_path = "/corral/workers/w3";
    ev.own_limit = 64 * MIB;
    ev.system_oom_kill = 1;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_int_equal(r.shell_status, 137);
    assert_int_equal(r.exit_code, -1);
    assert_false(r.via_shell);
    assert_false(r.inferred);
    assert_false(r.planned);
    assert_reason_has(r, "own memory limit (64.0 MiB) was hit");
    assert_reason_has(r, "oom_kill +1, failcnt +3 in /corral/workers/w3");
    assert_null(strstr(r.reason, "oom +"));
}

static void test_oom_own_v2(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.own = (struct cr_oom_delta){.oom = 1, .oom_kill = 1};
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_reason_has(r, "max +0, oom +1");
}

static void test_oom_ancestor(void **state)
{
    /* v1: the kill is counted in the victim's group, the limit hit in the
     * ancestor's failcnt. */
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V1;
    ev.own = (struct cr_oom_delta){.oom_kill = 1};
    ev.ancestor = (struct cr_oom_delta){.max = 7};
    ev.ancestor_path = "/corral";
    ev.ancestor_limit = 256 * MIB;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    assert_false(r.inferred);
    assert_reason_has(r, "enclosing cgroup's limit (256.0 MiB) was hit, not the worker's own");
    assert_reason_has(r, "ancestor: oom_kill +0, failcnt +7 in /corral");

    /* v2: the ancestor's memory.events.local oom moved. */
    ev.cg = CR_DEATH_CG_V2;
    ev.ancestor = (struct cr_oom_delta){.oom = 1, .oom_kill = 1};
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);

    /* both limits hit during its life: own wins and the reason says so */
    ev.own.oom = 1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_reason_has(r, "enclosing group's limit was also hit");
}

static void test_oom_v1_memsw_peak(void **state)
{
    /* Measured on the v1 host (kernel 6.18, memsw.limit == limit): after an
     * OOM kill neither failcnt moved; the victim's oom_kill did, and the
     * peak of the group whose limit was hit reached that limit. */
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V1;
    ev.own = (struct cr_oom_delta){.oom_kill = 1};
    ev.own_peak = 67096576;
    ev.own_limit = UINT64_MAX; /* the worker group itself unlimited */
    ev.ancestor_peak = 67108864;
    ev.ancestor_limit = 64 * MIB;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    assert_false(r.inferred);

    ev.own_limit = 64 * MIB; /* its own limit, reached by its peak (12 KiB short) */
    ev.ancestor_peak = 67096576;
    ev.ancestor_limit = 256 * MIB;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_false(r.inferred);

    ev.own_peak = 40 * MIB; /* far below: neither limit reached */
    ev.ancestor_peak = 100 * MIB;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_true(r.inferred);
}

static void test_oom_system_direct(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.own = (struct cr_oom_delta){.oom_kill = 1};
    ev.system_oom_kill = 2;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_SYSTEM);
    assert_false(r.inferred);
    assert_reason_has(r, "system oom_kill +2");
}

static void test_oom_kill_without_limit_counters(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V1;
    ev.own = (struct cr_oom_delta){.oom_kill = 1};
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_true(r.inferred);
}

static void test_oom_beats_corrald_sigkill(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.own = (struct cr_oom_delta){.max = 1, .oom = 1, .oom_kill = 1};
    ev.kill_reason = CR_KILL_STOP_TIMEOUT;
    ev.kill_signal = SIGKILL;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    assert_reason_has(r, "corrald had sent SIGKILL: stop-timeout");
}

static void test_sigkill_ledger(void **state)
{
    static const struct {
        enum cr_kill_reason why;
        enum cr_death want;
        bool planned;
    } cases[] = {
        {CR_KILL_HANG, CR_DEATH_WATCHDOG_KILL, false},
        {CR_KILL_STOP_TIMEOUT, CR_DEATH_STOP_TIMEOUT, false},
        {CR_KILL_START_TIMEOUT, CR_DEATH_START_TIMEOUT, false},
        {CR_KILL_MANUAL, CR_DEATH_SIGNAL, false},
        {CR_KILL_MEMORY, CR_DEATH_MEMORY_KILL, false},
        {CR_KILL_RECYCLE, CR_DEATH_RECYCLED, true},
        {CR_KILL_STOP, CR_DEATH_EXIT_CLEAN, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct cr_death_evidence ev = killed(SIGKILL);
        ev.cg = CR_DEATH_CG_V1;
        ev.ancestor.max = 4; /* page-cache reclaim at the service limit: weak */
        ev.system_oom_kill = 1;
        ev.kill_reason = cases[i].why;
        ev.kill_signal = SIGKILL;
        struct cr_death_result r = classify(&ev);
        assert_int_equal(r.category, cases[i].want);
        assert_int_equal(r.planned, cases[i].planned);
        assert_false(r.inferred);
    }
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.kill_reason = CR_KILL_MANUAL;
    ev.kill_signal = SIGKILL;
    struct cr_death_result r = classify(&ev);
    assert_reason_has(r, "operator");

    /* corrald's own memory kill carries its reading; a kernel OOM kill
     * counted in the worker's group still wins over the ledger. */
    ev = killed(SIGKILL);
    ev.kill_reason = CR_KILL_MEMORY;
    ev.kill_signal = SIGKILL;
    ev.kill_text = "RSS 70.2 MiB at --memory-max 64.0 MiB";
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_MEMORY_KILL);
    assert_reason_has(r, "no cgroup of its own: RSS 70.2 MiB at --memory-max 64.0 MiB");
    assert_int_equal(r.shell_status, 137);
}

static void test_hang_mask(void **state)
{
    /* corrald sent SIGABRT then SIGKILL for a hang; the last one is SIGKILL
     * but the worker died of the SIGABRT: the mask still ties it to corrald. */
    struct cr_death_evidence ev = killed(SIGABRT);
    ev.cld_code = CLD_DUMPED;
    ev.kill_reason = CR_KILL_HANG;
    ev.kill_signal = SIGKILL;
    ev.kill_sigmask = BIT(SIGABRT) | BIT(SIGKILL);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_WATCHDOG_KILL);
    assert_true(r.core_dumped);
    assert_reason_has(r, "hung");

    ev.kill_sigmask = 0; /* without the mask, SIGABRT is not corrald's */
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_ABORT);
}

static void test_sigkill_indirect(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.ancestor = (struct cr_oom_delta){.oom = 1, .oom_kill = 1};
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    assert_true(r.inferred);
    assert_reason_has(r, "probably");

    /* the same indirect evidence loses to corrald's own SIGKILL */
    ev.kill_reason = CR_KILL_HANG;
    ev.kill_signal = SIGKILL;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_WATCHDOG_KILL);

    /* no cgroups: the system counter is the only witness */
    ev = killed(SIGKILL);
    ev.system_oom_kill = 1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_SYSTEM);
    assert_true(r.inferred);

    /* with cgroups that counted nothing, the system counter was someone else */
    ev.cg = CR_DEATH_CG_V1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
    assert_reason_has(r, "counted no kill");
}

static void test_sigkill_plain(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
    assert_int_equal(r.signal, SIGKILL);
    assert_reason_has(r, "outside corrald");

    /* own counters ignored when the layout says there are none */
    ev.own.oom_kill = 1;
    ev.own.max = 1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
}

/* systemd-oomd SIGKILLs a whole group under memory pressure and counts
 * the processes in its user.oomd_kill xattr: a SIGKILL with that count and
 * no kernel kill is oomd's. A kernel kill counted wins; so does corrald's
 * own SIGKILL (it knows why it sent it). */
static void test_oom_userspace(void **state)
{
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.oomd_kill = 3;
    ev.oomd_path = "/system.slice/corral.service/workers/x/w2-5";
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_USERSPACE);
    assert_int_equal(r.shell_status, 137);
    assert_reason_has(r, "systemd-oomd");
    assert_reason_has(r, "3 process(es) killed in /system.slice/corral.service/workers/x/w2-5");
    assert_string_equal(cr_death_to_string(CR_DEATH_OOM_USERSPACE), "oom-userspace");
    ev.own.oom_kill = 1;
    ev.own.oom = 1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_OWN_LIMIT);
    ev.own = (struct cr_oom_delta){0};
    ev.kill_reason = CR_KILL_MEMORY;
    ev.kill_signal = SIGKILL;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_MEMORY_KILL);
    /* Not a SIGKILL: not oomd's. */
    ev = killed(SIGTERM);
    ev.oomd_kill = 3;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
}

static void test_old_counters_do_not_mislabel_sigterm(void **state)
{
    /* Only SIGKILL can be an OOM kill; a delta that moved because a child
     * process was OOM-killed earlier must not relabel an outside SIGTERM. */
    struct cr_death_evidence ev = killed(SIGTERM);
    ev.cg = CR_DEATH_CG_V2;
    ev.own = (struct cr_oom_delta){.max = 1, .oom = 1, .oom_kill = 1};
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
    assert_int_equal(r.shell_status, 143);
}

/* ---- SIGABRT ---- */

static void test_sigabrt_heap(void **state)
{
    static const char *const msgs[] = {
        "\n<--- Last few GCs --->\nFATAL ERROR: Reached heap limit Allocation failed - "
        "JavaScript heap out of memory\n",
        "FATAL ERROR: ... JavaScript heap out of memory",
        "corral-worker: FATAL: heap limit reached (used 60 MiB)\n",
    };
    for (size_t i = 0; i < 3; i++) {
        struct cr_death_evidence ev = killed(SIGABRT);
        ev.stderr_tail = msgs[i];
        ev.stderr_len = strlen(msgs[i]);
        struct cr_death_result r = classify(&ev);
        assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
        assert_false(r.inferred);
        assert_int_equal(r.shell_status, 134);
    }
    /* the message must be inside the given length */
    struct cr_death_evidence ev = killed(SIGABRT);
    ev.stderr_tail = msgs[2];
    ev.stderr_len = 10;
    assert_int_equal(classify(&ev).category, CR_DEATH_ABORT);

    ev = killed(SIGABRT);
    ev.fatal_heap_limit = true;
    ev.heap_used = 60 * MIB;
    ev.heap_limit = 64 * MIB;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
    assert_reason_has(r, "X_FATAL=heap-limit");
    assert_reason_has(r, "60.0 of 64.0 MiB");
}

static void test_sigabrt_heap_near(void **state)
{
    struct cr_death_evidence ev = killed(SIGABRT);
    ev.heap_used = 59 * MIB;
    ev.heap_limit = 64 * MIB; /* 92% */
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
    assert_true(r.inferred);

    ev.heap_used = 54 * MIB; /* 84% */
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_ABORT);

    ev = killed(SIGABRT);
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_ABORT);
    assert_reason_has(r, "without heap evidence");
}

static void test_sigabrt_hang_vs_heap(void **state)
{
    struct cr_death_evidence ev = killed(SIGABRT);
    ev.kill_reason = CR_KILL_HANG;
    ev.kill_signal = SIGABRT;
    ev.heap_used = 63 * MIB; /* near the limit: weak, loses to the ledger */
    ev.heap_limit = 64 * MIB;
    assert_int_equal(classify(&ev).category, CR_DEATH_WATCHDOG_KILL);

    ev.fatal_heap_limit = true; /* the worker announced its own abort: wins */
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
    assert_reason_has(r, "corrald had sent SIGABRT: hang");
}

/* ---- other signals ---- */

static void test_crash(void **state)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS};
    for (size_t i = 0; i < 5; i++) {
        struct cr_death_evidence ev = killed(sigs[i]);
        ev.cld_code = CLD_DUMPED;
        struct cr_death_result r = classify(&ev);
        assert_int_equal(r.category, CR_DEATH_CRASH);
        assert_true(r.core_dumped);
        assert_int_equal(r.shell_status, 128 + sigs[i]);
        assert_reason_has(r, "(core dumped)");
    }
    struct cr_death_evidence ev = killed(SIGSEGV);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_CRASH);
    assert_false(r.core_dumped);
    assert_reason_has(r, "SIGSEGV");
    assert_null(strstr(r.reason, "core dumped"));
}

static void test_other_signals(void **state)
{
    struct cr_death_evidence ev = killed(SIGTERM);
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
    assert_reason_has(r, "SIGTERM from outside corrald");

    ev.kill_reason = CR_KILL_RECYCLE;
    ev.kill_signal = SIGTERM;
    ev.kill_text = "max-requests (10000)";
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_RECYCLED);
    assert_true(r.planned);
    assert_reason_has(r, "max-requests (10000)");

    ev.kill_reason = CR_KILL_STOP;
    ev.kill_text = NULL;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_EXIT_CLEAN);
    assert_true(r.planned);
    assert_reason_has(r, "stopped by corrald (SIGTERM)");

    ev = killed(SIGUSR1);
    ev.kill_reason = CR_KILL_MANUAL;
    ev.kill_signal = SIGUSR1;
    r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
    assert_reason_has(r, "SIGUSR1 sent by an operator");

    /* an operator's SIGSEGV is the operator's, not a crash */
    ev = killed(SIGSEGV);
    ev.kill_reason = CR_KILL_MANUAL;
    ev.kill_signal = SIGSEGV;
    assert_int_equal(classify(&ev).category, CR_DEATH_SIGNAL);

    /* corrald sent SIGTERM to recycle; the worker crashed on the way out */
    ev = killed(SIGSEGV);
    ev.kill_reason = CR_KILL_RECYCLE;
    ev.kill_signal = SIGTERM;
    assert_int_equal(classify(&ev).category, CR_DEATH_CRASH);

    ev = killed(SIGRTMIN + 3);
    assert_int_equal(classify(&ev).category, CR_DEATH_SIGNAL);
}

static void test_reason_never_overflows(void **state)
{
    char path[1024];
    memset(path, 'a', sizeof(path) - 1);
    path[sizeof(path) - 1] = '\0';
    struct cr_death_evidence ev = killed(SIGKILL);
    ev.cg = CR_DEATH_CG_V2;
    ev.own = (struct cr_oom_delta){.oom_kill = 1};
    ev.ancestor = (struct cr_oom_delta){.oom = 1};
    ev.own_path = path;
    ev.ancestor_path = path;
    ev.kill_reason = CR_KILL_STOP_TIMEOUT;
    ev.kill_signal = SIGKILL;
    struct cr_death_result r = classify(&ev);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    assert_int_equal(strlen(r.reason), sizeof(r.reason) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_is_planned),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_exec_failed),
        cmocka_unit_test(test_exit_clean_and_error),
        cmocka_unit_test(test_exit_during_recycle_and_stop),
        cmocka_unit_test(test_shell_137_without_evidence_is_exit),
        cmocka_unit_test(test_shell_137_with_oom),
        cmocka_unit_test(test_shell_137_with_ledger),
        cmocka_unit_test(test_shell_134_with_heap),
        cmocka_unit_test(test_oom_own_v1),
        cmocka_unit_test(test_oom_own_v2),
        cmocka_unit_test(test_oom_ancestor),
        cmocka_unit_test(test_oom_v1_memsw_peak),
        cmocka_unit_test(test_oom_system_direct),
        cmocka_unit_test(test_oom_kill_without_limit_counters),
        cmocka_unit_test(test_oom_beats_corrald_sigkill),
        cmocka_unit_test(test_sigkill_ledger),
        cmocka_unit_test(test_oom_userspace),
        cmocka_unit_test(test_hang_mask),
        cmocka_unit_test(test_sigkill_indirect),
        cmocka_unit_test(test_sigkill_plain),
        cmocka_unit_test(test_old_counters_do_not_mislabel_sigterm),
        cmocka_unit_test(test_sigabrt_heap),
        cmocka_unit_test(test_sigabrt_heap_near),
        cmocka_unit_test(test_sigabrt_hang_vs_heap),
        cmocka_unit_test(test_crash),
        cmocka_unit_test(test_other_signals),
        cmocka_unit_test(test_reason_never_overflows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
