/* cr_worker_spawn: one worker generation's environment, argv, cgroup and
 * descriptors, then cr_spawn(). Below the core: it forks and hands the
 * descriptors to worker_io.c; what the state becomes is the core's call. */
#pragma once

struct cr_worker;

/* Forks and execs the next generation of w (w->generation moves on, the
 * per-generation readings are reset). 0 when a process exists (even if
 * its exec failed: w->exec_errno says so); -errno when nothing runs. */
int cr_worker_spawn(struct cr_worker *w);

/* The worker program when no command is configured: $CORRAL_WORKER, the
 * build tree's worker, or the installed one. Caller frees. */
char *cr_worker_default_path(void);

struct cr_supervisor;

/* Resolves --user/--group into the ids workers drop to (sup->set_ids,
 * worker_uid, worker_gid). Logs and returns -errno for an unknown name or
 * a switch corrald is not privileged to make. */
int cr_worker_ids_resolve(struct cr_supervisor *sup);
