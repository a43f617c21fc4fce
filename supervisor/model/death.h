/* death: why did a worker die? A pure function from evidence to a category.
 *
 * No I/O: the caller gathers the evidence (the waitid() siginfo, corrald's own
 * ledger of signals it sent, OOM counter deltas across this worker's life,
 * heap reports, the stderr tail) and this module decides. The full rules,
 * their precedence and the reasons behind them are in
 * docs/exit-classification.md; the short form is in cr_death_classify below.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cr_death {
    CR_DEATH_EXIT_CLEAN,         /* exited 0 (or stopped by corrald on purpose) */
    CR_DEATH_EXIT_ERROR,         /* exited with N != 0 */
    CR_DEATH_HEAP_LIMIT,         /* SIGABRT (134) with heap evidence */
    CR_DEATH_ABORT,              /* SIGABRT without heap evidence */
    CR_DEATH_OOM_OWN_LIMIT,      /* kernel OOM kill at the worker cgroup's own limit */
    CR_DEATH_OOM_ANCESTOR_LIMIT, /* kernel OOM kill at an enclosing cgroup's limit */
    CR_DEATH_OOM_SYSTEM,         /* kernel OOM kill with no cgroup limit involved */
    CR_DEATH_MEMORY_KILL,        /* corrald killed it at --memory-max (no per-worker group) */
    CR_DEATH_OOM_USERSPACE,      /* a userspace OOM killer (systemd-oomd) killed its group */
    CR_DEATH_WATCHDOG_KILL,      /* corrald killed it because it hung */
    CR_DEATH_STOP_TIMEOUT,       /* corrald SIGKILLed it: drain outlived the stop timeout */
    CR_DEATH_START_TIMEOUT,      /* corrald killed it: no READY=1 in time */
    CR_DEATH_CRASH,              /* SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS */
    CR_DEATH_SIGNAL,             /* any other signal (outside kill, operator kill) */
    CR_DEATH_RECYCLED,           /* corrald retired it on purpose (reload, soft limit, caps) */
    CR_DEATH_EXEC_FAILED,        /* the worker program could not be executed */
    _CR_DEATH_MAX,
};

/* "exit-clean", "oom-own-limit", …; NULL for values out of range. */
const char *cr_death_to_string(enum cr_death d);
/* The enum value (>= 0) for a name, or -EINVAL. */
int cr_death_from_string(const char *s);

/* True for deaths the restart policy must not punish with backoff: a
 * category-level answer (recycled). A stop by corrald is also planned, but
 * that depends on the ledger, not the category: see cr_death_result.planned. */
bool cr_death_is_planned(enum cr_death d);

/* Why corrald itself last signalled the worker (its ledger). */
enum cr_kill_reason {
    CR_KILL_NONE,          /* corrald sent nothing */
    CR_KILL_STOP,          /* shutdown or scale-down drain */
    CR_KILL_RECYCLE,       /* planned: reload, memory soft limit, max-requests, max-lifetime */
    CR_KILL_HANG,          /* watchdog: SIGABRT first (for a core/stack), then SIGKILL */
    CR_KILL_STOP_TIMEOUT,  /* SIGKILL after the drain outlived the stop timeout */
    CR_KILL_START_TIMEOUT, /* no READY=1 within the start timeout */
    CR_KILL_MANUAL,        /* operator `kill <id> <sig>` over the control socket */
    CR_KILL_MEMORY,        /* SIGKILL at --memory-max, enforced by corrald (no per-worker group) */
    _CR_KILL_REASON_MAX,
};

const char *cr_kill_reason_to_string(enum cr_kill_reason r);
int cr_kill_reason_from_string(const char *s);

/* The cgroup layout the counters were read from. NONE: no per-worker cgroup
 * (or its counters could not be read at spawn and at death): the OOM deltas
 * below are then ignored, except the system-wide one. */
enum cr_death_cg {
    CR_DEATH_CG_NONE,
    CR_DEATH_CG_V1,
    CR_DEATH_CG_V2,
    _CR_DEATH_CG_MAX,
};

/* Counter deltas across this worker's life (reading at death minus reading
 * at spawn), never cumulative values: an old OOM must not mislabel a later
 * death. Same field names as struct cr_cgroup_events.
 *   max:      v2 memory.events "max"; v1 memory.failcnt (the limit was hit,
 *             reclaim may still have succeeded)
 *   oom:      v2 memory.events "oom" (allocation about to fail at the limit);
 *             v1 has no such counter: leave 0
 *   oom_kill: v2 memory.events(.local) "oom_kill"; v1 memory.oom_control
 *             "oom_kill" (processes of this group killed by any OOM killer) */
struct cr_oom_delta {
    uint64_t max;
    uint64_t oom;
    uint64_t oom_kill;
};

#define CR_DEATH_STDERR_MAX 4096
#define CR_DEATH_REASON_MAX 384

struct cr_death_evidence {
    /* From waitid(): siginfo's si_code (CLD_EXITED, CLD_KILLED or
     * CLD_DUMPED) and si_status (the exit code or the signal number). Not
     * named si_*: <signal.h> defines si_status as a macro. */
    int cld_code;
    int cld_status;

    /* The exec-failure pipe delivered an errno: the program never ran. */
    bool exec_failed;
    int exec_errno;

    /* corrald's ledger. kill_signal: the last signal corrald sent (0: none).
     * kill_sigmask: every signal corrald sent this worker (bit N = signal N),
     * so a hang kill that sent SIGABRT and then SIGKILL is recognised by
     * either; 0 means "only kill_signal". kill_text: free text for the
     * reason, e.g. "memory soft limit (usage 70.1 MiB > soft 64.0 MiB)";
     * may be NULL. Not copied. */
    enum cr_kill_reason kill_reason;
    int kill_signal;
    uint64_t kill_sigmask;
    const char *kill_text;

    /* OOM evidence. On v2 read the leaf's memory.events (or .local: the same
     * for a leaf) and each ancestor's memory.events.local, so that a
     * sibling's event does not show up as the ancestor's; v1 counters are
     * per level anyway. ancestor: summed over the enclosing groups up to
     * (excluding) the root. Paths are for the reason text; may be NULL. */
    enum cr_death_cg cg;
    struct cr_oom_delta own;
    struct cr_oom_delta ancestor;
    const char *own_path;
    const char *ancestor_path;
    uint64_t own_limit;       /* bytes; 0 or UINT64_MAX: unknown/none */
    uint64_t ancestor_limit;  /* bytes of the ancestor that moved; 0: unknown */
    /* Peak usage over the worker's life (v2 memory.peak; v1
     * memory.max_usage_in_bytes, or memsw.max_usage_in_bytes when a memsw
     * limit is set); 0: unknown. A peak within CR_DEATH_PEAK_SLACK of its
     * limit also counts as "that limit was hit": measured on this project's
     * v1 host (kernel 6.18) with memsw.limit == limit, neither failcnt
     * moves on an OOM, so the peak is the only witness of which limit. */
    uint64_t own_peak;
    uint64_t ancestor_peak;
    uint64_t system_oom_kill; /* /proc/vmstat oom_kill delta */
    /* systemd-oomd's count of the processes it killed in the worker's group
     * (its user.oomd_kill xattr) over the worker's life: it SIGKILLs a
     * whole group under memory pressure and writes the count there. */
    uint64_t oomd_kill;
    const char *oomd_path; /* the group that carries it; may be NULL */
    /* --no-cgroups: the worker has no group of its own; "own" holds only the
     * kill count of the group it shares with corrald (whose limit is an
     * enclosing one and is counted among the ancestors). */
    bool own_shared;

    /* Heap evidence: X_FATAL=heap-limit was received; the last report. */
    bool fatal_heap_limit;
    uint64_t heap_used;
    uint64_t heap_limit; /* 0: never reported */

    /* The last <= CR_DEATH_STDERR_MAX bytes of stderr (not NUL-terminated,
     * may be NULL). Not copied. */
    const char *stderr_tail;
    size_t stderr_len;

    uint64_t uptime_ms;
};

struct cr_death_result {
    enum cr_death category;
    int signal;        /* the terminating signal (real or via a shell), 0 if none */
    int exit_code;     /* the exit code if the worker exited, else -1 */
    int shell_status;  /* as a shell shows it: the exit code, or 128 + signal */
    bool core_dumped;  /* CLD_DUMPED */
    bool via_shell;    /* an exit code 128+N was read as signal N */
    bool planned;      /* no backoff: recycled, or stopped by corrald */
    bool inferred;     /* the attribution rests on indirect evidence only */
    char reason[CR_DEATH_REASON_MAX]; /* one human sentence, NUL-terminated */
};

/* A peak within max(256 KiB, limit/100) of a limit means the limit was reached. */
#define CR_DEATH_PEAK_SLACK_MIN (256u * 1024)

/* Heap evidence threshold: a last report with heap_used at or above this
 * share of heap_limit counts as "the heap was at its limit". */
#define CR_DEATH_HEAP_NEAR_PCT 90

/* Classifies one death. Returns 0 and fills *ret, or -EINVAL when ev is
 * NULL, cld_code is not one of CLD_EXITED/CLD_KILLED/CLD_DUMPED (unless
 * exec_failed), or the enums are out of range; *ret is then untouched.
 *
 * Order of decision (first match wins; details in docs/exit-classification.md):
 *  1. exec_failed                                     → exec-failed
 *  2. the terminating signal: a real one, or an exit code 128+N (N 1..31)
 *     when evidence supports signal N (corrald sent N; N = SIGKILL with OOM
 *     evidence; N = SIGABRT with heap evidence); otherwise it stays an exit
 *  3. SIGKILL: own-group oom_kill moved → oom-own-limit / oom-ancestor-limit /
 *     oom-system by which limit counter moved (this beats corrald's own
 *     SIGKILL); else corrald's ledger (hang, stop-timeout, start-timeout,
 *     recycle, stop, manual); else indirect OOM evidence (inferred); else
 *     signal
 *  4. SIGABRT: X_FATAL or a heap-OOM message on stderr → heap-limit; else
 *     corrald's ledger (hang → watchdog-kill); else heap_used near heap_limit
 *     → heap-limit; else abort
 *  5. other signals: corrald's ledger if corrald sent it; crash signals
 *     → crash; else signal
 *  6. exit 0: recycle → recycled, stop → exit-clean (planned), else
 *     exit-clean; exit N → exit-error. */
int cr_death_classify(const struct cr_death_evidence *ev, struct cr_death_result *ret);
