/* cr_autoscale: how many workers (--workers MIN..MAX), decided from what
 * corrald measures, one decision a tick.
 *
 * Scaling out cures a loaded event loop only while there is something to
 * run the new loop on. A worker whose loop is busy *on the CPU* (a long
 * computation) needs a core: past the cores, another such worker only
 * adds switching and memory, and every request finishes later. A worker
 * whose loop is busy *without the CPU* (a synchronous driver call, a sync
 * read from slow storage, execSync) waits on something else: another
 * worker serves meanwhile, whatever the core count. So:
 *
 * - up, one worker at a time, when connections wait in the accept queue
 *   (longer than up_wait_ms) and the serving workers are busy (their loop
 *   utilization; unknown counts as busy, the queue alone speaks), unless
 *   the workers want the CPU, there are as many as cores already and no
 *   core is idle (saturated: a new worker would only share it with its
 *   siblings), or MAX or the memory budget is reached. "Want" counts the
 *   time a worker waited on a run queue with the time it ran: a CPU-bound
 *   loop starved by others (or by its siblings, past the cores) uses
 *   little CPU each, yet wants a whole core. Below the cores a CPU-bound
 *   worker is added even with no core idle: what keeps the cores busy then
 *   is other work of the host, the kernel gives the new worker its share
 *   of a core, and one worker per core is what a static --workers auto
 *   runs anyway (measured, 2 cores with other tenants using 1.1: one
 *   worker 14.3 /hashsync req/s, two 16.8; on a quieter run 16.1 and 20.7,
 *   while the rule held one worker for 7 s and for a whole 20 s run);
 * - down, when the queue stayed empty and the workers nearly idle for
 *   cooldown_ms (their loop utilization, or without it the CPU they use):
 *   straight to what the measured use needs at BUSY_TARGET (MIN when
 *   idle), never below MIN;
 * - nothing within settle_ms of a change, nor while a worker it asked for
 *   is still starting: each step is judged on what the last one did.
 *
 * Up and down have thresholds apart (BUSY_HIGH, BUSY_LOW) and the down
 * step waits a cool-down: a steady load between them holds N where it is.
 *
 * Pure: numbers in, a decision and its sentence out.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A serving loop this busy (0..1) is "busy": a worker more would help. */
#define CR_SCALE_BUSY_HIGH 0.8
/* Below this for the cool-down: fewer workers would do. */
#define CR_SCALE_BUSY_LOW 0.3
/* What a scale-down aims at: the measured load over this many workers. */
#define CR_SCALE_BUSY_TARGET 0.6
/* A busy worker wanting this many cores or more (used, or waited for on a
 * run queue) is busy on the CPU. */
#define CR_SCALE_CPU_BOUND 0.5
/* Fewer idle cores than this: the CPU is saturated. */
#define CR_SCALE_IDLE_MIN 0.5

struct cr_scale_limits {
    unsigned min, max;    /* --workers MIN..MAX */
    unsigned budget_max;  /* workers the memory budget fits; 0 = no limit */
    unsigned cores;       /* cores the workers may use (quota, affinity); 0 = unknown */
    uint64_t up_wait_ms;  /* connections waiting this long call for a worker */
    uint64_t cooldown_ms; /* low use this long before workers go */
    uint64_t settle_ms;   /* no decision this soon after a change */
};

/* One tick's measurements. A negative figure is unknown. */
struct cr_scale_sample {
    uint64_t now_ms;
    unsigned serving;         /* ready or blocked, not retiring */
    unsigned starting;        /* asked for and not serving yet (pending, starting) */
    bool queue_known;         /* the accept queue was read (a TCP listener); else the
                                 two below are 0 and the decision sees no queue */
    uint32_t queue_len;       /* connections in the accept queue now */
    uint64_t queue_waited_ms; /* since the queue was last seen empty; 0: empty */
    double busy;              /* the serving loops' mean utilization, 0..1 */
    double cpu_each;          /* cores each serving worker used, on average */
    double demand_each;       /* cores each wanted: used, plus its time waiting for a CPU
                                 (a CPU-bound loop wants a whole one however starved) */
    double idle_cores;        /* cores idle that the workers may use */
    double cpu_pressure;      /* PSI cpu "some" avg10, % (for the sentence only) */
};

/* What the caller keeps between ticks (zero it once). */
struct cr_scale_state {
    uint64_t changed_at; /* last change asked for, ms; 0 = never */
    uint64_t low_since;  /* the load has been low since, ms; 0 = not low */
};

enum cr_scale_why {
    CR_SCALE_HOLD,       /* nothing to do */
    CR_SCALE_UP,         /* connections wait and the workers are busy */
    CR_SCALE_DOWN,       /* low use for the cool-down */
    CR_SCALE_TO_MIN,     /* fewer than MIN (a bound was raised) */
    CR_SCALE_TO_MAX,     /* more than MAX (a bound was lowered) */
    CR_SCALE_SATURATED,  /* held: the workers burn the CPU, one a core at least, none idle */
    CR_SCALE_AT_MAX,     /* held: MAX reached */
    CR_SCALE_AT_BUDGET,  /* held: the memory budget fits no more */
    CR_SCALE_SETTLING,   /* held: a change is under way or too recent */
    _CR_SCALE_WHY_MAX,
};

struct cr_scale_decision {
    unsigned from, to; /* serving + starting now, and the target (== from: hold) */
    enum cr_scale_why why;
    char text[320]; /* "scale 2→3: 14 connections waited up to 180 ms, workers 98 % busy,
                       0.3 cores used each, 1.4 cores idle" */
};

/* What the scaler has done, for status (its one writer: inputs/scaler.c). */
struct cr_scale_status {
    unsigned ups, downs, holds;     /* changes made; wanted changes held */
    bool decided;                   /* last is set */
    struct cr_scale_decision last;  /* the last change or hold published */
    uint64_t last_wall_ms;
    struct cr_scale_sample sample;  /* the last tick's measurements (all unknown before
                                       the first: cr_scale_sample_unknown) */
};

/* A sample that knows nothing: every figure unknown (negative, the queue
 * unread), as status shows it before the scaler's first tick. */
struct cr_scale_sample cr_scale_sample_unknown(void);

/* The decision for sample s under limits l; st is the caller's memory of
 * earlier ticks (updated). A change (to != from) is to be applied now. */
void cr_autoscale_decide(const struct cr_scale_limits *l, const struct cr_scale_sample *s,
                         struct cr_scale_state *st, struct cr_scale_decision *ret);

const char *cr_scale_why_to_string(enum cr_scale_why w);
