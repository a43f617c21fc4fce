/* Spawning one worker generation: its environment, argv, cgroup and
 * descriptors, then cr_spawn(). Which state follows is the core's call. */
#include "worker_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgprep.h"
#include "cgtree.h"
#include "cgworker.h"
#include "clock.h"
#include "config.h"
#include "diag.h"
#include "freeze.h"
#include "gen.h"
#include "listen.h"
#include "log.h"
#include "node_agent.h"
#include "notify_rx.h"
#include "page.h"
#include "priority.h"
#include "reaper.h"
#include "spawnproc.h"
#include "spawnway.h"
#include "wio.h"

/* ---- spawning ---------------------------------------------------------- */

/* What a worker never inherits from corrald's environment: corrald's own
 * interface to systemd (a worker talks to corrald, corrald to systemd),
 * corral's variables (set fresh below), and the invoking session's agents
 * and bus (credentials a served app has no business holding). The list is
 * documented in docs/reliability.md. */
static bool env_denied(const char *e)
{
    static const char *const deny[] = {
        "LISTEN_FDS=", "LISTEN_PID=", "LISTEN_FDNAMES=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=",
        "WATCHDOG_PID=", "JOURNAL_STREAM=", "MAINPID=", "MANAGERPID=", "SYSTEMD_EXEC_PID=",
        "INVOCATION_ID=", "CREDENTIALS_DIRECTORY=", "MONITOR_", "TRIGGER_", "CORRAL_",
        /* systemd's MemoryPressureWatch= for corrald's own unit: its group,
         * not a worker's (a worker gets its own below, on v2). */
        "MEMORY_PRESSURE_WATCH=", "MEMORY_PRESSURE_WRITE=",
        "SSH_AUTH_SOCK=", "SSH_AGENT_PID=", "GPG_AGENT_INFO=", "DBUS_SESSION_BUS_ADDRESS=",
        "XDG_SESSION_", "KRB5CCNAME="};
    for (size_t i = 0; i < sizeof(deny) / sizeof(deny[0]); i++)
        if (strncmp(e, deny[i], strlen(deny[i])) == 0)
            return true;
    return false;
}

/* True when e's name is in names (a NULL-terminated list of names). */
static bool env_listed(const char *e, char *const *names)
{
    size_t n = strcspn(e, "=");
    for (size_t i = 0; names && names[i]; i++)
        if (strlen(names[i]) == n && strncmp(e, names[i], n) == 0)
            return true;
    return false;
}

/* --env KEY=VALUE overrides an inherited KEY: true when e is overridden. */
static bool env_overridden(const char *e, char *const *set)
{
    size_t n = strcspn(e, "=");
    for (size_t i = 0; set && set[i]; i++)
        if (strncmp(set[i], e, n) == 0 && set[i][n] == '=')
            return true;
    return false;
}

struct strv {
    char **v;
    size_t n, cap;
};

static int strv_add(struct strv *s, char *owned)
{
    if (!owned)
        return -ENOMEM;
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        char **nv = realloc(s->v, cap * sizeof(char *));
        if (!nv) {
            free(owned);
            return -ENOMEM;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = owned;
    s->v[s->n] = NULL;
    return 0;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, f);
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void strv_free(struct strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (struct strv){0};
}

/* base64("some 200000 2000000\0"): tests/unit/core/test_pressure_write.py
 * decodes it. */
#define CR_MEMORY_PRESSURE_WRITE "c29tZSAyMDAwMDAgMjAwMDAwMAA="

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static bool is_node(const char *path)
{
    const char *b = base_name(path);
    return strncmp(b, "node", 4) == 0 || strcmp(b, "nodejs") == 0;
}

static bool is_python(const char *path)
{
    return strncmp(base_name(path), "python", 6) == 0;
}

static bool env_has(const struct strv *env, const char *prefix)
{
    for (size_t i = 0; i < env->n; i++)
        if (strncmp(env->v[i], prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

static int build_env(const struct cr_gen *g, uint64_t heap_limit, const char *fdname,
                     struct strv *env, int *ret_slot)
{
    const struct cr_config *c = g->host->cfg;
    int r = 0;
    for (char **e = environ; *e && r == 0; e++) {
        bool pass = c->pass_env ? env_listed(*e, c->pass_env) : !env_denied(*e);
        if (pass && strncmp(*e, "CORRAL_", 7) != 0 && !env_overridden(*e, c->env) &&
            !(c->threadpool && strncmp(*e, "UV_THREADPOOL_SIZE=", 19) == 0))
            r = strv_add(env, strdup(*e));
    }
    for (size_t i = 0; c->env && c->env[i] && r == 0; i++)
        r = strv_add(env, strdup(c->env[i]));
    *ret_slot = (int)env->n;
    r = r ?: strv_add(env, strdup(CR_SPAWN_LISTEN_PID_TEMPLATE));
    r = r ?: strv_add(env, strdup("LISTEN_FDS=1"));
    r = r ?: strv_add(env, fmt("LISTEN_FDNAMES=%s", fdname));
    r = r ?: strv_add(env, fmt("NOTIFY_SOCKET=%s", g->host->notify->addr));
    r = r ?: strv_add(env, strdup("CORRAL_NOTIFY_FD=4"));
    r = r ?: strv_add(env, fmt("CORRAL_WORKER_ID=%d", g->id));
    r = r ?: strv_add(env, fmt("CORRAL_GENERATION=%u", g->generation));
    if (g->id == CR_SPARE_ID) { /* see docs/architecture.md, "Warm spares" */
        r = r ?: strv_add(env, strdup("CORRAL_SPARE=1"));
        /* A spare that speaks (the Node agent) learns how long it has to
         * say READY=1 before it is killed for silence. */
        r = r ?: strv_add(env, fmt("CORRAL_START_TIMEOUT_MS=%llu",
                                   (unsigned long long)c->start_timeout_ms));
    }
    if (c->memory_max)
        r = r ?: strv_add(env, fmt("CORRAL_MEMORY_MAX=%llu", (unsigned long long)c->memory_max));
    if (heap_limit)
        r = r ?: strv_add(env, fmt("CORRAL_HEAP_LIMIT=%llu", (unsigned long long)heap_limit));
    if (c->threadpool)
        r = r ?: strv_add(env, fmt("UV_THREADPOOL_SIZE=%u", c->threadpool));
    if (g->page)
        r = r ?: strv_add(env, strdup(CR_WPAGE_ENV "=5"));
    /* A Python worker killed for a hang (SIGABRT first) prints the
     * traceback of every thread on its way out: the stack of the stalled
     * loop, kept with the stderr tail. Unless the environment says
     * otherwise. */
    if (r == 0 && c->argc && is_python(c->argv[0]) && !env_has(env, "PYTHONFAULTHANDLER="))
        r = strv_add(env, strdup("PYTHONFAULTHANDLER=1"));
    if (c->watchdog_ms) /* as systemd does: the worker paces its heartbeats by it */
        r = r ?: strv_add(env, fmt("WATCHDOG_USEC=%llu",
                                   (unsigned long long)c->watchdog_ms * 1000));
    return r;
}

/* V8's heap limit is old space plus the young generation's reserve (48 MB
 * on 64-bit Node 20: --max-old-space-size=64 reports a 112 MB limit), so the
 * old space gets the derived heap limit minus that reserve. */
#define NODE_YOUNG_MB 48
static uint64_t node_old_space_mb(uint64_t heap_limit)
{
    uint64_t mb = heap_limit >> 20;
    return mb > 2 * NODE_YOUNG_MB ? mb - NODE_YOUNG_MB : (mb / 2 ? mb / 2 : 1);
}

/* With --heap-snapshot: the old space whose heap snapshot, written near
 * the heap limit, fits in the worker's memory share (bytes). Writing one
 * costs the process far more than the heap, in proportion to its number of
 * objects: measured with a leak of small objects ({id, name, tags: [i]})
 * under a memory cgroup, old space 32/64/128 MB gave a peak RSS of
 * 535/895/1668 MB on Node 20 (11.8 per MB of old space, plus 157 MB) and
 * 32/64 MB gave 732/1252 MB on Node 18 (16.3 per MB, plus 212 MB); a heap
 * of a few large arrays needed no more than without the snapshot. The
 * snapshot file (2.5-3 times the old space) is charged to the group as
 * page cache too, which the kernel can reclaim. So the old space is
 * (share - 256 MiB) / 16, and no less than 16 MB: below a 512 MiB share a
 * snapshot of a heap of small objects does not fit (said once). */
#define SNAPSHOT_BASE_MB 256
#define SNAPSHOT_PER_MB 16
#define SNAPSHOT_MIN_OLD_MB 16
static uint64_t snapshot_old_space_mb(uint64_t share)
{
    static bool warned; /* corrald's one warning about it */
    uint64_t mb = share >> 20;
    uint64_t old = mb > SNAPSHOT_BASE_MB ? (mb - SNAPSHOT_BASE_MB) / SNAPSHOT_PER_MB : 0;
    if (old < SNAPSHOT_MIN_OLD_MB && !warned) {
        warned = true;
        cr_log(CR_LOG_WARNING,
               "--heap-snapshot: a worker's memory (%llu MiB) leaves a %d MB heap, and a snapshot "
               "of a heap of small objects may still not fit (it needs about %d times the heap "
               "plus %d MiB): the kernel may kill the worker while it writes it",
               (unsigned long long)mb, SNAPSHOT_MIN_OLD_MB, SNAPSHOT_PER_MB, SNAPSHOT_BASE_MB);
    }
    return old < SNAPSHOT_MIN_OLD_MB ? SNAPSHOT_MIN_OLD_MB : old;
}

/* The directory of a node worker's reports, made now: a node worker
 * with the agent (its --require argument, agent) and a --diag-dir that
 * could be made, else NULL. Decided before the environment, since a heap
 * snapshot lowers the heap limit only when it can be written. */
static const char *node_diag_dir(struct cr_gen *g, const char *agent)
{
    g->diag_dir[0] = '\0';
    if (!agent)
        return NULL;
    return cr_diag_prepare(g->host->diag, g);
}

/* *agent (the agent's --require argument, or NULL) goes into argv, which
 * takes it: *agent is NULL after. */
static int build_argv(struct cr_gen *g, uint64_t heap_limit, const char *dir, char **agent,
                      struct strv *argv)
{
    const struct cr_config *c = g->host->cfg;
    int r = 0;
    if (!c->argc)
        return strv_add(argv, strdup(cr_spawner_worker_path(g->host->spawner)));
    r = strv_add(argv, strdup(c->argv[0]));
    if (r == 0 && *agent) {
        r = strv_add(argv, *agent);
        *agent = NULL;
        /* V8's report at a fatal error (a heap-limit abort: the heap's
         * spaces, no JS stack, node's own "No stack."), into a directory
         * that exists (node makes none, and then writes nothing). */
        if (r == 0 && dir) {
            r = strv_add(argv, strdup("--report-on-fatalerror"));
            r = r ?: strv_add(argv, fmt("--report-directory=%s", dir));
            r = r ?: strv_add(argv, strdup("--report-filename=report.json"));
            if (c->heap_snapshot) {
                r = r ?: strv_add(argv, strdup("--heapsnapshot-near-heap-limit=1"));
                r = r ?: strv_add(argv, fmt("--diagnostic-dir=%s", dir));
            }
        }
    }
    if (r == 0 && c->node_heap && heap_limit && is_node(c->argv[0])) {
        uint64_t old = c->heap_snapshot && dir ? (heap_limit >> 20) - NODE_YOUNG_MB
                                        : node_old_space_mb(heap_limit);
        r = strv_add(argv, fmt("--max-old-space-size=%llu", (unsigned long long)old));
        g->heap_limit_given = heap_limit; /* shown while the worker reports none */
    }
    for (size_t i = 1; r == 0 && i < c->argc; i++)
        r = strv_add(argv, strdup(c->argv[i]));
    return r;
}

static uint64_t jitter(uint64_t max)
{
    /* The option is capped far below UINT64_MAX, so max + 1 cannot wrap. */
    return max ? (uint64_t)random() % (max + 1) : 0;
}

/* A new generation starts with none of the last one's readings, reports,
 * ledger or exit. */
static void begin(struct cr_gen *g, unsigned generation)
{
    const struct cr_config *c = g->host->cfg;
    g->generation = generation;
    g->pid = 0;
    g->heap_limit_given = 0;
    g->ledger = (struct cr_ledger){0};
    g->exit = (struct cr_exit){0};
    g->cg.oom_events = 0;
    g->cg.seen = (struct cr_cgroup_events){0};
    cr_page_release(g);
    cr_report_reset(&g->report, uv_now(g->host->loop));
    cr_mem_reset(&g->mem);
    g->max_requests = c->max_requests ? c->max_requests + jitter(c->max_requests_jitter) : 0;
}

/* The child exists: hand its pidfd to the reaper and the rest of its
 * descriptors to wio.c. Without the exit watch the process cannot be
 * supervised: end it and reap it here — it never became a worker, and
 * nothing else knows its pid. */
static int adopt(struct cr_gen *g, const struct cr_spawn_result *res, int out_fd, int ns_fd)
{
    g->pid = res->pid;
    g->spawned_at = uv_now(g->host->loop);
    g->spawned_wall_ms = cr_wall_ms();
    int r = cr_reaper_watch(g->host->reaper, g, res->pidfd);
    if (r >= 0)
        r = cr_io_adopt(g, out_fd, ns_fd, res->exec_fd);
    else {
        close(out_fd);
        close(ns_fd);
        close(res->exec_fd);
    }
    if (r < 0) {
        cr_reaper_release(g);
        kill(res->pid, SIGKILL);
        waitpid(res->pid, NULL, 0);
        g->pid = 0;
        cr_freeze_release(g);
        cr_cgworker_release(g);
        return r;
    }
    return 0;
}

int cr_worker_spawn(struct cr_gen *g, unsigned generation, unsigned workers)
{
    const struct cr_gen_host *h = g->host;
    const struct cr_config *c = h->cfg;
    const struct cr_spawner *sp = h->spawner;
    struct strv env = {0}, argv = {0};
    struct cr_listener own = {.fd = -1};
    int outp[2] = {-1, -1}, ns[2] = {-1, -1}, procs_fd = -1, page_fd = -1;
    char *path = NULL;
    char *agent = NULL; /* a node worker's --require of the agent: resolved once */
    int slot, r;

    begin(g, generation);
    uint64_t heap_limit = cr_cgtree_heap_limit(h->cgtree, c, workers);
    r = c->argc ? cr_node_agent_arg(c, is_node(c->argv[0]), &agent) : 0;
    const char *diag = node_diag_dir(g, agent);
    if (r < 0)
        goto out;
    /* The heap a snapshot leaves room for: old space and young reserve;
     * only where node's heap is corrald's to set and the snapshot has a
     * directory to go to. */
    if (heap_limit && c->heap_snapshot && c->node_heap && diag)
        heap_limit = (snapshot_old_space_mb(cr_cgtree_memory_share(h->cgtree, c, workers)) +
                      NODE_YOUNG_MB)
                     << 20;
    const struct cr_listener *l = h->listener;
    if (c->balance == CR_BALANCE_REUSEPORT && !l->from_systemd) {
        if ((r = cr_listen_bind(l->addr, true, true, &own)) < 0)
            goto out;
        l = &own;
    }
    if (pipe2(outp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ns) < 0) {
        r = -errno;
        goto out;
    }
    /* Without a page the worker runs all the same: it only cannot say
     * what it serves. */
    if (!c->no_worker_page && cr_page_new(&g->page, &page_fd) < 0)
        g->page = NULL;
    if ((r = build_env(g, heap_limit, l->name[0] ? l->name : "corral", &env, &slot)) < 0 ||
        (r = build_argv(g, heap_limit, diag, &agent, &argv)) < 0 ||
        (r = cr_spawn_resolve(argv.v[0], &path)) < 0)
        goto out;
    struct cr_cgroup_events own0;
    bool on = h->cgtree->on;
    bool own0_read = on && cr_cg_prep_take(g, &own0); /* made ahead off the loop */
    if (on && ((!g->cg.cg && (r = cr_cgworker_create(g)) < 0) ||
               (r = procs_fd = cr_cgworker_procs_fd(g)) < 0)) {
        cr_cgworker_release(g);
        goto out;
    }
    if (g->id == CR_SPARE_ID && (r = cr_freeze_prepare(g)) < 0) {
        cr_cgworker_release(g);
        goto out;
    }
    cr_cgworker_baseline(g, own0_read ? &own0 : NULL);
    /* Where the worker may watch its own memory pressure, as systemd (254
     * and later) tells a service with MemoryPressureWatch=: a runtime
     * that knows these (sd-event, GLib) sheds caches before corral or the
     * kernel must act. The trigger is systemd's default, 200 ms of "some"
     * stall in a 2 s window: base64 of "some 200000 2000000" and its NUL. */
    if (r >= 0 && g->cg.cg && cr_cgroup_layout(g->cg.cg) == CR_CGROUP_V2 &&
        !env_has(&env, "MEMORY_PRESSURE_WATCH=")) {
        r = strv_add(&env, fmt("MEMORY_PRESSURE_WATCH=%s/memory.pressure",
                               cr_cgroup_fs_path(g->cg.cg)));
        r = r ?: strv_add(&env, strdup("MEMORY_PRESSURE_WRITE=" CR_MEMORY_PRESSURE_WRITE));
        if (r < 0) {
            cr_freeze_release(g);
            cr_cgworker_release(g);
            goto out;
        }
    }

    const struct cr_priority *prio = sp->priority;
    struct cr_spawn_opts o = {
        .helper = sp->helper, .vm = sp->vm, .path = path, .argv = argv.v, .envp = env.v,
        .listen_pid_slot = slot, .fd3 = l->fd, .fd4 = ns[1], .fd5 = page_fd,
        .out_fd = outp[1],
        .procs_fd = procs_fd, .set_ids = sp->set_ids, .uid = sp->uid, .gid = sp->gid,
        .nofile = sp->nofile, .set_sched = prio && cr_priority_changed(prio),
        .nice = prio ? prio->nice : 0,
    };
    struct cr_spawn_result res;
    int helper_err;
    r = cr_spawn(&o, &res, &helper_err);
    if (helper_err)
        cr_spawner_helper_failed(h->spawner, helper_err);
    if (r < 0) {
        cr_freeze_release(g);
        cr_cgworker_release(g);
        goto out;
    }
    r = adopt(g, &res, outp[0], ns[0]);
    outp[0] = ns[0] = -1; /* taken, even on failure */
    if (r >= 0 && own.fd >= 0) {
        /* Kept to read its accept queue while the worker accepts (wio.h). */
        cr_io_keep_listener(g, own.fd);
        own.fd = -1;
    }
    /* A v1 spare is frozen through the freezer hierarchy. The child moved
     * itself into its memory group only; the parent adds it here, long
     * before it can be ready and frozen. A spare that cannot be frozen must
     * not run unfrozen beside the workers: it is killed, and reaped (and
     * throttled) like any spare's death. Its pid is still ours: unreaped. */
    if (r >= 0 && g->freezer && cr_freezer_attach(g->freezer, res.pid) < 0) {
        cr_log(CR_LOG_ERR, "spare pid %d: cannot join its freezer group; killing it", (int)res.pid);
        kill(res.pid, SIGKILL);
    }
out:
    if (r < 0) /* no process: nothing will be written there */
        cr_diag_release(h->diag, g, NULL);
    if (procs_fd >= 0)
        close(procs_fd);
    if (page_fd >= 0)
        close(page_fd);
    if (outp[0] >= 0)
        close(outp[0]);
    if (outp[1] >= 0)
        close(outp[1]);
    if (ns[0] >= 0)
        close(ns[0]);
    if (ns[1] >= 0)
        close(ns[1]);
    cr_listen_close(&own);
    free(path);
    free(agent);
    strv_free(&env);
    strv_free(&argv);
    return r;
}
