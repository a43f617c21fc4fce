/* The processes of the generations: their pidfds, the signals sent
 * through them, their reaps (paced), the orphans, the kernel's exit
 * notices. See reaper.h. */
#include "reaper.h"

#include <errno.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gen.h"
#include "log.h"
#include "taskstats.h"
#include "textfile.h"
#include "uvclose.h"
#include "wio.h"

struct cr_proc {
    struct cr_gen *g; /* NULL once reaped and let go of */
    struct cr_reaper *r;
    pid_t pid; /* the key of r->by_pid */
    int pidfd;
    uv_poll_t poll;
    bool polling;         /* the poll handle is open (closed once by its close_cb) */
    bool queued;          /* in r's queue */
    struct cr_proc *next; /* in r's queue */
};

/* The notify socket names its sender by pid, a thousand times a second at
 * a thousand workers: a tree keyed by the generation's pid, not a walk of
 * the worker list per datagram. */
static int cmp_pid(const void *a, const void *b)
{
    pid_t x = ((const struct cr_proc *)a)->pid, y = ((const struct cr_proc *)b)->pid;
    return x < y ? -1 : x > y;
}

void cr_reaper_init(struct cr_reaper *r, uv_loop_t *loop, const struct cr_gen_sink *sink)
{
    *r = (struct cr_reaper){.loop = loop, .sink = sink};
    uv_idle_init(loop, &r->turn);
    r->turn.data = r;
}

void cr_reaper_close(struct cr_reaper *r)
{
    cr_uv_close((uv_handle_t *)&r->turn);
}

static void proc_closed(uv_handle_t *h)
{
    struct cr_proc *p = h->data;
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p);
}

void cr_reaper_release(struct cr_gen *g)
{
    struct cr_proc *p = g->proc;
    if (!p)
        return;
    tdelete(p, &p->r->by_pid, cmp_pid);
    g->proc = NULL;
    p->g = NULL;
    if (p->polling) {
        p->polling = false;
        uv_close((uv_handle_t *)&p->poll, proc_closed);
    } else {
        if (p->pidfd >= 0)
            close(p->pidfd);
        free(p);
    }
}

static int send_signal(struct cr_gen *g, int sig)
{
    if (!g->pid || !g->proc)
        return -ESRCH;
    /* Through the pidfd: the signal can only reach this process, never a
     * newer one that reused its pid. No pidfd: still unreaped, so still ours. */
    int pidfd = g->proc->pidfd;
    int r =
        pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) : kill(g->pid, sig);
    return r < 0 ? -errno : 0;
}

void cr_reaper_signal(struct cr_gen *g, int sig, enum cr_kill_reason why, const char *text)
{
    if (!g->pid || !g->proc)
        return;
    g->ledger.reason = why;
    g->ledger.signal = sig;
    if (sig > 0 && sig < 64)
        g->ledger.sigmask |= 1ull << sig;
    if (text)
        snprintf(g->ledger.text, sizeof(g->ledger.text), "%s", text);
    int r = send_signal(g, sig);
    if (r < 0 && r != -ESRCH)
        cr_log_event(CR_LOG_WARNING, "signal-failed", g->id, g->pid, NULL,
                     "worker %d: sending signal %d failed: %s", g->id, sig, strerror(-r));
}

int cr_reaper_stop_signal(struct cr_gen *g, int sig)
{
    return send_signal(g, sig);
}

struct cr_gen *cr_reaper_find(const struct cr_reaper *r, pid_t pid)
{
    struct cr_proc key = {.pid = pid};
    struct cr_proc *const *hit = tfind(&key, &r->by_pid, cmp_pid);
    return hit ? (*hit)->g : NULL;
}

struct walk {
    bool (*fn)(struct cr_gen *g, void *ctx);
    void *ctx;
    struct cr_gen *found;
};

static void visit(const void *node, VISIT which, void *arg)
{
    struct walk *wk = arg;
    struct cr_proc *p = *(struct cr_proc *const *)node;
    if ((which == postorder || which == leaf) && !wk->found && p->g && wk->fn(p->g, wk->ctx))
        wk->found = p->g;
}

struct cr_gen *cr_reaper_first(const struct cr_reaper *r, bool (*fn)(struct cr_gen *g, void *ctx),
                               void *ctx)
{
    struct walk wk = {fn, ctx, NULL};
    twalk_r(r->by_pid, visit, &wk);
    return wk.found;
}

/* The one place a process is reaped, whichever way its exit was noticed
 * (its pidfd, or SIGCHLD where there is none). Returns false when it has
 * not exited yet. */
static bool reap(struct cr_gen *g)
{
    siginfo_t si = {0};
    /* Peek first: while the exited worker is a zombie its pid and process
     * group cannot be reused, so without a cgroup the rest of its process
     * group can still be killed safely (a worker runs setsid()). With a
     * cgroup, releasing the group kills what is left in it. */
    if (waitid(P_PID, (id_t)g->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0)
        return false;
    if (!g->cg.cg && si.si_pid == g->pid)
        kill(-g->pid, SIGKILL);
    memset(&si, 0, sizeof(si));
    /* Reap this pid only, keeping the siginfo (CLD_DUMPED included). */
    if (waitid(P_PID, (id_t)g->pid, &si, WEXITED | WNOHANG) < 0) {
        if (errno == EINTR)
            return false;
        /* Not ours to reap any more (ECHILD): never spin on a readable
         * pidfd; record what we know. */
        cr_log_event(CR_LOG_ERR, "lost", g->id, g->pid, NULL, "worker %d: cannot reap pid %d: %s",
                     g->id, (int)g->pid, strerror(errno));
        si.si_code = CLD_EXITED;
        si.si_status = 255;
    } else if (si.si_pid == 0) {
        return false;
    }
    g->exit.code = si.si_code;
    g->exit.status = si.si_status;
    struct cr_proc *p = g->proc;
    if (p->polling) /* readable until reaped: it would wake every turn */
        uv_poll_stop(&p->poll);
    /* The output is read by the post-mortem, after a spare took the slot. */
    cr_io_read_exec(g);
    g->host->sink->exited(g);
    /* The reaper has read what it needed: the rest of the process goes. */
    cr_io_release(g);
    cr_reaper_release(g);
    return true;
}

/* Deaths are reaped at most REAPS_PER_TURN a loop turn, in the order they
 * were noticed. A stop, a scale-down or an OOM kill of the whole service
 * ends hundreds of workers at once, and each reap reads a post-mortem and
 * removes a group (~0.6 ms on a v1 host while 998 groups die, single
 * reads and removals up to 5 ms): reaped in one turn, 740 deaths kept
 * signals, control commands and heartbeats waiting 150 ms. Two a turn,
 * not four: while 998 drained (8 runs each, side by side), the median
 * ping went from 4.9 to 3.0 ms and the median of the runs' maxima from
 * ~20 to ~13.5 ms, and the drain took no longer. A lone death waits for
 * no one: it is reaped on the turn after it was noticed. */
#define REAPS_PER_TURN 2

static void reap_turn(uv_idle_t *h);

static void queue_reap(struct cr_proc *p)
{
    struct cr_reaper *r = p->r;
    if (p->queued)
        return;
    if (p->polling) /* readable until reaped: it would wake every turn */
        uv_poll_stop(&p->poll);
    p->queued = true;
    p->next = NULL;
    if (r->tail)
        r->tail->next = p;
    else
        r->head = p;
    r->tail = p;
    if (!uv_is_active((uv_handle_t *)&r->turn) && !uv_is_closing((uv_handle_t *)&r->turn))
        uv_idle_start(&r->turn, reap_turn);
}

static void on_exit_ready(uv_poll_t *h, int status, int events)
{
    struct cr_proc *p = h->data;
    if (p->g)
        queue_reap(p);
}

static void reap_turn(uv_idle_t *h)
{
    struct cr_reaper *r = h->data;
    for (unsigned n = 0; n < REAPS_PER_TURN && r->head; n++) {
        struct cr_proc *p = r->head;
        r->head = p->next;
        if (!r->head)
            r->tail = NULL;
        p->queued = false;
        if (p->g && !reap(p->g) && p->polling) /* EINTR: look again */
            uv_poll_start(&p->poll, UV_READABLE, on_exit_ready);
    }
    if (r->head)
        return;
    uv_idle_stop(h);
    /* Zombies the SIGCHLD scan could not see past a queued worker's. */
    cr_reaper_scan(r);
}

int cr_reaper_watch(struct cr_reaper *r, struct cr_gen *g, int pidfd)
{
    struct cr_proc *p = calloc(1, sizeof(*p));
    if (!p) {
        if (pidfd >= 0)
            close(pidfd);
        return -ENOMEM;
    }
    *p = (struct cr_proc){.g = g, .r = r, .pid = g->pid, .pidfd = pidfd};
    if (!tsearch(p, &r->by_pid, cmp_pid)) {
        if (pidfd >= 0)
            close(pidfd);
        free(p);
        return -ENOMEM;
    }
    g->proc = p;
    if (pidfd < 0)
        return 0; /* SIGCHLD's scan finds it */
    int e = uv_poll_init(r->loop, &p->poll, pidfd);
    if (e == 0) {
        p->poll.data = p;
        p->polling = true;
        e = uv_poll_start(&p->poll, UV_READABLE, on_exit_ready);
    }
    if (e < 0) {
        cr_reaper_release(g);
        return e;
    }
    return 0;
}

void cr_reaper_scan(struct cr_reaper *r)
{
    /* Bounded per wake-up: SIGCHLD coalesces, and the next one (or the
     * next worker exit) brings us back for whatever is left. */
    for (unsigned n = 0; n < 4096; n++) {
        siginfo_t si = {0};
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            return;
        struct cr_gen *g = cr_reaper_find(r, si.si_pid);
        if (g) {
            /* Queued (reap_turn); until it is reaped, it is the zombie
             * waitid names first: the queue scans again once drained. */
            queue_reap(g->proc);
            return;
        }
        /* A child libuv reaps: it will, on this same SIGCHLD; whatever
         * lies behind its zombie is scanned once it has (foreign_del). */
        for (unsigned i = 0; i < r->nforeign; i++)
            if (r->foreign[i] == si.si_pid)
                return;
        /* An orphan of some worker, re-parented to corrald (a subreaper,
         * or PID 1 in a container): nobody else will ever reap it. */
        pid_t orphan = si.si_pid;
        if (waitid(P_PID, (id_t)orphan, &si, WEXITED | WNOHANG) < 0)
            return;
        r->orphans++;
    }
}

int cr_reaper_foreign_add(struct cr_reaper *r, pid_t pid)
{
    if (r->nforeign == CR_REAPER_FOREIGN_MAX)
        return -ENOSPC;
    r->foreign[r->nforeign++] = pid;
    return 0;
}

void cr_reaper_foreign_del(struct cr_reaper *r, pid_t pid)
{
    for (unsigned i = 0; i < r->nforeign; i++)
        if (r->foreign[i] == pid) {
            r->foreign[i] = r->foreign[--r->nforeign];
            cr_reaper_scan(r);
            return;
        }
}

/* A live process whose pid a message names is not exiting (a stale message
 * of an earlier process with the same pid, or the old main thread of a
 * process that exec'd from another thread): its stat says so
 * (cr_taskstats_exiting). No stat: not ours to judge, the reap tells. */
void cr_reaper_exit_notice(struct cr_reaper *r, const struct cr_taskstats_exit *e)
{
    pid_t pid = e->whole_group ? e->tgid : e->pid;
    struct cr_gen *g = cr_reaper_find(r, pid);
    char buf[1024];
    const char *stat = g ? cr_proc_stat(pid, buf, sizeof(buf)) : NULL;
    if (stat && cr_taskstats_exiting(stat, e->whole_group))
        r->sink->exit_notice(g);
}
