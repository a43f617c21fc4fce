/* death: evidence → category. See death.h and docs/exit-classification.md. */
#include "death.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

static const char *const death_names[_CR_DEATH_MAX] = {
    [CR_DEATH_EXIT_CLEAN] = "exit-clean",
    [CR_DEATH_EXIT_ERROR] = "exit-error",
    [CR_DEATH_HEAP_LIMIT] = "heap-limit",
    [CR_DEATH_ABORT] = "abort",
    [CR_DEATH_OOM_OWN_LIMIT] = "oom-own-limit",
    [CR_DEATH_OOM_ANCESTOR_LIMIT] = "oom-ancestor-limit",
    [CR_DEATH_OOM_SYSTEM] = "oom-system",
    [CR_DEATH_MEMORY_KILL] = "memory-kill",
    [CR_DEATH_OOM_USERSPACE] = "oom-userspace",
    [CR_DEATH_WATCHDOG_KILL] = "watchdog-kill",
    [CR_DEATH_STOP_TIMEOUT] = "stop-timeout",
    [CR_DEATH_START_TIMEOUT] = "start-timeout",
    [CR_DEATH_CRASH] = "crash",
    [CR_DEATH_SIGNAL] = "signal",
    [CR_DEATH_RECYCLED] = "recycled",
    [CR_DEATH_EXEC_FAILED] = "exec-failed",
};

static const char *const kill_names[_CR_KILL_REASON_MAX] = {
    [CR_KILL_NONE] = "none",
    [CR_KILL_STOP] = "stop",
    [CR_KILL_RECYCLE] = "recycle",
    [CR_KILL_HANG] = "hang",
    [CR_KILL_STOP_TIMEOUT] = "stop-timeout",
    [CR_KILL_START_TIMEOUT] = "start-timeout",
    [CR_KILL_MANUAL] = "manual",
    [CR_KILL_MEMORY] = "memory-max",
};

/* Messages a runtime prints when its managed heap is exhausted: V8's two,
 * and corral's reference worker's. */
static const char *const heap_messages[] = {
    "Reached heap limit",
    "JavaScript heap out of memory",
    "FATAL: heap limit reached",
};

const char *cr_death_to_string(enum cr_death d)
{
    if ((unsigned)d >= _CR_DEATH_MAX)
        return NULL;
    return death_names[d];
}

static int lookup(const char *const *names, int n, const char *s)
{
    if (!s)
        return -EINVAL;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -EINVAL;
}

int cr_death_from_string(const char *s)
{
    return lookup(death_names, _CR_DEATH_MAX, s);
}

const char *cr_kill_reason_to_string(enum cr_kill_reason r)
{
    if ((unsigned)r >= _CR_KILL_REASON_MAX)
        return NULL;
    return kill_names[r];
}

int cr_kill_reason_from_string(const char *s)
{
    return lookup(kill_names, _CR_KILL_REASON_MAX, s);
}

bool cr_death_is_planned(enum cr_death d)
{
    return d == CR_DEATH_RECYCLED;
}

/* ---- evidence predicates ---- */

static bool corrald_sent(const struct cr_death_evidence *ev, int sig)
{
    if (sig <= 0 || sig >= 64 || ev->kill_reason == CR_KILL_NONE)
        return false;
    return ev->kill_signal == sig || (ev->kill_sigmask & (UINT64_C(1) << sig));
}

static const char *heap_message(const struct cr_death_evidence *ev)
{
    if (!ev->stderr_tail || ev->stderr_len == 0)
        return NULL;
    for (size_t i = 0; i < sizeof(heap_messages) / sizeof(heap_messages[0]); i++)
        if (memmem(ev->stderr_tail, ev->stderr_len, heap_messages[i], strlen(heap_messages[i])))
            return heap_messages[i];
    return NULL;
}

static bool heap_near_limit(const struct cr_death_evidence *ev)
{
    if (ev->heap_limit == 0 || ev->heap_used == 0)
        return false;
    /* Compare in long double: heap_used * 100 could overflow u64 in theory. */
    return (long double)ev->heap_used * 100 >= (long double)ev->heap_limit * CR_DEATH_HEAP_NEAR_PCT;
}

static bool cg_known(const struct cr_death_evidence *ev)
{
    return ev->cg == CR_DEATH_CG_V1 || ev->cg == CR_DEATH_CG_V2;
}

/* The kernel counted an OOM kill in the worker's own group: the only direct
 * proof that the worker was an OOM victim (v1 and v2 both count the kill in
 * the victim's group, whichever limit was hit). */
static bool oom_direct(const struct cr_death_evidence *ev)
{
    return cg_known(ev) && ev->own.oom_kill > 0;
}

static bool peak_at_limit(uint64_t peak, uint64_t limit)
{
    if (peak == 0 || limit == 0 || limit == UINT64_MAX)
        return false;
    uint64_t slack = limit / 100 > CR_DEATH_PEAK_SLACK_MIN ? limit / 100 : CR_DEATH_PEAK_SLACK_MIN;
    return peak >= limit || limit - peak <= slack;
}

static bool own_limit_hit(const struct cr_death_evidence *ev)
{
    return cg_known(ev) && (ev->own.oom > 0 || ev->own.max > 0 ||
                            peak_at_limit(ev->own_peak, ev->own_limit));
}

static bool ancestor_limit_hit(const struct cr_death_evidence *ev)
{
    return cg_known(ev) && (ev->ancestor.oom > 0 || ev->ancestor.max > 0 ||
                            peak_at_limit(ev->ancestor_peak, ev->ancestor_limit));
}

/* Indirect OOM evidence, used only when nothing better explains a SIGKILL:
 * the ancestor counted a kill and hit its limit while the own group's
 * counters stayed still, or no cgroup counters exist and the system-wide
 * counter moved. Either may be another process's OOM kill. */
static bool oom_ancestor_indirect(const struct cr_death_evidence *ev)
{
    return cg_known(ev) && ev->own.oom_kill == 0 && ev->ancestor.oom_kill > 0 &&
           ancestor_limit_hit(ev) && !own_limit_hit(ev);
}

static bool oom_system_indirect(const struct cr_death_evidence *ev)
{
    return ev->system_oom_kill > 0 && !cg_known(ev);
}

/* An enclosing group's limit counters moved: whatever the system counter
 * says, the machine did not run out; a limit did. */
static bool ancestor_moved(const struct cr_death_evidence *ev)
{
    return cg_known(ev) && (ev->ancestor.max > 0 || ev->ancestor.oom > 0);
}

static bool heap_evidence(const struct cr_death_evidence *ev)
{
    return ev->fatal_heap_limit || heap_message(ev) || heap_near_limit(ev);
}

/* May an exit code of 128+n be read as "killed by signal n, reported by a
 * shell wrapper"? Only when something besides the number says so: programs
 * are free to exit 137 for their own reasons. */
static bool shell_signal_supported(const struct cr_death_evidence *ev, int n)
{
    if (corrald_sent(ev, n))
        return true;
    if (n == SIGKILL)
        return oom_direct(ev) || oom_ancestor_indirect(ev) || oom_system_indirect(ev);
    if (n == SIGABRT)
        return heap_evidence(ev);
    return false;
}

/* ---- reason text ---- */

static void addf(struct cr_death_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void addf(struct cr_death_result *r, const char *fmt, ...)
{
    size_t len = strnlen(r->reason, sizeof(r->reason));
    if (len + 1 >= sizeof(r->reason))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason + len, sizeof(r->reason) - len, fmt, ap);
    va_end(ap);
}

static const char *signame(int sig, char *buf, size_t size)
{
    const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
    if (abbrev)
        snprintf(buf, size, "SIG%s", abbrev);
    else
        snprintf(buf, size, "signal %d", sig);
    return buf;
}

static void add_mib(struct cr_death_result *r, const char *prefix, uint64_t bytes)
{
    if (bytes == 0 || bytes == UINT64_MAX)
        return;
    addf(r, "%s%.1f MiB)", prefix, (double)bytes / (1024.0 * 1024.0));
}

static const char *limit_counter_name(const struct cr_death_evidence *ev)
{
    return ev->cg == CR_DEATH_CG_V1 ? "failcnt" : "max";
}

static void add_oom_counts(struct cr_death_result *r, const char *what,
                           const struct cr_death_evidence *ev, const struct cr_oom_delta *d,
                           const char *path)
{
    addf(r, "; %s: oom_kill +%" PRIu64 ", %s +%" PRIu64, what, d->oom_kill,
         limit_counter_name(ev), d->max);
    if (ev->cg == CR_DEATH_CG_V2)
        addf(r, ", oom +%" PRIu64, d->oom);
    if (path)
        addf(r, " in %s", path);
}

static void add_ledger_note(struct cr_death_result *r, const struct cr_death_evidence *ev)
{
    char sb[32];
    if (ev->kill_reason == CR_KILL_NONE || ev->kill_signal <= 0)
        return;
    addf(r, " (corrald had sent %s: %s)", signame(ev->kill_signal, sb, sizeof(sb)),
         cr_kill_reason_to_string(ev->kill_reason));
}

/* ---- decisions ---- */

static void set(struct cr_death_result *r, enum cr_death d, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set(struct cr_death_result *r, enum cr_death d, const char *fmt, ...)
{
    r->category = d;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
}

/* SIGKILL with the kernel's own count of a kill in the worker's group. Which
 * limit: the own group's oom/max counters count only events at its own
 * limit (v2 memory.events of a leaf; v1 failcnt is per level), so if they
 * moved it was the own limit; else an ancestor's; else no limit at all. */
static void classify_oom_direct(const struct cr_death_evidence *ev, struct cr_death_result *r)
{
    if (own_limit_hit(ev)) {
        set(r, CR_DEATH_OOM_OWN_LIMIT,
            "killed by the kernel OOM killer: the worker's own memory limit");
        add_mib(r, " (", ev->own_limit);
        addf(r, " was hit");
        add_oom_counts(r, "own group", ev, &ev->own, ev->own_path);
        if (ancestor_limit_hit(ev))
            addf(r, "; an enclosing group's limit was also hit during its life");
    } else if (ancestor_limit_hit(ev)) {
        set(r, CR_DEATH_OOM_ANCESTOR_LIMIT,
            "killed by the kernel OOM killer: an enclosing cgroup's limit");
        add_mib(r, " (", ev->ancestor_limit);
        addf(r, ev->own_shared ? " was hit (--no-cgroups: no per-worker limit)"
                               : " was hit, not the worker's own");
        add_oom_counts(r, "ancestor", ev, &ev->ancestor, ev->ancestor_path);
        add_oom_counts(r, "own group", ev, &ev->own, ev->own_path);
    } else if (ev->system_oom_kill > 0 && !ancestor_moved(ev)) {
        set(r, CR_DEATH_OOM_SYSTEM,
            "killed by the kernel OOM killer with no cgroup limit hit: the machine ran out "
            "of memory (system oom_kill +%" PRIu64 ")",
            ev->system_oom_kill);
        add_oom_counts(r, "own group", ev, &ev->own, ev->own_path);
    } else if (ev->own_shared) {
        /* --no-cgroups: the group the worker shares with corrald counted
         * the kill, and no limit counter moved. Every limit around the
         * worker is an enclosing one (a container's, a service's). */
        set(r, CR_DEATH_OOM_ANCESTOR_LIMIT,
            "killed by the kernel OOM killer (counted in the group shared with corrald; no "
            "limit counter moved, so the enclosing limit is assumed)");
        add_oom_counts(r, "shared group", ev, &ev->own, ev->own_path);
        r->inferred = true;
    } else {
        /* The kill was counted in the group, but no limit counter moved (a
         * kernel that lacks them, or a reading lost): the own group is the
         * only place the kernel pointed at. */
        set(r, CR_DEATH_OOM_OWN_LIMIT,
            "killed by the kernel OOM killer (counted in the worker's own group; no limit "
            "counter moved, so the limit is assumed to be its own)");
        add_oom_counts(r, "own group", ev, &ev->own, ev->own_path);
        r->inferred = true;
    }
    if (corrald_sent(ev, SIGKILL))
        add_ledger_note(r, ev);
}

/* corrald sent the fatal signal: its ledger says why. Returns false when
 * corrald did not send sig. */
static bool classify_ledger(const struct cr_death_evidence *ev, int sig, struct cr_death_result *r)
{
    char sb[32];
    const char *name = signame(sig, sb, sizeof(sb));
    const char *text = ev->kill_text ? ev->kill_text : "";
    const char *sep = ev->kill_text ? ": " : "";

    if (!corrald_sent(ev, sig))
        return false;
    switch (ev->kill_reason) {
    case CR_KILL_STOP:
        set(r, CR_DEATH_EXIT_CLEAN, "stopped by corrald (%s)%s%s", name, sep, text);
        r->planned = true;
        break;
    case CR_KILL_RECYCLE:
        set(r, CR_DEATH_RECYCLED, "recycled by corrald (%s)%s%s", name, sep, text);
        r->planned = true;
        break;
    case CR_KILL_HANG:
        set(r, CR_DEATH_WATCHDOG_KILL, "killed by corrald (%s): the worker hung (watchdog)%s%s",
            name, sep, text);
        break;
    case CR_KILL_STOP_TIMEOUT:
        set(r, CR_DEATH_STOP_TIMEOUT,
            "killed by corrald (%s): its drain outlived the stop timeout%s%s", name, sep, text);
        break;
    case CR_KILL_START_TIMEOUT:
        set(r, CR_DEATH_START_TIMEOUT,
            "killed by corrald (%s): no READY=1 within the start timeout%s%s", name, sep, text);
        break;
    case CR_KILL_MEMORY:
        set(r, CR_DEATH_MEMORY_KILL,
            "killed by corrald (%s) at its memory limit, which corrald enforces: the worker has "
            "no cgroup of its own%s%s",
            name, sep, text);
        break;
    default: /* CR_KILL_MANUAL */
        set(r, CR_DEATH_SIGNAL, "killed by %s sent by an operator through corrald%s%s", name,
            sep, text);
        break;
    }
    return true;
}

static void classify_sigkill(const struct cr_death_evidence *ev, struct cr_death_result *r)
{
    if (oom_direct(ev)) {
        classify_oom_direct(ev, r);
    } else if (classify_ledger(ev, SIGKILL, r)) {
        /* corrald's own SIGKILL, no kernel kill counted in the group. */
    } else if (ev->oomd_kill) {
        set(r, CR_DEATH_OOM_USERSPACE,
            "killed by systemd-oomd under memory pressure: it counted %" PRIu64
            " process(es) killed in %s (user.oomd_kill)",
            ev->oomd_kill, ev->oomd_path ? ev->oomd_path : "the worker's group");
    } else if (oom_ancestor_indirect(ev)) {
        set(r, CR_DEATH_OOM_ANCESTOR_LIMIT,
            "probably killed by the kernel OOM killer at an enclosing cgroup's limit");
        add_mib(r, " (", ev->ancestor_limit);
        add_oom_counts(r, "ancestor", ev, &ev->ancestor, ev->ancestor_path);
        addf(r, "; the worker's own group counted no kill");
        r->inferred = true;
    } else if (oom_system_indirect(ev)) {
        set(r, CR_DEATH_OOM_SYSTEM,
            "probably killed by the kernel OOM killer: no cgroup to ask, and the system "
            "oom_kill counter moved +%" PRIu64 " during its life",
            ev->system_oom_kill);
        r->inferred = true;
    } else {
        set(r, CR_DEATH_SIGNAL, "killed by SIGKILL from outside corrald (no OOM counter moved)");
        if (cg_known(ev) && ev->system_oom_kill > 0)
            addf(r, "; the system oom_kill counter moved +%" PRIu64
                    " but the worker's group counted no kill",
                 ev->system_oom_kill);
    }
}

static void classify_sigabrt(const struct cr_death_evidence *ev, struct cr_death_result *r)
{
    const char *msg = heap_message(ev);

    if (ev->fatal_heap_limit || msg) {
        /* The worker itself said its heap was exhausted: that outranks a
         * watchdog SIGABRT, since a heap near its limit spends long in GC. */
        set(r, CR_DEATH_HEAP_LIMIT, "aborted at the runtime's heap limit (%s)",
            ev->fatal_heap_limit ? "X_FATAL=heap-limit" : msg);
        if (ev->heap_limit)
            addf(r, "; last heap report %.1f of %.1f MiB", (double)ev->heap_used / 1048576.0,
                 (double)ev->heap_limit / 1048576.0);
        if (corrald_sent(ev, SIGABRT))
            add_ledger_note(r, ev);
    } else if (classify_ledger(ev, SIGABRT, r)) {
        /* e.g. the first step of a hang kill */
    } else if (heap_near_limit(ev)) {
        set(r, CR_DEATH_HEAP_LIMIT,
            "aborted with its heap at the limit: last heap report %.1f of %.1f MiB (>= %d%%)",
            (double)ev->heap_used / 1048576.0, (double)ev->heap_limit / 1048576.0,
            CR_DEATH_HEAP_NEAR_PCT);
        r->inferred = true;
    } else {
        set(r, CR_DEATH_ABORT, "aborted (SIGABRT) without heap evidence: an assertion or "
                               "abort() in the program or a native module");
    }
}

static bool is_crash_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGSYS;
}

static void classify_signal(const struct cr_death_evidence *ev, int sig,
                            struct cr_death_result *r)
{
    char sb[32];
    const char *name = signame(sig, sb, sizeof(sb));

    if (sig == SIGKILL)
        classify_sigkill(ev, r);
    else if (sig == SIGABRT)
        classify_sigabrt(ev, r);
    else if (classify_ledger(ev, sig, r))
        ;
    else if (is_crash_signal(sig))
        set(r, CR_DEATH_CRASH, "crashed with %s%s", name,
            r->core_dumped ? " (core dumped)" : "");
    else
        set(r, CR_DEATH_SIGNAL, "killed by %s from outside corrald", name);
}

static void classify_exit(const struct cr_death_evidence *ev, int code, struct cr_death_result *r)
{
    char sb[32];
    const char *text = ev->kill_text ? ev->kill_text : "";
    const char *sep = ev->kill_text ? ": " : "";

    if (code == 0 && ev->kill_reason == CR_KILL_RECYCLE) {
        set(r, CR_DEATH_RECYCLED, "recycled by corrald (exited 0)%s%s", sep, text);
        r->planned = true;
    } else if (code == 0 && (ev->kill_reason == CR_KILL_STOP ||
                             ev->kill_reason == CR_KILL_STOP_TIMEOUT)) {
        set(r, CR_DEATH_EXIT_CLEAN, "stopped by corrald (exited 0)");
        r->planned = true;
    } else if (code == 0) {
        set(r, CR_DEATH_EXIT_CLEAN, "exited by itself with 0");
        add_ledger_note(r, ev);
    } else {
        set(r, CR_DEATH_EXIT_ERROR, "exited with %d", code);
        if (code > 128 && code < 160)
            addf(r, " (reads like a shell's report of %s, but nothing else supports it)",
                 signame(code - 128, sb, sizeof(sb)));
        add_ledger_note(r, ev);
    }
}

static void add_uptime(struct cr_death_result *r, uint64_t ms)
{
    if (ms < 10000)
        addf(r, "; uptime %" PRIu64 " ms", ms);
    else
        addf(r, "; uptime %.1f s", (double)ms / 1000.0);
}

static bool evidence_valid(const struct cr_death_evidence *ev)
{
    if ((unsigned)ev->kill_reason >= _CR_KILL_REASON_MAX || (unsigned)ev->cg >= _CR_DEATH_CG_MAX)
        return false;
    if (ev->exec_failed)
        return true;
    if (ev->cld_code == CLD_EXITED)
        return ev->cld_status >= 0 && ev->cld_status <= 255;
    if (ev->cld_code == CLD_KILLED || ev->cld_code == CLD_DUMPED)
        return ev->cld_status > 0 && ev->cld_status < 65;
    return false;
}

int cr_death_classify(const struct cr_death_evidence *ev, struct cr_death_result *ret)
{
    struct cr_death_result r = {.exit_code = -1};

    if (!ev || !ret || !evidence_valid(ev))
        return -EINVAL;

    if (ev->exec_failed) {
        const char *name = strerrorname_np(ev->exec_errno);
        const char *desc = strerrordesc_np(ev->exec_errno);
        set(&r, CR_DEATH_EXEC_FAILED, "the worker program could not be executed: %s (%s)",
            desc ? desc : "unknown error", name ? name : "?");
        if (ev->cld_code == CLD_EXITED)
            r.exit_code = r.shell_status = ev->cld_status;
        *ret = r;
        return 0;
    }

    if (ev->cld_code == CLD_EXITED) {
        int code = ev->cld_status;
        r.shell_status = code;
        if (code > 128 && code < 160 && shell_signal_supported(ev, code - 128)) {
            r.signal = code - 128;
            r.via_shell = true;
            r.exit_code = code;
            classify_signal(ev, r.signal, &r);
            addf(&r, "; seen as exit %d through a shell wrapper", code);
        } else {
            r.exit_code = code;
            classify_exit(ev, code, &r);
        }
    } else {
        r.signal = ev->cld_status;
        r.shell_status = 128 + ev->cld_status;
        r.core_dumped = ev->cld_code == CLD_DUMPED;
        classify_signal(ev, r.signal, &r);
    }
    add_uptime(&r, ev->uptime_ms);
    *ret = r;
    return 0;
}
