/* cr_reaper: the processes of the generations — each one's pidfd, the
 * signals sent through it, its reap (the one place a worker is reaped),
 * the orphans re-parented to corrald, and the kernel's exit notices. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <uv.h>

#include "death.h"

struct cr_gen;
struct cr_gen_sink;
struct cr_taskstats_exit;

struct cr_proc;

/* Children corrald starts for itself with libuv's uv_spawn (the --on-death
 * program, ondeath.h) are libuv's to reap: its own SIGCHLD handler waits
 * for each of its processes by pid, and a child reaped by anyone else is
 * never reported (libuv 1.44 skips the ECHILD), leaving its exit callback
 * uncalled forever. The orphan scan leaves these alone. */
#define CR_REAPER_FOREIGN_MAX 64

struct cr_reaper {
    uv_loop_t *loop;
    const struct cr_gen_sink *sink;
    void *by_pid;                /* tsearch(3) tree of the watched generations, by pid */
    struct cr_proc *head, *tail; /* exits noticed, not reaped yet */
    uv_idle_t turn;              /* runs while the queue is not empty */
    unsigned long orphans;       /* re-parented descendants of workers, reaped */
    /* Children started through libuv (cr_reaper_foreign_add), unordered. */
    pid_t foreign[CR_REAPER_FOREIGN_MAX];
    unsigned nforeign;
};

/* Ready to watch processes on loop; what it learns goes to sink. */
void cr_reaper_init(struct cr_reaper *r, uv_loop_t *loop, const struct cr_gen_sink *sink);
/* Closes its handle (the end of the loop). */
void cr_reaper_close(struct cr_reaper *r);

/* Watches g's process (g->pid): its pidfd (taken; -1 where there is none:
 * kernels before 5.3, valgrind — SIGCHLD's scan reaps it then). -errno
 * when the exit watch cannot be set up: the process cannot be supervised. */
int cr_reaper_watch(struct cr_reaper *r, struct cr_gen *g, int pidfd);
/* Lets go of g's process without reaping it (a spawn that cannot be
 * supervised reaps it itself). */
void cr_reaper_release(struct cr_gen *g);
/* Sends sig through the pidfd (never to a newer process that reused the
 * pid) and notes it in g's ledger: corrald's own kills are evidence. A
 * no-op without a process. */
void cr_reaper_signal(struct cr_gen *g, int sig, enum cr_kill_reason why, const char *text);
/* SIGSTOP/SIGCONT outside the ledger (a stop is no kill): 0 or -errno. */
int cr_reaper_stop_signal(struct cr_gen *g, int sig);
/* The watched generation whose process is pid, or NULL. */
struct cr_gen *cr_reaper_find(const struct cr_reaper *r, pid_t pid);
/* Calls fn for every watched generation until it returns true; returns
 * that generation, or NULL. */
struct cr_gen *cr_reaper_first(const struct cr_reaper *r, bool (*fn)(struct cr_gen *g, void *ctx),
                               void *ctx);
/* Reaps every exited child of corrald: a watched process through the same
 * path as its pidfd, anything else as an orphan re-parented to corrald (a
 * child subreaper, and PID 1 in a container). Call on SIGCHLD. */
void cr_reaper_scan(struct cr_reaper *r);
/* pid is a child libuv reaps: the scan stops at its zombie instead of
 * reaping it. Register it before the loop runs again (SIGCHLD is only
 * handled there). -ENOSPC past CR_REAPER_FOREIGN_MAX. */
int cr_reaper_foreign_add(struct cr_reaper *r, pid_t pid);
/* libuv has reaped pid: forgotten, and the scan runs again for whatever
 * exited behind its zombie meanwhile. */
void cr_reaper_foreign_del(struct cr_reaper *r, pid_t pid);
/* A taskstats exit message (exitnotice.h): the generation whose process
 * it ends, if any, gets an exit notice. A message of a main thread alone is
 * taken as its process's end only when /proc shows no other thread (a
 * single-threaded process's death says no more than that). */
void cr_reaper_exit_notice(struct cr_reaper *r, const struct cr_taskstats_exit *e);
