/* corral-exec: the step between corrald and a worker program.
 *
 * corrald starts it from a child that shares its memory (no copy of
 * corrald's address space: spawnvm.h, or posix_spawn) with fds 0-5 already the
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

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CR_EXEC_STATIC
#define CR_EXEC_STATIC 0
#endif

extern char **environ;

static void cloexec(int fd)
{
    if (fd >= 0)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* A line this build cannot read (corrald and corral-exec of different
 * versions): said on the exec-failure pipe, so that corrald stops using
 * this program rather than taking the exit for the worker's. */
static int refuse(void)
{
    struct stat st;
    int report[2] = {CR_SPAWN_HELPER, EPROTO};
    fprintf(stderr, "corral-exec: an argument line this build cannot read (corrald and "
                    "corral-exec of different versions?); started by corrald only\n");
    if (fstat(CR_SPAWN_HELPER_ERR_FD, &st) == 0 && S_ISFIFO(st.st_mode))
        (void)!write(CR_SPAWN_HELPER_ERR_FD, report, sizeof(report));
    return 127;
}

int main(int argc, char **argv)
{
    /* corrald's probe at start-up: the program runs here, and says whether
     * it is static (a dynamic one would let the loader act on LD_*
     * variables meant for the workers while it still runs as root). */
    if (argc == 2 && strcmp(argv[1], "--probe") == 0)
        return CR_EXEC_STATIC ? 0 : 3;
    /* Signals arrive blocked, with corrald's dispositions (the child that
     * started us shared corrald's memory, where a handler or a core dump
     * must not run): the worker starts from the defaults. */
    cr_spawn_child_default_signals();

    struct cr_spawn_child c;
    if (argc < 4 || cr_spawn_child_parse(argv[1], &c) < 0)
        return refuse();
    int envc = 0;
    while (environ[envc])
        envc++;
    if (c.listen_pid_slot >= envc ||
        (c.listen_pid_slot >= 0 && !cr_spawn_child_slot_ok(environ[c.listen_pid_slot])))
        return refuse();
    /* Neither descriptor is the worker's business. */
    cloexec(c.err_fd);
    cloexec(c.procs_fd);
    cr_spawn_child_finish(&c, argv[2], argv + 3, environ);
}
