/* The data of the supervisor core: the worker table and the supervisor
 * that owns it. Only the core (supervisor.c and its files spares.c,
 * pacer.c and recycle.c, operations.c, view.c and,
 * below it, worker_spawn.c, worker_io.c, worker_death.c, cgsetup.c), the
 * inputs that keep per-worker readings (memwatch.c, worker_notify.c), the
 * control socket's files and main.c's wiring see inside; the views read
 * through view.h. scripts/include-graph holds that list.
 *
 * Types only: no functions live here (the include graph treats this file
 * as part of whoever includes it), and it includes no module of the core.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <uv.h>

#include "config.h"
#include "cr_cgroup.h"
#include "death.h"
#include "events.h"
#include "lifecycle.h"
#include "listen.h"
#include "notify.h"
#include "priority.h"

struct cr_cgroup;
struct cr_freezer;
struct cr_cg_prep;
struct cr_history;
struct cr_control;
struct cr_trend_ring;
struct cr_wio;
struct cr_io_sink;

/* A warm spare has no slot: its id is 0 until a promotion gives it one. */
#define CR_SPARE_ID 0

struct cr_worker {
    struct cr_supervisor *sup;
    struct cr_worker *next;

    int id;              /* slot number, 1..N: CORRAL_WORKER_ID */
    unsigned generation; /* CORRAL_GENERATION: one more for every process in this slot */
    pid_t pid;           /* 0 when no process */
    enum cr_wstate state;
    enum cr_wstate prev; /* the state before the last transition (for events) */

    /* The one deadline. */
    uv_timer_t deadline;
    uint64_t deadline_at; /* loop ms, 0 = none */

    /* This generation's descriptors and their polls (pidfd, output,
     * notify stream, OOM watch), with the output's tail and the stream's
     * framing buffer; freed on its own once its handles closed, so a
     * reaped generation never holds up the next one. */
    struct cr_wio *io;
    int exec_errno;
    int wait_code, wait_status; /* from waitid, for the reaper */

    struct cr_cgroup *cg;
    struct cr_freezer *freezer;     /* a spare's freezer group (v1: its own; v2: cg's) */
    struct cr_cg_prep *prep;        /* its next group, made ahead off the loop (cgprep.c) */
    unsigned oom_events;            /* OOM events seen this generation */
    struct cr_cgroup_events seen;   /* counters at the last OOM-watch wake-up */
    struct cr_oom_delta own0, anc0; /* counters at spawn */
    uint64_t vmstat_oom0;
    bool heartbeats;                /* the worker has sent WATCHDOG=1 */

    /* Readiness (--ready), fixed for a generation at its spawn. */
    enum cr_ready_mode ready_mode;
    bool spoke;       /* it has sent a notify message */
    bool announced;   /* its readiness comes by READY=1, under the start timeout */
    bool unannounced; /* ready without READY=1 (assumed by its mode) */
    uint64_t heap_limit_given; /* the heap limit corrald passed (--node-heap); 0 = none */

    bool closing; /* the deadline timer is closing; freed in its close_cb */

    /* Timing (loop ms, and wall ms for reports). */
    uint64_t spawned_at;
    uint64_t spawned_wall_ms;
    uint64_t ready_at;
    uint64_t last_report_at;

    /* Latest report from the worker. */
    struct cr_notify_msg last;
    bool fatal_heap_limit;
    char status_text[256];

    /* corrald's ledger of what it did to this process. */
    enum cr_kill_reason kill_reason;
    int kill_signal;
    uint64_t kill_sigmask;
    char kill_text[192];

    /* Slot-level restart bookkeeping (moves to the replacement). */
    struct cr_restart_state restart;
    struct cr_restart_decision decision; /* the policy's last word, for the cell it leads to */
    uint64_t notice_at;  /* loop ms of its exit notice (state dying: decision already taken) */
    unsigned restarts;
    unsigned oom_kills; /* kernel OOM kills of this slot, all generations */
    uint64_t max_requests; /* this generation's cap with jitter, 0 = none */

    /* Handover: a replacement starting for `replaces`; the old one is
     * drained once this one is ready. */
    struct cr_worker *replaces;
    struct cr_worker *replaced_by;
    bool retire_on_exit; /* do not restart: stop, scale-down, or handed over */
    bool recycle_queued;
    bool drain_queued;             /* retired; its SIGTERM waits for the drain pacer */
    enum cr_kill_reason drain_why; /* ... and what it is for */
    char drain_text[64];
    char recycle_text[192]; /* why the queued recycle was asked for */
    uint64_t recycle_after; /* loop ms: no recycle before (a replacement just failed) */

    /* Memory watch. */
    unsigned sampled_round; /* the memory watch's last round that looked at it */
    uint64_t sampled_at;    /* loop ms of its last sample */
    struct cr_trend_ring *samples;
    uint64_t rss, cg_usage, cg_peak, cg_limit; /* the last readings that succeeded */
    unsigned soft_over; /* consecutive samples above the soft limit */
    int verdict;        /* enum cr_verdict */
    char verdict_text[256];
    uint64_t soft_crossed_at; /* loop ms when usage first crossed the soft limit */

    /* The last death in this slot, for status. */
    char last_death[32];
    char last_death_reason[CR_DEATH_REASON_MAX];
};

struct cr_supervisor {
    uv_loop_t *loop;
    struct cr_config cfg;
    uint64_t started_at;
    uint64_t started_wall_ms;

    struct cr_listener listener;
    char notify_addr[108]; /* NOTIFY_SOCKET for workers: <notify_dir>/notify */
    char notify_dir[108];  /* private (0700) directory of the notify socket */
    /* Workers drop to these ids before exec (--user/--group). */
    bool set_ids;
    /* The open-files limit corrald was started with (it raises its own
     * soft limit); workers get it back before exec. */
    struct rlimit nofile;
    bool nofile_saved;
    /* corrald's CPU priority as started (its workers') and as raised. */
    struct cr_priority priority;
    uid_t worker_uid;
    gid_t worker_gid;
    int notify_fd;
    int vmstat_fd; /* /proc/vmstat, kept open for its OOM-kill counter (cgsetup.c) */
    void *io_by_pid; /* tsearch(3) tree of the live generations by pid (worker_io.c) */
    struct cr_wio *reap_head, *reap_tail; /* exits noticed, not reaped yet (worker_io.c) */
    uv_idle_t reap_turn; /* runs while the reap queue is not empty */
    uv_idle_t drain_turn; /* runs while workers wait for their paced SIGTERM (recycle.c) */
    uv_poll_t notify_poll;
    uv_timer_t notify_batch; /* the poll's pause while messages trickle in (worker_io.c) */
    uint64_t notify_woke_at; /* loop ms of the poll's last wake-up */
    unsigned notify_quiet_ticks; /* ticks in a row that read nothing */

    struct cr_worker *workers;
    unsigned target;
    unsigned *generations; /* per slot id: the last generation handed out */
    size_t ngenerations;
    unsigned reload_failed; /* replacements of the running reload that died */
    uv_timer_t finish_timer; /* exits the loop once stopping and empty */
    uv_idle_t spawn_pacer;   /* runs while workers are pending: one spawn per loop turn */
    unsigned spawn_cap;      /* starting at once, adapted to the loop's turns (spawncap.h) */
    unsigned spawn_calm;     /* short turns in a row */
    uint64_t spawn_turn_ns;  /* uv_hrtime of the pacer's last turn; 0 when it was stopped */
    uint64_t spawn_quiet_at; /* loop ms when the last pending worker was spawned; 0 = busy */
    uv_timer_t spawn_recheck; /* pending, but --spawn-parallel workers are starting */

    /* cgroups */
    bool cgroups;
    int cg_layout; /* enum cr_cgroup_layout */
    char *cg_base;    /* rel path: workers live in <cg_base>/workers */
    bool cg_base_created; /* --cgroup-parent did not exist: remove it at exit */
    struct cr_cgroup *cg_workers; /* <cg_base>/workers/<instance>: this corrald's own */
    int cg_lock_fd;               /* flock on cg_workers's directory, held until exit */
    struct cr_cgroup **cg_ancestors; /* enclosing groups whose limits count as "ancestor" */
    size_t cg_nancestors;
    struct cr_cgroup **cg_trash; /* groups to remove once the kernel lets us */
    size_t cg_ntrash;
    uv_timer_t cg_trash_timer;

    struct cr_history *history;
    unsigned deaths_by_category[_CR_DEATH_MAX];

    /* Warm spares (workers with id CR_SPARE_ID in the spare states). */
    int freezer_kind;             /* enum cr_freezer_kind; NONE: SIGSTOP */
    char *freezer_base;           /* v1: <own freezer group>/corral-<pid>, made and removed here */
    struct cr_restart_state spare_restart; /* spares that died on their own, throttled */
    uint64_t spare_not_before;    /* loop ms: no new spare before (a spare just died) */
    uv_timer_t spare_timer;       /* starts the next spare once spare_not_before passed */
    unsigned promotions;
    unsigned early_promotions; /* of them, on the kernel's exit notice (before the reap) */
    char exit_notice[160];     /* "taskstats", "off", "unavailable: <why>", "stopped: <why>" (main.c) */


    unsigned long orphans_reaped; /* re-parented descendants of workers, reaped */

    bool stopping;
    bool reloading;
    int exit_code;

    /* Who hears about what happens (subscribed in main.c). */
    struct cr_events events;
    /* Where a generation's descriptors deliver what they read (set in main.c). */
    const struct cr_io_sink *io_sink;

    /* Set by cr_control_open(); the core itself never uses it. */
    struct cr_control *control;
    char *worker_path;
    /* corral-exec, through which workers start without a fork of corrald
     * (spawnchild.h); NULL: fork. */
    char *spawn_helper;
    struct cr_spawn_vm *spawn_vm; /* the stacks of children not yet exec'd (spawnvm.h) */
};

/* Loop milliseconds: the clock of deadlines and uptimes. */
static inline uint64_t cr_now_ms(const struct cr_supervisor *sup)
{
    return uv_now(sup->loop);
}
