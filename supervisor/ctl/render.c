/* Human renderings of the control protocol's objects. */
#include "render.h"

#include "when.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const ctl_reset = "\033[0m";
#define RED "\033[31m"
#define GREEN "\033[32m"
#define YELLOW "\033[33m"
#define DIM "\033[2m"
#define BOLD "\033[1m"

struct ctl_style ctl_style_for(FILE *f)
{
    const char *nc = getenv("NO_COLOR");
    struct ctl_style st = {.color = isatty(fileno(f)) && !(nc && *nc)};
    return st;
}

double ctl_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

bool ctl_known(const cJSON *o, const char *k)
{
    return cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(o, k));
}

bool ctl_stale(const cJSON *o, const char *age_key)
{
    return ctl_known(o, age_key) && ctl_num(o, age_key) >= CTL_STALE_MS;
}

void ctl_fmt_known(const cJSON *o, const char *k, void (*fmt)(double, char *, size_t), char *buf,
                   size_t len)
{
    if (ctl_known(o, k))
        fmt(ctl_num(o, k), buf, len);
    else
        snprintf(buf, len, "-");
}

void ctl_fmt_ratio(double r, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f", r);
}

const char *ctl_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static const char *c(const struct ctl_style *st, const char *code)
{
    return st->color ? code : "";
}

static const char *rs(const struct ctl_style *st)
{
    return st->color ? ctl_reset : "";
}

const char *ctl_state_color(const struct ctl_style *st, const char *state)
{
    if (!st->color)
        return "";
    if (strcmp(state, "ready") == 0)
        return GREEN;
    if (strcmp(state, "failed") == 0 || strcmp(state, "exited") == 0)
        return RED;
    return YELLOW;
}

void ctl_fmt_bytes(double b, char *buf, size_t len)
{
    static const char units[] = "BKMGTP";
    int u = 0;
    while (b >= 1024 && u < 5) {
        b /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%.0fB", b);
    else
        snprintf(buf, len, b < 10 ? "%.1f%c" : "%.0f%c", b, units[u]);
}

void ctl_fmt_ms(double ms, char *buf, size_t len)
{
    unsigned long long s = (unsigned long long)(ms / 1000);
    if (ms < 1000)
        snprintf(buf, len, "%.0fms", ms);
    else if (s < 60)
        snprintf(buf, len, "%llus", s);
    else if (s < 3600)
        snprintf(buf, len, "%llum%02llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%lluh%02llum", s / 3600, s % 3600 / 60);
    else
        snprintf(buf, len, "%llud%02lluh", s / 86400, s % 86400 / 3600);
}

void ctl_fmt_us(double us, char *buf, size_t len)
{
    if (us < 1000)
        snprintf(buf, len, "%.0fus", us);
    else if (us < 1e6)
        snprintf(buf, len, us < 1e4 ? "%.1fms" : "%.0fms", us / 1e3);
    else
        snprintf(buf, len, "%.2fs", us / 1e6);
}

void ctl_bar(FILE *f, const struct ctl_style *st, double used, double limit, int width)
{
    double frac = limit > 0 ? used / limit : 0;
    int fill = (int)lround(fmin(frac, 1.0) * width);
    const char *col = frac >= 0.9 ? RED : frac >= 0.7 ? YELLOW : GREEN;
    fputc('[', f);
    fputs(c(st, col), f);
    for (int i = 0; i < width; i++)
        fputs(i < fill ? "#" : (st->color ? "\033[2m.\033[22m" : "."), f);
    fputs(rs(st), f);
    fputc(']', f);
}

void ctl_sparkline(FILE *f, const double *v, size_t n, double max)
{
    static const char *const ticks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    for (size_t i = 0; i < n; i++) {
        int t = max > 0 ? (int)(v[i] / max * 7.0 + 0.5) : 0;
        fputs(ticks[t < 0 ? 0 : t > 7 ? 7 : t], f);
    }
}

void ctl_print_supervisor(FILE *f, const struct ctl_style *st, const cJSON *s)
{
    char up[32];
    ctl_fmt_ms(ctl_num(s, "uptime_ms"), up, sizeof(up));
    const cJSON *l = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s, "listen"), 0);
    const cJSON *cg = cJSON_GetObjectItemCaseSensitive(s, "cgroup");
    fprintf(f, "%scorrald %s%s  pid %.0f  up %s  %s  %.0f/%.0f ready  listen %s (%s)  cgroups %s\n",
            c(st, BOLD), ctl_str(s, "version"), rs(st), ctl_num(s, "pid"), up,
            ctl_str(s, "state"), ctl_num(s, "workers_ready"), ctl_num(s, "workers_target"),
            ctl_str(l, "address"), ctl_str(l, "balance"), ctl_str(cg, "layout"));
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(s, "listen_queue");
    if (cJSON_IsObject(q)) {
        bool sat = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(q, "saturated"));
        fprintf(f, "%saccept queue: %.0f/%.0f waiting", c(st, sat ? RED : ""),
                ctl_num(q, "length"), ctl_num(q, "max"));
        if (ctl_num(q, "waited_ms") > 0)
            fprintf(f, ", for up to %.0f ms", ctl_num(q, "waited_ms"));
        if (sat)
            fputs(" - SATURATED: add workers", f);
        if (ctl_num(q, "saturations") > 0)
            fprintf(f, " (saturated %.0f time%s since start)", ctl_num(q, "saturations"),
                    ctl_num(q, "saturations") == 1 ? "" : "s");
        fprintf(f, "%s\n", rs(st));
    }
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(s, "spares");
    if (sp && ctl_num(sp, "target") > 0)
        fprintf(f, "spares: %.0f/%.0f frozen (%s), %.0f starting, %.0f promoted\n",
                ctl_num(sp, "frozen"), ctl_num(sp, "target"), ctl_str(sp, "freezer"),
                ctl_num(sp, "starting"), ctl_num(sp, "promotions"));
    const cJSON *rz = cJSON_GetObjectItemCaseSensitive(s, "readiness");
    if (rz && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(rz, "ready")))
        fprintf(f, "%s%s%s\n", c(st, YELLOW), ctl_str(rz, "reason"), rs(st));
    const cJSON *mb = cJSON_GetObjectItemCaseSensitive(s, "memory_budget");
    if (cJSON_IsObject(mb))
        fprintf(f, "%s%s%s\n", c(st, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(mb, "fits"))
                                       ? ""
                                       : RED),
                ctl_str(mb, "summary"), rs(st));
    fputs("deaths:", f);
    int any = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(s, "deaths"))
    {
        if (cJSON_IsNumber(d) && d->valuedouble > 0)
            fprintf(f, "%s %s%s %.0f%s", any++ ? "," : "", c(st, RED), d->string, d->valuedouble,
                    rs(st));
    }
    fputs(any ? "\n" : " none\n", f);
}

static void worker_row(FILE *f, const struct ctl_style *st, const cJSON *w)
{
    char up[32], rss[16], heap[16], hl[16], use[16], lim[16], p99[16], mx[16], elu[16];
    char state[24];
    const char *raw = ctl_str(w, "state");
    /* Ready by its --ready mode, not by READY=1: marked, see the legend. */
    bool unannounced = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "unannounced"));
    snprintf(state, sizeof(state), "%s%s", raw, unannounced ? "*" : "");
    double usage = ctl_num(w, "cgroup_usage_bytes"), limit = ctl_num(w, "cgroup_limit_bytes");
    ctl_fmt_ms(ctl_num(w, "uptime_ms"), up, sizeof(up));
    ctl_fmt_known(w, "rss_bytes", ctl_fmt_bytes, rss, sizeof(rss));
    if (ctl_stale(w, "rss_age_ms"))
        strncat(rss, "~", sizeof(rss) - strlen(rss) - 1);
    ctl_fmt_known(w, "heap_used_bytes", ctl_fmt_bytes, heap, sizeof(heap));
    ctl_fmt_known(w, "heap_limit_bytes", ctl_fmt_bytes, hl, sizeof(hl));
    ctl_fmt_known(w, "cgroup_usage_bytes", ctl_fmt_bytes, use, sizeof(use));
    if (ctl_stale(w, "cgroup_usage_age_ms"))
        strncat(use, "~", sizeof(use) - strlen(use) - 1);
    ctl_fmt_known(w, "loop_delay_p99_us", ctl_fmt_us, p99, sizeof(p99));
    ctl_fmt_known(w, "loop_delay_max_us", ctl_fmt_us, mx, sizeof(mx));
    ctl_fmt_known(w, "elu", ctl_fmt_ratio, elu, sizeof(elu));
    fprintf(f, "%3.0f  %s%-9s%s %7.0f %4.0f  %-7s %6s  %6s/%-6s ", ctl_num(w, "id"),
            ctl_state_color(st, raw), state, rs(st), ctl_num(w, "pid"),
            ctl_num(w, "generation"), up, rss, heap, hl);
    if (limit > 0) {
        ctl_fmt_bytes(limit, lim, sizeof(lim));
        ctl_bar(f, st, usage, limit, 10);
        char ul[40];
        snprintf(ul, sizeof(ul), "%s/%s", use, lim);
        fprintf(f, " %-13s", ul);
    } else {
        fprintf(f, "%-12s %-13s", "no limit", use);
    }
    fprintf(f, " %7s %7s %5s", p99, mx, elu);
    const cJSON *ld = cJSON_GetObjectItemCaseSensitive(w, "last_death");
    if (cJSON_IsObject(ld))
        fprintf(f, "  %s%s%s: %.60s", c(st, RED), ctl_str(ld, "category"), rs(st),
                ctl_str(ld, "reason"));
    else
        fputs("  -", f);
    fputc('\n', f);
}

void ctl_print_workers(FILE *f, const struct ctl_style *st, const cJSON *workers)
{
    fprintf(f, "%s ID  STATE         PID  GEN  UPTIME     RSS    HEAP/LIMIT     "
               "CGROUP MEMORY              LOOP p99     MAX   ELU  LAST DEATH%s\n",
            c(st, BOLD), rs(st));
    const cJSON *w;
    bool marked = false, stale = false;
    cJSON_ArrayForEach(w, workers)
    {
        worker_row(f, st, w);
        marked |= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(w, "unannounced"));
        stale |= ctl_stale(w, "rss_age_ms") || ctl_stale(w, "cgroup_usage_age_ms");
    }
    if (marked)
        fprintf(f, "%s* unannounced: ready by its --ready mode, not by READY=1; - = not reported%s\n",
                c(st, DIM), rs(st));
    if (stale)
        fprintf(f, "%s~ read %.0f ms or more before this answer (rss_age_ms, "
                   "cgroup_usage_age_ms); - = not known%s\n",
                c(st, DIM), CTL_STALE_MS, rs(st));
}

static void print_value(FILE *f, const cJSON *v, int indent)
{
    if (cJSON_IsObject(v)) {
        fputc('\n', f);
        const cJSON *m;
        cJSON_ArrayForEach(m, v)
        {
            fprintf(f, "%*s%-22s ", indent + 2, "", m->string);
            print_value(f, m, indent + 2);
        }
        return;
    }
    char *s = cJSON_IsString(v) ? NULL : cJSON_PrintUnformatted(v);
    fprintf(f, "%s\n", s ? s : v->valuestring);
    free(s);
}

void ctl_print_worker(FILE *f, const struct ctl_style *st, const cJSON *w)
{
    fprintf(f, "%sworker %.0f%s\n", c(st, BOLD), ctl_num(w, "id"), rs(st));
    const cJSON *m;
    cJSON_ArrayForEach(m, w)
    {
        fprintf(f, "  %-22s ", m->string);
        print_value(f, m, 2);
    }
}

static void fmt_clock(double wall_ms, char *buf, size_t len)
{
    time_t t = (time_t)(wall_ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%H:%M:%S", &tm);
}

void ctl_print_history(FILE *f, const struct ctl_style *st, const cJSON *history)
{
    fprintf(f, "%sTIME      WORKER      PID  GEN  UPTIME   CATEGORY            REASON%s\n",
            c(st, BOLD), rs(st));
    const cJSON *p;
    cJSON_ArrayForEach(p, history)
    {
        char when[16], up[32];
        fmt_clock(ctl_num(p, "end_ms"), when, sizeof(when));
        ctl_fmt_ms(ctl_num(p, "uptime_ms"), up, sizeof(up));
        fprintf(f, "%-8s  %6.0f  %7.0f %4.0f  %-7s  %s%-18s%s  %s\n", when,
                ctl_num(p, "worker_id"), ctl_num(p, "pid"), ctl_num(p, "generation"), up,
                c(st, RED), ctl_str(p, "category"), rs(st), ctl_str(p, "reason"));
    }
}

void ctl_print_history_ndjson(FILE *f, const cJSON *history)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, history)
    {
        char *s = cJSON_PrintUnformatted(p);
        if (s)
            fprintf(f, "%s\n", s);
        free(s);
    }
}

/* One CSV field: as it is, or quoted with its quotes doubled. */
static void csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A number field, or an empty one when o[k] is null or absent. */
static void csv_num(FILE *f, const cJSON *o, const char *k)
{
    fputc(',', f);
    if (ctl_known(o, k))
        fprintf(f, "%.0f", ctl_num(o, k));
}

void ctl_print_history_csv(FILE *f, const cJSON *history)
{
    fputs(CTL_HISTORY_CSV_HEADER "\r\n", f);
    const cJSON *p;
    cJSON_ArrayForEach(p, history)
    {
        char when[40];
        fputs(ctl_fmt_iso_utc((int64_t)ctl_num(p, "end_ms"), when, sizeof(when)), f);
        csv_num(f, p, "worker_id");
        csv_num(f, p, "pid");
        csv_num(f, p, "generation");
        fputc(',', f);
        csv_field(f, ctl_str(p, "category"));
        csv_num(f, p, "shell_status");
        csv_num(f, p, "uptime_ms");
        csv_num(f, p, "rss_bytes");
        csv_num(f, p, "cg_usage_bytes");
        csv_num(f, p, "heap_used_bytes");
        csv_num(f, p, "heap_limit_bytes");
        fputc(',', f);
        csv_field(f, ctl_str(p, "reason"));
        fputs("\r\n", f);
    }
}

void ctl_print_event(FILE *f, const struct ctl_style *st, const cJSON *e)
{
    char when[16];
    fmt_clock(ctl_num(e, "time_ms"), when, sizeof(when));
    const char *ev = ctl_str(e, "event");
    bool bad = strcmp(ev, "died") == 0 || strcmp(ev, "failed") == 0 ||
               strcmp(ev, "blocked") == 0 || strcmp(ev, "accept-queue-saturated") == 0;
    if (!cJSON_GetObjectItemCaseSensitive(e, "worker")) /* about corrald, not one worker */
        fprintf(f, "%s  %-30s %s%s%s", when, "corrald", c(st, bad ? RED : GREEN), ev, rs(st));
    else
        fprintf(f, "%s  worker %-3.0f pid %-7.0f gen %-3.0f %s%-10s%s", when,
                ctl_num(e, "worker"), ctl_num(e, "pid"), ctl_num(e, "generation"),
                c(st, bad ? RED : GREEN), ev, rs(st));
    if (*ctl_str(e, "category"))
        fprintf(f, " %s", ctl_str(e, "category"));
    if (*ctl_str(e, "reason"))
        fprintf(f, " — %s", ctl_str(e, "reason"));
    /* Events other than died carry their detail under varying keys. */
    const cJSON *m;
    cJSON_ArrayForEach(m, e)
    {
        static const char *const known[] = {"event", "time_ms", "worker",  "pid",
                                            "generation", "category", "reason", "postmortem"};
        bool skip = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            skip |= strcmp(m->string, known[i]) == 0;
        if (!skip && cJSON_IsString(m) && *m->valuestring)
            fprintf(f, " %s=%s", m->string, m->valuestring);
        else if (!skip && cJSON_IsNumber(m))
            fprintf(f, " %s=%g", m->string, m->valuedouble);
    }
    fputc('\n', f);
}
