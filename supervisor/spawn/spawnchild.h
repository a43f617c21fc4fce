/* spawnchild: the last steps of a worker's start, between corrald and the
 * worker program, and the one line that carries them to corral-exec.
 *
 * A new worker process must, before one instruction of the worker program:
 * arm its parent-death signal, move itself into its cgroup, take the
 * descriptor limit and the nice corrald was started with (and the kernel's
 * default slice), drop to the worker's user, fill in LISTEN_PID, and exec. These steps run in one of two places:
 *
 *   - in corral-exec, the small static program corrald starts from a child
 *     that shares its memory (spawnvm.h; posix_spawn where that is not
 *     available): the kernel never copies corrald's address space, so a
 *     start costs corrald's loop 0.09 ms median instead of a fork's 0.44
 *     ms page-table copy (docs/reliability.md, "Loop latency");
 *   - in a forked child, when corral-exec is not installed.
 *
 * Either way the same function does them, so the two paths cannot drift.
 * Failures go back over the exec-failure pipe as {stage, errno}; EOF on
 * that pipe means the worker program was exec'd. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Where a child that never exec'd failed: its exec (or the set-up before
 * it), its move into its cgroup, or the exec of corral-exec itself. */
enum { CR_SPAWN_EXEC = 1, CR_SPAWN_ATTACH = 2, CR_SPAWN_HELPER = 3 };

/* The padded LISTEN_PID entry: the child writes its pid over the spaces. */
#define CR_SPAWN_LISTEN_PID_TEMPLATE "LISTEN_PID=                    "

/* The descriptors corral-exec receives, at these numbers: the write end of
 * the exec-failure pipe, and the worker group's cgroup.procs. Both are made
 * CLOEXEC before the worker program runs, which only ever sees 0-5. */
#define CR_SPAWN_HELPER_ERR_FD 6
#define CR_SPAWN_HELPER_PROCS_FD 7

struct cr_spawn_child {
    pid_t ppid;          /* corrald: the child dies with it, and checks it still runs */
    int err_fd;          /* the exec-failure pipe, write end */
    int procs_fd;        /* the worker group's cgroup.procs, or -1 */
    int listen_pid_slot; /* index of the LISTEN_PID template in envp, or -1 */
    bool has_nofile;
    struct rlimit nofile; /* RLIMIT_NOFILE to set when has_nofile */
    bool set_ids;        /* drop to uid/gid, supplementary groups cleared */
    uid_t uid;
    gid_t gid;
    bool set_sched;      /* set this nice and the kernel's default slice (priority.h) */
    int nice;            /* -20 to 19 */
};

/* Writes c as corral-exec's first argument into buf (size n). Returns the
 * length, or -ENOSPC when it does not fit. Pure. */
int cr_spawn_child_format(const struct cr_spawn_child *c, char *buf, size_t n);

/* Parses what cr_spawn_child_format wrote. Returns 0, or -EINVAL for
 * anything else (*ret untouched). Pure. */
int cr_spawn_child_parse(const char *s, struct cr_spawn_child *ret);

/* Whether an environment entry is the padded LISTEN_PID template the
 * child writes its pid into. Pure. */
bool cr_spawn_child_slot_ok(const char *entry);

/* Runs the steps above and execs path with argv/envp; on any failure
 * writes {stage, errno} to c->err_fd and exits 127. Never returns.
 * Async-signal-safe: it runs between fork and exec too. envp is written to
 * (the LISTEN_PID slot). */
/* Every signal's disposition back to the default and the mask emptied, as a
 * worker program must start: from corral-exec, and from the fork path's
 * child (async-signal-safe). */
void cr_spawn_child_default_signals(void);
void cr_spawn_child_finish(const struct cr_spawn_child *c, const char *path, char *const *argv,
                           char *const *envp) __attribute__((noreturn));
