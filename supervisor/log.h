/* cr_log: one line per event. On stderr with a level prefix; under systemd
 * (JOURNAL_STREAM names our stderr) through sd_journal_send with structured
 * fields, so `journalctl -u corral CORRAL_DEATH=oom-own-limit` finds deaths.
 *
 * Who logs: the modules that act for corrald — the core (supervisor.c,
 * recycle.c, spares.c, operations.c, worker_spawn.c, worker_io.c,
 * cgsetup.c), its inputs (worker_notify.c, memwatch.c, control.c) and
 * outputs (sd.c, this file's event subscriber) and main.c — each log what
 * they did, once, where it happened. The pure modules (lifecycle, death, history, trend, notify,
 * config, events, instance, listen, spawn, view, status, metrics) and the cgroups/
 * library never log: they return -errno and their caller logs.
 * scripts/include-graph keeps them off this header.
 */
#pragma once

#include <stdarg.h>
#include <sys/types.h>

struct cr_event;

enum cr_log_level { CR_LOG_DEBUG, CR_LOG_INFO, CR_LOG_NOTICE, CR_LOG_WARNING, CR_LOG_ERR };

/* Reads JOURNAL_STREAM and decides where lines go. */
void cr_log_init(const char *level_name);
void cr_log_set_level(const char *level_name);
int cr_log_level_from_string(const char *s);

/* A free-form line. */
void cr_log(enum cr_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An event line with structured fields. `fields` is a NULL-terminated list
 * of "KEY=value" strings (journal field names; on stderr they are printed as
 * key=value after the message). */
void cr_log_event(enum cr_log_level level, const char *event, int worker_id, pid_t pid,
                  const char *const *fields, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Subscriber to the core's events: a death's journal line with its
 * structured fields (CORRAL_DEATH=, CORRAL_POSTMORTEM=, …), and
 * `set log-level`. */
void cr_log_on_event(void *userdata, const struct cr_event *ev);
