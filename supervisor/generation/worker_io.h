/* cr_io: the descriptors of one worker generation — its pidfd (exit and
 * signals), its output pipe (forwarded to the log, tail kept for the
 * post-mortem), the stream form of the notify protocol and the cgroup OOM
 * watch — and the shared datagram notify socket.
 *
 * Below the core: what these descriptors deliver goes through the sink
 * that main.c installs (sup->io_sink), never by calling the core by name. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The last output bytes of a generation, kept for its post-mortem. */
#define CR_STDERR_TAIL 4096

struct cr_supervisor;
struct cr_worker;
struct cr_notify_msg;
struct cr_taskstats_exit;

struct cr_io_sink {
    /* The process was reaped: w->wait_code and w->wait_status hold its siginfo. */
    void (*exited)(struct cr_worker *w);
    /* A notify message from the worker (datagram or stream). */
    void (*message)(struct cr_worker *w, const struct cr_notify_msg *m);
    /* Something asks for a rolling replacement (a v2 memory.high event). */
    void (*recycle)(struct cr_worker *w, const char *why);
    /* The kernel says the process is exiting; the reap follows. */
    void (*exit_notice)(struct cr_worker *w);
};

/* corral-exec could not be run (err): log it once, and start workers by
 * fork from now on when err says it is unusable rather than short of
 * resources (cr_spawn_helper_unusable). */
void cr_io_helper_failed(struct cr_supervisor *sup, int err);

/* Takes the four descriptors (closed even on failure) and starts their
 * polls, plus the cgroup's OOM watch. exec_fd is cr_spawn()'s exec pipe:
 * a failed exec sets w->exec_errno (logged) before the reap. -errno when
 * the exit watch fails: the process then cannot be supervised. */
int cr_io_adopt(struct cr_worker *w, int pidfd, int out_fd, int ns_fd, int exec_fd);
/* The generation's pidfd, or -1. */
int cr_io_pidfd(const struct cr_worker *w);
/* The generation's /proc/<pid>/statm (or smaps_rollup when pss) for the
 * memory watch: opened once the exec succeeded (smaps_rollup binds the
 * address space it was opened on) and kept for the generation — a pread
 * per sample instead of a path walk, an open and a close, and bound to
 * this process even after its pid is reused. reopen: open it afresh (the
 * last read found nothing: the process may have exec'd again, e.g. from a
 * shell wrapper). -1 before the exec, after the release, or when it
 * cannot be opened. */
int cr_io_mem_fd(struct cr_worker *w, bool pss, bool reopen);
/* Reads what the output pipe still holds (before a post-mortem). */
void cr_io_drain_output(struct cr_worker *w);
/* The stderr tail, oldest byte first; buf holds CR_STDERR_TAIL bytes.
 * Empty when the generation wrote nothing (or its descriptors are gone). */
void cr_io_tail(const struct cr_worker *w, char *buf, size_t *len);
/* Reaps every exited child of corrald: a worker through the same path as
 * its pidfd (the only path where there is no pidfd: kernels before 5.3,
 * valgrind), anything else as an orphan re-parented to corrald, a child
 * subreaper (and PID 1 in a container). Call on SIGCHLD. */
void cr_io_reap_children(struct cr_supervisor *sup);
/* A taskstats exit message (exitnotice.c): the worker whose process it
 * ends, if any, gets an exit notice. A message of a main thread alone is
 * taken as its process's end only when /proc shows no other thread (a
 * single-threaded process's death says no more than that). */
void cr_io_exit_notice(struct cr_supervisor *sup, const struct cr_taskstats_exit *e);
/* Starts polling the shared datagram notify socket (sup->notify_fd). */
int cr_io_notify_start(struct cr_supervisor *sup);
/* Creates the shared datagram notify socket in a private 0700 directory
 * (owned by the workers' user under --user) and starts polling it; sets
 * sup->notify_addr. close: closes it and removes the socket and directory. */
int cr_io_notify_open(struct cr_supervisor *sup);
void cr_io_notify_close(struct cr_supervisor *sup);
