/* The descriptors of one worker generation: its pidfd (exit), its output
 * pipe (forwarded to corrald's log, tail kept for the post-mortem), the
 * stream form of the notify protocol, and the cgroup OOM watch. Also the
 * shared datagram notify socket. What they deliver goes to sup->io_sink. */
#include "worker_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <search.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "internal.h"
#include "log.h"
#include "notify_socket.h"
#include "ring.h"
#include "spawnproc.h"
#include "taskstats.h"
#include "textfile.h"

enum { IO_PID, IO_OUT, IO_NS, IO_OOM, IO_EXEC, IO_MAX };

/* What a generation wrote: the line being cut for the log and the tail
 * kept for its post-mortem. Made by the first byte: most workers write
 * nothing while they run well, and 5 KiB each adds up over hundreds. */
struct io_output {
    char line[1024];
    size_t line_len;
    struct cr_ring tail_ring; /* indices into tail (common/ring.h) */
    char tail[CR_STDERR_TAIL];
};

struct cr_wio {
    struct cr_worker *w; /* NULL once the worker let go of it */
    int fd[IO_MAX];
    uv_poll_t poll[IO_MAX];
    bool polling[IO_MAX];
    int open;
    bool execd;  /* the exec succeeded: /proc/<pid> shows the worker's own image */
    int mem_fd;  /* /proc/<pid>/statm or smaps_rollup, kept open for sampling */
    bool mem_pss; /* which of the two mem_fd is */
    pid_t pid;    /* the key of sup->io_by_pid */
    struct cr_wio *reap_next; /* in sup's reap queue when reap_queued */
    bool reap_queued;

    struct io_output *out; /* NULL until the first output byte */
    /* The stream form of the notify protocol, held only while a message is
     * incomplete: a worker writes whole messages, so between reads
     * there is nothing to keep. */
    struct cr_notify_stream *ns;
};

/* The notify socket names its sender by pid, a thousand times a second at
 * a thousand workers: a tree keyed by the generation's pid, not a walk of
 * the worker list per datagram. */
static int cmp_pid(const void *a, const void *b)
{
    pid_t x = ((const struct cr_wio *)a)->pid, y = ((const struct cr_wio *)b)->pid;
    return x < y ? -1 : x > y;
}

int cr_io_pidfd(const struct cr_worker *w)
{
    return w->io ? w->io->fd[IO_PID] : -1;
}

static void io_closed(uv_handle_t *h)
{
    struct cr_wio *io = h->data;
    if (--io->open == 0) {
        for (int i = 0; i < IO_MAX; i++)
            if (io->fd[i] >= 0)
                close(io->fd[i]);
        if (io->mem_fd >= 0)
            close(io->mem_fd);
        free(io->out);
        free(io->ns);
        free(io);
    }
}

static void io_stop(struct cr_wio *io, int which)
{
    if (!io->polling[which])
        return;
    io->polling[which] = false;
    uv_close((uv_handle_t *)&io->poll[which], io_closed);
}

/* Lets go of a generation's descriptors; they close once libuv is done. */
static void io_release(struct cr_worker *w)
{
    struct cr_wio *io = w->io;
    if (!io)
        return;
    tdelete(io, &w->sup->io_by_pid, cmp_pid);
    w->io = NULL;
    io->w = NULL;
    for (int i = 0; i < IO_MAX; i++)
        io_stop(io, i);
    /* Drops the worker's own reference (see cr_io_adopt). */
    uv_handle_t fake = {.data = io};
    io_closed(&fake);
}

int cr_io_mem_fd(struct cr_worker *w, bool pss, bool reopen)
{
    struct cr_wio *io = w->io;
    if (!io || !io->execd)
        return -1;
    if (io->mem_fd >= 0 && (io->mem_pss != pss || reopen)) {
        close(io->mem_fd);
        io->mem_fd = -1;
    }
    if (io->mem_fd < 0) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)w->pid, pss ? "smaps_rollup" : "statm");
        io->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        io->mem_pss = pss;
    }
    return io->mem_fd;
}

void cr_io_tail(const struct cr_worker *w, char *buf, size_t *len)
{
    const struct io_output *out = w->io ? w->io->out : NULL;
    *len = out ? out->tail_ring.len : 0;
    for (size_t i = 0; i < *len; i++)
        buf[i] = out->tail[cr_ring_oldest(&out->tail_ring, CR_STDERR_TAIL, i)];
}

static void forward_line(const struct cr_worker *w, struct io_output *out)
{
    out->line[out->line_len] = '\0';
    cr_log_event(CR_LOG_INFO, "output", w->id, w->pid, NULL, "w%d[%d]: %s", w->id, (int)w->pid,
                 out->line);
    out->line_len = 0;
}

static void output_bytes(const struct cr_worker *w, struct io_output *out, const char *buf,
                         size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out->tail[cr_ring_push(&out->tail_ring, CR_STDERR_TAIL)] = buf[i];
        if (buf[i] == '\n') {
            forward_line(w, out);
            continue;
        }
        out->line[out->line_len++] = buf[i];
        if (out->line_len == sizeof(out->line) - 1)
            forward_line(w, out); /* an endless line is cut, never buffered without bound */
    }
}

/* Reads what the pipe holds now. Returns false at EOF or error. */
static bool read_output(struct cr_wio *io)
{
    char buf[4096];
    for (int rounds = 0; rounds < 16; rounds++) {
        ssize_t n = read(io->fd[IO_OUT], buf, sizeof(buf));
        if (n > 0) {
            /* Without memory for the tail the bytes are dropped: the pipe
             * must not fill up and block the worker. */
            if (io->out || (io->out = calloc(1, sizeof(*io->out))))
                output_bytes(io->w, io->out, buf, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EINTR))
            continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

void cr_io_drain_output(struct cr_worker *w)
{
    struct cr_wio *io = w->io;
    if (!io || io->fd[IO_OUT] < 0)
        return;
    read_output(io);
    if (io->out && io->out->line_len)
        forward_line(w, io->out);
}

static void on_output(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    if (!io->w)
        return;
    if (status < 0 || !read_output(io))
        io_stop(io, IO_OUT);
}

/* Hands the whole messages in buf to the sink. False when the stream must
 * close: a message outgrew the protocol's bound. */
static bool stream_feed(struct cr_wio *io, const char *buf, size_t n)
{
    char msg[CR_NOTIFY_MAX + 2];
    /* The sink may let go of the generation (io->w NULL): stop there. */
    for (size_t off = 0; off < n && io->w;) {
        size_t used = 0, mlen = 0;
        int r = cr_notify_stream_feed(io->ns, buf + off, n - off, &used, msg, &mlen);
        off += used;
        if (r < 0) {
            cr_log_event(CR_LOG_WARNING, "protocol", io->w->id, io->w->pid, NULL,
                         "worker %d: notify stream message over %d bytes; stream closed", io->w->id,
                         CR_NOTIFY_MAX);
            return false;
        }
        if (r == 0)
            break;
        struct cr_notify_msg m;
        cr_notify_parse(msg, mlen, &m, NULL);
        io->w->sup->io_sink->message(io->w, &m);
    }
    return true;
}

static void on_nstream(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    if (!io->w)
        return;
    char buf[4096];
    ssize_t n = status < 0 ? -1 : read(io->fd[IO_NS], buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0 && !io->ns && !(io->ns = calloc(1, sizeof(*io->ns)))) {
        cr_log_event(CR_LOG_ERR, "protocol", io->w->id, io->w->pid, NULL,
                     "worker %d: no memory to frame its notify stream; stream closed", io->w->id);
        n = -1;
    }
    if (n <= 0 || !stream_feed(io, buf, (size_t)n)) {
        io_stop(io, IO_NS);
        return;
    }
    if (io->ns->len == 0) { /* no message pending: nothing to keep */
        free(io->ns);
        io->ns = NULL;
    }
}

static void on_oom(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    cr_cgroup_oom_fd_drain(io->fd[IO_OOM]);
    struct cr_worker *w = io->w;
    if (!w || !w->cg)
        return;
    struct cr_cgroup_events ev = {0};
    if (cr_cgroup_read_events(w->cg, true, &ev) < 0)
        return;
    /* v1's eventfd also fires for OOMs in enclosing groups and on removal;
     * v2's inotify fires on any memory.events change: the counters say
     * what happened. */
    if (ev.oom_kill > w->seen.oom_kill || ev.oom > w->seen.oom) {
        w->oom_events++;
        cr_log_event(CR_LOG_WARNING, "oom", w->id, w->pid, NULL,
                     "worker %d: OOM in its cgroup (oom %llu, oom_kill %llu, limit hits %llu)",
                     w->id, (unsigned long long)ev.oom, (unsigned long long)ev.oom_kill,
                     (unsigned long long)ev.max);
    }
    if (ev.high > w->seen.high && w->sup->cfg.memory_high) {
        /* v2 memory.high throttles but does not contain growth without
         * swap: take the first "high" event as an early recycle signal. */
        char why[96];
        snprintf(why, sizeof(why), "memory.high reached (%llu high events)",
                 (unsigned long long)ev.high);
        w->sup->io_sink->recycle(w, why);
    }
    w->seen = ev;
}

/* The child's word on its exec, read when the pipe becomes readable or,
 * at the latest, when the child is reaped (it writes before it exits). */
static void read_exec(struct cr_wio *io)
{
    struct cr_worker *w = io->w;
    int stage = 0, err = 0;
    if (!w || !io->polling[IO_EXEC] || cr_spawn_read_exec(io->fd[IO_EXEC], &stage, &err) < 0)
        return;
    io_stop(io, IO_EXEC);
    io->execd = !err;
    if (!err)
        return;
    w->exec_errno = err;
    const struct cr_config *c = &w->sup->cfg;
    if (stage == CR_SPAWN_ATTACH) {
        cr_log_event(CR_LOG_ERR, "exec-failed", w->id, w->pid, NULL,
                     "worker %d: cannot enter its cgroup: %s", w->id, strerror(err));
    } else if (stage == CR_SPAWN_HELPER) {
        /* corral-exec ran at start-up; it vanished since, or the system
         * ran short: the start failed, and is retried like any other. */
        cr_log_event(CR_LOG_ERR, "exec-failed", w->id, w->pid, NULL,
                     "worker %d: cannot run corral-exec: %s", w->id, strerror(err));
        cr_io_helper_failed(w->sup, err);
    } else
        cr_log_event(CR_LOG_ERR, "exec-failed", w->id, w->pid, NULL,
                     "worker %d: cannot execute %s: %s", w->id,
                     c->argc ? c->argv[0] : w->sup->worker_path, strerror(err));
}

static void on_exec(uv_poll_t *p, int status, int events)
{
    read_exec(p->data);
}

/* The one place a worker is reaped, whichever way its exit was noticed
 * (its pidfd, or SIGCHLD where there is no pidfd). Returns false when the
 * process has not exited yet. */
static bool reap(struct cr_worker *w)
{
    struct cr_wio *io = w->io;
    siginfo_t si = {0};
    /* Peek first: while the exited worker is a zombie its pid and process
     * group cannot be reused, so without a cgroup the rest of its process
     * group can still be killed safely (a worker runs setsid()). With a
     * cgroup, releasing the group kills what is left in it. */
    if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == 0)
        return false;
    if (!w->cg && si.si_pid == w->pid)
        kill(-w->pid, SIGKILL);
    memset(&si, 0, sizeof(si));
    /* Reap this pid only, keeping the siginfo (CLD_DUMPED included). */
    if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG) < 0) {
        if (errno == EINTR)
            return false;
        /* Not ours to reap any more (ECHILD): never spin on a readable
         * pidfd; record what we know. */
        cr_log_event(CR_LOG_ERR, "lost", w->id, w->pid, NULL,
                     "worker %d: cannot reap pid %d: %s", w->id, (int)w->pid, strerror(errno));
        si.si_code = CLD_EXITED;
        si.si_status = 255;
    } else if (si.si_pid == 0) {
        return false;
    }
    w->wait_code = si.si_code;
    w->wait_status = si.si_status;
    if (io) {
        read_exec(io);
        io_stop(io, IO_PID);
    }
    w->sup->io_sink->exited(w);
    /* The reaper has read what it needed: the rest of the generation goes. */
    if (io && w->io == io)
        io_release(w);
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

static void queue_reap(struct cr_wio *io)
{
    struct cr_supervisor *sup = io->w->sup;
    if (io->reap_queued)
        return;
    if (io->polling[IO_PID]) /* readable until reaped: it would wake every turn */
        uv_poll_stop(&io->poll[IO_PID]);
    io->reap_queued = true;
    io->reap_next = NULL;
    if (sup->reap_tail)
        sup->reap_tail->reap_next = io;
    else
        sup->reap_head = io;
    sup->reap_tail = io;
    if (!uv_is_active((uv_handle_t *)&sup->reap_turn) &&
        !uv_is_closing((uv_handle_t *)&sup->reap_turn))
        uv_idle_start(&sup->reap_turn, reap_turn);
}

static void on_exit_ready(uv_poll_t *p, int status, int events);

static void reap_turn(uv_idle_t *h)
{
    struct cr_supervisor *sup = h->data;
    for (unsigned n = 0; n < REAPS_PER_TURN && sup->reap_head; n++) {
        struct cr_wio *io = sup->reap_head;
        sup->reap_head = io->reap_next;
        if (!sup->reap_head)
            sup->reap_tail = NULL;
        io->reap_queued = false;
        if (io->w && !reap(io->w) && io->polling[IO_PID]) /* EINTR: look again */
            uv_poll_start(&io->poll[IO_PID], UV_READABLE, on_exit_ready);
    }
    if (sup->reap_head)
        return;
    uv_idle_stop(h);
    /* Zombies the SIGCHLD scan could not see past a queued worker's. */
    cr_io_reap_children(sup);
}

static void on_exit_ready(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    if (io->w)
        queue_reap(io);
}

static struct cr_worker *worker_of_pid(struct cr_supervisor *sup, pid_t pid)
{
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->pid == pid)
            return w;
    return NULL;
}

void cr_io_reap_children(struct cr_supervisor *sup)
{
    /* Bounded per wake-up: SIGCHLD coalesces, and the next one (or the
     * next worker exit) brings us back for whatever is left. */
    for (unsigned n = 0; n < 4096; n++) {
        siginfo_t si = {0};
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
            return;
        struct cr_worker *w = worker_of_pid(sup, si.si_pid);
        if (w && w->io) {
            /* Queued (reap_turn); until it is reaped, it is the zombie
             * waitid names first: the queue scans again once drained. */
            queue_reap(w->io);
            return;
        }
        if (w) {
            if (!reap(w))
                return;
            continue;
        }
        /* An orphan of some worker, re-parented to corrald (a subreaper,
         * or PID 1 in a container): nobody else will ever reap it. */
        pid_t orphan = si.si_pid;
        if (waitid(P_PID, (id_t)orphan, &si, WEXITED | WNOHANG) < 0)
            return;
        sup->orphans_reaped++;
    }
}

static int io_poll(struct cr_wio *io, uv_loop_t *loop, int which, uv_poll_cb cb)
{
    if (io->fd[which] < 0)
        return 0;
    int r = uv_poll_init(loop, &io->poll[which], io->fd[which]);
    if (r < 0)
        return r;
    io->poll[which].data = io;
    io->polling[which] = true;
    io->open++;
    return uv_poll_start(&io->poll[which], UV_READABLE, cb);
}

void cr_io_helper_failed(struct cr_supervisor *sup, int err)
{
    if (!sup->spawn_helper || !cr_spawn_helper_unusable(err))
        return;
    cr_log(CR_LOG_WARNING, "cannot run %s (%s): workers start by fork from now on",
           sup->spawn_helper, strerror(err));
    free(sup->spawn_helper);
    sup->spawn_helper = NULL;
}

int cr_io_adopt(struct cr_worker *w, int pidfd, int out_fd, int ns_fd, int exec_fd)
{
    struct cr_wio *io = calloc(1, sizeof(*io));
    if (!io) {
        close(pidfd);
        close(out_fd);
        close(ns_fd);
        close(exec_fd);
        return -ENOMEM;
    }
    io->w = w;
    /* The worker's reference: the generation lives until io_release(), not
     * merely while some poll is open (without a pidfd, the output and
     * stream polls may all reach EOF before the worker is reaped). */
    io->open = 1;
    io->fd[IO_PID] = pidfd;
    io->fd[IO_OUT] = out_fd;
    io->fd[IO_NS] = ns_fd;
    io->fd[IO_OOM] = -1;
    io->fd[IO_EXEC] = exec_fd;
    io->mem_fd = -1;
    io->pid = w->pid;
    w->io = io;
    if (!tsearch(io, &w->sup->io_by_pid, cmp_pid)) {
        io_release(w);
        return -ENOMEM;
    }
    if (w->cg && cr_cgroup_oom_fd(w->cg, &io->fd[IO_OOM]) < 0)
        io->fd[IO_OOM] = -1; /* counters are still read at death */
    uv_loop_t *loop = w->sup->loop;
    uv_os_fd_t fds[] = {out_fd, ns_fd};
    for (size_t i = 0; i < 2; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        fcntl(fds[i], F_SETFL, fl | O_NONBLOCK);
    }
    /* Without the exit watch the process cannot be supervised: fail. The
     * other watches only lose information (output, stream reports, OOM
     * notifications; the counters are read at death anyway). */
    int r = io_poll(io, loop, IO_PID, on_exit_ready);
    if (r < 0) {
        io_release(w);
        return r;
    }
    io_poll(io, loop, IO_OUT, on_output);
    io_poll(io, loop, IO_NS, on_nstream);
    io_poll(io, loop, IO_OOM, on_oom);
    io_poll(io, loop, IO_EXEC, on_exec);
    return 0;
}

/* ---- the datagram socket ----------------------------------------------- */

/* The worker whose main process is pid. */
static struct cr_worker *by_main_pid(struct cr_supervisor *sup, pid_t pid)
{
    struct cr_wio key = {.pid = pid};
    struct cr_wio *const *hit = tfind(&key, &sup->io_by_pid, cmp_pid);
    return hit ? (*hit)->w : NULL;
}

/* The worker a datagram came from: its main pid, or — like systemd's
 * NotifyAccess=all — any process inside the worker's cgroup, so a worker
 * started through a shell wrapper or a launcher can still report. */
static struct cr_worker *by_pid(struct cr_supervisor *sup, pid_t pid)
{
    struct cr_worker *w = by_main_pid(sup, pid);
    if (w)
        return w;
    if (!sup->cgroups)
        return NULL;
    char *rel = NULL;
    if (cr_cgroup_of_pid(pid, &rel) < 0)
        return NULL;
    struct cr_worker *found = NULL;
    for (struct cr_worker *w = sup->workers; w && !found; w = w->next)
        if (w->io && w->cg && strcmp(cr_cgroup_rel(w->cg), rel) == 0)
            found = w;
    free(rel);
    return found;
}

/* ---- the kernel's exit notices (exitnotice.c) --------------------------- */

/* A live worker whose pid a message names is not exiting (a stale message
 * of an earlier process with the same pid, or the old main thread of a
 * process that exec'd from another thread): its stat says so
 * (cr_taskstats_exiting). No stat: not ours to judge, the reap tells. */
void cr_io_exit_notice(struct cr_supervisor *sup, const struct cr_taskstats_exit *e)
{
    pid_t pid = e->whole_group ? e->tgid : e->pid;
    struct cr_worker *w = by_main_pid(sup, pid);
    char buf[1024];
    const char *stat = w ? cr_proc_stat(pid, buf, sizeof(buf)) : NULL;
    if (stat && cr_taskstats_exiting(stat, e->whole_group))
        sup->io_sink->exit_notice(w);
}

/* Heartbeats and reports come as a steady trickle — 256 workers reporting
 * every second woke corrald 256 times a second, and each wake-up cost more
 * than the message. So when the socket wakes us again within
 * NOTIFY_BATCH_MS of the last time, corrald stops polling it and reads it
 * every NOTIFY_BATCH_MS instead; NOTIFY_QUIET_TICKS ticks in a row that find
 * nothing, or one that finds the queue the kernel allows nearly full (two
 * short of it), go back to polling. The kernel queues at most net.unix.max_dgram_qlen datagrams (10
 * by default) on the socket, and a blocking sender (sd_notify) waits while
 * it is full: a tick must never let it fill. Batching is for the steady
 * state only: while workers are queued to spawn, every message (their
 * READY=1 above all) is read at once. A lone message (a READY=1 after a
 * quiet spell, the restart after a death) is read at once too; under a
 * trickle a message waits at most NOTIFY_BATCH_MS. */
#define NOTIFY_BATCH_MS    10
#define NOTIFY_QUIET_TICKS 3

/* net.unix.max_dgram_qlen less two, read once (10 when it cannot be). */
static int notify_tick_max(void)
{
    static int max;
    if (!max) {
        FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "re");
        int q = 0;
        if (!f || fscanf(f, "%d", &q) != 1 || q < 4)
            q = 10;
        if (f)
            fclose(f);
        max = q - 2;
    }
    return max;
}

/* Reads and hands on what the socket holds (at most 256 messages); returns
 * how many datagrams were read. */
static int notify_drain(struct cr_supervisor *sup)
{
    char buf[CR_NOTIFY_MAX];
    int i;
    for (i = 0; i < 256; i++) {
        pid_t pid = 0;
        ssize_t n = cr_notify_recv(sup->notify_fd, buf, sizeof(buf), &pid);
        if (n <= 0)
            break;
        struct cr_worker *w = by_pid(sup, pid);
        if (!w) {
            cr_log(CR_LOG_DEBUG, "notify datagram from unknown pid %d dropped", (int)pid);
            continue;
        }
        struct cr_notify_msg m;
        cr_notify_parse(buf, (size_t)n, &m, NULL);
        sup->io_sink->message(w, &m);
    }
    return i;
}

static void on_notify(uv_poll_t *p, int status, int events);

static bool spawning(const struct cr_supervisor *sup)
{
    return uv_is_active((const uv_handle_t *)&sup->spawn_pacer) ||
           uv_is_active((const uv_handle_t *)&sup->spawn_recheck);
}

static void on_notify_tick(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    int n = notify_drain(sup);
    sup->notify_quiet_ticks = n ? 0 : sup->notify_quiet_ticks + 1;
    if (uv_is_closing((uv_handle_t *)&sup->notify_poll) ||
        (sup->notify_quiet_ticks < NOTIFY_QUIET_TICKS && n < notify_tick_max() && !spawning(sup)))
        return;
    /* Quiet again, a stream the tick could let fill the queue, or spawns. */
    uv_timer_stop(t);
    sup->notify_woke_at = uv_now(sup->loop);
    uv_poll_start(&sup->notify_poll, UV_READABLE, on_notify);
}

static void on_notify(uv_poll_t *p, int status, int events)
{
    struct cr_supervisor *sup = p->data;
    notify_drain(sup);
    uint64_t now = uv_now(sup->loop);
    bool steady = now - sup->notify_woke_at < NOTIFY_BATCH_MS && !spawning(sup);
    sup->notify_woke_at = now;
    if (steady && !uv_is_closing((uv_handle_t *)&sup->notify_batch)) {
        sup->notify_quiet_ticks = 0;
        uv_poll_stop(p);
        uv_timer_start(&sup->notify_batch, on_notify_tick, NOTIFY_BATCH_MS, NOTIFY_BATCH_MS);
    }
}

int cr_io_notify_start(struct cr_supervisor *sup)
{
    int r = uv_poll_init(sup->loop, &sup->notify_poll, sup->notify_fd);
    if (r < 0)
        return r;
    sup->notify_poll.data = sup;
    uv_timer_init(sup->loop, &sup->notify_batch);
    sup->notify_batch.data = sup;
    return uv_poll_start(&sup->notify_poll, UV_READABLE, on_notify);
}

/* Where the private directory of the notify socket goes: the service's
 * runtime directory, else /run for root, else the user's runtime
 * directory, else the temporary directory. */
static const char *notify_base(void)
{
    const char *e = getenv("RUNTIME_DIRECTORY");
    if (e && *e && !strchr(e, ':'))
        return e;
    if (geteuid() == 0 && access("/run", W_OK) == 0)
        return "/run";
    if ((e = getenv("XDG_RUNTIME_DIR")) && *e)
        return e;
    if ((e = getenv("TMPDIR")) && *e)
        return e;
    return "/tmp";
}

int cr_io_notify_open(struct cr_supervisor *sup)
{
    char dir[sizeof(sup->notify_dir)];
    if (snprintf(dir, sizeof(dir), "%s/corral-notify.XXXXXX", notify_base()) >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    /* mkdtemp makes it 0700: only corrald (and, below, the workers' user)
     * can reach the socket inside. */
    if (!mkdtemp(dir))
        return -errno;
    memcpy(sup->notify_dir, dir, sizeof(dir));
    int r = snprintf(sup->notify_addr, sizeof(sup->notify_addr), "%s/notify", dir) >=
                    (int)sizeof(sup->notify_addr)
                ? -ENAMETOOLONG
                : cr_notify_open(sup->notify_addr, &sup->notify_fd);
    /* Under --user the workers' user owns both, so it can search the
     * directory and write to the socket; nobody else can. */
    if (r >= 0 && sup->set_ids &&
        (chown(dir, sup->worker_uid, sup->worker_gid) < 0 ||
         chown(sup->notify_addr, sup->worker_uid, sup->worker_gid) < 0))
        r = -errno;
    if (r < 0) {
        cr_io_notify_close(sup);
        return r;
    }
    return cr_io_notify_start(sup);
}

void cr_io_notify_close(struct cr_supervisor *sup)
{
    if (sup->notify_fd >= 0)
        close(sup->notify_fd);
    sup->notify_fd = -1;
    if (sup->notify_addr[0])
        unlink(sup->notify_addr);
    if (sup->notify_dir[0])
        rmdir(sup->notify_dir);
    sup->notify_addr[0] = sup->notify_dir[0] = '\0';
}
