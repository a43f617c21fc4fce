/* history: post-mortems and their bounded ring. See history.h. */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "utf8.h"

#define MINUTE_MS 60000
#define HOUR_BUCKETS 60

/* One minute of deaths per category: the minute's index (unix ms / 60000)
 * and the count. A bucket is reused when its minute comes round again. */
struct bucket {
    int64_t minute;
    uint64_t count;
};

struct cr_history {
    size_t capacity;
    struct cr_ring idx; /* which of ring[] are in use */
    uint64_t total[_CR_DEATH_MAX];
    struct bucket hour[_CR_DEATH_MAX][HOUR_BUCKETS];
    struct cr_postmortem ring[]; /* capacity entries */
};

/* ---- the record ---- */

void cr_postmortem_set_death(struct cr_postmortem *pm, const struct cr_death_result *res)
{
    if (!pm || !res)
        return;
    pm->category = res->category;
    snprintf(pm->reason, sizeof(pm->reason), "%s", res->reason);
    pm->exit_code = res->exit_code;
    pm->signal = res->signal;
    pm->shell_status = res->shell_status;
    pm->core_dumped = res->core_dumped;
    pm->via_shell = res->via_shell;
    pm->planned = res->planned;
    pm->inferred = res->inferred;
}

void cr_postmortem_set_stderr(struct cr_postmortem *pm, const char *buf, size_t len)
{
    if (!pm)
        return;
    if (!buf)
        len = 0;
    if (len > sizeof(pm->stderr_tail)) {
        buf += len - sizeof(pm->stderr_tail);
        len = sizeof(pm->stderr_tail);
    }
    if (len)
        memmove(pm->stderr_tail, buf, len);
    pm->stderr_len = len;
}

/* A byte figure as the series keeps it: KiB, rounded up (the ring's own
 * unit), never the unknown mark. */
static uint32_t series_kib(uint64_t bytes)
{
    uint64_t k = (bytes + 1023) / 1024;
    return k >= CR_POSTMORTEM_UNKNOWN ? CR_POSTMORTEM_UNKNOWN - 1 : (uint32_t)k;
}

/* The larger of a point's figure and a reading, an unknown figure being
 * smaller than any reading. */
static void series_max(uint32_t *have, bool known, uint64_t bytes)
{
    if (!known)
        return;
    uint32_t k = series_kib(bytes);
    if (*have == CR_POSTMORTEM_UNKNOWN || k > *have)
        *have = k;
}

void cr_postmortem_set_series(struct cr_postmortem *pm, const struct cr_trend_ring *ring,
                              uint64_t death_ms)
{
    if (!pm)
        return;
    pm->series_len = 0;
    size_t n = cr_trend_ring_len(ring);
    long last_second = -1;
    for (size_t i = 0; i < n; i++) {
        struct cr_sample s;
        if (cr_trend_ring_get(ring, i, &s) < 0)
            break;
        uint64_t age = s.t_ms < death_ms ? death_ms - s.t_ms : 0;
        if (age >= CR_POSTMORTEM_SERIES_MS)
            continue;
        /* Whole seconds before the death: 0 is the last one. The samples
         * come oldest first, so a second is done once a newer one starts. */
        long second = (long)(age / 1000);
        struct cr_postmortem_point *p = &pm->series[pm->series_len ? pm->series_len - 1 : 0];
        if (second != last_second) {
            if (pm->series_len == CR_POSTMORTEM_SERIES_MAX)
                break; /* cannot happen: 60 seconds, 60 points */
            p = &pm->series[pm->series_len++];
            *p = (struct cr_postmortem_point){
                .rss_kib = CR_POSTMORTEM_UNKNOWN,
                .heap_used_kib = CR_POSTMORTEM_UNKNOWN,
                .external_kib = CR_POSTMORTEM_UNKNOWN,
                .cg_usage_kib = CR_POSTMORTEM_UNKNOWN,
            };
            last_second = second;
        }
        p->t_ms = -(int32_t)age;
        series_max(&p->rss_kib, s.rss > 0, s.rss);
        /* A worker that reports no heap has none to show: null, not 0. */
        bool heap = s.heap_reported || s.heap_used > 0;
        series_max(&p->heap_used_kib, heap, s.heap_used);
        series_max(&p->external_kib, heap, s.external);
        /* 0: no cgroup reading (no group of its own). */
        series_max(&p->cg_usage_kib, s.cg_usage > 0, s.cg_usage);
    }
}

void cr_postmortem_set_verdict(struct cr_postmortem *pm, enum cr_trend_verdict v, uint64_t at_ms,
                               const char *detail, uint64_t death_ms)
{
    if (!pm)
        return;
    pm->verdict = (unsigned)v < _CR_TREND_VERDICT_MAX ? v : CR_TREND_UNKNOWN;
    pm->verdict_since_ms = !at_ms              ? INT64_MIN
                           : at_ms >= death_ms ? 0
                                               : -(int64_t)(death_ms - at_ms);
    snprintf(pm->verdict_detail, sizeof(pm->verdict_detail), "%s", detail ? detail : "");
}

/* A NUL-terminated, valid UTF-8 copy of buf; caller frees. */
static char *utf8_clean(const char *buf, size_t len)
{
    char *out = malloc(len + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len;) {
        /* A NUL would end the text early: it becomes '?' too. */
        size_t n = buf[i] ? cr_utf8_seq((const unsigned char *)buf + i, len - i) : 0;
        if (n == 0) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, buf + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    return out;
}

static bool add_num(cJSON *o, const char *key, double v)
{
    return cJSON_AddNumberToObject(o, key, v) != NULL;
}

static bool add_limit(cJSON *o, const char *key, uint64_t v)
{
    if (v == 0 || v == UINT64_MAX)
        return cJSON_AddNullToObject(o, key) != NULL;
    return add_num(o, key, (double)v);
}

static bool add_oom(cJSON *parent, const char *key, const struct cr_oom_delta *d)
{
    cJSON *o = cJSON_AddObjectToObject(parent, key);
    return o && add_num(o, "max", (double)d->max) && add_num(o, "oom", (double)d->oom) &&
           add_num(o, "oom_kill", (double)d->oom_kill);
}

static bool add_memstat(cJSON *parent, const struct cr_postmortem_memstat *m)
{
    cJSON *o = cJSON_AddObjectToObject(parent, "memory_stat");
    return o && add_num(o, "anon_bytes", (double)m->anon) &&
           add_num(o, "file_bytes", (double)m->file) &&
           add_num(o, "kernel_bytes", (double)m->kernel) &&
           add_num(o, "slab_bytes", (double)m->slab) &&
           add_num(o, "sock_bytes", (double)m->sock) &&
           add_num(o, "shmem_bytes", (double)m->shmem);
}

static bool add_status(cJSON *o, const struct cr_postmortem *pm)
{
    const char *cat = cr_death_to_string(pm->category);
    bool ok = cJSON_AddStringToObject(o, "category", cat ? cat : "unknown") &&
              cJSON_AddStringToObject(o, "reason", pm->reason) &&
              add_num(o, "shell_status", pm->shell_status) &&
              cJSON_AddBoolToObject(o, "core_dumped", pm->core_dumped) &&
              cJSON_AddBoolToObject(o, "via_shell", pm->via_shell) &&
              cJSON_AddBoolToObject(o, "planned", pm->planned) &&
              cJSON_AddBoolToObject(o, "inferred", pm->inferred);
    if (!ok)
        return false;
    if (pm->exit_code >= 0)
        ok = add_num(o, "exit_code", pm->exit_code);
    else
        ok = cJSON_AddNullToObject(o, "exit_code");
    if (ok && pm->signal > 0)
        ok = add_num(o, "signal", pm->signal) &&
             cJSON_AddStringToObject(o, "signal_name", sigabbrev_np(pm->signal) ?
                                                         sigabbrev_np(pm->signal) : "?");
    else if (ok)
        ok = cJSON_AddNullToObject(o, "signal") && cJSON_AddNullToObject(o, "signal_name");
    return ok;
}

/* A figure the worker reported, or null: never a made-up 0. */
static bool add_known(cJSON *o, const char *k, bool known, uint64_t v)
{
    return known ? add_num(o, k, (double)v) : cJSON_AddNullToObject(o, k) != NULL;
}

/* The OOM counters, as far as the group evidence knew them. */
static bool add_ooms(cJSON *o, const struct cr_postmortem *pm)
{
    if (pm->oom_scope == CR_PM_OOM_UNKNOWN)
        return cJSON_AddNullToObject(o, "oom_own") && cJSON_AddNullToObject(o, "oom_ancestor");
    if (pm->oom_scope == CR_PM_OOM_ALL && !add_oom(o, "oom_own", &pm->oom_own))
        return false;
    if (pm->oom_scope == CR_PM_OOM_KILLS) {
        cJSON *own = cJSON_AddObjectToObject(o, "oom_own");
        if (!own || !cJSON_AddNullToObject(own, "max") || !cJSON_AddNullToObject(own, "oom") ||
            !add_num(own, "oom_kill", (double)pm->oom_own.oom_kill))
            return false;
    }
    return add_oom(o, "oom_ancestor", &pm->oom_ancestor);
}

static bool add_memory(cJSON *o, const struct cr_postmortem *pm)
{
    return add_known(o, "rss_bytes", pm->rss != 0, pm->rss) &&
           add_known(o, "cg_usage_bytes", pm->cg_usage != 0, pm->cg_usage) &&
           add_known(o, "cg_peak_bytes", pm->cg_peak != 0, pm->cg_peak) &&
           add_limit(o, "cg_limit_bytes", pm->cg_limit) &&
           (pm->memstat_read ? add_memstat(o, &pm->memstat)
                             : cJSON_AddNullToObject(o, "memory_stat") != NULL) &&
           add_ooms(o, pm) &&
           add_num(o, "oom_system_kills", (double)pm->oom_system) &&
           add_known(o, "heap_used_bytes", !pm->heap_unknown, pm->heap_used) &&
           add_known(o, "heap_total_bytes", !pm->heap_unknown, pm->heap_total) &&
           add_limit(o, "heap_limit_bytes", pm->heap_limit) &&
           add_known(o, "external_bytes", !pm->heap_unknown, pm->external) &&
           add_known(o, "loop_delay_max_us", !pm->loop_unknown, pm->loop_delay_max_us);
}

void cr_request_seen_text(const struct cr_request_seen *r, char *buf, size_t size)
{
    if (!r->known)
        snprintf(buf, size, "%s", "");
    else if (!r->serving)
        snprintf(buf, size, " (serving no request)");
    else
        snprintf(buf, size, " in %s %s (%.1f s)", r->method, r->target,
                 (double)r->age_ms / 1000.0);
}

cJSON *cr_request_seen_to_json(const struct cr_request_seen *r)
{
    if (!r->known)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL;
    if (ok && r->serving)
        ok = cJSON_AddStringToObject(o, "method", r->method) &&
             cJSON_AddStringToObject(o, "path", r->target) && add_num(o, "age_ms", (double)r->age_ms);
    else if (ok)
        ok = cJSON_AddNullToObject(o, "method") && cJSON_AddNullToObject(o, "path") &&
             cJSON_AddNullToObject(o, "age_ms");
    ok = ok && add_num(o, "inflight", r->inflight);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* {"source","text"} when a stack came, {"missing": why} when one was
 * asked for and none came, null when none was asked for. */
static bool add_stack(cJSON *o, const struct cr_postmortem *pm)
{
    if (!pm->stack_len && !pm->stack_missing[0])
        return cJSON_AddNullToObject(o, "stack") != NULL;
    cJSON *s = cJSON_AddObjectToObject(o, "stack");
    if (!s)
        return false;
    if (!pm->stack_len)
        return cJSON_AddStringToObject(s, "missing", pm->stack_missing) != NULL;
    char *text = utf8_clean(pm->stack, pm->stack_len);
    bool ok = text && cJSON_AddStringToObject(s, "source", pm->stack_source) &&
              cJSON_AddStringToObject(s, "text", text);
    free(text);
    return ok;
}

/* {"<space>": {"used_bytes", "size_bytes"}, ...}, or null: none reported. */
static bool add_heap_spaces(cJSON *o, const struct cr_postmortem *pm)
{
    if (!pm->heap_spaces_len)
        return cJSON_AddNullToObject(o, "heap_spaces") != NULL;
    cJSON *h = cJSON_AddObjectToObject(o, "heap_spaces");
    for (unsigned i = 0; h && i < pm->heap_spaces_len && i < CR_NOTIFY_SPACES_MAX; i++) {
        const struct cr_heap_space *s = &pm->heap_spaces[i];
        cJSON *e = cJSON_AddObjectToObject(h, s->name);
        if (!e || !add_num(e, "used_bytes", (double)s->used) ||
            !add_num(e, "size_bytes", (double)s->size))
            return false;
    }
    return h != NULL;
}

/* A path, or null for "". */
static bool add_path(cJSON *o, const char *key, const char *path)
{
    if (!*path)
        return cJSON_AddNullToObject(o, key) != NULL;
    return cJSON_AddStringToObject(o, key, path) != NULL;
}

static bool add_reports(cJSON *o, const struct cr_postmortem *pm)
{
    const struct cr_postmortem_reports *r = &pm->reports;
    if (!r->known)
        return cJSON_AddNullToObject(o, "reports") != NULL;
    cJSON *x = cJSON_AddObjectToObject(o, "reports");
    bool whole = r->heap_snapshot[0] && r->snapshot_whole;
    return x && add_path(x, "fatal_error_report", r->fatal_error_report) &&
           add_path(x, "heap_snapshot", whole ? r->heap_snapshot : "") &&
           (whole || !r->heap_snapshot[0] ||
            cJSON_AddStringToObject(x, "heap_snapshot_incomplete", r->heap_snapshot));
}

/* A series figure in bytes, or null. */
static bool add_kib(cJSON *o, const char *k, uint32_t kib)
{
    if (kib == CR_POSTMORTEM_UNKNOWN)
        return cJSON_AddNullToObject(o, k) != NULL;
    return add_num(o, k, (double)kib * 1024);
}

static bool add_verdict(cJSON *o, const struct cr_postmortem *pm)
{
    const char *v = cr_trend_verdict_to_string(pm->verdict);
    return cJSON_AddStringToObject(o, "memory_verdict", v ? v : "unknown") &&
           (pm->verdict_since_ms == INT64_MIN
                ? cJSON_AddNullToObject(o, "memory_verdict_since_ms") != NULL
                : add_num(o, "memory_verdict_since_ms", (double)pm->verdict_since_ms)) &&
           cJSON_AddStringToObject(o, "memory_verdict_detail", pm->verdict_detail);
}

static bool add_series(cJSON *o, const struct cr_postmortem *pm)
{
    cJSON *a = cJSON_AddArrayToObject(o, "memory_series");
    if (!a)
        return false;
    for (size_t i = 0; i < pm->series_len && i < CR_POSTMORTEM_SERIES_MAX; i++) {
        const struct cr_postmortem_point *p = &pm->series[i];
        cJSON *pt = cJSON_CreateObject();
        if (!pt)
            return false;
        cJSON_AddItemToArray(a, pt); /* a's now: freed with the record on failure */
        if (!add_num(pt, "t_ms", p->t_ms) || !add_kib(pt, "rss_bytes", p->rss_kib) ||
            !add_kib(pt, "heap_used_bytes", p->heap_used_kib) ||
            !add_kib(pt, "external_bytes", p->external_kib) ||
            !add_kib(pt, "cg_usage_bytes", p->cg_usage_kib))
            return false;
    }
    return true;
}

cJSON *cr_postmortem_to_json(const struct cr_postmortem *pm)
{
    cJSON *o;
    char *tail;
    bool ok;

    if (!pm || !(o = cJSON_CreateObject()))
        return NULL;
    ok = add_num(o, "worker_id", pm->worker_id) && add_num(o, "pid", pm->pid) &&
         add_num(o, "generation", (double)pm->generation) &&
         add_num(o, "start_ms", (double)pm->start_ms) &&
         add_num(o, "end_ms", (double)pm->end_ms) &&
         add_num(o, "uptime_ms", (double)pm->uptime_ms) && add_status(o, pm) &&
         add_memory(o, pm) && add_heap_spaces(o, pm) && add_verdict(o, pm) &&
         add_series(o, pm) && add_stack(o, pm) && add_reports(o, pm);
    cJSON *req = ok ? cr_request_seen_to_json(&pm->request) : NULL;
    ok = req && cJSON_AddItemToObject(o, "request", req);
    if (req && !ok)
        cJSON_Delete(req);
    tail = ok ? utf8_clean(pm->stderr_tail, pm->stderr_len) : NULL;
    ok = tail && cJSON_AddStringToObject(o, "stderr_tail", tail);
    free(tail);
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- logfmt ---- */

struct line {
    char *buf;
    size_t size, len;
    bool truncated;
};

static void put(struct line *l, const char *s, size_t n)
{
    size_t room = l->size - 1 - l->len;
    if (n > room) {
        n = room;
        l->truncated = true;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    l->buf[l->len] = '\0';
}

static void putf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void putf(struct line *l, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        put(l, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* key=value for a known figure; nothing for an unknown one. */
static void put_known(struct line *l, const char *key, bool known, uint64_t v)
{
    if (known)
        putf(l, " %s=%" PRIu64, key, v);
}

/* key="value" with \" \\ \n escaped and control bytes as '?'. */
static void put_quoted(struct line *l, const char *key, const char *s, size_t n)
{
    putf(l, " %s=\"", key);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            put(l, "\\", 1);
            put(l, (const char *)&s[i], 1);
        } else if (c == '\n') {
            put(l, "\\n", 2);
        } else if (c < 0x20 || c == 0x7f) {
            put(l, "?", 1);
        } else {
            put(l, (const char *)&s[i], 1);
        }
    }
    put(l, "\"", 1);
}

/* The last non-empty line of the stderr tail: start and length. */
static size_t last_line(const struct cr_postmortem *pm, const char **ret)
{
    size_t end = pm->stderr_len, start;

    while (end > 0 && (pm->stderr_tail[end - 1] == '\n' || pm->stderr_tail[end - 1] == '\r'))
        end--;
    start = end;
    while (start > 0 && pm->stderr_tail[start - 1] != '\n')
        start--;
    if (end - start > 200)
        start = end - 200;
    *ret = pm->stderr_tail + start;
    return end - start;
}

int cr_postmortem_format_logfmt(const struct cr_postmortem *pm, char *buf, size_t size)
{
    struct line l = {.buf = buf, .size = size};
    const char *cat, *tail;
    size_t tail_len;

    if (!pm || !buf || size == 0)
        return -EINVAL;
    buf[0] = '\0';
    cat = cr_death_to_string(pm->category);
    putf(&l, "worker=%u pid=%d generation=%" PRIu64 " category=%s shell_status=%d", pm->worker_id,
         pm->pid, pm->generation, cat ? cat : "unknown", pm->shell_status);
    if (pm->signal > 0)
        putf(&l, " signal=SIG%s", sigabbrev_np(pm->signal) ? sigabbrev_np(pm->signal) : "?");
    putf(&l, " core_dumped=%s via_shell=%s uptime_ms=%" PRIu64, pm->core_dumped ? "true" : "false",
         pm->via_shell ? "true" : "false", pm->uptime_ms);
    /* What the JSON says null for has no key here (unknown is not 0). */
    put_known(&l, "rss_bytes", pm->rss != 0, pm->rss);
    put_known(&l, "cg_usage_bytes", pm->cg_usage != 0, pm->cg_usage);
    put_known(&l, "cg_peak_bytes", pm->cg_peak != 0, pm->cg_peak);
    put_known(&l, "cg_limit_bytes", pm->cg_limit && pm->cg_limit != UINT64_MAX, pm->cg_limit);
    put_known(&l, "heap_used_bytes", !pm->heap_unknown, pm->heap_used);
    put_known(&l, "heap_limit_bytes", pm->heap_limit && pm->heap_limit != UINT64_MAX,
              pm->heap_limit);
    put_known(&l, "external_bytes", !pm->heap_unknown, pm->external);
    put_known(&l, "oom_kill_own", pm->oom_scope != CR_PM_OOM_UNKNOWN, pm->oom_own.oom_kill);
    put_known(&l, "oom_kill_ancestor", pm->oom_scope != CR_PM_OOM_UNKNOWN,
              pm->oom_ancestor.oom_kill);
    putf(&l, " oom_kill_system=%" PRIu64, pm->oom_system);
    put_quoted(&l, "reason", pm->reason, strnlen(pm->reason, sizeof(pm->reason)));
    if (pm->request.known && pm->request.serving) {
        char rq[sizeof(pm->request.method) + sizeof(pm->request.target) + 1];
        int n = snprintf(rq, sizeof(rq), "%s %s", pm->request.method, pm->request.target);
        put_quoted(&l, "request", rq, n > 0 ? (size_t)n : 0);
        putf(&l, " request_age_ms=%" PRIu64, pm->request.age_ms);
    }
    if (pm->stack_len)
        put_quoted(&l, "stack_source", pm->stack_source, strlen(pm->stack_source));
    tail_len = last_line(pm, &tail);
    if (tail_len)
        put_quoted(&l, "stderr_last", tail, tail_len);
    return l.truncated ? -ENOBUFS : (int)l.len;
}

/* ---- the ring ---- */

int cr_history_new(size_t capacity, struct cr_history **ret)
{
    struct cr_history *h;

    if (!ret)
        return -EINVAL;
    if (capacity == 0)
        capacity = CR_HISTORY_DEFAULT_CAPACITY;
    if (capacity > CR_HISTORY_MAX_CAPACITY)
        return -EINVAL;
    h = calloc(1, sizeof(*h) + capacity * sizeof(h->ring[0]));
    if (!h)
        return -ENOMEM;
    h->capacity = capacity;
    for (size_t d = 0; d < _CR_DEATH_MAX; d++)
        for (size_t b = 0; b < HOUR_BUCKETS; b++)
            h->hour[d][b].minute = INT64_MIN;
    *ret = h;
    return 0;
}

struct cr_history *cr_history_free(struct cr_history *h)
{
    free(h);
    return NULL;
}

/* Floor division, so that times before 1970 still map to one minute each. */
static int64_t minute_of(int64_t ms)
{
    return ms >= 0 ? ms / MINUTE_MS : -((-ms + MINUTE_MS - 1) / MINUTE_MS);
}

static size_t bucket_index(int64_t minute)
{
    int64_t b = minute % HOUR_BUCKETS;
    return (size_t)(b < 0 ? b + HOUR_BUCKETS : b);
}

int cr_history_push(struct cr_history *h, const struct cr_postmortem *pm)
{
    struct bucket *b;
    int64_t minute;

    if (!h || !pm || (unsigned)pm->category >= _CR_DEATH_MAX)
        return -EINVAL;
    h->ring[cr_ring_push(&h->idx, h->capacity)] = *pm;
    h->total[pm->category]++;

    minute = minute_of(pm->end_ms);
    b = &h->hour[pm->category][bucket_index(minute)];
    if (b->minute == minute) {
        b->count++;
    } else if (b->minute < minute) {
        /* An older minute (or never used): this minute takes the bucket. A
         * record older than the bucket's minute is at least an hour old
         * relative to it and is only counted in the total. */
        b->minute = minute;
        b->count = 1;
    }
    return 0;
}

size_t cr_history_len(const struct cr_history *h)
{
    return h ? h->idx.len : 0;
}

size_t cr_history_capacity(const struct cr_history *h)
{
    return h ? h->capacity : 0;
}

const struct cr_postmortem *cr_history_get(const struct cr_history *h, size_t n)
{
    if (!h || n >= h->idx.len)
        return NULL;
    return &h->ring[cr_ring_newest(&h->idx, h->capacity, n)];
}

uint64_t cr_history_count_total(const struct cr_history *h, enum cr_death d)
{
    if (!h || (unsigned)d >= _CR_DEATH_MAX)
        return 0;
    return h->total[d];
}

uint64_t cr_history_count_last_hour(const struct cr_history *h, enum cr_death d, int64_t now_ms)
{
    int64_t now_minute = minute_of(now_ms);
    uint64_t sum = 0;

    if (!h || (unsigned)d >= _CR_DEATH_MAX)
        return 0;
    for (size_t i = 0; i < HOUR_BUCKETS; i++) {
        const struct bucket *b = &h->hour[d][i];
        if (b->minute != INT64_MIN && b->minute <= now_minute &&
            now_minute - b->minute < HOUR_BUCKETS)
            sum += b->count;
    }
    return sum;
}
