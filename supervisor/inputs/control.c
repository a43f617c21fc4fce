/* The control socket's transport: accept, authorize, frame lines, bound
 * every buffer, time out idle peers, hold an answer the dispatcher said to
 * wait for (a `stack` with "wait"), and fan events out to subscribers. */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "log.h"

struct client {
    struct cr_control *ctl;
    struct client *next;
    uv_pipe_t pipe;
    uv_timer_t idle;
    uv_shutdown_t shut;
    char *buf;
    size_t len;
    bool subscribed;
    bool closing;   /* out of the client list, no more input is read */
    bool released;  /* the handles are closing */
    bool draining;  /* finishing, input is read and thrown away */
    bool paused;    /* input not read while the peer's unread output is large */
    bool eof;       /* the peer will send nothing more */
    /* A held answer (struct cr_control_turn), looked at again every
     * HOLD_POLL_MS on the idle timer until it is in or the deadline. Input
     * is not read meanwhile. */
    struct {
        cJSON *res; /* the answer as it stands; NULL: nothing held */
        struct cr_control_turn turn;
        uint64_t deadline;
    } hold;
    int handles;
    uid_t uid;
    pid_t pid;
};

struct cr_control {
    uv_loop_t *loop;
    const struct cr_config *cfg;
    const struct cr_ctl_ops *ops;
    void *ops_ctx;
    uv_pipe_t server;
    char *path;
    char *lock_path;
    int lock_fd; /* flock'd for as long as we own path; -1 = none */
    gid_t group;
    uid_t *uids;
    size_t nuids;
    struct client *clients;
    unsigned nclients;
    uint64_t idle_ms;
    bool closing;
};

const char *cr_control_path(const struct cr_control *c)
{
    return c ? c->path : NULL;
}

static void client_freed(uv_handle_t *h)
{
    struct client *c = h->data;
    if (--c->handles == 0) {
        cJSON_Delete(c->hold.res);
        free(c->buf);
        free(c);
    }
}

static void client_unlink(struct client *c)
{
    if (c->closing)
        return;
    c->closing = true;
    struct cr_control *ctl = c->ctl;
    for (struct client **pp = &ctl->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    ctl->nclients--;
}

/* Closes at once: queued output is dropped (uv_close cancels it). */
static void client_close(struct client *c)
{
    client_unlink(c);
    if (c->released)
        return;
    c->released = true;
    uv_close((uv_handle_t *)&c->idle, client_freed);
    uv_close((uv_handle_t *)&c->pipe, client_freed);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct client *c = req->data;
    /* A draining client is closed at its EOF or by the linger timer. */
    if (!c->draining || status < 0)
        client_close(c);
}

static void on_linger(uv_timer_t *t)
{
    client_close(t->data);
}

#define LINGER_MS 2000
/* A held stack answer is a few stores away once the worker's thread woke:
 * look often, it costs one load of the worker's page. */
#define HOLD_POLL_MS 5

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

/* Closes once what is queued has been written (e.g. a last error line),
 * but never waits longer than LINGER_MS for a peer that does not read.
 * drain: keep reading (and discarding) until the peer's EOF, so that a
 * peer still sending (an oversized line) sees our answer, not a reset. */
static void client_finish(struct client *c, bool drain)
{
    if (c->closing)
        return;
    client_unlink(c);
    c->draining = drain;
    if (!drain)
        uv_read_stop((uv_stream_t *)&c->pipe);
    else if (!uv_is_active((uv_handle_t *)&c->pipe))
        uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->pipe, on_shutdown) < 0) {
        client_close(c);
        return;
    }
    uv_timer_start(&c->idle, on_linger, LINGER_MS, 0);
}

struct wreq {
    uv_write_t req;
    char *data;
};

static void maybe_resume(struct client *c);

static void on_written(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct client *c = req->handle->data;
    free(w->data);
    free(w);
    if (status == 0)
        maybe_resume(c);
    else if (status != UV_ECANCELED)
        client_close(c); /* the peer is gone (EPIPE): free it now, not never */
}

/* Queues one line (owned_text, n bytes, ends in '\n'); a peer that lets its
 * queue pass the cap is dropped, so a client that never reads can never
 * make corrald buffer without bound. */
static void send_line(struct client *c, char *owned_text, size_t n)
{
    if (c->closing || !owned_text) {
        free(owned_text);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > CR_CONTROL_MAX_OUTPUT) {
        free(owned_text);
        cr_log(CR_LOG_WARNING, "control client (pid %d) does not read its output: dropped",
               (int)c->pid);
        client_close(c);
        return;
    }
    struct wreq *w = malloc(sizeof(*w));
    if (!w) {
        free(owned_text);
        client_close(c);
        return;
    }
    w->data = owned_text;
    uv_buf_t b = uv_buf_init(owned_text, (unsigned)n);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written) < 0) {
        free(owned_text);
        free(w);
        client_close(c);
    }
}

static void send_error(struct client *c, const char *code, const char *msg)
{
    cJSON *o = cr_control_error(code, "%s", msg);
    size_t n = 0;
    char *text = cr_control_print_line(o, &n);
    send_line(c, text, n);
    cJSON_Delete(o);
}

void cr_control_broadcast(struct cr_control *ctl, const cJSON *obj)
{
    if (!ctl)
        return;
    char *text = NULL;
    size_t n = 0;
    for (struct client *c = ctl->clients, *next; c; c = next) {
        next = c->next;
        if (!c->subscribed)
            continue;
        if (!text && !(text = cr_control_print_line(obj, &n)))
            return;
        char *copy = malloc(n + 1);
        if (copy)
            memcpy(copy, text, n + 1);
        send_line(c, copy, n);
    }
    free(text);
}

static void on_idle(uv_timer_t *t)
{
    struct client *c = t->data;
    if (c->subscribed)
        return;
    send_error(c, CR_E_BAD_REQUEST, "idle timeout");
    client_finish(c, false);
}

static void send_answer(struct client *c, cJSON *res)
{
    size_t n = 0;
    char *text = cr_control_print_line(res, &n);
    send_line(c, text, n);
    cJSON_Delete(res);
}

static void process(struct client *c);

/* The held answer looked at again (no line parsed): it goes out once it
 * comes without a hold, or at the deadline as it stands; then the
 * client's later lines. */
static void on_hold(uv_timer_t *t)
{
    struct client *c = t->data;
    struct cr_control_turn turn;
    /* Never NULL: the held answer, renewed, or the error that ends it. */
    cJSON *res = cr_control_handle_again(c->ctl->ops, c->ctl->ops_ctx, c->hold.res,
                                         &c->hold.turn, &turn);
    c->hold.res = NULL;
    if (turn.hold_ms && uv_now(c->ctl->loop) < c->hold.deadline) {
        c->hold.res = res;
        return;
    }
    send_answer(c, res);
    if (c->closing)
        return;
    if (c->subscribed) /* a subscriber is never idle */
        uv_timer_stop(&c->idle);
    else
        uv_timer_start(&c->idle, on_idle, c->ctl->idle_ms, c->ctl->idle_ms);
    process(c);
    if (!c->hold.res && !c->paused && !c->closing && !c->eof)
        uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
}

static void handle_line(struct client *c, const char *line, size_t len)
{
    /* Tolerate CRLF and blank lines. */
    if (len && line[len - 1] == '\r')
        len--;
    if (!len)
        return;
    struct cr_control_turn turn;
    cJSON *res = cr_control_handle(c->ctl->ops, c->ctl->ops_ctx, line, len, &turn);
    if (turn.hold_ms && res) {
        c->hold.res = res;
        c->hold.turn = turn;
        c->hold.deadline = uv_now(c->ctl->loop) + turn.hold_ms;
        uv_read_stop((uv_stream_t *)&c->pipe);
        uv_timer_start(&c->idle, on_hold, HOLD_POLL_MS, HOLD_POLL_MS);
        return;
    }
    send_answer(c, res);
    if (turn.subscribe) {
        c->subscribed = true;
        uv_timer_stop(&c->idle);
    }
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char slab[16384];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

static bool backlogged(struct client *c)
{
    return uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > CR_CONTROL_PAUSE_OUTPUT;
}

/* Answers line-too-long and finishes the client; its input is drained so
 * that a peer still sending sees the answer, not a reset. */
static void refuse_long_line(struct client *c)
{
    send_error(c, CR_E_LINE_TOO_LONG, "a request line is limited to 65536 bytes");
    client_finish(c, true);
}

/* Answers the complete lines in c->buf. A peer that pipelines requests
 * without reading the answers is paused (no more input is read) while its
 * unread output exceeds CR_CONTROL_PAUSE_OUTPUT, so one client can neither
 * make corrald buffer without bound nor hold the loop for long. */
static void process(struct client *c)
{
    size_t off = 0;
    /* c->buf is NULL until the first byte arrives (an EOF may come first).
     * A held answer stops the lines after it; on_hold goes on. */
    while (c->len && !c->closing && !c->hold.res) {
        if (backlogged(c)) {
            c->paused = true;
            uv_read_stop((uv_stream_t *)&c->pipe);
            break;
        }
        char *nl = memchr(c->buf + off, '\n', c->len - off);
        if (!nl)
            break;
        /* The cap holds for complete lines too: a read (16 KiB) may bring
         * the end of an over-long line before the buffered check sees it. */
        if ((size_t)(nl - (c->buf + off)) > CR_CONTROL_MAX_LINE) {
            refuse_long_line(c);
            return;
        }
        handle_line(c, c->buf + off, (size_t)(nl - (c->buf + off)));
        off = (size_t)(nl - c->buf) + 1;
    }
    if (c->closing)
        return;
    if (off) {
        memmove(c->buf, c->buf + off, c->len - off);
        c->len -= off;
    }
    if (c->paused || c->hold.res)
        return;
    if (c->len > CR_CONTROL_MAX_LINE) {
        refuse_long_line(c);
        return;
    }
    if (c->eof) {
        /* The peer is done sending (`printf '{"cmd":"ping"}' | socat`):
         * answer an unterminated last line, then close once it is out. */
        if (c->len)
            handle_line(c, c->buf, c->len);
        c->len = 0;
        if (c->hold.res)
            return; /* on_hold finishes it once the answer is out */
        /* A subscriber's EOF ends its subscription too: kept, it would
         * hold a client slot until an event write failed, which may be
         * never, and 128 of them would lock everyone out (busy). */
        client_finish(c, false);
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct client *c = s->data;
    if (c->draining) {
        if (n < 0)
            client_close(c);
        return;
    }
    if (c->closing || n == 0)
        return;
    if (n == UV_EOF) {
        c->eof = true;
        uv_read_stop(s);
        process(c);
        return;
    }
    if (n < 0) {
        client_close(c);
        return;
    }
    uv_timer_again(&c->idle);
    /* Bounded: unpaused, at most one partial line (<= the cap) remains
     * between reads; paused, nothing more is read. */
    char *nb = realloc(c->buf, c->len + (size_t)n + 1);
    if (!nb) {
        client_close(c);
        return;
    }
    c->buf = nb;
    memcpy(c->buf + c->len, b->base, (size_t)n);
    c->len += (size_t)n;
    process(c);
}

/* A paused client resumes once its unread output has halved. */
static void maybe_resume(struct client *c)
{
    if (c->closing || !c->paused ||
        uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > CR_CONTROL_PAUSE_OUTPUT / 2)
        return;
    c->paused = false;
    process(c);
    if (!c->paused && !c->closing && !c->eof && !c->hold.res)
        uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
}

/* The peer's supplementary groups (SO_PEERGROUPS, Linux 4.13+) count
 * like its primary group: membership in --control-group is what matters. */
static bool in_group(int fd, gid_t group)
{
    gid_t small[256], *gs = small;
    socklen_t gl = sizeof(small);
    int r = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gs, &gl);
    /* More groups than fit (up to NGROUPS_MAX, 65536): the kernel said how
     * many bytes it needs; a member must not be refused for having many. */
    if (r < 0 && errno == ERANGE && gl > sizeof(small) && (gs = malloc(gl)))
        r = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gs, &gl);
    bool found = false;
    for (size_t i = 0; r == 0 && gs && i < gl / sizeof(gid_t) && !found; i++)
        found = gs[i] == group;
    if (gs != small)
        free(gs);
    return found;
}

static bool allowed(struct cr_control *ctl, int fd, const struct ucred *cr)
{
    if (cr->uid == 0 || cr->uid == getuid())
        return true;
    for (size_t i = 0; i < ctl->nuids; i++)
        if (ctl->uids[i] == cr->uid)
            return true;
    if (ctl->group == (gid_t)-1)
        return false;
    return cr->gid == ctl->group || in_group(fd, ctl->group);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct cr_control *ctl = server->data;
    if (status < 0)
        return;
    struct client *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->ctl = ctl;
    uv_pipe_init(server->loop, &c->pipe, 0);
    uv_timer_init(server->loop, &c->idle);
    c->pipe.data = c->idle.data = c;
    c->handles = 2;
    c->next = ctl->clients;
    ctl->clients = c;
    ctl->nclients++;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        client_close(c);
        return;
    }
    uv_os_fd_t fd = -1;
    struct ucred cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t sl = sizeof(cr);
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl) < 0 || !allowed(ctl, fd, &cr)) {
        cr_log(CR_LOG_WARNING, "control: refused peer pid %d uid %d", (int)cr.pid, (int)cr.uid);
        send_error(c, CR_E_FORBIDDEN, "this user may not use corrald's control socket");
        client_finish(c, true);
        return;
    }
    c->uid = cr.uid;
    c->pid = cr.pid;
    if (ctl->nclients > ctl->cfg->control_max_clients) {
        send_error(c, CR_E_BUSY, "too many control clients");
        client_finish(c, true);
        return;
    }
    uv_timer_start(&c->idle, on_idle, ctl->idle_ms, ctl->idle_ms);
    uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, on_read);
}

static char *default_path(void)
{
    const char *rd = getenv("RUNTIME_DIRECTORY");
    char *p = NULL;
    if (rd && *rd) {
        /* RUNTIME_DIRECTORY may list several directories: take the first. */
        size_t n = strcspn(rd, ":");
        if (asprintf(&p, "%.*s/control.sock", (int)n, rd) < 0)
            return NULL;
        return p;
    }
    return strdup("corral.sock");
}

static int parse_uids(struct cr_control *ctl, const char *list)
{
    while (list && *list) {
        char *end;
        unsigned long v = strtoul(list, &end, 10);
        if (end == list)
            return -EINVAL;
        uid_t *n = realloc(ctl->uids, (ctl->nuids + 1) * sizeof(uid_t));
        if (!n)
            return -ENOMEM;
        ctl->uids = n;
        ctl->uids[ctl->nuids++] = (uid_t)v;
        list = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -EINVAL;
    }
    return 0;
}

static void control_free(struct cr_control *ctl);

static void server_closed(uv_handle_t *h)
{
    control_free(h->data);
}

static void control_free(struct cr_control *ctl)
{
    if (ctl->lock_fd >= 0)
        close(ctl->lock_fd);
    free(ctl->path);
    free(ctl->lock_path);
    free(ctl->uids);
    free(ctl);
}

/* The pid a lock holder wrote into the lock file, for the error message. */
static long lock_holder(int fd)
{
    char buf[24] = "";
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    return n > 0 ? strtol(buf, NULL, 10) : 0;
}

/* Takes <path>.lock with flock: held for as long as this corrald owns the
 * path, released by the kernel however we die. -EADDRINUSE when another
 * process holds it. */
static int take_lock(struct cr_control *ctl)
{
    for (int tries = 0; tries < 8; tries++) {
        int fd = open(ctl->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno == EWOULDBLOCK ? EADDRINUSE : errno;
            if (e == EADDRINUSE)
                cr_log(CR_LOG_ERR, "control socket %s is in use by a running corrald (pid %ld, "
                       "lock %s): not replacing it", ctl->path, lock_holder(fd), ctl->lock_path);
            close(fd);
            return -e;
        }
        /* A holder that exited unlinks the file before it lets go: a lock
         * on a file no longer at the path guards nothing, so try again. */
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(ctl->lock_path, &b) == 0 && a.st_dev == b.st_dev &&
            a.st_ino == b.st_ino) {
            char pid[24];
            int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) < 0)
                (void)0; /* the pid is only a hint for the message above */
            ctl->lock_fd = fd;
            return 0;
        }
        close(fd);
    }
    return -EAGAIN;
}

/* With the lock held, whatever is at the path is ours to judge: a socket
 * that accepts a connection belongs to a live process that does not take
 * the lock (an older corrald, or not a corrald): never replaced. A socket
 * nobody listens on is stale: removed. Anything else is an error. */
static int claim_path(struct cr_control *ctl)
{
    struct stat st;
    if (lstat(ctl->path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        cr_log(CR_LOG_ERR, "control socket %s: a file that is not a socket is in the way",
               ctl->path);
        return -EEXIST;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(ctl->path) < sizeof(sa.sun_path)) {
        memcpy(sa.sun_path, ctl->path, strlen(ctl->path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -errno;
        int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        int e = r < 0 ? errno : 0;
        close(fd);
        /* EAGAIN: it listens, its backlog is merely full. */
        if (r == 0 || e == EAGAIN || e == EINPROGRESS) {
            cr_log(CR_LOG_ERR, "control socket %s is live (another process accepts on it): "
                   "not replacing it", ctl->path);
            return -EADDRINUSE;
        }
    }
    if (unlink(ctl->path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

/* Bound and listening under a temporary name, then renamed: the path
 * appears only once a client can connect to it (a script that waits for
 * the file never sees ECONNREFUSED). Born 0660: no window in which others
 * could connect. */
static int bind_socket(struct cr_control *ctl)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.%d.tmp", ctl->path, (int)getpid()) < 0)
        return -ENOMEM;
    if (strlen(tmp) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        /* No room for the temporary name: bind the path itself. */
        free(tmp);
        if (!(tmp = strdup(ctl->path)))
            return -ENOMEM;
    }
    unlink(tmp);
    mode_t old = umask(0117);
    int r = uv_pipe_bind(&ctl->server, tmp);
    umask(old);
    if (r == 0 && ctl->group != (gid_t)-1 && chown(tmp, (uid_t)-1, ctl->group) < 0)
        r = -errno;
    if (r == 0)
        r = chmod(tmp, 0660) < 0 ? -errno : 0;
    if (r == 0)
        r = uv_listen((uv_stream_t *)&ctl->server, 512, on_connection);
    if (r == 0 && strcmp(tmp, ctl->path) != 0 && rename(tmp, ctl->path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        cr_log(CR_LOG_ERR, "control socket %s: %s", ctl->path, uv_strerror(r));
    }
    free(tmp);
    return r;
}

static int control_config(struct cr_control *ctl, const struct cr_config *cfg)
{
    ctl->path = cfg->control ? strdup(cfg->control) : default_path();
    if (!ctl->path || asprintf(&ctl->lock_path, "%s.lock", ctl->path) < 0) {
        ctl->lock_path = NULL; /* undefined after a failed asprintf; control_free frees it */
        return -ENOMEM;
    }
    int r = parse_uids(ctl, cfg->control_allow_uids);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "--control-allow-uid: '%s' is not a list of uids",
               cfg->control_allow_uids);
        return r;
    }
    if (cfg->control_group) {
        struct group *g = getgrnam(cfg->control_group);
        if (!g) {
            cr_log(CR_LOG_ERR, "--control-group: no group '%s'", cfg->control_group);
            return -ENOENT;
        }
        ctl->group = g->gr_gid;
    }
    return 0;
}

int cr_control_open(uv_loop_t *loop, const struct cr_config *cfg, const struct cr_ctl_ops *ops,
                    void *ops_ctx, struct cr_control **ret)
{
    struct cr_control *ctl = calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->loop = loop;
    ctl->cfg = cfg;
    ctl->ops = ops;
    ctl->ops_ctx = ops_ctx;
    ctl->group = (gid_t)-1;
    ctl->lock_fd = -1;
    ctl->idle_ms = cfg->control_idle_ms;
    int r = control_config(ctl, cfg);
    if (r >= 0 && (r = take_lock(ctl)) < 0 && r != -EADDRINUSE)
        cr_log(CR_LOG_ERR, "control socket lock %s: %s", ctl->lock_path, strerror(-r));
    if (r >= 0)
        r = claim_path(ctl);
    if (r < 0) {
        control_free(ctl);
        return r;
    }
    uv_pipe_init(loop, &ctl->server, 0);
    ctl->server.data = ctl;
    if ((r = bind_socket(ctl)) < 0) {
        /* Freed once the loop has closed the handle. */
        uv_close((uv_handle_t *)&ctl->server, server_closed);
        return r;
    }
    cr_log(CR_LOG_INFO, "control socket at %s", ctl->path);
    *ret = ctl;
    return 0;
}

void cr_control_close(struct cr_control *ctl)
{
    if (!ctl || ctl->closing)
        return;
    ctl->closing = true;
    while (ctl->clients)
        client_close(ctl->clients);
    unlink(ctl->path);
    unlink(ctl->lock_path);
    uv_close((uv_handle_t *)&ctl->server, server_closed);
}
