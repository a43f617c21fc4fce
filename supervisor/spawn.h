/* cr_spawn: fork + exec of one worker, the way libuv's process.c does it but
 * with the two things uv_spawn cannot do: put the child in its cgroup before
 * it runs a single instruction of the worker program, and leave reaping (and
 * so the full siginfo, core-dumped flag included) to the caller.
 *
 * The child blocks on a gate pipe while the parent runs `attach` (the cgroup
 * move); an exec-failure pipe carries errno back (EOF = exec worked).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct cr_spawn_opts {
    const char *path;        /* resolved program path */
    char *const *argv;
    char *const *envp;       /* must contain one "LISTEN_PID=" entry, padded (see below) */
    int listen_pid_slot;     /* index in envp the child fills with its pid, or -1 */
    int fd3;                 /* becomes fd 3 (the listening socket), or -1 */
    int fd4;                 /* becomes fd 4 (the notify stream), or -1 */
    int out_fd;              /* becomes fds 1 and 2 */
    /* Runs in the parent between fork and the child's exec. A negative
     * return aborts the spawn: the child is killed and reaped. */
    int (*attach)(void *userdata, pid_t pid);
    void *userdata;
    /* Drop to this uid/gid (supplementary groups cleared) after the attach,
     * before exec; the child verifies it cannot regain root. */
    bool set_ids;
    uid_t uid;
    gid_t gid;
};

struct cr_spawn_result {
    pid_t pid;
    int pidfd;     /* CLOEXEC pidfd of the child (poll it; reap with waitid) */
    int exec_errno; /* 0 = exec worked; else the child is exiting with 127 */
};

/* The padded LISTEN_PID entry: the child writes its pid over the spaces. */
#define CR_SPAWN_LISTEN_PID_TEMPLATE "LISTEN_PID=                    "

/* Forks and execs. On success (>= 0) the child exists and must be reaped by
 * the caller, even when exec_errno says exec failed. -errno on failure to
 * fork or to attach (nothing left running). Blocks only until the child has
 * exec'd or failed to: microseconds. */
int cr_spawn(const struct cr_spawn_opts *o, struct cr_spawn_result *ret);

/* Resolves a program name like execvp would (PATH search when it has no
 * slash). Caller frees. -ENOENT/-EACCES when nothing runnable is found. */
int cr_spawn_resolve(const char *name, char **ret_path);
