/* corrald ↔ systemd: READY=1 once every worker is ready (or the start
 * timeout passed), STATUS= kept current, RELOADING/STOPPING around rolling
 * reloads and shutdown, WATCHDOG=1 from the loop itself. Without
 * NOTIFY_SOCKET all of it is a no-op. Hears the core through its events
 * and reads it through supervisor.h's const views. */
#include "sd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "clock.h"
#include "config.h"
#include "events.h"
#include "history.h"
#include "log.h"
#include "view.h"

struct cr_sd {
    struct cr_supervisor *sup;
    uv_timer_t timer; /* first the start grace, then the watchdog period */
    bool notify;      /* NOTIFY_SOCKET is set */
    bool ready_sent;
    bool closed;
    uint64_t watchdog_usec;
    char status[256]; /* the last STATUS= sent */
};

static void notifyf(struct cr_sd *sd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notifyf(struct cr_sd *sd, const char *fmt, ...)
{
    if (!sd->notify)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    int r = sd_notify(0, buf);
    if (r < 0)
        cr_log(CR_LOG_DEBUG, "sd_notify failed: %s", strerror(-r));
}

static void update(struct cr_sd *sd);

static void ready_anyway(struct cr_sd *sd)
{
    sd->ready_sent = true;
    cr_log(CR_LOG_WARNING, "start timeout: reporting ready with %u of %u workers ready",
           cr_supervisor_count_ready(sd->sup), cr_supervisor_target(sd->sup));
    sd->status[0] = '\0';
    notifyf(sd, "READY=1");
    update(sd);
}

static void on_watchdog(uv_timer_t *t)
{
    struct cr_sd *sd = t->data;
    /* This runs only when the loop turns: a stuck corrald stops petting. */
    notifyf(sd, "WATCHDOG=1");
    if (!sd->ready_sent &&
        cr_supervisor_uptime_ms(sd->sup) >= cr_supervisor_config(sd->sup)->start_timeout_ms)
        ready_anyway(sd);
}

static void on_start_grace(uv_timer_t *t)
{
    struct cr_sd *sd = t->data;
    if (!sd->ready_sent)
        ready_anyway(sd);
    uv_timer_stop(t);
    uint64_t usec = sd->watchdog_usec;
    if (usec)
        uv_timer_start(t, on_watchdog, usec / 2000, usec / 2000);
}

int cr_sd_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_sd **ret)
{
    struct cr_sd *sd = calloc(1, sizeof(*sd));
    if (!sd)
        return -ENOMEM;
    sd->sup = sup;
    uv_timer_init(loop, &sd->timer);
    sd->timer.data = sd;
    *ret = sd;
    sd->notify = getenv("NOTIFY_SOCKET") != NULL;
    uint64_t usec = 0;
    if (sd->notify && sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000)
        sd->watchdog_usec = usec;
    if (!sd->notify)
        return 0;
    /* One timer: first the start grace (READY=1 even if some worker never
     * comes up), then the watchdog period. */
    uint64_t grace = cr_supervisor_config(sup)->start_timeout_ms;
    if (sd->watchdog_usec && sd->watchdog_usec / 2000 < grace) {
        uv_timer_start(&sd->timer, on_watchdog, sd->watchdog_usec / 2000,
                       sd->watchdog_usec / 2000);
        return 0; /* the watchdog must keep running; readiness is tracked by update() */
    }
    uv_timer_start(&sd->timer, on_start_grace, grace, 0);
    return 0;
}

static void format_status(const struct cr_supervisor *sup, char *buf, size_t len)
{
    unsigned ready = cr_supervisor_count_ready(sup);
    unsigned blocked = cr_supervisor_count_state(sup, CR_WS_BLOCKED) +
                       cr_supervisor_count_state(sup, CR_WS_TRACING);
    int n = snprintf(buf, len, "%u/%u workers ready", ready, cr_supervisor_target(sup));
    if (blocked)
        n += snprintf(buf + n, len - (size_t)n, " (%u blocked)", blocked);
    int64_t now = (int64_t)cr_wall_ms();
    const struct cr_history *h = cr_supervisor_history(sup);
    uint64_t total = 0;
    char parts[256] = "";
    size_t pl = 0;
    for (int d = 0; d < _CR_DEATH_MAX; d++) {
        uint64_t c = cr_history_count_last_hour(h, (enum cr_death)d, now);
        if (!c)
            continue;
        total += c;
        pl += (size_t)snprintf(parts + pl, sizeof(parts) - pl, "%s%llu %s", pl ? ", " : "",
                               (unsigned long long)c, cr_death_to_string((enum cr_death)d));
        if (pl >= sizeof(parts))
            break;
    }
    if (total)
        snprintf(buf + n, len - (size_t)n, ", %llu death%s (%s) in the last hour",
                 (unsigned long long)total, total == 1 ? "" : "s", parts);
    else
        snprintf(buf + n, len - (size_t)n, ", 0 deaths in the last hour");
}

/* READY/STATUS as the table changes. */
static void update(struct cr_sd *sd)
{
    const struct cr_supervisor *sup = sd->sup;
    char status[256];
    format_status(sup, status, sizeof(status));
    if (cr_supervisor_stopping(sup))
        return;
    bool reloading = cr_supervisor_reloading(sup);
    bool all_ready = cr_supervisor_count_ready(sup) >= cr_supervisor_target(sup);
    if (!sd->ready_sent && all_ready) {
        sd->ready_sent = true;
        cr_log(CR_LOG_NOTICE, "ready: %s", status);
        notifyf(sd, "READY=1\nSTATUS=%s", status);
        snprintf(sd->status, sizeof(sd->status), "%s", status);
        return;
    }
    if (sd->ready_sent && !reloading && strstr(sd->status, "reloading")) {
        /* A reload finished: READY=1 again closes RELOADING=1. */
        notifyf(sd, "READY=1\nSTATUS=%s", status);
        snprintf(sd->status, sizeof(sd->status), "%s", status);
        return;
    }
    if (reloading)
        snprintf(status + strlen(status), sizeof(status) - strlen(status), "; reloading");
    if (strcmp(status, sd->status) != 0) {
        snprintf(sd->status, sizeof(sd->status), "%s", status);
        notifyf(sd, "STATUS=%s", status);
    }
}

void cr_sd_on_event(void *userdata, const struct cr_event *ev)
{
    struct cr_sd *sd = userdata;
    if (sd->closed)
        return;
    switch (ev->type) {
    case CR_EV_TABLE:
        update(sd);
        break;
    case CR_EV_RELOAD:
        if (ev->phase == CR_RELOAD_STARTED)
            notifyf(sd, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading: replacing every "
                           "worker",
                       (unsigned long long)(uv_hrtime() / 1000));
        else
            update(sd);
        break;
    case CR_EV_LAME_DUCK:
        /* Serving for the stop delay, then draining for up to the stop timeout. */
        notifyf(sd, "STOPPING=1\nSTATUS=stopping: serving for the stop delay, then draining"
                    "\nEXTEND_TIMEOUT_USEC=%llu",
                (unsigned long long)(cr_supervisor_config(sd->sup)->stop_delay_ms +
                                     cr_supervisor_config(sd->sup)->stop_timeout_ms + 5000) *
                    1000);
        break;
    case CR_EV_STOPPING:
        /* Draining may take up to the stop timeout: tell systemd so it waits. */
        notifyf(sd, "STOPPING=1\nSTATUS=stopping: draining workers\nEXTEND_TIMEOUT_USEC=%llu",
                   (unsigned long long)(cr_supervisor_config(sd->sup)->stop_timeout_ms + 5000) *
                       1000);
        break;
    case CR_EV_FINISHED:
        sd->closed = true;
        uv_close((uv_handle_t *)&sd->timer, NULL);
        break;
    default:
        break;
    }
}

struct cr_sd *cr_sd_free(struct cr_sd *sd)
{
    free(sd);
    return NULL;
}
