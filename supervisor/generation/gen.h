/* cr_gen: one worker process — a generation of a slot, or a warm spare —
 * and what corrald holds of it: its pid and descriptors, its cgroup, the
 * worker's reports, corrald's memory readings, the ledger of what corrald
 * did to it, how it ended.
 *
 * Below the core: a generation knows nothing of the worker table, of slots
 * or of states. The core's struct cr_worker embeds one; what its
 * descriptors deliver reaches the core through the sink main.c installs
 * (struct cr_gen_sink). Each part has one writer, named beside it.
 *
 * Every generation shares one struct cr_gen_host: the host facilities it
 * uses (configuration, listener, cgroup tree, spawner, reaper, notify
 * socket), set up once by the core.
 *
 * Types only: the functions that act on a generation live in the modules
 * that own each part (reaper.h signals and reaps it, wio.h holds its
 * descriptors, worker_spawn.h starts it). */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "cr_cgroup.h"
#include "death.h"
#include "diag.h"
#include "memread.h"
#include "report.h"
#include "wpage.h"

struct cr_config;
struct cr_listener;
struct cr_cgtree;
struct cr_spawner;
struct cr_reaper;
struct cr_notify_rx;
struct cr_freezing;
struct cr_freezer;
struct cr_cg_prep;
struct cr_wio;
struct cr_proc;
struct cr_gen;
struct cr_notify_msg;
struct cr_page;
struct cr_diag;

/* A warm spare serves no slot: its id is 0 until a promotion gives it one. */
#define CR_SPARE_ID 0

/* Where a generation's descriptors deliver what they read (main.c wires
 * it to the core and the inputs). */
struct cr_gen_sink {
    /* The process was reaped: g->exit holds its siginfo. */
    void (*exited)(struct cr_gen *g);
    /* The exec pipe: the program runs (EOF), or never ran
     * (g->exit.exec_errno says why). */
    void (*exec_ok)(struct cr_gen *g);
    void (*exec_failed)(struct cr_gen *g);
    /* A notify message from the worker (datagram or stream). */
    void (*message)(struct cr_gen *g, const struct cr_notify_msg *m);
    /* Something asks for a rolling replacement (a v2 memory.high event). */
    void (*recycle)(struct cr_gen *g, const char *why);
    /* The kernel says the process is exiting; the reap follows. */
    void (*exit_notice)(struct cr_gen *g);
};

struct cr_gen_host {
    uv_loop_t *loop;
    const struct cr_config *cfg;
    const struct cr_listener *listener;
    struct cr_cgtree *cgtree; /* NULL-free: disabled trees say so themselves */
    struct cr_spawner *spawner;
    struct cr_reaper *reaper;
    struct cr_notify_rx *notify;
    struct cr_freezing *freezing;
    struct cr_diag *diag; /* node's report directories; NULL: none */
    const struct cr_gen_sink *sink;
};

/* corrald's ledger of what it did to this process: written by the signals
 * it sends (reaper.c), emptied for a new generation (worker_spawn.c). */
struct cr_ledger {
    enum cr_kill_reason reason;
    int signal;
    uint64_t sigmask; /* every signal sent, bit n for signal n */
    char text[320];
};

/* How it ended (the reaper; the exec pipe's errno from wio.c). */
struct cr_exit {
    int code, status; /* waitid's si_code and si_status */
    int exec_errno;   /* the program never ran: why; 0 = it ran (or not known yet) */
    int exec_stage;   /* where it failed (CR_SPAWN_*) */
};

/* The generation's cgroup (cgworker.c), made ahead (cgprep.c) or at its
 * spawn, and its OOM counters. */
struct cr_gen_cg {
    struct cr_cgroup *cg;           /* NULL without per-worker groups */
    uint64_t limit;                 /* the hard limit set on it; 0 = none */
    struct cr_oom_delta own0, anc0; /* counters at spawn */
    uint64_t vmstat_oom0;
    unsigned oom_events;          /* OOM events seen by its watch (wio.c) */
    struct cr_cgroup_events seen; /* counters at the watch's last wake-up (wio.c) */
};

/* The stack of its main thread, asked for before a hang kill (the core's
 * trace.c writes it), for the post-mortem. */
struct cr_gen_stack {
    uint32_t asked;    /* the page's request number; 0 = not asked */
    uint64_t asked_at; /* loop ms */
    char *text;        /* the answer (malloc'd); NULL = none came */
    char source[CR_WPAGE_SOURCE_MAX + 1];
    char missing[128]; /* why none came or none was asked for; "" = not asked */
};

struct cr_gen {
    const struct cr_gen_host *host;
    int id;              /* the slot it serves, CR_SPARE_ID for a spare (set by the core) */
    unsigned generation; /* CORRAL_GENERATION (set by the core before the spawn) */
    pid_t pid;           /* 0 when no process */
    uint64_t spawned_at; /* loop ms */
    uint64_t spawned_wall_ms;
    uint64_t heap_limit_given; /* the heap limit passed to node (--node-heap); 0 = none */
    uint64_t max_requests;     /* this generation's request cap with jitter; 0 = none */

    struct cr_proc *proc;       /* its pidfd and reap (reaper.c); NULL once reaped */
    struct cr_wio *io;          /* its other descriptors (wio.c); NULL once reaped */
    struct cr_cg_prep *prep;    /* its next group, made ahead off the loop (cgprep.c) */
    struct cr_freezer *freezer; /* a spare's freezer group (freeze.c) */
    /* Its worker page (page.h), made at the spawn (worker_spawn.c), kept
     * after the death for the post-mortem; NULL when none could be made or
     * --no-worker-page. */
    struct cr_page *page;
    struct cr_gen_stack stack;
    /* The directory node writes its fatal-error report (and heap snapshot)
     * into (diag.c, from the spawn until the death's post-mortem read it);
     * "" = none. */
    char diag_dir[CR_DIAG_PATH_MAX];
    struct cr_gen_cg cg;
    struct cr_report report; /* the worker's own reports (report.c) */
    struct cr_mem mem;       /* corrald's memory readings (memread.c) */
    struct cr_ledger ledger;
    struct cr_exit exit;
};
