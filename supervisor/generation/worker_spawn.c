/* Spawning one worker generation: its environment, argv, cgroup and
 * descriptors, then cr_spawn(). Which state follows is the core's call. */
#include "worker_spawn.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgprep.h"
#include "cgsetup.h"
#include "clock.h"
#include "cr_config.h"
#include "freeze.h"
#include "internal.h"
#include "log.h"
#include "node_agent.h"
#include "spawnproc.h"
#include "trend.h"
#include "worker_io.h"

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

static int build_env(struct cr_worker *w, const char *fdname, struct strv *env, int *ret_slot)
{
    struct cr_supervisor *sup = w->sup;
    const struct cr_config *c = &sup->cfg;
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
    r = r ?: strv_add(env, fmt("NOTIFY_SOCKET=%s", sup->notify_addr));
    r = r ?: strv_add(env, strdup("CORRAL_NOTIFY_FD=4"));
    r = r ?: strv_add(env, fmt("CORRAL_WORKER_ID=%d", w->id));
    r = r ?: strv_add(env, fmt("CORRAL_GENERATION=%u", w->generation));
    if (w->id == CR_SPARE_ID) { /* see docs/architecture.md, "Warm spares" */
        r = r ?: strv_add(env, strdup("CORRAL_SPARE=1"));
        /* A spare that speaks (the Node agent) learns how long it has to
         * say READY=1 before it is killed for silence. */
        r = r ?: strv_add(env, fmt("CORRAL_START_TIMEOUT_MS=%llu",
                                   (unsigned long long)c->start_timeout_ms));
    }
    if (c->memory_max)
        r = r ?: strv_add(env, fmt("CORRAL_MEMORY_MAX=%llu", (unsigned long long)c->memory_max));
    if (cr_cg_heap_limit(sup))
        r = r ?: strv_add(env, fmt("CORRAL_HEAP_LIMIT=%llu",
                                   (unsigned long long)cr_cg_heap_limit(sup)));
    if (c->threadpool)
        r = r ?: strv_add(env, fmt("UV_THREADPOOL_SIZE=%u", c->threadpool));
    if (c->watchdog_ms) /* as systemd does: the worker paces its heartbeats by it */
        r = r ?: strv_add(env, fmt("WATCHDOG_USEC=%llu", (unsigned long long)c->watchdog_ms * 1000));
    return r;
}

static bool is_node(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return strncmp(b, "node", 4) == 0 || strcmp(b, "nodejs") == 0;
}

/* V8's heap limit is old space plus the young generation's reserve (48 MB
 * on 64-bit Node 20: --max-old-space-size=64 reports a 112 MB limit), so the
 * old space gets the derived heap limit minus that reserve. */
static uint64_t node_old_space_mb(const struct cr_supervisor *sup)
{
    uint64_t mb = cr_cg_heap_limit(sup) >> 20;
    return mb > 96 ? mb - 48 : (mb / 2 ? mb / 2 : 1);
}

static int build_argv(struct cr_worker *w, struct strv *argv)
{
    struct cr_supervisor *sup = w->sup;
    const struct cr_config *c = &sup->cfg;
    int r = 0;
    if (!c->argc)
        return strv_add(argv, strdup(sup->worker_path));
    r = strv_add(argv, strdup(c->argv[0]));
    char *agent = NULL;
    if (r == 0 && (r = cr_node_agent_arg(c, is_node(c->argv[0]), &agent)) == 0 && agent)
        r = strv_add(argv, agent);
    if (r == 0 && c->node_heap && cr_cg_heap_limit(sup) && is_node(c->argv[0])) {
        r = strv_add(argv, fmt("--max-old-space-size=%llu", (unsigned long long)node_old_space_mb(sup)));
        w->heap_limit_given = cr_cg_heap_limit(sup); /* shown while the worker reports none */
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

/* A new generation starts with none of the last one's readings. */
static void new_generation(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    unsigned gen = cr_cg_prep_generation(w); /* reserved for the group made ahead */
    if (!gen)
        gen = cr_slot_next_generation(sup, w->id);
    w->generation = gen ? gen : w->generation + 1;
    w->pid = 0;
    w->exec_errno = 0;
    w->kill_reason = CR_KILL_NONE;
    w->kill_signal = 0;
    w->kill_sigmask = 0;
    w->kill_text[0] = '\0';
    w->last = (struct cr_notify_msg){0};
    w->fatal_heap_limit = false;
    w->heartbeats = false;
    w->oom_events = 0;
    w->seen = (struct cr_cgroup_events){0};
    w->soft_over = 0;
    w->soft_crossed_at = 0;
    w->status_text[0] = '\0';
    w->verdict = 0;
    w->verdict_text[0] = '\0';
    w->rss = w->cg_usage = 0;
    w->sampled_at = 0;
    if (w->samples)
        cr_trend_ring_clear(w->samples);
    w->max_requests = sup->cfg.max_requests
                          ? sup->cfg.max_requests + jitter(sup->cfg.max_requests_jitter)
                          : 0;
}

/* The child exists: hand its descriptors to worker_io.c. Without the exit
 * watch the process cannot be supervised: end it and reap it here — it
 * never became a worker, and nothing else knows its pid. */
static int adopt(struct cr_worker *w, const struct cr_spawn_result *res, int out_fd, int ns_fd)
{
    w->pid = res->pid;
    w->exec_errno = 0; /* told later by the exec pipe (worker_io.c) */
    w->spawned_at = cr_now_ms(w->sup);
    w->spawned_wall_ms = cr_wall_ms();
    w->ready_at = 0;
    w->last_report_at = w->spawned_at;
    int r = cr_io_adopt(w, res->pidfd, out_fd, ns_fd, res->exec_fd);
    if (r < 0) {
        kill(res->pid, SIGKILL);
        waitpid(res->pid, NULL, 0);
        w->pid = 0;
        cr_freeze_release(w);
        cr_cg_worker_release(w);
        return r;
    }
    cr_log_event(CR_LOG_INFO, "spawned", w->id, w->pid, NULL,
                 "worker %d spawned: pid %d, generation %u%s", w->id, (int)w->pid, w->generation,
                 w->replaces ? " (replacement)" : "");
    return 0;
}

int cr_worker_spawn(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    struct strv env = {0}, argv = {0};
    struct cr_listener own = {.fd = -1};
    int outp[2] = {-1, -1}, ns[2] = {-1, -1}, procs_fd = -1;
    char *path = NULL;
    int slot, r;

    new_generation(w);
    const struct cr_listener *l = &sup->listener;
    if (sup->cfg.balance == CR_BALANCE_REUSEPORT && !l->from_systemd) {
        if ((r = cr_listen_bind(l->addr, true, true, &own)) < 0)
            goto out;
        l = &own;
    }
    if (pipe2(outp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ns) < 0) {
        r = -errno;
        goto out;
    }
    if ((r = build_env(w, l->name[0] ? l->name : "corral", &env, &slot)) < 0 ||
        (r = build_argv(w, &argv)) < 0 || (r = cr_spawn_resolve(argv.v[0], &path)) < 0)
        goto out;
    struct cr_cgroup_events own0;
    bool own0_read = sup->cgroups && cr_cg_prep_take(w, &own0); /* made ahead off the loop */
    if (sup->cgroups && ((!w->cg && (r = cr_cg_worker_create(w)) < 0) ||
                         (r = procs_fd = cr_cg_worker_procs_fd(w)) < 0)) {
        cr_cg_worker_release(w);
        goto out;
    }
    if (w->id == CR_SPARE_ID && (r = cr_freeze_prepare(w)) < 0) {
        cr_cg_worker_release(w);
        goto out;
    }
    cr_cg_worker_baseline(w, own0_read ? &own0 : NULL);

    struct cr_spawn_opts o = {
        .helper = sup->spawn_helper, .vm = sup->spawn_vm, .path = path, .argv = argv.v, .envp = env.v, .listen_pid_slot = slot,
        .fd3 = l->fd, .fd4 = ns[1], .out_fd = outp[1], .procs_fd = procs_fd,
        .set_ids = sup->set_ids, .uid = sup->worker_uid, .gid = sup->worker_gid,
        .nofile = sup->nofile_saved ? &sup->nofile : NULL,
        .set_sched = cr_priority_changed(&sup->priority), .nice = sup->priority.nice,
    };
    struct cr_spawn_result res;
    int helper_err;
    r = cr_spawn(&o, &res, &helper_err);
    if (helper_err)
        cr_io_helper_failed(sup, helper_err);
    if (r < 0) {
        cr_freeze_release(w);
        cr_cg_worker_release(w);
        goto out;
    }
    r = adopt(w, &res, outp[0], ns[0]);
    outp[0] = ns[0] = -1; /* taken, even on failure */
    /* A v1 spare is frozen through the freezer hierarchy. The child moved
     * itself into its memory group only; the parent adds it here, long
     * before it can be ready and frozen. A spare that cannot be frozen must
     * not run unfrozen beside the workers: it is killed, and reaped (and
     * throttled) like any spare's death. Its pid is still ours: unreaped. */
    if (r >= 0 && w->freezer && cr_freezer_attach(w->freezer, res.pid) < 0) {
        cr_log(CR_LOG_ERR, "spare pid %d: cannot join its freezer group; killing it", (int)res.pid);
        kill(res.pid, SIGKILL);
    }
out:
    if (procs_fd >= 0)
        close(procs_fd);
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
    strv_free(&env);
    strv_free(&argv);
    return r;
}

char *cr_worker_default_path(void)
{
    /* In a build tree the worker sits in ../worker/ next to supervisor/. */
    return cr_spawn_find_file("CORRAL_WORKER", "../worker/corral-worker", X_OK,
                              CR_LIBEXECDIR "/corral/corral-worker");
}

/* A user or group given by name or number. */
static int id_of(const char *s, bool group, unsigned *ret, unsigned *ret_primary_gid)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s && !*end && !errno && v < (unsigned long)UINT32_MAX) {
        struct passwd *pw = group ? NULL : getpwuid((uid_t)v);
        *ret = (unsigned)v;
        *ret_primary_gid = pw ? pw->pw_gid : (unsigned)v;
        return 0;
    }
    if (group) {
        struct group *gr = getgrnam(s);
        if (!gr)
            return -ENOENT;
        *ret = gr->gr_gid;
        return 0;
    }
    struct passwd *pw = getpwnam(s);
    if (!pw)
        return -ENOENT;
    *ret = pw->pw_uid;
    *ret_primary_gid = pw->pw_gid;
    return 0;
}

int cr_worker_ids_resolve(struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid(), primary = gid, unused;
    if (!c->user && !c->group)
        return 0;
    if (c->user && id_of(c->user, false, &uid, &primary) < 0) {
        cr_log(CR_LOG_ERR, "--user: no such user '%s'", c->user);
        return -EINVAL;
    }
    gid = c->user ? primary : gid;
    if (c->group && id_of(c->group, true, &gid, &unused) < 0) {
        cr_log(CR_LOG_ERR, "--group: no such group '%s'", c->group);
        return -EINVAL;
    }
    if (geteuid() != 0 && (uid != geteuid() || gid != getegid())) {
        cr_log(CR_LOG_ERR, "--user/--group: corrald runs as uid %u and cannot switch workers to "
               "uid %u gid %u; run corrald as root or drop the option", (unsigned)geteuid(), uid, gid);
        return -EPERM;
    }
    sup->set_ids = true;
    sup->worker_uid = (uid_t)uid;
    sup->worker_gid = (gid_t)gid;
    cr_log(CR_LOG_INFO, "workers run as uid %u gid %u, without supplementary groups", uid, gid);
    return 0;
}
