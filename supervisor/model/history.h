/* history: post-mortem records of dead workers and a bounded ring of them.
 *
 * corrald writes the post-mortem because the worker often cannot (a kernel
 * OOM kill gives it no chance to log). No I/O here: the caller fills the
 * record from its last samples and the classification, pushes it, and logs
 * or serves the renderings below.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "death.h"

/* memory.stat at death (the fields corral reports; known when the
 * record's memstat_read is set). Plain fields so that this header does not
 * depend on the cgroups module. */
struct cr_postmortem_memstat {
    uint64_t anon;
    uint64_t file;
    uint64_t kernel;
    uint64_t slab;
    uint64_t sock;
    uint64_t shmem;
};

struct cr_postmortem {
    unsigned worker_id;
    int pid;
    uint64_t generation;
    int64_t start_ms; /* wall clock, unix ms */
    int64_t end_ms;   /* wall clock, unix ms; also the time counted in "last hour" */
    uint64_t uptime_ms;

    /* From cr_death_classify (see cr_postmortem_set_death). */
    enum cr_death category;
    char reason[CR_DEATH_REASON_MAX];
    int exit_code; /* -1: killed by a signal */
    int signal;    /* 0: exited */
    int shell_status;
    bool core_dumped;
    bool via_shell;
    bool planned;
    bool inferred;

    /* Last memory readings; 0 = unknown (never read: no group of its own,
     * no sample before it died, a kernel without memory.peak), never a
     * measured 0 (a process and the group it ran in always hold pages).
     * Limits: 0 or UINT64_MAX = none. */
    uint64_t rss;
    uint64_t cg_usage;
    uint64_t cg_peak;
    uint64_t cg_limit;
    bool memstat_read; /* memstat holds the group's memory.stat */
    struct cr_postmortem_memstat memstat;

    /* OOM counter deltas across the worker's life (as in the evidence),
     * as far as oom_scope says they are known. */
    enum cr_pm_oom {
        CR_PM_OOM_UNKNOWN, /* no group to count in (--no-cgroups, no shared group read) */
        CR_PM_OOM_KILLS,   /* a group shared with corrald: oom_own's kill count alone */
        CR_PM_OOM_ALL,     /* its own group: every counter */
    } oom_scope;
    struct cr_oom_delta oom_own;
    struct cr_oom_delta oom_ancestor;
    uint64_t oom_system;

    /* Last heap report from the worker (0 = never reported; with
     * heap_unknown / loop_unknown set, the JSON says null instead). */
    bool heap_unknown;
    bool loop_unknown;
    uint64_t heap_used;
    uint64_t heap_total;
    uint64_t heap_limit;
    uint64_t external;
    uint64_t loop_delay_max_us;

    /* The last <= CR_DEATH_STDERR_MAX bytes of stderr, copied (not
     * NUL-terminated; may contain any bytes). */
    size_t stderr_len;
    char stderr_tail[CR_DEATH_STDERR_MAX];
};

/* Copies the category, reason and status fields of a classification. */
void cr_postmortem_set_death(struct cr_postmortem *pm, const struct cr_death_result *res);
/* Copies the last min(len, CR_DEATH_STDERR_MAX) bytes of buf (NULL → empty). */
void cr_postmortem_set_stderr(struct cr_postmortem *pm, const char *buf, size_t len);

/* A new cJSON object (caller owns; cJSON_Delete), or NULL when out of
 * memory. Keys are snake_case with units in their names (rss_bytes,
 * uptime_ms, …); an unknown limit is null; the stderr tail is made valid
 * UTF-8 (invalid bytes and NULs become '?'). */
cJSON *cr_postmortem_to_json(const struct cr_postmortem *pm);

/* One logfmt line (no newline) into buf: key=value pairs, values with
 * spaces or quotes quoted and escaped, plus the last non-empty stderr line
 * (stderr_last, at most 200 bytes). A figure the JSON shows as null (never
 * reported, never read, no limit) has no key at all: never a made-up 0.
 * Returns the length written, or -ENOBUFS when size was too small (buf
 * then holds a truncated, NUL-terminated line), -EINVAL on NULL arguments
 * or size 0. 2048 bytes is always enough. */
int cr_postmortem_format_logfmt(const struct cr_postmortem *pm, char *buf, size_t size);

/* ---- the ring ---- */

#define CR_HISTORY_DEFAULT_CAPACITY 256
#define CR_HISTORY_MAX_CAPACITY 65536

struct cr_history;

/* capacity 0 → CR_HISTORY_DEFAULT_CAPACITY. -EINVAL above
 * CR_HISTORY_MAX_CAPACITY, -ENOMEM. */
int cr_history_new(size_t capacity, struct cr_history **ret);
/* NULL-safe; returns NULL. */
struct cr_history *cr_history_free(struct cr_history *h);

/* Copies *pm in; when full the oldest record is dropped. Counts the death
 * in the per-category totals and in the last-hour buckets (by pm->end_ms).
 * -EINVAL for a NULL argument or a category out of range. */
int cr_history_push(struct cr_history *h, const struct cr_postmortem *pm);

size_t cr_history_len(const struct cr_history *h);
size_t cr_history_capacity(const struct cr_history *h);

/* The n-th newest record (0 = the newest), or NULL when n >= len. The
 * pointer is valid until the next push. Iterate newest-first with
 *   for (size_t i = 0; (pm = cr_history_get(h, i)); i++) … */
const struct cr_postmortem *cr_history_get(const struct cr_history *h, size_t n);

/* Deaths of a category since the history was created (never dropped). */
uint64_t cr_history_count_total(const struct cr_history *h, enum cr_death d);
/* Deaths of a category in the last hour before now_ms, counted in whole
 * minutes (the current minute and the 59 before it) and independent of the
 * ring's capacity. Deaths stamped after now_ms's minute are not counted. */
uint64_t cr_history_count_last_hour(const struct cr_history *h, enum cr_death d, int64_t now_ms);
