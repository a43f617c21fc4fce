/* cr_spawn: starts one worker, the way libuv's process.c does it but with
 * the two things uv_spawn cannot do: put the child in its cgroup before it
 * runs a single instruction of the worker program, and leave reaping (and
 * so the full siginfo, core-dumped flag included) to the caller.
 *
 * With corral-exec (o->helper) the start is a CLONE_VM child that execs
 * it (o->vm, spawnvm.h) or a posix_spawn() of it: neither copies
 * corrald's address space. Without corral-exec, a fork(). Either way the
 * child moves itself into its cgroup (a cgroup.procs fd the parent opened)
 * before exec, and an exec-failure pipe carries the stage and errno back
 * (EOF = the worker program was exec'd). The parent never waits for the
 * worker: it watches the pipe from its loop (cr_spawn_read_exec).
 */
#pragma once

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "spawnchild.h"

struct cr_spawn_vm;

struct cr_spawn_opts {
    const char *helper;      /* corral-exec's path, or NULL to fork */
    struct cr_spawn_vm *vm;  /* with helper: start it without waiting (spawnvm.h), or NULL */
    const char *path;        /* resolved program path */
    char *const *argv;
    char *const *envp;       /* must contain one "LISTEN_PID=" entry, padded (see below) */
    int listen_pid_slot;     /* index in envp the child fills with its pid, or -1 */
    int fd3;                 /* becomes fd 3 (the listening socket), or -1 */
    int fd4;                 /* becomes fd 4 (the notify stream), or -1 */
    int fd5;                 /* becomes fd 5 (the worker page, common/wpage.h), or -1 */
    int out_fd;              /* becomes fds 1 and 2 */
    /* The worker group's cgroup.procs, open for writing, or -1: the child
     * writes its pid there before anything else; failing, it never execs. */
    int procs_fd;
    /* Drop to this uid/gid (supplementary groups cleared) after the attach,
     * before exec; the child verifies it cannot regain root. */
    bool set_ids;
    uid_t uid;
    gid_t gid;
    /* Set before exec (corrald's own soft limit is raised), or NULL. */
    const struct rlimit *nofile;
    /* When set_sched, this nice and the kernel's default slice are set
     * before exec (corrald runs above its workers, priority.h). */
    bool set_sched;
    int nice;
};

struct cr_spawn_result {
    pid_t pid;
    int pidfd;   /* CLOEXEC pidfd of the child (poll it; reap with waitid), -1 without */
    int exec_fd; /* CLOEXEC, non-blocking: readable once the child exec'd (EOF) or failed */
};

/* Starts the child. On success (>= 0) it exists and must be reaped by the
 * caller, who owns pidfd and exec_fd. -errno when the start or pidfd_open
 * fails (nothing left running). Never waits for the worker program.
 * When corral-exec itself cannot be run, forks instead, and says so in
 * *ret_helper_errno (0 otherwise): the caller should stop naming it. */
int cr_spawn(const struct cr_spawn_opts *o, struct cr_spawn_result *ret, int *ret_helper_errno);

/* corral-exec run once for real (it exits at once), from the same kind of
 * child as workers (a CLONE_VM one, else posix_spawn), with an empty
 * environment: 0 when it runs and is static, 1 when it runs but is linked
 * dynamically, 2 when it ran and failed (*ret_status: its wait status; a
 * missing library, say), -errno when it could not be started (its exec's
 * errno: an LSM refusal, a wrong format; or clone's). Waits for it: for
 * start-up only. */
int cr_spawn_helper_probe(const char *helper, struct cr_spawn_vm *vm, int *ret_status);

/* An exec error that says corral-exec cannot be used (as opposed to the
 * system being short of memory or processes): stop starting it. */
bool cr_spawn_helper_unusable(int err);

/* corral-exec's path: $CORRAL_EXEC, else beside corrald in a build tree,
 * else installed. NULL when it is not there to run, or CORRAL_SPAWN=fork
 * asks for fork(). Caller frees. */
char *cr_spawn_helper_find(void);

/* Reads the child's report from exec_fd: *ret_errno 0 when exec worked
 * (EOF), else the errno of the stage that failed (CR_SPAWN_ATTACH: the
 * cgroup move, CR_SPAWN_HELPER: the exec of corral-exec, CR_SPAWN_EXEC:
 * execve or the set-up before it). -EAGAIN:
 * nothing to read yet. */
int cr_spawn_read_exec(int exec_fd, int *ret_stage, int *ret_errno);

/* Resolves a program name like execvp would (PATH search when it has no
 * slash). Caller frees. -ENOENT/-EACCES when nothing runnable is found. */
int cr_spawn_resolve(const char *name, char **ret_path);

/* A file corrald runs or hands on, found the same way for each: $env_var
 * when set, else rel resolved against the directory of corrald's own
 * executable when accessible with mode (a build tree: "../worker/…"),
 * else installed. Caller frees; NULL when out of memory. */
char *cr_spawn_find_file(const char *env_var, const char *rel, int mode, const char *installed);
