/* cr_spawner: how corrald starts worker processes — through corral-exec
 * from a CLONE_VM child, by posix_spawn, or by fork — as which user, with
 * which program when none is configured, and what every worker gets back
 * before exec (corrald's open-files limit and priority as started). */
#pragma once

#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

struct cr_config;
struct cr_priority;
struct cr_spawn_vm;

struct cr_spawner {
    char *worker_path;      /* the program when no command is configured */
    char *helper;           /* corral-exec's path; NULL: fork */
    struct cr_spawn_vm *vm; /* the stacks of children not yet exec'd (spawnvm.h) */
    bool set_ids;           /* workers drop to uid/gid before exec (--user/--group) */
    uid_t uid;
    gid_t gid;
    /* What corrald was started with, given back to every worker (host/self.h);
     * NULL: leave it. */
    const struct rlimit *nofile;
    const struct cr_priority *priority;
};

/* Finds the worker program, resolves --user/--group and decides how
 * workers start (corral-exec is run once here the way workers will run it,
 * or fork when it is missing, cannot run, or is linked dynamically while
 * workers drop to another user), logging each. -errno (logged) for an
 * unknown user or group, or one corrald may not switch to. */
int cr_spawner_open(struct cr_spawner *sp, const struct cr_config *cfg);
/* corral-exec could not be run (err): log it once, and start workers by
 * fork from now on when err says it is unusable rather than short of
 * resources (cr_spawn_helper_unusable). */
void cr_spawner_helper_failed(struct cr_spawner *sp, int err);
/* The program workers run when no command is configured. */
const char *cr_spawner_worker_path(const struct cr_spawner *sp);
void cr_spawner_done(struct cr_spawner *sp);
