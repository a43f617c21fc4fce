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
#include "notify.h"
#include "trend.h"
#include "wpage.h"

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

/* The request a worker was serving, from its worker page (common/wpage.h),
 * as corrald read it. */
struct cr_request_seen {
    bool known;        /* the worker keeps the record and it was read whole */
    bool serving;      /* a request was being served (known only) */
    uint32_t inflight; /* requests started, not finished */
    uint64_t age_ms;   /* since the request started (serving only) */
    char method[CR_WPAGE_METHOD_MAX + 1];
    char target[CR_WPAGE_TARGET_MAX + 1]; /* path and query, printable ASCII */
};

/* " in GET /x?y=1 (5.2 s)" for a request being served, " (serving no
 * request)" for a worker known to serve none, "" when unknown; for log
 * lines and reasons. */
void cr_request_seen_text(const struct cr_request_seen *r, char *buf, size_t size);
/* {"method","path","age_ms","inflight"} (method, path and age null when
 * none is served), or a JSON null when unknown. NULL when out of memory. */
cJSON *cr_request_seen_to_json(const struct cr_request_seen *r);

/* Files a node worker's runtime left for its death, in the directory
 * corrald gave it (generation/diag.h): absolute paths, "" for none. */
#define CR_POSTMORTEM_PATH_MAX 384
struct cr_postmortem_reports {
    bool known;                                      /* the generation had a directory for them */
    char fatal_error_report[CR_POSTMORTEM_PATH_MAX]; /* V8's report at a fatal error */
    char heap_snapshot[CR_POSTMORTEM_PATH_MAX];      /* --heapsnapshot-near-heap-limit */
    bool snapshot_whole; /* the snapshot ends as a whole one does (not cut by the death) */
};

/* The most of a stack a post-mortem keeps (a worker page holds twice that;
 * the ring keeps CR_HISTORY_DEFAULT_CAPACITY records). */
#define CR_POSTMORTEM_STACK_MAX 8192

/* The last minute of memory before a death, from corrald's samples of the
 * worker (the trend ring, memread.c): at most one point per second of the
 * CR_POSTMORTEM_SERIES_MS before the death, each the largest reading of
 * each figure among that second's samples (the peaks are what meets a
 * limit), stamped with the time of its newest sample. A second without a
 * sample has no point (a calm worker is sampled every eighth period, 2 s
 * by default). Sizes in KiB as the ring keeps them, 20 bytes a point:
 * 1.2 KiB a record. */
#define CR_POSTMORTEM_SERIES_MAX 60
#define CR_POSTMORTEM_SERIES_MS  60000
#define CR_POSTMORTEM_UNKNOWN    UINT32_MAX /* a figure not known: null, never 0 */

struct cr_postmortem_point {
    int32_t t_ms;           /* relative to the death: -59999 .. 0 */
    uint32_t rss_kib;       /* corrald's reading; CR_POSTMORTEM_UNKNOWN: none */
    uint32_t heap_used_kib; /* the worker's report; unknown while it reports no heap */
    uint32_t external_kib;  /* the worker's report; unknown likewise */
    uint32_t cg_usage_kib;  /* its own group's usage; unknown without one */
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
    /* The heap's spaces in its last report (X_HEAP_SPACES); 0: none. */
    unsigned heap_spaces_len;
    struct cr_heap_space heap_spaces[CR_NOTIFY_SPACES_MAX];
    struct cr_postmortem_reports reports;

    /* The request being served when it died (or when corrald killed it). */
    struct cr_request_seen request;

    /* The stack of its main thread: taken before a hang kill from the
     * worker's page, or read from its stderr after the death (Python's
     * faulthandler). stack_source "" with stack_missing "": not asked. */
    char stack_source[CR_WPAGE_SOURCE_MAX + 1];
    char stack_missing[128]; /* why none came, when one was asked for */
    size_t stack_len;
    char stack[CR_POSTMORTEM_STACK_MAX]; /* NUL-terminated when stack_len > 0 */

    /* The memory trend's last verdict (trend.h), the time it was reached
     * relative to the death (INT64_MIN: never: "unknown" from the start)
     * and the numbers behind it then (cr_trend_format; "" with none). */
    enum cr_trend_verdict verdict;
    int64_t verdict_since_ms;
    char verdict_detail[256];

    /* Memory over the last minute, oldest first (cr_postmortem_set_series). */
    size_t series_len;
    struct cr_postmortem_point series[CR_POSTMORTEM_SERIES_MAX];

    /* The last <= CR_DEATH_STDERR_MAX bytes of stderr, copied (not
     * NUL-terminated; may contain any bytes). */
    size_t stderr_len;
    char stderr_tail[CR_DEATH_STDERR_MAX];
};

/* Copies the category, reason and status fields of a classification. */
void cr_postmortem_set_death(struct cr_postmortem *pm, const struct cr_death_result *res);
/* Copies the last min(len, CR_DEATH_STDERR_MAX) bytes of buf (NULL → empty). */
void cr_postmortem_set_stderr(struct cr_postmortem *pm, const char *buf, size_t len);

/* The memory series (see struct cr_postmortem_point) from the samples in
 * ring taken within CR_POSTMORTEM_SERIES_MS before death_ms (the ring's
 * clock: loop ms); a sample stamped after death_ms counts as at it. NULL
 * or an empty ring: no points. */
void cr_postmortem_set_series(struct cr_postmortem *pm, const struct cr_trend_ring *ring,
                              uint64_t death_ms);

/* The trend's verdict at the death: v, reached at loop time at_ms (0: it
 * never changed), the numbers behind it; death_ms on the same clock. */
void cr_postmortem_set_verdict(struct cr_postmortem *pm, enum cr_trend_verdict v, uint64_t at_ms,
                               const char *detail, uint64_t death_ms);

/* A new cJSON object (caller owns; cJSON_Delete), or NULL when out of
 * memory. Keys are snake_case with units in their names (rss_bytes,
 * uptime_ms, …); an unknown limit is null; the stderr tail is made valid
 * UTF-8 (invalid bytes and NULs become '?'). memory_series is an array of
 * {"t_ms", "rss_bytes", "heap_used_bytes", "external_bytes",
 * "cg_usage_bytes"}, oldest first, an unknown figure null; beside it
 * memory_verdict, memory_verdict_since_ms (null: never reached) and
 * memory_verdict_detail. heap_spaces is {"<space>": {"used_bytes",
 * "size_bytes"}, ...} in the worker's order, or null; reports is
 * {"fatal_error_report", "heap_snapshot"} (each a path or null, and
 * "heap_snapshot_incomplete": a path, for a snapshot the death cut short),
 * or null for a worker given no directory for them. */
cJSON *cr_postmortem_to_json(const struct cr_postmortem *pm);

/* One logfmt line (no newline) into buf: key=value pairs, values with
 * spaces or quotes quoted and escaped, plus the last non-empty stderr line
 * (stderr_last, at most 200 bytes). A figure the JSON shows as null (never
 * reported, never read, no limit) has no key at all: never a made-up 0.
 * Returns the length written, or -ENOBUFS when size was too small (buf
 * then holds a truncated, NUL-terminated line), -EINVAL on NULL arguments
 * or size 0. 3072 bytes is always enough. */
int cr_postmortem_format_logfmt(const struct cr_postmortem *pm, char *buf, size_t size);

/* ---- the ring ---- */

/* A record is a fixed size, so that the ring is one allocation made at
 * start-up and never grows: sizeof(struct cr_postmortem) is 16,576 bytes
 * (the 8 KiB stack, the 4 KiB stderr tail, the 400-byte request, the
 * 384-byte reason, 1,208 bytes of memory series, two 384-byte report
 * paths, 768 bytes of heap spaces, the trend's 256-byte detail, the
 * figures); the default 256 records cost 4.05 MiB, the maximum 65536
 * records 1.0 GiB. test_history.c prints the figure and
 * bounds it. */
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
