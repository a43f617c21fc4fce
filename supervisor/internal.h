/* Declarations shared by the files that make up the supervisor core
 * (supervisor.c, worker_io.c, cgsetup.c, memwatch.c, sd.c). Not an API. */
#pragma once

#include "supervisor.h"

struct cr_postmortem;

/* worker_io.c */
int cr_io_start_worker(struct cr_worker *w);        /* polls on out, nstream, pidfd, oom */
void cr_io_drain_output(struct cr_worker *w);      /* read what is left (before a post-mortem) */
int cr_io_notify_start(struct cr_supervisor *sup); /* the datagram socket's poll */
void cr_io_handle_notify(struct cr_worker *w, const struct cr_notify_msg *m);
void cr_io_tail(const struct cr_worker *w, char *buf, size_t *len); /* stderr tail, in order */

/* cgsetup.c */
int cr_cg_setup(struct cr_supervisor *sup);
int cr_cg_worker_create(struct cr_worker *w); /* creates the group, sets limits */
int cr_cg_attach_cb(void *userdata, pid_t pid);
void cr_cg_worker_baseline(struct cr_worker *w);
void cr_cg_worker_evidence(struct cr_worker *w, struct cr_death_evidence *ev,
                           struct cr_postmortem *pm);
void cr_cg_worker_release(struct cr_worker *w); /* remove now or queue for removal */
void cr_cg_apply_limits(struct cr_supervisor *sup); /* after `set memory-max …` */
void cr_cg_done(struct cr_supervisor *sup);
uint64_t cr_vmstat_oom_kill(void);
/* The heap limit handed to workers: the tightest of the per-worker limit and
 * the tightest enclosing limit shared among the workers, minus the headroom;
 * 0 when no limit applies. */
uint64_t cr_cg_heap_limit(const struct cr_supervisor *sup);

/* memwatch.c */
void cr_memwatch_start(struct cr_supervisor *sup);
void cr_memwatch_worker_gone(struct cr_worker *w);
void cr_memwatch_restart_timer(struct cr_supervisor *sup);

/* sd.c */
void cr_sd_init(struct cr_supervisor *sup);
void cr_sd_update(struct cr_supervisor *sup); /* READY/STATUS as the table changes */
void cr_sd_notify(struct cr_supervisor *sup, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* supervisor.c */
void cr_worker_recycle(struct cr_worker *w, const char *why); /* queue a rolling replacement */
void cr_worker_signal(struct cr_worker *w, int sig, enum cr_kill_reason why, const char *text);
const char *cr_worker_state_name(const struct cr_worker *w);

/* Shared by the supervisor core files (supervisor.c, worker_spawn.c,
 * operations.c). */
struct cr_worker *cr_worker_new(struct cr_supervisor *sup, int id);
void cr_worker_remove(struct cr_worker *w);   /* unlink and free a worker without process */
void cr_worker_set_deadline(struct cr_worker *w, uint64_t ms);
void cr_worker_clear_deadline(struct cr_worker *w);
void cr_worker_emit(struct cr_worker *w, const char *event, const char *extra_key,
                    const char *extra);
void cr_worker_start(struct cr_worker *w);    /* spawn, or back off when even that fails */
void cr_worker_drain(struct cr_worker *w, enum cr_kill_reason why, const char *text);
void cr_supervisor_pump_recycles(struct cr_supervisor *sup);
void cr_supervisor_maybe_finish(struct cr_supervisor *sup);
struct cr_restart_policy cr_supervisor_restart_policy(const struct cr_supervisor *sup);
