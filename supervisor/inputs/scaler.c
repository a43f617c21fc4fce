/* --workers MIN..MAX: the measurements and the steps (scaler.h). */
#include "scaler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acceptq.h"
#include "budget.h"
#include "clock.h"
#include "config.h"
#include "events.h"
#include "history.h"
#include "internal.h"
#include "lifecycle.h"
#include "log.h"
#include "notify.h"
#include "operations.h"
#include "page.h"
#include "self.h"
#include "supervisor.h"
#include "textfile.h"
#include "view.h"

/* A loop's utilization older than three of its report periods (and than
 * this) says nothing about the loop now. */
#define ELU_FRESH_MS 3000
/* A loop silent for one and a half of its report periods (and this) since
 * it began the request it serves is stuck in it. Reports come every second
 * by default; the period is each worker's own, measured between its last
 * two utilization reports (the agent's CORRAL_REPORT_INTERVAL_MS,
 * corral-worker's --report-interval). */
#define STUCK_SILENT_MS 1500

static uint64_t at_least(uint64_t floor, uint64_t v)
{
    return v > floor ? v : floor;
}

/* One worker's loop thread at the last tick. */
struct cpu_mark {
    pid_t pid;
    uint64_t run_ns, wait_ns; /* on a CPU; runnable, waiting for one */
};

struct cr_scaler {
    struct cr_supervisor *sup;
    uv_timer_t timer;
    struct cr_scale_state st;
    struct cr_scale_status status;
    enum cr_scale_why last_held; /* the last hold published (one event per kind in a row) */
    /* The CPU at the last tick: the host's (/proc/stat) and each worker's. */
    uint64_t host_total, host_idle;
    uint64_t tick_ns;
    struct cpu_mark *marks;
    size_t nmarks;
    unsigned cores; /* the CPU quota or the affinity mask, the smaller */
    bool closed;
};

/* The host's CPU time, all CPUs: total and idle (idle + iowait) jiffies. */
static bool host_cpu(uint64_t *total, uint64_t *idle)
{
    char buf[512];
    if (cr_read_text("/proc/stat", buf, sizeof(buf)) < 0 || strncmp(buf, "cpu ", 4) != 0)
        return false;
    unsigned long long v[10] = {0};
    int n = sscanf(buf + 4, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    if (n < 5)
        return false;
    *total = 0;
    for (int i = 0; i < n && i < 8; i++) /* guest time is already in user */
        *total += v[i];
    *idle = v[3] + v[4];
    return true;
}

/* PSI cpu "some" avg10, in %: tasks that waited for a CPU. -1: none. */
static double cpu_pressure(void)
{
    char buf[256];
    double v;
    if (cr_read_text("/proc/pressure/cpu", buf, sizeof(buf)) < 0 ||
        sscanf(buf, "some avg10=%lf", &v) != 1)
        return -1;
    return v;
}

/* The main thread's (the loop's) time on a CPU and waiting on a run
 * queue, ns: /proc/<pid>/schedstat. False when it is gone. */
static bool proc_sched(pid_t pid, uint64_t *run, uint64_t *wait)
{
    char path[64], buf[128];
    unsigned long long r, w;
    snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
    if (cr_read_text(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%llu %llu", &r, &w) != 2)
        return false;
    *run = r;
    *wait = w;
    return true;
}

static const struct cpu_mark *mark_of(const struct cpu_mark *m, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].pid == pid)
            return &m[i];
    return NULL;
}

static bool serving(const struct cr_worker *w)
{
    return w->state == CR_WS_READY || w->state == CR_WS_BLOCKED || w->state == CR_WS_TRACING;
}

/* This tick's measurements: the table, the loops, the CPU, the queue. */
static void measure(struct cr_scaler *sc, struct cr_scale_sample *s, double dt_s)
{
    struct cr_supervisor *sup = sc->sup;
    uint64_t now = cr_now_ms(sup);
    *s = cr_scale_sample_unknown();
    s->now_ms = now;
    s->cpu_pressure = cpu_pressure();
    unsigned n = 0, starting = 0, elu_n = 0, cpu_n = 0;
    double elu = 0, cpu = 0, cpu_all = 0, demand = 0;
    size_t cap = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        cap++;
    struct cpu_mark *marks = cap ? calloc(cap, sizeof(*marks)) : NULL;
    size_t nm = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next) {
        if (!w->slot || w->slot->holder != w || w->role == CR_ROLE_RETIRING)
            continue; /* a spare, a replacement, a worker on its way out */
        if (w->state == CR_WS_NEW || w->state == CR_WS_PENDING || w->state == CR_WS_STARTING) {
            starting++;
            continue;
        }
        if (!serving(w))
            continue;
        n++;
        /* How busy its loop is: its own utilization over its last report
         * (up to a second old). Its worker page says more only where that
         * is missing or late: a request in flight is not a busy loop (a
         * long poll, a timer, a query awaited), but a loop that has not
         * reported since it began the request it serves, and is overdue,
         * is stuck in it now, before the watchdog says so. Without a fresh
         * utilization the page is all there is: serving counts as busy. */
        const struct cr_notify_msg *last = &w->g.report.last;
        struct cr_request_seen rq;
        cr_page_request(w->g.page, &rq);
        const struct cr_report *rep = &w->g.report;
        uint64_t silent = now - rep->last_at;
        bool fresh = (last->present & CR_NF_ELU) && rep->elu_at &&
                     now - rep->elu_at < at_least(ELU_FRESH_MS, 3 * rep->elu_period_ms);
        uint64_t stuck_after = at_least(STUCK_SILENT_MS, rep->elu_period_ms * 3 / 2);
        double b = -1;
        if (w->state != CR_WS_READY) /* silent past the watchdog: stuck */
            b = 1;
        if (fresh && last->elu > b)
            b = last->elu;
        if (rq.known && rq.serving && (!fresh || (rq.age_ms < silent && silent >= stuck_after)))
            b = 1;
        else if (rq.known && b < 0)
            b = 0;
        if (b >= 0) {
            elu += b;
            elu_n++;
        }
        uint64_t run, wait;
        if (w->g.pid && proc_sched(w->g.pid, &run, &wait)) {
            const struct cpu_mark *before = mark_of(sc->marks, sc->nmarks, w->g.pid);
            if (marks && nm < cap)
                marks[nm++] = (struct cpu_mark){w->g.pid, run, wait};
            if (before && dt_s > 0 && run >= before->run_ns && wait >= before->wait_ns) {
                double c = (double)(run - before->run_ns) / 1e9 / dt_s;
                cpu += c;
                demand += c + (double)(wait - before->wait_ns) / 1e9 / dt_s;
                cpu_n++;
                cpu_all += c;
            }
        }
    }
    free(sc->marks);
    sc->marks = marks;
    sc->nmarks = nm;
    /* Slots asked for that neither serve nor start (backoff, failed)
     * still count in N: they are the operator's, and come back. */
    s->starting = starting;
    s->serving = sup->target > starting ? sup->target - starting : 0;
    if (elu_n)
        s->busy = elu / elu_n;
    if (cpu_n) {
        s->cpu_each = cpu / cpu_n;
        s->demand_each = demand / cpu_n;
    }
    uint64_t total, idle;
    if (host_cpu(&total, &idle)) {
        /* /proc/stat's iowait (counted in idle here) may go back between
         * two reads (NO_HZ accounting): an unsigned difference would wrap
         * to an absurd idle figure. Such a tick says nothing. */
        if (sc->host_total && total > sc->host_total && idle >= sc->host_idle &&
            idle - sc->host_idle <= total - sc->host_total) {
            long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
            double idle_cores = (double)(idle - sc->host_idle) / (double)(total - sc->host_total) *
                                (double)(ncpu > 0 ? ncpu : 1);
            /* Under a CPU quota the host may idle while the quota is spent:
             * what the workers may still use is the quota minus theirs. */
            double left = (double)sc->cores - cpu_all;
            s->idle_cores = idle_cores < left ? idle_cores : left;
            if (s->idle_cores < 0)
                s->idle_cores = 0;
        }
        sc->host_total = total;
        sc->host_idle = idle;
    }
    const struct cr_acceptq_figures *q = cr_supervisor_accept_queue(sup);
    if (q && q->known) {
        s->queue_known = true;
        s->queue_len = q->length;
        /* The lower bound: seen waiting at every sample that long. */
        s->queue_waited_ms = q->nonempty_ms;
    }
}

/* The most workers the memory budget fits, 0 when it sets no bound. */
static unsigned budget_max(struct cr_supervisor *sup)
{
    struct cr_budget_in in;
    struct cr_budget b;
    cr_view_budget(sup, &in, &b);
    return b.limited && in.per_worker ? (b.fit_workers ? b.fit_workers : 1) : 0;
}

static void publish(struct cr_scaler *sc, const struct cr_scale_decision *d)
{
    sc->status.decided = true;
    sc->status.last = *d;
    sc->status.last_wall_ms = cr_wall_ms();
    cr_log_event(d->to != d->from ? CR_LOG_NOTICE : CR_LOG_INFO, "scale", 0, 0, NULL, "%s",
                 d->text);
    cr_supervisor_publish(sc->sup, &(struct cr_event){.type = CR_EV_SCALE, .scale = d});
}

static void on_tick(uv_timer_t *t)
{
    struct cr_scaler *sc = t->data;
    struct cr_supervisor *sup = sc->sup;
    const struct cr_config *c = &sup->cfg;
    uint64_t ns = uv_hrtime();
    double dt = sc->tick_ns ? (double)(ns - sc->tick_ns) / 1e9 : 0;
    sc->tick_ns = ns;
    struct cr_scale_sample s;
    measure(sc, &s, dt);
    sc->status.sample = s;
    if (!c->workers_max || sup->phase != CR_PHASE_RUNNING)
        return;
    struct cr_scale_limits l = {.min = c->workers_min,
                                .max = c->workers_max,
                                .budget_max = budget_max(sup),
                                .cores = sc->cores,
                                .up_wait_ms = c->scale_wait_ms,
                                .cooldown_ms = c->scale_cooldown_ms,
                                .settle_ms = CR_SCALER_SETTLE_MS};
    struct cr_scale_decision d;
    cr_autoscale_decide(&l, &s, &sc->st, &d);
    if (d.to != d.from) {
        int r = cr_supervisor_scale_auto(sup, d.to);
        if (r < 0) {
            cr_log(CR_LOG_WARNING, "%s: not done: %s", d.text, strerror(-r));
            return;
        }
        if (d.to > d.from)
            sc->status.ups++;
        else
            sc->status.downs++;
        sc->last_held = CR_SCALE_HOLD;
        publish(sc, &d);
    } else if ((d.why == CR_SCALE_SATURATED || d.why == CR_SCALE_AT_MAX ||
                d.why == CR_SCALE_AT_BUDGET) &&
               d.why != sc->last_held) {
        /* A step wanted and held: said once, until something else happens. */
        sc->status.holds++;
        sc->last_held = d.why;
        publish(sc, &d);
    } else if (d.why == CR_SCALE_HOLD) {
        sc->last_held = CR_SCALE_HOLD;
    }
}

int cr_scaler_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_scaler **ret)
{
    struct cr_scaler *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return -ENOMEM;
    sc->sup = sup;
    sc->status.sample = cr_scale_sample_unknown();
    uv_timer_init(loop, &sc->timer);
    sc->timer.data = sc;
    *ret = sc;
    return 0;
}

void cr_scaler_start(struct cr_scaler *sc)
{
    if (!sc || sc->closed || !sc->sup->cfg.workers_max ||
        uv_is_active((uv_handle_t *)&sc->timer))
        return;
    struct cr_cpus cpus;
    cr_self_cpus(&cpus);
    sc->cores = cpus.n;
    sc->st = (struct cr_scale_state){0};
    sc->status.sample = cr_scale_sample_unknown(); /* nothing measured in this run yet */
    sc->tick_ns = 0;
    sc->host_total = 0;
    cr_log(CR_LOG_NOTICE,
           "workers %u..%u: corrald decides N (a worker more while connections wait over %llu ms "
           "and it helps; fewer after %llu ms of low use); %u core(s) for the workers",
           sc->sup->cfg.workers_min, sc->sup->cfg.workers_max,
           (unsigned long long)sc->sup->cfg.scale_wait_ms,
           (unsigned long long)sc->sup->cfg.scale_cooldown_ms, sc->cores);
    uv_timer_start(&sc->timer, on_tick, CR_SCALER_TICK_MS, CR_SCALER_TICK_MS);
}

void cr_scaler_on_event(void *userdata, const struct cr_event *ev)
{
    struct cr_scaler *sc = userdata;
    if (sc->closed)
        return;
    if (ev->type == CR_EV_CONFIG && strcmp(ev->key, "workers") == 0) {
        if (ev->config->workers_max)
            cr_scaler_start(sc);
        else
            uv_timer_stop(&sc->timer);
    } else if (ev->type == CR_EV_FINISHED) {
        sc->closed = true;
        uv_close((uv_handle_t *)&sc->timer, NULL);
    }
}

const struct cr_scale_status *cr_scaler_status(const struct cr_scaler *sc)
{
    return sc ? &sc->status : NULL;
}

struct cr_scaler *cr_scaler_free(struct cr_scaler *sc)
{
    if (sc) {
        free(sc->marks);
        free(sc);
    }
    return NULL;
}
