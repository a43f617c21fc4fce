/* The termination summary: see termsum.h. */
#include "termsum.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "history.h"

#define LINE_MAX_BYTES 320

struct out {
    char *buf;
    size_t cap; /* bytes usable, the NUL included */
    size_t len;
};

/* Appends a whole line or nothing: false when it does not fit. */
static bool line(struct out *o, const char *text)
{
    size_t n = strlen(text);
    if (o->len + n + 2 > o->cap) /* the text, '\n' and the NUL */
        return false;
    memcpy(o->buf + o->len, text, n);
    o->len += n;
    o->buf[o->len++] = '\n';
    o->buf[o->len] = '\0';
    return true;
}

/* snprintf into a line buffer, cut with "..." when longer. */
static void fmt(char *l, size_t size, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *l, size_t size, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(l, size, f, ap);
    va_end(ap);
    if (n >= (int)size)
        memcpy(l + size - 4, "...", 4);
    /* One line: a reason never holds a newline, but the summary must not
     * break wherever one came from. */
    for (char *p = l; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static void stamp(int64_t ms, char *buf, size_t size)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&s, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, size, "?");
}

static void uptime(uint64_t ms, char *buf, size_t size)
{
    if (ms < 60000)
        snprintf(buf, size, "%llu.%llu s", (unsigned long long)(ms / 1000),
                 (unsigned long long)(ms % 1000 / 100));
    else if (ms < 3600000)
        snprintf(buf, size, "%llu min", (unsigned long long)(ms / 60000));
    else
        snprintf(buf, size, "%llu h", (unsigned long long)(ms / 3600000));
}

int cr_termsum_render(const struct cr_termsum *t, char *buf, size_t size)
{
    if (!t || !buf || size < 256)
        return -EINVAL;
    struct out o = {.buf = buf, .cap = size < CR_TERMSUM_MAX ? size : CR_TERMSUM_MAX};
    char l[LINE_MAX_BYTES + 1], when[32], up[32];
    buf[0] = '\0';

    stamp(t->now_ms, when, sizeof when);
    uptime(t->now_ms > t->started_ms ? (uint64_t)(t->now_ms - t->started_ms) : 0, up, sizeof up);
    const char *why = t->why && *t->why ? t->why : NULL;
    switch (t->phase) {
    case CR_TERMSUM_EXITED:
        fmt(l, sizeof l, "corrald %s (pid %d) exited %d at %s after %s: %s", t->version, t->pid,
            t->exit_code, when, up, why ? why : "no reason recorded");
        break;
    case CR_TERMSUM_STOPPING:
        fmt(l, sizeof l, "corrald %s (pid %d) stopping at %s after %s (%s); it was killed if no "
            "exit line replaced this one", t->version, t->pid, when, up, why ? why : "asked to");
        break;
    default:
        fmt(l, sizeof l,
            "corrald %s (pid %d) running at %s, up %s, %u of %u worker(s) ready; it was killed "
            "if no exit line replaced this one",
            t->version, t->pid, when, up, t->ready, t->target);
        break;
    }
    line(&o, l);

    size_t ndeaths = 0;
    unsigned total = 0;
    char counts[LINE_MAX_BYTES + 1] = "";
    size_t cl = 0;
    for (int i = 0; t->by_category && i < _CR_DEATH_MAX; i++) {
        if (!t->by_category[i])
            continue;
        total += t->by_category[i];
        int n = snprintf(counts + cl, sizeof counts - cl, "%s%s %u", cl ? ", " : "",
                         cr_death_to_string((enum cr_death)i), t->by_category[i]);
        if (n > 0 && (size_t)n < sizeof counts - cl)
            cl += (size_t)n;
    }
    if (t->history)
        ndeaths = cr_history_len(t->history);
    if (!total) {
        line(&o, "worker deaths: none");
        return (int)o.len;
    }
    fmt(l, sizeof l, "worker deaths: %u (%s); newest first, those corrald asked for last:",
        total, counts);
    line(&o, l);

    /* Room for the closing count line is kept back while deaths are listed. */
    const size_t tail_room = 64;
    size_t shown = 0;
    bool full = false;
    /* The deaths corrald did not ask for first: a stop's drained workers
     * must not push the OOM kill that explains the pod out of the message. */
    for (size_t k = 0; k < 2 * ndeaths && !full; k++) {
        const struct cr_postmortem *pm = cr_history_get(t->history, k % ndeaths);
        if (pm->planned != (k >= ndeaths))
            continue;
        char status[24];
        if (pm->exit_code >= 0 && !pm->signal)
            snprintf(status, sizeof status, "%d", pm->shell_status);
        else
            snprintf(status, sizeof status, "%d, signal %d%s", pm->shell_status, pm->signal,
                     pm->core_dumped ? ", core" : "");
        stamp(pm->end_ms, when, sizeof when);
        fmt(l, sizeof l, "%s worker %u pid %d gen %llu %s (%s): %s", when, pm->worker_id, pm->pid,
            (unsigned long long)pm->generation, cr_death_to_string(pm->category), status,
            pm->reason);
        if (o.len + strlen(l) + 2 + tail_room > o.cap) {
            full = true;
            break;
        }
        line(&o, l);
        shown++;
    }
    if (shown < total) {
        fmt(l, sizeof l, "... and %zu earlier death(s) not shown (corralctl history has them)",
            (size_t)total - shown);
        line(&o, l);
    }
    return (int)o.len;
}
