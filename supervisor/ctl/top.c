/* The live view: polls `status` once per interval, keeps a short
 * per-worker history client-side (corrald keeps none for us), and redraws
 * the whole screen in one write. */
#include "top.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define SPARK 40      /* samples kept per worker: 40 s at the default interval */
#define MAX_SLOTS 256 /* workers tracked; more are shown without history */

struct slot {
    int id;
    size_t n;
    double rss[SPARK];
    double delay[SPARK];
};

static struct termios saved;
static bool raw_on;
static volatile sig_atomic_t quit_sig;

static void on_signal(int sig)
{
    quit_sig = sig;
}

static void term_restore(void)
{
    if (raw_on) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        raw_on = false;
    }
    /* Back from the alternate screen, cursor shown. */
    fputs("\033[?25h\033[?1049l", stdout);
    fflush(stdout);
}

static void term_setup(void)
{
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t) == 0)
            raw_on = true;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a signal must break poll() so the loop can leave. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    atexit(term_restore);
    fputs("\033[?1049h\033[?25l", stdout);
}

static struct slot *slot_for(struct slot *slots, size_t *nslots, int id)
{
    for (size_t i = 0; i < *nslots; i++)
        if (slots[i].id == id)
            return &slots[i];
    if (*nslots == MAX_SLOTS)
        return NULL;
    struct slot *s = &slots[(*nslots)++];
    memset(s, 0, sizeof(*s));
    s->id = id;
    return s;
}

static void push(double *ring, size_t n, double v)
{
    if (n == SPARK)
        memmove(ring, ring + 1, (SPARK - 1) * sizeof(double));
    ring[n == SPARK ? SPARK - 1 : n] = v;
}

static double max_of(const double *v, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static void draw_worker(FILE *f, const struct ctl_style *st, const cJSON *w, struct slot *s)
{
    char rss[16], lim[16], p99[16], mx[16], top[16], elu[16], req[24];
    const char *state = ctl_str(w, "state");
    double usage = ctl_num(w, "cgroup_usage_bytes"), limit = ctl_num(w, "cgroup_limit_bytes");
    ctl_fmt_known(w, "rss_bytes", ctl_fmt_bytes, rss, sizeof(rss));
    ctl_fmt_known(w, "loop_delay_p99_us", ctl_fmt_us, p99, sizeof(p99));
    ctl_fmt_known(w, "loop_delay_max_us", ctl_fmt_us, mx, sizeof(mx));
    ctl_fmt_known(w, "elu", ctl_fmt_ratio, elu, sizeof(elu));
    if (ctl_known(w, "requests"))
        snprintf(req, sizeof(req), "%.0f", ctl_num(w, "requests"));
    else
        snprintf(req, sizeof(req), "-");
    fprintf(f, "%3.0f %s%-9s%s %7.0f  rss %6s ", ctl_num(w, "id"), ctl_state_color(st, state),
            state, st->color ? ctl_reset : "", ctl_num(w, "pid"), rss);
    if (limit > 0 && !ctl_known(w, "cgroup_usage_bytes")) {
        ctl_fmt_bytes(limit, lim, sizeof(lim));
        fprintf(f, "%-18s of %s", "usage not read yet", lim); /* an empty bar would say 0 */
    } else if (limit > 0) {
        ctl_fmt_bytes(limit, lim, sizeof(lim));
        ctl_bar(f, st, usage, limit, 16);
        fprintf(f, " of %s", lim);
    } else {
        fputs("(no cgroup limit)", f);
    }
    fprintf(f, "  loop p99 %s max %s  elu %s  req %s\r\n", p99, mx, elu, req);
    if (!s)
        return;
    double m = max_of(s->rss, s->n);
    ctl_fmt_bytes(m, top, sizeof(top));
    fputs("      mem  ", f);
    ctl_sparkline(f, s->rss, s->n, limit > 0 ? limit : m);
    fprintf(f, "%*s peak %s\r\n", (int)(SPARK - s->n), "", top);
    m = max_of(s->delay, s->n);
    ctl_fmt_us(m, top, sizeof(top));
    fputs("      loop ", f);
    ctl_sparkline(f, s->delay, s->n, m);
    fprintf(f, "%*s max  %s\r\n", (int)(SPARK - s->n), "", top);
}

static void draw(const struct ctl_style *st, const cJSON *res, struct slot *slots, size_t *nslots)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return;
    const cJSON *sup = cJSON_GetObjectItemCaseSensitive(res, "supervisor");
    char up[32], now[16];
    time_t t = time(NULL);
    struct tm tm;
    strftime(now, sizeof(now), "%H:%M:%S", localtime_r(&t, &tm));
    ctl_fmt_ms(ctl_num(sup, "uptime_ms"), up, sizeof(up));
    fprintf(f, "\033[H\033[2Jcorral top — %s  corrald pid %.0f up %s  %.0f/%.0f ready  (q quits)\r\n\r\n",
            now, ctl_num(sup, "pid"), up, ctl_num(sup, "workers_ready"),
            ctl_num(sup, "workers_target"));
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(res, "workers"))
    {
        struct slot *s = slot_for(slots, nslots, (int)ctl_num(w, "id"));
        if (s) {
            push(s->rss, s->n, ctl_num(w, "rss_bytes"));
            push(s->delay, s->n, ctl_num(w, "loop_delay_max_us"));
            if (s->n < SPARK)
                s->n++;
        }
        draw_worker(f, st, w, s);
    }
    fputs("\r\ndeaths:", f);
    const cJSON *d;
    int any = 0;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(sup, "deaths"))
    {
        if (cJSON_IsNumber(d) && d->valuedouble > 0)
            fprintf(f, "%s %s %.0f", any++ ? "," : "", d->string, d->valuedouble);
    }
    fputs(any ? "\r\n" : " none\r\n", f);
    fclose(f);
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    free(text);
}

/* Waits up to ms for a key; true when the user asked to quit. */
static bool wait_key(int ms)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return false;
    char ch;
    if (read(STDIN_FILENO, &ch, 1) != 1) {
        /* stdin at its end (not a terminal): just wait out the interval. */
        poll(NULL, 0, ms);
        return false;
    }
    return ch == 'q' || ch == 'Q' || ch == 3 /* Ctrl-C in raw mode */;
}

int ctl_top(struct ctl_conn *c, const struct ctl_style *st, int interval_ms)
{
    static struct slot slots[MAX_SLOTS];
    size_t nslots = 0;
    int rc = 0;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", "status");
    term_setup();
    while (!quit_sig) {
        cJSON *res = NULL;
        if (ctl_call(c, req, 5000, &res, NULL) < 0) {
            rc = 3;
            break;
        }
        draw(st, res, slots, &nslots);
        cJSON_Delete(res);
        if (wait_key(interval_ms))
            break;
    }
    cJSON_Delete(req);
    term_restore();
    if (rc)
        fprintf(stderr, "corralctl: lost the connection to corrald\n");
    return rc;
}
