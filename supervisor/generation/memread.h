/* cr_mem: corrald's memory readings of one generation — its resident size
 * and its cgroup's usage, sampled into a bounded ring, and the trend's
 * verdict read off it. One writer: this module (the memory watch decides
 * when to sample and what a reading means for the worker). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "trend.h"

struct cr_report;

/* The group's memory pressure (PSI) at the last sample, v2 only. */
struct cr_mem_pressure {
    bool known;
    double some10, some60; /* % of time some task stalled on memory, 10 s and 60 s averages */
    double full10, full60; /* ... every task */
    uint64_t at;           /* loop ms of the reading */
};

/* From this much "some" pressure (avg10, %) the verdict says pressure:
 * tasks of the worker wait on memory a tenth of the time (reclaim,
 * refaults, memory.high's throttling) — it is slowed by memory whatever
 * its trend, and a userspace OOM killer (systemd-oomd's default limit is
 * 60 % over 30 s) may be on its way. */
#define CR_MEM_PRESSURE_VERDICT_PCT 10.0

struct cr_mem {
    struct cr_trend_ring *samples; /* made by the first sample */
    uint64_t sampled_at;           /* loop ms of the last sample; 0 = none */
    unsigned round;                /* the memory watch's last round that looked at it */
    uint64_t rss, cg_usage;        /* the last readings that succeeded; 0 = none yet */
    uint64_t rss_at, cg_usage_at;  /* loop ms each was read (a view shows their age) */
    enum cr_trend_verdict verdict;
    uint64_t verdict_at; /* loop ms of the sample that gave it; 0 = none yet */
    char verdict_text[256];
    unsigned soft_over;       /* consecutive samples above the soft limit */
    uint64_t soft_crossed_at; /* loop ms when usage first crossed it */
    struct cr_mem_pressure pressure;
    unsigned pressure_over; /* consecutive samples over --memory-pressure */
};

/* A new generation: no readings (the ring is kept, emptied; the round too:
 * it is the memory watch's mark of the worker, not of a process). */
void cr_mem_reset(struct cr_mem *m);
/* Frees the ring (the worker goes). */
void cr_mem_free(struct cr_mem *m);
/* Marks m looked at in round; false when it already was. */
bool cr_mem_visit(struct cr_mem *m, unsigned round);
/* Resident bytes from fd: /proc/<pid>/statm (the second field) or, with
 * pss, smaps_rollup's Pss. 0 when nothing could be read. */
uint64_t cr_mem_read_resident(int fd, bool pss);

struct cr_mem_reading {
    uint64_t now;      /* loop ms */
    uint64_t rss;      /* > 0 */
    bool cg;           /* the worker has a group of its own ... */
    bool cg_read;      /* ... whose usage was read now ... */
    uint64_t cg_usage; /* ... as this (kept from before when unread) */
    uint64_t cg_limit; /* its hard limit; 0 = none */
    size_t ring;       /* the ring's capacity (--sample-ring) */
    bool psi;          /* its group's memory.pressure was read now: */
    double some10, some60, full10, full60;
};

/* Takes one reading with the worker's last report into the ring and reads
 * the trend. Returns 1 when the verdict changed (the text says why), 0
 * when it did not, -errno when the ring cannot be made. */
int cr_mem_take(struct cr_mem *m, const struct cr_mem_reading *in, const struct cr_report *rep);
/* Counts a usage against the soft limit (0: none): the consecutive samples
 * above it, 0 below. */
/* A reading of the resident size alone, between samples (the watch of a
 * limit corrald enforces itself): the ring is not touched. */
void cr_mem_note_resident(struct cr_mem *m, uint64_t rss, uint64_t now);
unsigned cr_mem_over_soft(struct cr_mem *m, uint64_t usage, uint64_t soft, uint64_t now);
/* Counts the last pressure reading against --memory-pressure (pct, 0 =
 * off): the consecutive samples at or over it, 0 below or unknown. */
unsigned cr_mem_over_pressure(struct cr_mem *m, unsigned pct);
