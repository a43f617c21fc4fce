/* The datagram notify socket: see notify_rx.h. */
#include "notify_rx.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "gen.h"
#include "log.h"
#include "notify.h"
#include "notify_socket.h"
#include "pathperm.h"
#include "reaper.h"
#include "uvclose.h"

static bool in_group(struct cr_gen *g, void *rel)
{
    return g->cg.cg && strcmp(cr_cgroup_rel(g->cg.cg), rel) == 0;
}

/* The generation a datagram came from: its main pid, or — like systemd's
 * NotifyAccess=all — any process inside the worker's cgroup, so a worker
 * started through a shell wrapper or a launcher can still report. */
static struct cr_gen *sender(struct cr_notify_rx *rx, pid_t pid)
{
    struct cr_gen *g = cr_reaper_find(rx->reaper, pid);
    if (g || !rx->by_cgroup)
        return g;
    char *rel = NULL;
    if (cr_cgroup_of_pid(pid, &rel) < 0)
        return NULL;
    g = cr_reaper_first(rx->reaper, in_group, rel);
    free(rel);
    return g;
}

/* Heartbeats and reports come as a steady trickle — 256 workers reporting
 * every second woke corrald 256 times a second, and each wake-up cost more
 * than the message. So when the socket wakes us again within
 * NOTIFY_BATCH_MS of the last time, corrald stops polling it and reads it
 * every NOTIFY_BATCH_MS instead; NOTIFY_QUIET_TICKS ticks in a row that find
 * nothing, or one that finds the queue the kernel allows nearly full (two
 * short of it), go back to polling. The kernel queues at most
 * net.unix.max_dgram_qlen datagrams (10 by default) on the socket, and a
 * blocking sender (sd_notify) waits while it is full: a tick must never let
 * it fill. Batching is for the steady state only: while workers are queued
 * to spawn, every message (their READY=1 above all) is read at once. A lone
 * message (a READY=1 after a quiet spell, the restart after a death) is
 * read at once too; under a trickle a message waits at most
 * NOTIFY_BATCH_MS. */
#define NOTIFY_BATCH_MS    10
#define NOTIFY_QUIET_TICKS 3

/* net.unix.max_dgram_qlen less two, read once (10 when it cannot be). */
static int tick_max(void)
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
static int drain(struct cr_notify_rx *rx)
{
    char buf[CR_NOTIFY_MAX];
    int i;
    for (i = 0; i < 256; i++) {
        pid_t pid = 0;
        ssize_t n = cr_notify_recv(rx->fd, buf, sizeof(buf), &pid);
        if (n <= 0)
            break;
        struct cr_gen *g = sender(rx, pid);
        if (!g) {
            cr_log(CR_LOG_DEBUG, "notify datagram from unknown pid %d dropped", (int)pid);
            continue;
        }
        struct cr_notify_msg m;
        cr_notify_parse(buf, (size_t)n, &m, NULL);
        rx->sink->message(g, &m);
    }
    return i;
}

static bool busy(const struct cr_notify_rx *rx)
{
    return rx->busy && rx->busy(rx->busy_ctx);
}

static void on_notify(uv_poll_t *p, int status, int events);

static void on_tick(uv_timer_t *t)
{
    struct cr_notify_rx *rx = t->data;
    int n = drain(rx);
    rx->quiet_ticks = n ? 0 : rx->quiet_ticks + 1;
    if (uv_is_closing((uv_handle_t *)&rx->poll) ||
        (rx->quiet_ticks < NOTIFY_QUIET_TICKS && n < tick_max() && !busy(rx)))
        return;
    /* Quiet again, a stream the tick could let fill the queue, or spawns. */
    uv_timer_stop(t);
    rx->woke_at = uv_now(rx->loop);
    uv_poll_start(&rx->poll, UV_READABLE, on_notify);
}

static void on_notify(uv_poll_t *p, int status, int events)
{
    struct cr_notify_rx *rx = p->data;
    drain(rx);
    uint64_t now = uv_now(rx->loop);
    bool steady = now - rx->woke_at < NOTIFY_BATCH_MS && !busy(rx);
    rx->woke_at = now;
    if (steady && !uv_is_closing((uv_handle_t *)&rx->batch)) {
        rx->quiet_ticks = 0;
        uv_poll_stop(p);
        uv_timer_start(&rx->batch, on_tick, NOTIFY_BATCH_MS, NOTIFY_BATCH_MS);
    }
}

/* Where the private directory of the socket goes: the service's runtime
 * directory, else /run for root, else the user's runtime directory, else
 * the temporary directory. */
static const char *base_dir(void)
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

int cr_notify_rx_open(struct cr_notify_rx *rx, uv_loop_t *loop, struct cr_reaper *reaper,
                      const struct cr_gen_sink *sink, const struct cr_notify_rx_opts *o)
{
    *rx = (struct cr_notify_rx){.loop = loop,
                                .reaper = reaper,
                                .sink = sink,
                                .fd = -1,
                                .by_cgroup = o->by_cgroup,
                                .busy = o->busy,
                                .busy_ctx = o->busy_ctx};
    char dir[sizeof(rx->dir)];
    if (snprintf(dir, sizeof(dir), "%s/corral-notify.XXXXXX", base_dir()) >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    /* mkdtemp makes it 0700: only corrald (and, below, the workers) can
     * reach the socket inside. */
    if (!mkdtemp(dir))
        return -errno;
    memcpy(rx->dir, dir, sizeof(dir));
    int r = snprintf(rx->addr, sizeof(rx->addr), "%s/notify", dir) >= (int)sizeof(rx->addr)
                ? -ENAMETOOLONG
                : cr_notify_open(rx->addr, &rx->fd);
    /* Under --user the workers' user owns the socket, so it can write to
     * it, and the workers' group may search the directory (0710); nobody
     * else can reach it. The directory stays corrald's: a root without
     * CAP_DAC_OVERRIDE (the hardened unit) could not unlink a socket in a
     * directory it no longer owns. The socket first (0600, whatever the
     * umask), while the path is still corrald's to walk. */
    if (r >= 0 && o->chown &&
        (chmod(rx->addr, 0600) < 0 || chown(rx->addr, o->uid, o->gid) < 0 || chown(dir, (uid_t)-1, o->gid) < 0 ||
         chmod(dir, 0710) < 0))
        r = -errno;
    /* A parent the workers cannot search (a unit's RuntimeDirectoryMode=0750
     * under root) silences them: every readiness would be assumed, every
     * heartbeat and heap report lost. Say so, once, at start. */
    char bad[PATH_MAX];
    struct stat bad_st;
    if (r >= 0 && o->chown && !cr_path_reachable(dir, o->uid, o->gid, bad, sizeof(bad), &bad_st))
        cr_log(CR_LOG_WARNING,
               "workers (uid %u gid %u) cannot reach the notify socket %s: %s is mode %04o, "
               "owner %u:%u; their READY=1, heartbeats and heap reports will not arrive (let "
               "them search it, e.g. RuntimeDirectoryMode=0711)",
               (unsigned)o->uid, (unsigned)o->gid, rx->addr, bad,
               (unsigned)(bad_st.st_mode & 07777), (unsigned)bad_st.st_uid,
               (unsigned)bad_st.st_gid);
    if (r >= 0 && (r = uv_poll_init(loop, &rx->poll, rx->fd)) == 0) {
        rx->poll.data = rx;
        uv_timer_init(loop, &rx->batch);
        rx->batch.data = rx;
        r = uv_poll_start(&rx->poll, UV_READABLE, on_notify);
    }
    if (r < 0)
        cr_notify_rx_close(rx);
    return r;
}

void cr_notify_rx_stop(struct cr_notify_rx *rx)
{
    cr_uv_close((uv_handle_t *)&rx->poll);
    cr_uv_close((uv_handle_t *)&rx->batch);
}

void cr_notify_rx_close(struct cr_notify_rx *rx)
{
    if (rx->fd >= 0)
        close(rx->fd);
    rx->fd = -1;
    if (rx->addr[0])
        unlink(rx->addr);
    if (rx->dir[0])
        rmdir(rx->dir);
    rx->addr[0] = rx->dir[0] = '\0';
}
