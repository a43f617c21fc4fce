/* cr_view: the const views of the worker table — counts, flags and
 * snapshots — for the outputs (status.c, metrics.c, sd.c) and anyone who
 * reads without changing. A snapshot is a copy; its strings point into
 * the supervisor and stay valid until the next loop turn changes it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "acceptq.h"
#include "cr_cgroup.h"
#include "death.h"
#include "history.h"
#include "lifecycle.h"
#include "memread.h"
#include "notify.h"
#include "trend.h"

struct cr_supervisor;
struct cr_worker;
struct cr_config;
struct cr_history;
struct cr_listener;

/* Workers that serve: ready or blocked, not retiring. */
unsigned cr_supervisor_count_ready(const struct cr_supervisor *sup);
/* Workers in state s. */
unsigned cr_supervisor_count_state(const struct cr_supervisor *sup, enum cr_wstate s);
unsigned cr_supervisor_target(const struct cr_supervisor *sup);
bool cr_supervisor_stopping(const struct cr_supervisor *sup);
bool cr_supervisor_lame_duck(const struct cr_supervisor *sup);
bool cr_supervisor_reloading(const struct cr_supervisor *sup);
const struct cr_config *cr_supervisor_config(const struct cr_supervisor *sup);
const struct cr_history *cr_supervisor_history(const struct cr_supervisor *sup);
/* Loop milliseconds now, and since corrald started. */
uint64_t cr_supervisor_now_ms(const struct cr_supervisor *sup);
uint64_t cr_supervisor_uptime_ms(const struct cr_supervisor *sup);
const char *cr_worker_state_name(const struct cr_worker *w);
/* The accept queue as last sampled (model/acceptq.h): connections waiting
 * (length), the backlog (max), how long they have waited at most
 * (waited_ms), saturated; sampled_at is loop ms (see cr_supervisor_now_ms).
 * Every output reads these figures here, and so will anything that scales
 * on them: one place, one writer (inputs/acceptwatch.c). */
const struct cr_acceptq_figures *cr_supervisor_accept_queue(const struct cr_supervisor *sup);

/* The table in id order (a replacement right after the worker it replaces):
 *   for (const struct cr_worker *w = cr_view_first(sup); w; w = cr_view_next(w)) */
const struct cr_worker *cr_view_first(const struct cr_supervisor *sup);
const struct cr_worker *cr_view_next(const struct cr_worker *w);

struct cr_worker_view {
    int id;
    pid_t pid; /* 0 without a process */
    unsigned generation;
    enum cr_wstate state;
    uint64_t uptime_ms;          /* 0 without a process */
    uint64_t last_report_ago_ms; /* 0 without a process */
    unsigned restarts, oom_kills; /* the slot's, every generation */
    unsigned oom_events;          /* this generation's */
    enum cr_role role;
    pid_t replaces_pid;    /* role replacement: the holder it replaces (0: gone) */
    pid_t replaced_by_pid; /* role replaced: its replacement starting (0: none) */
    bool retiring;         /* it goes for good (its role: retiring, or handed over) */
    bool recycle_queued;
    struct cr_notify_msg last; /* the sticky fields of the worker's reports; a field
                                  is known only when its CR_NF_ bit is in last.present */
    bool spoke;                /* it has sent a notify message (else last_report_ago_ms
                                  means nothing) */
    bool unannounced;          /* ready without READY=1: assumed by --ready */
    uint64_t heap_limit_given; /* the heap limit corrald passed (--node-heap); 0 = none */
    /* Resident bytes of the process: read for this view, else corrald's
     * last sample, else the worker's own report; 0 = unknown (no process,
     * nothing read or reported yet: a live process is never 0).
     * rss_age_ms: how old the figure is (0: read for this view). */
    uint64_t rss, rss_age_ms;
    bool cg;                   /* it has a group of its own (else cg_usage is unknown) */
    uint64_t cg_usage;         /* its group's usage, as rss; 0 = unknown */
    uint64_t cg_usage_age_ms;
    uint64_t cg_limit;
    uint64_t cg_soft;          /* --memory-soft (0 = none) */
    const char *cgroup;        /* relative path, or NULL */
    enum cr_trend_verdict verdict;
    const char *verdict_text, *status_text;
    const char *last_death;        /* the slot's last death's category, or NULL: none */
    const char *last_death_reason;
    struct cr_request_seen request; /* from its worker page, read now */
    struct cr_mem_pressure pressure; /* its group's PSI at the last sample (v2) */
};

/* A view answers a request (status, worker, metrics): its memory figures
 * are read again at that moment, when that is cheap, rather than shown as
 * the memory watch last sampled them (a calm worker is sampled every
 * eighth period, 2 s at the default: a worker that just grew by 200 MB
 * showed its RSS of 2 s before). The reads are preads of the descriptors
 * the generation already holds (statm, the group's usage file): nothing is
 * opened, nothing written back (the memory watch stays the one writer of
 * the samples and the trend). On this machine they cost 3.1 µs (statm) and
 * 2.2 µs (v1 usage) read in a loop, about 9 µs a worker inside a status
 * answer (caches cold: at 256 workers corrald's CPU per status went from
 * 2.4-3.4 ms to 5.5 ms). One answer reads at most CR_VIEW_FRESH_MAX
 * workers, about 4 ms of reads: a count, not a clock, so that which
 * workers are read does not depend on how loaded the machine is (a clock
 * counted every preemption, and the JSON built between the reads); the
 * workers past it show their last sample with its age, as do figures that
 * cannot be read cheaply (--pss: smaps_rollup walks the whole address
 * space). */
#define CR_VIEW_FRESH_MAX 400
struct cr_view_fresh {
    unsigned read; /* workers read for this answer so far */
};
void cr_view_fresh_begin(struct cr_view_fresh *f);
/* A snapshot of w. fresh: the answer's budget for fresh reads (NULL: none,
 * every figure as last sampled, with its age). */
void cr_view_worker(const struct cr_worker *w, struct cr_view_fresh *fresh,
                    struct cr_worker_view *ret);

struct cr_supervisor_view {
    uint64_t uptime_ms, started_wall_ms;
    bool stopping, reloading;
    bool lame_duck;       /* in the stop delay: serving, /readyz failing */
    uint64_t drain_in_ms; /* lame duck: until the drain */
    unsigned target, ready;
    unsigned answering;   /* of ready, not blocked (/readyz) */
    const struct cr_listener *listener;
    bool cgroups;
    enum cr_cgroup_layout cg_layout;
    const char *cg_workers; /* relative path of the workers' parent group, or NULL */
    const unsigned *deaths_by_category; /* _CR_DEATH_MAX counts */
    const struct cr_config *config;
    const char *worker_path;
    unsigned spares_target, spares_frozen, spares_starting; /* starting: forked or freezing */
    unsigned promotions;   /* spares that took a dead worker's slot */
    unsigned early_promotions; /* of them, on the kernel's exit notice, before the reap */
    const char *freezer;   /* how spares are frozen: "cgroup.freeze", "v1-freezer", "SIGSTOP" */
    const struct cr_acceptq_figures *accept_queue; /* cr_supervisor_accept_queue */
    uint64_t accept_queue_age_ms;                  /* since its last sample */
};

void cr_view_supervisor(const struct cr_supervisor *sup, struct cr_supervisor_view *ret);

/* /readyz: running (not in the stop delay nor draining) and at least
 * --ready-min workers ready and not blocked (every worker asked for when 0;
 * never more than that). why: one line saying so, either way. need: the
 * count asked for. */
bool cr_view_ready(const struct cr_supervisor_view *v, unsigned *need, char *why, size_t size);

/* The memory budget (budget.h) as it stands: the per-worker limit, the
 * workers and spares asked for, one reload replacement, corrald's own RSS
 * against the tightest enclosing limit. Fresh reads of the limits. */
struct cr_budget_in;
struct cr_budget;
void cr_view_budget(const struct cr_supervisor *sup, struct cr_budget_in *in, struct cr_budget *b);
