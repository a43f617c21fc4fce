/* corral-exec: the step between corrald and a worker program.
 *
 * corrald starts it with posix_spawn() (so the kernel does not copy
 * corrald's address space: see spawnchild.h) with fds 0-4 already the
 * worker's, the exec-failure pipe on CR_SPAWN_HELPER_ERR_FD and the worker
 * group's cgroup.procs on CR_SPAWN_HELPER_PROCS_FD. It does the last steps
 * of the start and execs the worker in its own place, so the worker keeps
 * the pid corrald was given, and stays corrald's child.
 *
 *   corral-exec SPEC PATH ARGV0 [ARG...]
 *
 * It is linked statically where the toolchain allows, and does nothing that
 * needs more than the C library's system-call wrappers (no name service:
 * corrald resolves users to numbers). Not meant to be run by hand. */
#include "spawnchild.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

extern char **environ;

static void cloexec(int fd)
{
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
}

int main(int argc, char **argv)
{
    struct cr_spawn_child c;
    if (argc < 4 || cr_spawn_child_parse(argv[1], &c) < 0) {
        fprintf(stderr, "corral-exec: started by corrald only (SPEC PATH ARGV0 [ARG...])\n");
        return 127;
    }
    int envc = 0;
    while (environ[envc])
        envc++;
    if (c.listen_pid_slot >= envc) {
        fprintf(stderr, "corral-exec: no LISTEN_PID entry at %d\n", c.listen_pid_slot);
        return 127;
    }
    /* Neither descriptor is the worker's business. */
    cloexec(c.err_fd);
    cloexec(c.procs_fd);
    cr_spawn_child_finish(&c, argv[2], argv + 3, environ);
}
