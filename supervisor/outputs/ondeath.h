/* cr_ondeath: --on-death PROGRAM, run after each death. An output: it
 * subscribes to the core's death event and reads its views.
 *
 * PROGRAM is executed (execve of the path: no shell, no PATH search, no
 * arguments) with the post-mortem on its standard input — the record as
 * `history` gives it, one line of JSON — and in its environment
 * CORRAL_WORKER_ID, CORRAL_PID, CORRAL_GENERATION, CORRAL_DEATH_CATEGORY
 * and CORRAL_DEATH_PLANNED (0 or 1) beside corrald's own variables (less
 * its interface to systemd: LISTEN_*, NOTIFY_SOCKET, WATCHDOG_*,
 * JOURNAL_STREAM). Its stdout and stderr, one pipe, go to corrald's log
 * line by line, "on-death[PID] wN: …" (at most CR_ONDEATH_LINES lines a
 * run, CR_ONDEATH_LINE bytes a line); its exit status is logged.
 *
 * Never on corrald's loop: the death only queues the run, a timer of the
 * next loop turn starts it with libuv's uv_spawn (one per turn, like the
 * spawn pacer), the JSON goes in through a libuv pipe and the output comes
 * out through another. uv_spawn forks corrald and waits for the exec:
 * corrald's share of a start is logged at debug level. The program runs in
 * a session and process group of its own, as corrald's user, in corrald's
 * cgroup, at the nice corrald was started with (its workers' nice, not
 * corrald's raised one).
 *
 * Bounded in time, in number and in memory: a run still going after
 * --on-death-timeout is SIGKILLed with its whole process group; at most
 * --on-death-parallel run at once; up to CR_ONDEATH_QUEUE more deaths wait
 * (each its JSON text: 1.5 to 12 KiB, up to 30 KiB for a stderr tail of
 * control bytes, which JSON escapes in 6 bytes each), and a death beyond
 * that is dropped — logged and counted, the newest rather than the oldest
 * since a storm's first deaths are the ones that tell its cause (its
 * record stays in the history). Deaths while corrald drains for its stop are its own doing
 * and run nothing; at the end of the stop, deaths still waiting are
 * dropped and runs under way end within their timeout. */
#pragma once

#include <stdint.h>
#include <uv.h>

struct cr_supervisor;
struct cr_ondeath;
struct cr_event;
struct cr_priority;

#define CR_ONDEATH_QUEUE 32   /* deaths waiting for a run */
#define CR_ONDEATH_LINES 100  /* output lines logged per run; the rest are counted */
#define CR_ONDEATH_LINE  1024 /* bytes of one output line logged; a longer one is cut */
/* How long the output is read after the program has exited, for a child
 * of its that still holds the pipe. */
#define CR_ONDEATH_DRAIN_MS 1000

/* What the runner needs of the rest of corrald (main.c wires it). */
struct cr_ondeath_host {
    /* The runner's processes are libuv's to reap (reaper.h,
     * cr_reaper_foreign_*): registered once started, released once
     * reaped. started may refuse (-ENOSPC): the run is then killed. */
    int (*started)(void *ctx, int pid);
    void (*reaped)(void *ctx, int pid);
    /* The priority corrald was started with and its own now (NULL: not
     * changed); a run gets the former back. */
    const struct cr_priority *(*priority)(void *ctx);
    void *ctx;
};

struct cr_ondeath_stats {
    unsigned running, pending;
    uint64_t started;      /* runs started */
    uint64_t succeeded;    /* ... that exited 0 */
    uint64_t failed;       /* ... that exited non-zero or died of a signal of their own */
    uint64_t timed_out;    /* ... SIGKILLed at --on-death-timeout */
    uint64_t spawn_failed; /* runs that could not start (no such program, ...) */
    uint64_t dropped;      /* deaths not run: the queue was full, or corrald stopped */
};

/* A runner reading its settings from sup's configuration at each death
 * (--on-death and its limits are live). -ENOMEM. */
int cr_ondeath_new(const struct cr_supervisor *sup, uv_loop_t *loop,
                   const struct cr_ondeath_host *host, struct cr_ondeath **ret);
/* Subscriber: worker-died queues a run; finished drops the waiting ones. */
void cr_ondeath_on_event(void *od, const struct cr_event *ev);
/* For `status`. NULL-safe (all zero). */
void cr_ondeath_stats(const struct cr_ondeath *od, struct cr_ondeath_stats *ret);
/* After the loop has ended (every handle closed); NULL-safe; NULL. */
struct cr_ondeath *cr_ondeath_free(struct cr_ondeath *od);
