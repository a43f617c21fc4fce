/* The descriptors of one generation: its output pipe (forwarded to
 * corrald's log, tail kept for the post-mortem), the stream form of the
 * notify protocol, the cgroup OOM watch and the exec pipe. What they
 * deliver goes to the host's sink. */
#include "wio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acceptq.h"
#include "config.h"
#include "cr_cgroup.h"
#include "gen.h"
#include "listen.h"
#include "log.h"
#include "ring.h"
#include "spawnproc.h"
#include "spawnway.h"

enum { IO_OUT, IO_NS, IO_OOM, IO_EXEC, IO_MAX };

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
    struct cr_gen *g; /* NULL once the generation let go of it */
    int fd[IO_MAX];
    uv_poll_t poll[IO_MAX];
    bool polling[IO_MAX];
    int open;     /* the generation's reference and one per poll not yet closed */
    bool execd;   /* the exec succeeded: /proc/<pid> shows the worker's own image */
    int mem_fd;   /* /proc/<pid>/statm or smaps_rollup, kept open for sampling */
    bool mem_pss; /* which of the two mem_fd is */
    /* --balance reuseport: corrald's copy of the worker's own listening
     * socket, and its accept queue across samples (the accept watch);
     * -1 once the worker no longer accepts (cr_io_drop_listener). */
    int listen_fd;
    struct cr_acceptq_sock listen_q;

    struct io_output *out; /* NULL until the first output byte */
    /* The stream form of the notify protocol, held only while a message is
     * incomplete: a worker writes whole messages, so between reads
     * there is nothing to keep. */
    struct cr_notify_stream *ns;
};

static void io_closed(uv_handle_t *h)
{
    struct cr_wio *io = h->data;
    if (--io->open == 0) {
        for (int i = 0; i < IO_MAX; i++)
            if (io->fd[i] >= 0)
                close(io->fd[i]);
        if (io->mem_fd >= 0)
            close(io->mem_fd);
        if (io->listen_fd >= 0)
            close(io->listen_fd);
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

void cr_io_release(struct cr_gen *g)
{
    struct cr_wio *io = g->io;
    if (!io)
        return;
    g->io = NULL;
    io->g = NULL;
    for (int i = 0; i < IO_MAX; i++)
        io_stop(io, i);
    /* The listening socket at once: it must not outlive the process in
     * the reuseport group (io_closed may wait for libuv). */
    if (io->listen_fd >= 0)
        close(io->listen_fd);
    io->listen_fd = -1;
    /* Drops the generation's own reference (see cr_io_adopt). */
    uv_handle_t ref = {.data = io};
    io_closed(&ref);
}

int cr_io_mem_fd(struct cr_gen *g, bool pss, bool reopen)
{
    struct cr_wio *io = g->io;
    if (!io || !io->execd)
        return -1;
    if (io->mem_fd >= 0 && (io->mem_pss != pss || reopen)) {
        close(io->mem_fd);
        io->mem_fd = -1;
    }
    if (io->mem_fd < 0) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)g->pid, pss ? "smaps_rollup" : "statm");
        io->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        io->mem_pss = pss;
    }
    return io->mem_fd;
}

void cr_io_keep_listener(struct cr_gen *g, int fd)
{
    struct cr_wio *io = g->io;
    if (!io) {
        close(fd);
        return;
    }
    if (io->listen_fd >= 0)
        close(io->listen_fd);
    io->listen_fd = fd;
    io->listen_q = (struct cr_acceptq_sock){0};
}

void cr_io_drop_listener(struct cr_gen *g)
{
    struct cr_wio *io = g->io;
    if (!io || io->listen_fd < 0)
        return;
    close(io->listen_fd);
    io->listen_fd = -1;
}

int cr_io_listen_queue(struct cr_gen *g, uint64_t now, uint32_t *length, uint32_t *max,
                       struct cr_acceptq_seen *seen)
{
    struct cr_wio *io = g->io;
    if (!io || io->listen_fd < 0)
        return 0;
    int r = cr_listen_queue(io->listen_fd, length, max);
    if (r > 0)
        *seen = cr_acceptq_sock_observe(&io->listen_q, *length, now);
    return r;
}

uint64_t cr_io_resident_now(const struct cr_gen *g)
{
    const struct cr_wio *io = g->io;
    if (!io || !io->execd || io->mem_fd < 0 || io->mem_pss)
        return 0;
    return cr_mem_read_resident(io->mem_fd, false);
}

void cr_io_tail(const struct cr_gen *g, char *buf, size_t *len)
{
    const struct io_output *out = g->io ? g->io->out : NULL;
    *len = out ? out->tail_ring.len : 0;
    for (size_t i = 0; i < *len; i++)
        buf[i] = out->tail[cr_ring_oldest(&out->tail_ring, CR_STDERR_TAIL, i)];
}

static void forward_line(const struct cr_gen *g, struct io_output *out)
{
    out->line[out->line_len] = '\0';
    cr_log_event(CR_LOG_INFO, "output", g->id, g->pid, NULL, "w%d[%d]: %s", g->id, (int)g->pid,
                 out->line);
    out->line_len = 0;
}

static void output_bytes(const struct cr_gen *g, struct io_output *out, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out->tail[cr_ring_push(&out->tail_ring, CR_STDERR_TAIL)] = buf[i];
        if (buf[i] == '\n') {
            forward_line(g, out);
            continue;
        }
        out->line[out->line_len++] = buf[i];
        if (out->line_len == sizeof(out->line) - 1)
            forward_line(g, out); /* an endless line is cut, never buffered without bound */
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
                output_bytes(io->g, io->out, buf, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EINTR))
            continue;
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
    return true;
}

static void on_output(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    if (!io->g)
        return;
    if (status < 0 || !read_output(io))
        io_stop(io, IO_OUT);
}

/* Hands the whole messages in buf to the sink. False when the stream must
 * close: a message outgrew the protocol's bound. */
static bool stream_feed(struct cr_wio *io, const char *buf, size_t n)
{
    char msg[CR_NOTIFY_MAX + 2];
    /* The sink may let go of the generation (io->g NULL): stop there. */
    for (size_t off = 0; off < n && io->g;) {
        size_t used = 0, mlen = 0;
        int r = cr_notify_stream_feed(io->ns, buf + off, n - off, &used, msg, &mlen);
        off += used;
        if (r < 0) {
            cr_log_event(CR_LOG_WARNING, "protocol", io->g->id, io->g->pid, NULL,
                         "worker %d: notify stream message over %d bytes; stream closed", io->g->id,
                         CR_NOTIFY_MAX);
            return false;
        }
        if (r == 0)
            break;
        struct cr_notify_msg m;
        cr_notify_parse(msg, mlen, &m, NULL);
        io->g->host->sink->message(io->g, &m);
    }
    return true;
}

static void on_nstream(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    if (!io->g)
        return;
    char buf[4096];
    ssize_t n = status < 0 ? -1 : read(io->fd[IO_NS], buf, sizeof(buf));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0 && !io->ns && !(io->ns = calloc(1, sizeof(*io->ns)))) {
        cr_log_event(CR_LOG_ERR, "protocol", io->g->id, io->g->pid, NULL,
                     "worker %d: no memory to frame its notify stream; stream closed", io->g->id);
        n = -1;
    }
    if (n <= 0 || !stream_feed(io, buf, (size_t)n)) {
        io_stop(io, IO_NS);
        return;
    }
    if (io->ns && io->ns->len == 0) { /* no message pending: nothing to keep */
        free(io->ns);
        io->ns = NULL;
    }
}

static void on_oom(uv_poll_t *p, int status, int events)
{
    struct cr_wio *io = p->data;
    cr_cgroup_oom_fd_drain(io->fd[IO_OOM]);
    struct cr_gen *g = io->g;
    if (!g || !g->cg.cg)
        return;
    struct cr_cgroup_events ev = {0};
    if (cr_cgroup_read_events(g->cg.cg, true, &ev) < 0)
        return;
    /* v1's eventfd also fires for OOMs in enclosing groups and on removal;
     * v2's inotify fires on any memory.events change: the counters say
     * what happened. */
    if (ev.oom_kill > g->cg.seen.oom_kill || ev.oom > g->cg.seen.oom) {
        g->cg.oom_events++;
        cr_log_event(CR_LOG_WARNING, "oom", g->id, g->pid, NULL,
                     "worker %d: OOM in its cgroup (oom %llu, oom_kill %llu, limit hits %llu)",
                     g->id, (unsigned long long)ev.oom, (unsigned long long)ev.oom_kill,
                     (unsigned long long)ev.max);
    }
    bool high = ev.high > g->cg.seen.high && g->host->cfg->memory_high;
    g->cg.seen = ev;
    if (high) {
        /* v2 memory.high throttles but does not contain growth without
         * swap: take the first "high" event as an early recycle signal. */
        char why[96];
        snprintf(why, sizeof(why), "memory.high reached (%llu high events)",
                 (unsigned long long)ev.high);
        g->host->sink->recycle(g, why);
    }
}

/* The child's word on its exec, read when the pipe becomes readable or,
 * at the latest, when the child is reaped (it writes before it exits). */
static void read_exec(struct cr_wio *io)
{
    struct cr_gen *g = io->g;
    int stage = 0, err = 0;
    if (!g || !io->polling[IO_EXEC] || cr_spawn_read_exec(io->fd[IO_EXEC], &stage, &err) < 0)
        return;
    io_stop(io, IO_EXEC);
    io->execd = !err;
    if (!err) {
        /* Open now, not at the first sample: a status asked for in
         * between reads the worker's RSS, not an unknown. Not under
         * --pss: status reads no PSS descriptor, and smaps_rollup stays
         * bound to the image it was opened on (a wrapper's, before its
         * exec); the first sample opens that. */
        if (!g->host->cfg->pss)
            cr_io_mem_fd(g, false, false);
        g->host->sink->exec_ok(g);
        return;
    }
    g->exit.exec_errno = err;
    g->exit.exec_stage = stage;
    const struct cr_config *c = g->host->cfg;
    if (stage == CR_SPAWN_ATTACH) {
        cr_log_event(CR_LOG_ERR, "exec-failed", g->id, g->pid, NULL,
                     "worker %d: cannot enter its cgroup: %s", g->id, strerror(err));
    } else if (stage == CR_SPAWN_HELPER) {
        /* corral-exec ran at start-up; it vanished since, or the system
         * ran short: the start failed, and is retried like any other. */
        cr_log_event(CR_LOG_ERR, "exec-failed", g->id, g->pid, NULL,
                     "worker %d: cannot run corral-exec: %s", g->id, strerror(err));
        cr_spawner_helper_failed(g->host->spawner, err);
    } else {
        cr_log_event(
            CR_LOG_ERR, "exec-failed", g->id, g->pid, NULL, "worker %d: cannot execute %s: %s",
            g->id, c->argc ? c->argv[0] : cr_spawner_worker_path(g->host->spawner), strerror(err));
    }
    g->host->sink->exec_failed(g);
}

static void on_exec(uv_poll_t *p, int status, int events)
{
    read_exec(p->data);
}

void cr_io_read_exec(struct cr_gen *g)
{
    if (g->io)
        read_exec(g->io);
}

bool cr_io_execd(const struct cr_gen *g)
{
    return g->io && g->io->execd;
}

void cr_io_drain_output(struct cr_gen *g)
{
    struct cr_wio *io = g->io;
    if (!io || io->fd[IO_OUT] < 0)
        return;
    read_output(io);
    if (io->out && io->out->line_len)
        forward_line(g, io->out);
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

int cr_io_adopt(struct cr_gen *g, int out_fd, int ns_fd, int exec_fd)
{
    struct cr_wio *io = calloc(1, sizeof(*io));
    if (!io) {
        close(out_fd);
        close(ns_fd);
        close(exec_fd);
        return -ENOMEM;
    }
    io->g = g;
    /* The generation's reference: it lives until cr_io_release(), not
     * merely while some poll is open (the output and stream polls may all
     * reach EOF before the process is reaped). */
    io->open = 1;
    io->fd[IO_OUT] = out_fd;
    io->fd[IO_NS] = ns_fd;
    io->fd[IO_OOM] = -1;
    io->fd[IO_EXEC] = exec_fd;
    io->mem_fd = -1;
    io->listen_fd = -1;
    g->io = io;
    if (g->cg.cg && cr_cgroup_oom_fd(g->cg.cg, &io->fd[IO_OOM]) < 0)
        io->fd[IO_OOM] = -1; /* counters are still read at death */
    int fds[] = {out_fd, ns_fd};
    for (size_t i = 0; i < 2; i++) {
        int fl = fcntl(fds[i], F_GETFL);
        fcntl(fds[i], F_SETFL, fl | O_NONBLOCK);
    }
    /* These watches only lose information when they fail (output, stream
     * reports, OOM notifications: the counters are read at death anyway). */
    uv_loop_t *loop = g->host->loop;
    io_poll(io, loop, IO_OUT, on_output);
    io_poll(io, loop, IO_NS, on_nstream);
    io_poll(io, loop, IO_OOM, on_oom);
    io_poll(io, loop, IO_EXEC, on_exec);
    return 0;
}
