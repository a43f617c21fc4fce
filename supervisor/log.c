#include "log.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "death.h"
#include "events.h"
#include "acceptq.h"
#include "history.h"

static enum cr_log_level min_level = CR_LOG_INFO;
static bool to_journal;

static const char *const level_names[] = {"debug", "info", "notice", "warning", "err"};
static const int syslog_prio[] = {LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERR};

int cr_log_level_from_string(const char *s)
{
    for (int i = 0; s && i < 5; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void cr_log_set_level(const char *level_name)
{
    int l = cr_log_level_from_string(level_name);
    if (l >= 0)
        min_level = (enum cr_log_level)l;
}

/* JOURNAL_STREAM is "dev:ino" of the stream systemd connected to our
 * stderr; only if stderr still is that stream do we speak journal. */
static bool stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void cr_log_init(const char *level_name)
{
    cr_log_set_level(level_name);
    to_journal = stderr_is_journal();
}

static void emit(enum cr_log_level level, const char *event, int worker_id, pid_t pid,
                 const char *const *fields, const char *msg)
{
    if (to_journal) {
        /* sd_journal_sendv takes an iovec of FIELD=value strings. */
        struct iovec iov[40];
        char bufs[6][128];
        int n = 0;
        snprintf(bufs[0], sizeof(bufs[0]), "PRIORITY=%d", syslog_prio[level]);
        snprintf(bufs[1], sizeof(bufs[1]), "SYSLOG_IDENTIFIER=corrald");
        iov[n++] = (struct iovec){bufs[0], strlen(bufs[0])};
        iov[n++] = (struct iovec){bufs[1], strlen(bufs[1])};
        char *m = NULL;
        if (asprintf(&m, "MESSAGE=%s", msg) < 0)
            return;
        iov[n++] = (struct iovec){m, strlen(m)};
        if (event) {
            snprintf(bufs[2], sizeof(bufs[2]), "CORRAL_EVENT=%s", event);
            iov[n++] = (struct iovec){bufs[2], strlen(bufs[2])};
        }
        if (worker_id > 0) {
            snprintf(bufs[3], sizeof(bufs[3]), "CORRAL_WORKER_ID=%d", worker_id);
            iov[n++] = (struct iovec){bufs[3], strlen(bufs[3])};
        }
        if (pid > 0) {
            snprintf(bufs[4], sizeof(bufs[4]), "CORRAL_PID=%d", (int)pid);
            iov[n++] = (struct iovec){bufs[4], strlen(bufs[4])};
        }
        for (int i = 0; fields && fields[i] && n < 40; i++)
            iov[n++] = (struct iovec){(void *)fields[i], strlen(fields[i])};
        sd_journal_sendv(iov, n);
        free(m);
        return;
    }

    struct timespec ts;
    struct tm tm;
    char when[32];
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    /* One write per line so lines from corrald and forwarded worker output
     * never interleave mid-line. */
    char line[8192];
    int len = snprintf(line, sizeof(line), "%s.%03ld %-7s ", when, ts.tv_nsec / 1000000,
                       level_names[level]);
    if (event)
        len += snprintf(line + len, sizeof(line) - (size_t)len, "[%s] ", event);
    len += snprintf(line + len, sizeof(line) - (size_t)len, "%s", msg);
    for (int i = 0; fields && fields[i] && (size_t)len < sizeof(line); i++) {
        const char *f = fields[i];
        const char *k = strncmp(f, "CORRAL_", 7) == 0 ? f + 7 : f;
        len += snprintf(line + len, sizeof(line) - (size_t)len, " ");
        for (; *k && *k != '=' && (size_t)len < sizeof(line) - 1; k++)
            line[len++] = (char)(*k >= 'A' && *k <= 'Z' ? *k + 32 : *k);
        len += snprintf(line + len, sizeof(line) - (size_t)len, "%s", k);
    }
    if ((size_t)len >= sizeof(line) - 1)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)len);
    (void)w;
}

static void vlog(enum cr_log_level level, const char *event, int worker_id, pid_t pid,
                 const char *const *fields, const char *fmt, va_list ap)
{
    if (level < min_level)
        return;
    char msg[4096];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    emit(level, event, worker_id, pid, fields, msg);
}

void cr_log(enum cr_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, NULL, 0, 0, NULL, fmt, ap);
    va_end(ap);
}

void cr_log_event(enum cr_log_level level, const char *event, int worker_id, pid_t pid,
                  const char *const *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, event, worker_id, pid, fields, fmt, ap);
    va_end(ap);
}

/* ---- the core's events --------------------------------------------------- */

/* A death is the one event the journal gets structured fields for:
 * `journalctl CORRAL_DEATH=oom-own-limit` finds them. */
static void log_death(const struct cr_event *ev)
{
    const struct cr_postmortem *pm = ev->postmortem;
    char status[40], peak[48], death[48], gen[40], line[3072], pmf[3100];
    snprintf(status, sizeof(status), "CORRAL_EXIT_STATUS=%d", pm->shell_status);
    snprintf(peak, sizeof(peak), "CORRAL_MEMORY_PEAK=%llu", (unsigned long long)pm->cg_peak);
    snprintf(death, sizeof(death), "CORRAL_DEATH=%s", cr_death_to_string(pm->category));
    snprintf(gen, sizeof(gen), "CORRAL_GENERATION=%llu", (unsigned long long)pm->generation);
    cr_postmortem_format_logfmt(pm, line, sizeof(line));
    snprintf(pmf, sizeof(pmf), "CORRAL_POSTMORTEM=%s", line);
    /* A peak never read (no group of its own, a kernel without
     * memory.peak) is no field at all: 0 would read as a measurement. */
    const char *fields[] = {death, status, gen, pmf, pm->cg_peak ? peak : NULL, NULL};
    bool bad = !pm->planned && pm->category != CR_DEATH_EXIT_CLEAN;
    cr_log_event(bad ? CR_LOG_WARNING : CR_LOG_INFO, "died", ev->worker, ev->pid, fields,
                 "worker %d (pid %d) died: %s — %s", ev->worker, (int)ev->pid,
                 cr_death_to_string(pm->category), pm->reason);
}

/* The accept queue saturated, or drained: one line each, and the figures
 * as journal fields (`journalctl CORRAL_EVENT=accept-queue-saturated`). */
static void log_queue(const struct cr_event *ev)
{
    const struct cr_acceptq_figures *q = ev->queue;
    bool sat = ev->type == CR_EV_QUEUE_SATURATED;
    char line[256], len[48], waited[48];
    cr_acceptq_format(q, sat ? CR_ACCEPTQ_SATURATED : CR_ACCEPTQ_DRAINED, line, sizeof line);
    snprintf(len, sizeof len, "CORRAL_QUEUE_LENGTH=%u", q->length);
    snprintf(waited, sizeof waited, "CORRAL_QUEUE_WAITED_MS=%llu",
             (unsigned long long)q->waited_ms);
    const char *fields[] = {len, waited, NULL};
    cr_log_event(sat ? CR_LOG_WARNING : CR_LOG_NOTICE, cr_event_type_to_string(ev->type), 0, 0,
                 fields, "%s", line);
}

void cr_log_on_event(void *userdata, const struct cr_event *ev)
{
    (void)userdata;
    if (ev->type == CR_EV_WORKER_DIED && ev->postmortem)
        log_death(ev);
    else if ((ev->type == CR_EV_QUEUE_SATURATED || ev->type == CR_EV_QUEUE_DRAINED) && ev->queue)
        log_queue(ev);
    else if (ev->type == CR_EV_CONFIG && strcmp(ev->key, "log-level") == 0)
        cr_log_set_level(ev->config->log_level);
}
