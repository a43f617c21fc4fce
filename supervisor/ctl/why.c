/* `corralctl why`: see why.h. */
#include "why.h"

#include <ctype.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "when.h"
#include "why_advice.h"

#define LABEL     14 /* "  evidence    ": the indent of a section's values */
#define SERIES_MS 60000.0

#define RED    "\033[31m"
#define YELLOW "\033[33m"
#define BOLD   "\033[1m"
#define DIM    "\033[2m"

/* ---- small things ---- */

static const char *c(const struct ctl_why_opts *o, const char *code)
{
    return o->style.color ? code : "";
}

static const char *rs(const struct ctl_why_opts *o)
{
    return o->style.color ? ctl_reset : "";
}

static const cJSON *get(const cJSON *o, const char *k)
{
    return cJSON_GetObjectItemCaseSensitive(o, k);
}

/* Columns of s[0..n): its UTF-8 characters (a continuation byte is none). */
static int cols(const char *s, size_t n)
{
    int w = 0;
    for (size_t i = 0; i < n; i++)
        w += ((unsigned char)s[i] & 0xc0) != 0x80;
    return w;
}

/* The bytes of s that fill at most max columns, cut at a character. */
static size_t fit(const char *s, size_t n, int max)
{
    int w = 0;
    size_t i = 0;
    for (; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80 && ++w > max)
            break;
    }
    return i;
}

/* Text a worker or anyone else wrote: a control byte (an escape sequence's
 * start, a CR) is shown as '?', a tab as a blank. */
static void put_clean(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        fputc(ch == '\t' ? ' ' : ch < 0x20 || ch == 0x7f ? '?' : ch, f);
    }
}

/* A line of untrusted text cut to max columns, with an ellipsis when cut. */
static void put_line(FILE *f, const struct ctl_why_opts *o, const char *s, size_t n, int max)
{
    if (cols(s, n) <= max) {
        put_clean(f, s, n);
        return;
    }
    const char *dots = o->unicode ? "…" : "...";
    int dw = o->unicode ? 1 : 3;
    put_clean(f, s, fit(s, n, max - dw));
    fputs(dots, f);
}

/* text wrapped at the width: the first line goes on after whatever is
 * already printed at column `at`, the others start at column `indent`.
 * A word longer than a line is cut. */
/* The width of " UNIT" when the word p[0..n) is a number and a unit of one
 * or two letters follows it after one space, else 0. */
static int unit_after(const char *p, size_t n)
{
    if (!n || !isdigit((unsigned char)p[n - 1]) || p[n] != ' ')
        return 0;
    const char *u = p + n + 1;
    size_t k = 0;
    while (k < 3 && isalpha((unsigned char)u[k]))
        k++;
    if (k < 1 || k > 2 || !strchr(" \n;,)", u[k])) /* strchr finds the '\0' too */
        return 0;
    return (int)k + 1;
}

static void wrap(FILE *f, const struct ctl_why_opts *o, const char *text, int at, int indent)
{
    int col = at, room = o->width - 1;
    bool first = true;
    const char *p = text;
    while (*p) {
        while (*p == ' ' || *p == '\n')
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, " \n");
        int w = cols(p, n);
        /* A number keeps its unit on its line ("15.8 s", "200 ms"). */
        int glued = w + unit_after(p, n);
        if (!first && col + 1 + glued > room) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', f);
            col++;
        }
        while (col + w > room) { /* a word wider than a line */
            size_t k = fit(p, n, room - col);
            put_clean(f, p, k);
            p += k, n -= k;
            w = cols(p, n);
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        }
        put_clean(f, p, n);
        col += w;
        p += n;
        first = false;
    }
    fputc('\n', f);
}

static void label(FILE *f, const char *l)
{
    fprintf(f, "  %-*s", LABEL - 2, l);
}

/* A labelled value, wrapped under the value column. */
static void field(FILE *f, const struct ctl_why_opts *o, const char *l, const char *text)
{
    label(f, l);
    wrap(f, o, text, LABEL, LABEL);
}

static void heading(FILE *f, const struct ctl_why_opts *o, const char *h)
{
    fprintf(f, "\n%s%s%s\n", c(o, BOLD), h, rs(o));
}

static void bytes(double v, char *buf, size_t len)
{
    ctl_fmt_bytes(v, buf, len);
}

/* "12M" or "-" for o[k]: a figure corrald did not know is never a 0. */
static const char *fig(const cJSON *o, const char *k, char *buf, size_t len)
{
    ctl_fmt_known(o, k, bytes, buf, len);
    return buf;
}

/* A limit: null or 0 means none. */
static bool has_limit(const cJSON *o, const char *k)
{
    return ctl_known(o, k) && ctl_num(o, k) > 0;
}

/* ---- the memory series ---- */

struct series {
    const char *label, *key;
    int cells;
    double v[60]; /* per cell; NAN: no sample */
    double lo, hi;
    struct ctl_why_ends ends; /* the first and the last sample (why_advice.h) */
};

/* Folds the points of key into cells of 60 s / cells each (the peak of a
 * cell), and notes the least and the most, the first and the last. */
static void fold(struct series *s, const cJSON *points)
{
    for (int i = 0; i < s->cells; i++)
        s->v[i] = NAN;
    s->ends.known = false;
    const cJSON *p;
    cJSON_ArrayForEach(p, points)
    {
        if (!ctl_known(p, s->key))
            continue;
        double t = ctl_num(p, "t_ms"), v = ctl_num(p, s->key);
        /* Clamped as a double: a saved record (--file) may hold any number,
         * and a double past INT_MAX has no int. */
        double c = floor((t + SERIES_MS) / (SERIES_MS / s->cells));
        int cell = !(c >= 0) ? 0 : c >= s->cells ? s->cells - 1 : (int)c;
        if (isnan(s->v[cell]) || v > s->v[cell])
            s->v[cell] = v;
        if (!s->ends.known) {
            s->lo = s->hi = s->ends.first = v;
            s->ends.first_t = t;
            s->ends.known = true;
        }
        s->lo = fmin(s->lo, v);
        s->hi = fmax(s->hi, v);
        s->ends.last = v;
        s->ends.last_t = t;
    }
}

static void spark(FILE *f, const struct ctl_why_opts *o, const struct series *s)
{
    static const char *const uni[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    static const char ascii[] = "_.-:=+*#";
    for (int i = 0; i < s->cells; i++) {
        if (isnan(s->v[i])) {
            fputc(' ', f);
            continue;
        }
        int t = s->hi > 0 ? (int)(s->v[i] / s->hi * 7.0 + 0.5) : 0;
        t = t < 0 ? 0 : t > 7 ? 7 : t;
        if (o->unicode)
            fputs(uni[t], f);
        else
            fputc(ascii[t], f);
    }
}

/* Cells that divide the minute evenly and fit: 60, 30, 20, 15 or 12. */
static int cells_for(int width)
{
    static const int choice[] = {60, 30, 20, 15, 12};
    int room = width - LABEL - 2 - 24; /* the figures after it: "2.1M … 61M, limit 64M" */
    for (size_t i = 0; i < sizeof(choice) / sizeof(choice[0]); i++)
        if (choice[i] <= room)
            return choice[i];
    return 12;
}

static void print_memory(FILE *f, const struct ctl_why_opts *o, const cJSON *pm,
                         struct ctl_why_ends *out)
{
    const cJSON *pts = get(pm, "memory_series");
    int cells = cells_for(o->width);
    struct series s[4] = {
        {.label = "RSS", .key = "rss_bytes", .cells = cells},
        {.label = "heap", .key = "heap_used_bytes", .cells = cells},
        {.label = "external", .key = "external_bytes", .cells = cells},
        {.label = "group", .key = "cg_usage_bytes", .cells = cells},
    };
    if (!cJSON_IsArray(pts)) {
        heading(f, o, "Memory, the last minute");
        fputs("  not recorded\n", f);
        for (int i = 0; i < 4; i++)
            out[i] = (struct ctl_why_ends){.known = false};
        return;
    }
    char h[96];
    snprintf(h, sizeof(h), "Memory, the last minute (a cell: the peak of %d s)", 60 / cells);
    heading(f, o, h);
    if (cJSON_GetArraySize(pts) == 0) {
        fputs("  no sample: it died before corrald's first reading (or was a spare)\n", f);
        for (int i = 0; i < 4; i++)
            out[i] = (struct ctl_why_ends){.known = false};
        return;
    }
    for (int i = 0; i < 4; i++) {
        fold(&s[i], pts);
        out[i] = s[i].ends;
        label(f, s[i].label);
        if (!s[i].ends.known) {
            fputs(i == 3 ? "no group of its own\n" : "not reported\n", f);
            continue;
        }
        spark(f, o, &s[i]);
        char lo[16], hi[16], lim[16];
        bytes(s[i].lo, lo, sizeof(lo));
        bytes(s[i].hi, hi, sizeof(hi));
        fprintf(f, "  %s%s%s", lo, o->unicode ? " … " : " .. ", hi);
        const char *lk = i == 1 ? "heap_limit_bytes" : i == 3 ? "cg_limit_bytes" : NULL;
        if (lk && has_limit(pm, lk))
            fprintf(f, ", limit %s", fig(pm, lk, lim, sizeof(lim)));
        fputc('\n', f);
    }
    fprintf(f, "%*s%-*s%s\n", LABEL, "", cells - 5, "-60s", "death");
}

/* ---- the sections ---- */

static void print_head(FILE *f, const struct ctl_why_opts *o, const cJSON *pm)
{
    char up[32], when[40];
    ctl_fmt_ms(ctl_num(pm, "uptime_ms"), up, sizeof(up));
    ctl_fmt_local((int64_t)ctl_num(pm, "end_ms"), when, sizeof(when));
    fprintf(f, "%sworker %.0f died: %s%s%s%s\n", c(o, BOLD), ctl_num(pm, "worker_id"), c(o, RED),
            ctl_str(pm, "category"), rs(o),
            cJSON_IsTrue(get(pm, "inferred")) ? " (inferred: indirect evidence only)" : "");
    fprintf(f, "  pid %.0f, generation %.0f, up %s, ended %s\n", ctl_num(pm, "pid"),
            ctl_num(pm, "generation"), up, when);
    label(f, "why");
    wrap(f, o, ctl_str(pm, "reason"), LABEL, LABEL);
}

static void print_evidence(FILE *f, const struct ctl_why_opts *o, const cJSON *pm)
{
    char buf[512], a[16], b[16], d[16];
    heading(f, o, "Evidence");
    const char *sig = ctl_str(pm, "signal_name");
    if (ctl_known(pm, "signal"))
        snprintf(buf, sizeof(buf), "killed by signal %.0f (SIG%s)%s, shell status %.0f%s",
                 ctl_num(pm, "signal"), sig,
                 cJSON_IsTrue(get(pm, "via_shell")) ? " through a shell" : "",
                 ctl_num(pm, "shell_status"),
                 cJSON_IsTrue(get(pm, "core_dumped")) ? ", core dumped" : ", no core dump");
    else
        snprintf(buf, sizeof(buf), "exited %.0f", ctl_num(pm, "exit_code"));
    if (cJSON_IsTrue(get(pm, "planned")))
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "; planned by corrald");
    field(f, o, "status", buf);

    const cJSON *own = get(pm, "oom_own"), *anc = get(pm, "oom_ancestor");
    int k = snprintf(buf, sizeof(buf),
                     "own group %.0f (limit hit %.0f, oom %.0f), enclosing %.0f (limit hit %.0f)",
                     ctl_num(own, "oom_kill"), ctl_num(own, "max"), ctl_num(own, "oom"),
                     ctl_num(anc, "oom_kill"), ctl_num(anc, "max"));
    /* The host's count is read only for a kill its own group counted. */
    if (ctl_num(own, "oom_kill") > 0 && k > 0 && (size_t)k < sizeof(buf))
        snprintf(buf + k, sizeof(buf) - (size_t)k, ", host-wide %.0f",
                 ctl_num(pm, "oom_system_kills"));
    field(f, o, "OOM kills", buf);

    if (has_limit(pm, "cg_limit_bytes") || ctl_num(pm, "cg_usage_bytes") > 0) {
        bytes(ctl_num(pm, "cg_usage_bytes"), a, sizeof(a));
        bytes(ctl_num(pm, "cg_peak_bytes"), b, sizeof(b));
        snprintf(buf, sizeof(buf), "usage %s, peak %s, limit %s", a, b,
                 has_limit(pm, "cg_limit_bytes") ? fig(pm, "cg_limit_bytes", d, sizeof(d))
                                                 : "none");
    } else {
        snprintf(buf, sizeof(buf), "none of its own");
    }
    field(f, o, "group", buf);

    bytes(ctl_num(pm, "rss_bytes"), a, sizeof(a));
    int n = snprintf(buf, sizeof(buf), "RSS %s", a);
    if (ctl_known(pm, "heap_used_bytes"))
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "; heap %s used of %s",
                      fig(pm, "heap_used_bytes", b, sizeof(b)),
                      fig(pm, "heap_total_bytes", d, sizeof(d)));
    else
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "; heap not reported");
    if (has_limit(pm, "heap_limit_bytes"))
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, ", limit %s",
                      fig(pm, "heap_limit_bytes", b, sizeof(b)));
    if (ctl_known(pm, "external_bytes"))
        snprintf(buf + n, sizeof(buf) - (size_t)n, "; external %s",
                 fig(pm, "external_bytes", b, sizeof(b)));
    field(f, o, "memory", buf);

    /* The heap's spaces in the last report, the fullest first (at most
     * five: a heap-limit abort is about the one that filled up). */
    const cJSON *spaces = get(pm, "heap_spaces");
    if (cJSON_IsObject(spaces) && spaces->child) {
        const cJSON *shown[5] = {0};
        const cJSON *s;
        cJSON_ArrayForEach(s, spaces)
        {
            const cJSON *c =
                ctl_num(s, "used_bytes") > 0 ? s : NULL; /* an empty one says nothing */
            for (size_t i = 0; i < 5 && c; i++)
                if (!shown[i] || ctl_num(c, "used_bytes") > ctl_num(shown[i], "used_bytes")) {
                    const cJSON *t = shown[i];
                    shown[i] = c;
                    c = t;
                }
        }
        n = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < 5 && shown[i] && n < (int)sizeof(buf); i++) {
            bytes(ctl_num(shown[i], "used_bytes"), a, sizeof(a));
            bytes(ctl_num(shown[i], "size_bytes"), b, sizeof(b));
            n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%s %s of %s", i ? ", " : "",
                          shown[i]->string, a, b);
        }
        if (shown[0])
            field(f, o, "heap spaces", buf);
    }

    if (ctl_known(pm, "loop_delay_max_us")) {
        ctl_fmt_us(ctl_num(pm, "loop_delay_max_us"), a, sizeof(a));
        snprintf(buf, sizeof(buf), "max %s in its last report", a);
        field(f, o, "loop delay", buf);
    }

    const char *v = ctl_str(pm, "memory_verdict");
    if (*v) {
        if (ctl_known(pm, "memory_verdict_since_ms")) {
            char ago[32];
            ctl_fmt_ms(-ctl_num(pm, "memory_verdict_since_ms"), ago, sizeof(ago));
            snprintf(buf, sizeof(buf), "%s since %s before the death", v, ago);
        } else {
            snprintf(buf, sizeof(buf), "%s", v);
        }
        field(f, o, "trend", buf);
        /* The numbers behind a verdict that names a cause or a limit. */
        const char *detail = ctl_str(pm, "memory_verdict_detail");
        if (*detail && strcmp(v, "stable") != 0 && strcmp(v, "unknown") != 0) {
            fprintf(f, "%*s", LABEL, "");
            wrap(f, o, detail, LABEL, LABEL);
        }
    }
}

/* `request`, `stack` and `reports`: shown when the record has them. */
static void print_context(FILE *f, const struct ctl_why_opts *o, const cJSON *pm)
{
    char buf[512], age[32];
    heading(f, o, "At the death");
    const cJSON *req = get(pm, "request");
    if (cJSON_IsObject(req) && !cJSON_IsString(get(req, "method"))) {
        /* Known, and none was being served. */
        snprintf(buf, sizeof(buf), "none being served (%.0f in flight)", ctl_num(req, "inflight"));
        field(f, o, "request", buf);
    } else if (cJSON_IsObject(req)) {
        int n = snprintf(buf, sizeof(buf), "%s %s", ctl_str(req, "method"), ctl_str(req, "path"));
        if (ctl_known(req, "age_ms")) {
            /* The reason's own figure has a decimal: so does this one. */
            double ms = ctl_num(req, "age_ms");
            if (ms < 60000)
                ctl_fmt_us(ms * 1000, age, sizeof(age));
            else
                ctl_fmt_ms(ms, age, sizeof(age));
            n += snprintf(buf + n, sizeof(buf) - (size_t)n, ", running for %s", age);
        }
        if (ctl_known(req, "inflight"))
            snprintf(buf + n, sizeof(buf) - (size_t)n, " (%.0f in flight)",
                     ctl_num(req, "inflight"));
        field(f, o, "request", buf);
    } else {
        field(f, o, "request", "not recorded");
    }

    const cJSON *st = get(pm, "stack");
    const char *text = ctl_str(st, "text");
    if (cJSON_IsObject(st) && *text) {
        snprintf(buf, sizeof(buf), "from %s", *ctl_str(st, "source") ? ctl_str(st, "source") : "?");
        field(f, o, "stack", buf);
        const char *p = text;
        int shown = 0, total = 0;
        for (const char *q = text; *q; q++)
            total += *q == '\n';
        total += text[strlen(text) - 1] != '\n';
        while (*p && shown < CTL_WHY_STACK_LINES) {
            size_t n = strcspn(p, "\n");
            fprintf(f, "    %s ", o->unicode ? "│" : "|");
            put_line(f, o, p, n, o->width - 7);
            fputc('\n', f);
            shown++;
            p += n + (p[n] == '\n');
        }
        if (total > shown)
            fprintf(f, "    %s %d more lines\n", o->unicode ? "…" : "...", total - shown);
    } else if (cJSON_IsObject(st) && *ctl_str(st, "missing")) {
        snprintf(buf, sizeof(buf), "not recorded: %s", ctl_str(st, "missing"));
        field(f, o, "stack", buf);
    } else {
        field(f, o, "stack", "not recorded");
    }

    const cJSON *rep = cJSON_IsObject(get(pm, "reports")) ? get(pm, "reports") : NULL;
    bool any = false;
    const cJSON *r;
    cJSON_ArrayForEach(r, rep)
    {
        if (!cJSON_IsString(r) || !*r->valuestring)
            continue;
        char name[64];
        snprintf(name, sizeof(name), "%s", r->string);
        for (char *u = name; *u; u++)
            *u = *u == '_' ? ' ' : *u;
        /* A path is often wider than the value column: on a line of its own. */
        if (any)
            fprintf(f, "%*s%s:\n", LABEL, "", name);
        else
            label(f, "reports"), fprintf(f, "%s:\n", name);
        fputs("    ", f);
        wrap(f, o, r->valuestring, 4, 4);
        any = true;
    }
    if (!any)
        field(f, o, "reports", rep ? "none written" : "not recorded");
}

static void print_stderr(FILE *f, const struct ctl_why_opts *o, const cJSON *pm)
{
    const char *t = ctl_str(pm, "stderr_tail");
    /* The last CTL_WHY_STDERR_LINES lines that are not blank, in order. */
    const char *start[CTL_WHY_STDERR_LINES];
    size_t len[CTL_WHY_STDERR_LINES];
    int n = 0;
    size_t end = strlen(t);
    while (end > 0 && n < CTL_WHY_STDERR_LINES) {
        size_t b = end;
        while (b > 0 && t[b - 1] != '\n')
            b--;
        size_t e = end;
        while (e > b && (t[e - 1] == '\r' || t[e - 1] == ' '))
            e--;
        if (e > b) {
            start[n] = t + b;
            len[n] = e - b;
            n++;
        }
        end = b ? b - 1 : 0;
    }
    heading(f, o, "The last lines of its output");
    if (!n) {
        fputs("  none\n", f);
        return;
    }
    for (int i = n - 1; i >= 0; i--) {
        fprintf(f, "  %s ", o->unicode ? "│" : "|");
        put_line(f, o, start[i], len[i], o->width - 5);
        fputc('\n', f);
    }
}

/* ---- what to do next ---- */

static void print_advice(FILE *f, const struct ctl_why_opts *o, const struct ctl_why_facts *x)
{
    char l1[CTL_WHY_ADVICE_MAX], l2[CTL_WHY_ADVICE_MAX];
    ctl_why_advice(x, l1, l2);
    heading(f, o, "What to do next");
    const char *bullet = o->unicode ? "  • " : "  * ";
    fputs(bullet, f);
    wrap(f, o, l1, 4, 4);
    if (l2[0]) {
        fputs(bullet, f);
        wrap(f, o, l2, 4, 4);
    }
}

void ctl_print_why(FILE *f, const struct ctl_why_opts *o, const cJSON *pm)
{
    struct ctl_why_facts x = {.cat = ctl_str(pm, "category"), .verdict_ago_ms = -1};
    print_head(f, o, pm);
    print_evidence(f, o, pm);
    print_memory(f, o, pm, x.mem);
    print_context(f, o, pm);
    print_stderr(f, o, pm);

    x.planned = cJSON_IsTrue(get(pm, "planned"));
    x.core = cJSON_IsTrue(get(pm, "core_dumped"));
    x.request = cJSON_IsString(get(get(pm, "request"), "method"));
    x.stack = cJSON_IsObject(get(pm, "stack")) && *ctl_str(get(pm, "stack"), "text");
    x.snapshot = *ctl_str(get(pm, "reports"), "heap_snapshot") != '\0';
    if (has_limit(pm, "cg_limit_bytes"))
        fig(pm, "cg_limit_bytes", x.limit, sizeof(x.limit));
    else
        snprintf(x.limit, sizeof(x.limit), "not set");
    if (has_limit(pm, "heap_limit_bytes"))
        fig(pm, "heap_limit_bytes", x.heap_limit, sizeof(x.heap_limit));
    else
        snprintf(x.heap_limit, sizeof(x.heap_limit), "unknown");
    x.verdict = *ctl_str(pm, "memory_verdict") ? ctl_str(pm, "memory_verdict") : NULL;
    if (ctl_known(pm, "memory_verdict_since_ms"))
        x.verdict_ago_ms = -ctl_num(pm, "memory_verdict_since_ms");
    print_advice(f, o, &x);
}

/* ---- --file ---- */

/* The newest record a document holds that matches (see ctl_why_pick):
 * key is "worker_id" or "pid", match 0 takes any. */
static void visit(const cJSON *doc, const char *key, long match, const cJSON **best)
{
    if (cJSON_IsArray(doc)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, doc) visit(e, key, match, best);
        return;
    }
    if (!cJSON_IsObject(doc))
        return;
    if (cJSON_IsArray(get(doc, "history"))) {
        visit(get(doc, "history"), key, match, best);
        return;
    }
    if (cJSON_IsObject(get(doc, "postmortem"))) {
        visit(get(doc, "postmortem"), key, match, best);
        return;
    }
    if (!cJSON_IsString(get(doc, "category")) || !ctl_known(doc, "pid"))
        return;
    if (match && ctl_num(doc, key) != (double)match)
        return;
    if (!*best || ctl_num(doc, "end_ms") > ctl_num(*best, "end_ms"))
        *best = doc;
}

cJSON *ctl_why_pick(const char *text, size_t len, long match, char *err, size_t errlen)
{
    /* The whole text as one JSON value, else one value per line. */
    cJSON *docs = cJSON_CreateArray();
    const char *end = NULL;
    cJSON *whole = cJSON_ParseWithLengthOpts(text, len, &end, false);
    /* cJSON stops after the first value: NDJSON's first line parses too. */
    if (whole && end && strspn(end, " \t\r\n") != (size_t)(text + len - end)) {
        cJSON_Delete(whole);
        whole = NULL;
    }
    if (whole) {
        cJSON_AddItemToArray(docs, whole);
    } else {
        size_t line = 1;
        for (size_t at = 0; at < len; line++) {
            const char *nl = memchr(text + at, '\n', len - at);
            size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
            if (strspn(text + at, " \t\r") < n) {
                cJSON *d = cJSON_ParseWithLength(text + at, n);
                if (!d) {
                    snprintf(err, errlen, "line %zu is not JSON", line);
                    cJSON_Delete(docs);
                    return NULL;
                }
                cJSON_AddItemToArray(docs, d);
            }
            at += n + 1;
        }
    }
    const cJSON *best = NULL, *any = NULL;
    /* A worker id first, a pid if no worker matches: as corrald is asked. */
    visit(docs, "worker_id", match, &best);
    if (!best && match)
        visit(docs, "pid", match, &best);
    visit(docs, "pid", 0, &any);
    cJSON *ret = best ? cJSON_Duplicate(best, true) : NULL;
    if (!ret && !any)
        snprintf(err, errlen, "no post-mortem in it");
    else if (!ret)
        snprintf(err, errlen, "no death of worker or pid %ld in it", match);
    cJSON_Delete(docs);
    return ret;
}

bool ctl_locale_utf8(void)
{
    setlocale(LC_CTYPE, "");
    const char *cs = nl_langinfo(CODESET);
    return cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

int ctl_width_for(FILE *f)
{
    struct winsize ws;
    int w = 0;
    if (isatty(fileno(f)) && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        w = ws.ws_col;
    const char *env = getenv("COLUMNS");
    if (!w && env && *env)
        w = atoi(env);
    if (w <= 0)
        w = 80;
    return w < CTL_WHY_MIN_WIDTH ? CTL_WHY_MIN_WIDTH : w;
}
