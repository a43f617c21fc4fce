/* corrald ↔ systemd: READY=1 once every worker is ready (or the start
 * timeout passed), STATUS= kept current, RELOADING/STOPPING around rolling
 * reloads and shutdown, WATCHDOG=1 from the loop itself. Without
 * NOTIFY_SOCKET all of it is a no-op. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "history.h"
#include "log.h"

void cr_sd_notify(struct cr_supervisor *sup, const char *fmt, ...)
{
    if (!sup->sd_notify)
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

static void ready_anyway(struct cr_supervisor *sup)
{
    sup->sd_ready_sent = true;
    cr_log(CR_LOG_WARNING, "start timeout: reporting ready with %u of %u workers ready",
           cr_supervisor_count_ready(sup), sup->target);
    sup->sd_status[0] = '\0';
    cr_sd_notify(sup, "READY=1");
    cr_sd_update(sup);
}

static void on_watchdog(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    /* This runs only when the loop turns: a stuck corrald stops petting. */
    cr_sd_notify(sup, "WATCHDOG=1");
    if (!sup->sd_ready_sent && cr_now_ms(sup) - sup->started_at >= sup->cfg.start_timeout_ms)
        ready_anyway(sup);
}

static void on_start_grace(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    if (!sup->sd_ready_sent)
        ready_anyway(sup);
    uv_timer_stop(t);
    uint64_t usec = sup->sd_watchdog_usec;
    if (usec)
        uv_timer_start(t, on_watchdog, usec / 2000, usec / 2000);
}

void cr_sd_init(struct cr_supervisor *sup)
{
    sup->sd_notify = getenv("NOTIFY_SOCKET") != NULL;
    uint64_t usec = 0;
    if (sup->sd_notify && sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000)
        sup->sd_watchdog_usec = usec;
    if (!sup->sd_notify)
        return;
    /* One timer: first the start grace (READY=1 even if some worker never
     * comes up), then the watchdog period. */
    uint64_t grace = sup->cfg.start_timeout_ms;
    if (sup->sd_watchdog_usec && sup->sd_watchdog_usec / 2000 < grace) {
        uv_timer_start(&sup->sd_timer, on_watchdog, sup->sd_watchdog_usec / 2000,
                       sup->sd_watchdog_usec / 2000);
        return; /* the watchdog must keep running; readiness is tracked by cr_sd_update */
    }
    uv_timer_start(&sup->sd_timer, on_start_grace, grace, 0);
}

static void format_status(struct cr_supervisor *sup, char *buf, size_t len)
{
    unsigned ready = cr_supervisor_count_ready(sup);
    unsigned blocked = 0;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        blocked += w->state == CR_WS_BLOCKED;
    int n = snprintf(buf, len, "%u/%u workers ready", ready, sup->target);
    if (blocked)
        n += snprintf(buf + n, len - (size_t)n, " (%u blocked)", blocked);
    int64_t now = (int64_t)cr_wall_ms();
    uint64_t total = 0;
    char parts[256] = "";
    size_t pl = 0;
    for (int d = 0; d < _CR_DEATH_MAX; d++) {
        uint64_t c = cr_history_count_last_hour(sup->history, (enum cr_death)d, now);
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

void cr_sd_update(struct cr_supervisor *sup)
{
    char status[256];
    format_status(sup, status, sizeof(status));
    if (sup->stopping)
        return;
    bool all_ready = cr_supervisor_count_ready(sup) >= sup->target;
    if (!sup->sd_ready_sent && all_ready) {
        sup->sd_ready_sent = true;
        cr_log(CR_LOG_NOTICE, "ready: %s", status);
        cr_sd_notify(sup, "READY=1\nSTATUS=%s", status);
        snprintf(sup->sd_status, sizeof(sup->sd_status), "%s", status);
        return;
    }
    if (sup->sd_ready_sent && !sup->reloading && strstr(sup->sd_status, "reloading")) {
        /* A reload finished: READY=1 again closes RELOADING=1. */
        cr_sd_notify(sup, "READY=1\nSTATUS=%s", status);
        snprintf(sup->sd_status, sizeof(sup->sd_status), "%s", status);
        return;
    }
    if (sup->reloading)
        snprintf(status + strlen(status), sizeof(status) - strlen(status), "; reloading");
    if (strcmp(status, sup->sd_status) != 0) {
        snprintf(sup->sd_status, sizeof(sup->sd_status), "%s", status);
        cr_sd_notify(sup, "STATUS=%s", status);
    }
}
