/* The supervisor core: the lifecycle table's actions, spawning, reaping,
 * the restart policy and rolling replacement. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cr_config.h"
#include "history.h"
#include "log.h"
#include "trend.h"

extern char **environ;

uint64_t cr_now_ms(const struct cr_supervisor *sup)
{
    return uv_now(sup->loop);
}

uint64_t cr_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_deadline(uv_timer_t *t)
{
    struct cr_worker *w = t->data;
    w->deadline_at = 0;
    cr_worker_event(w, CR_WE_DEADLINE);
}

/* The one deadline of a worker: `ms` from now, or none when ms is 0 and
 * `clear` is set. A zero delay still goes through the loop, so an action
 * never recurses into the table. */
static void set_deadline(struct cr_worker *w, uint64_t ms)
{
    w->deadline_at = cr_now_ms(w->sup) + ms;
    uv_timer_start(&w->deadline, on_deadline, ms, 0);
}

static void clear_deadline(struct cr_worker *w)
{
    w->deadline_at = 0;
    uv_timer_stop(&w->deadline);
}

static struct cr_worker *worker_new(struct cr_supervisor *sup, int id)
{
    struct cr_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->sup = sup;
    w->id = id;
    w->state = CR_WS_BACKOFF;
    uv_timer_init(sup->loop, &w->deadline);
    w->deadline.data = w;
    /* Keep the list ordered by id, replacements after the worker they replace. */
    struct cr_worker **pp = &sup->workers;
    while (*pp && (*pp)->id <= id)
        pp = &(*pp)->next;
    w->next = *pp;
    *pp = w;
    return w;
}

static void worker_freed(uv_handle_t *h)
{
    struct cr_worker *w = h->data;
    free(w);
}

static void maybe_finish_stop(struct cr_supervisor *sup);

/* Unlinks and frees a worker that has no process. */
static void worker_remove(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    for (struct cr_worker **pp = &sup->workers; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    if (w->replaces)
        w->replaces->replaced_by = NULL;
    if (w->replaced_by)
        w->replaced_by->replaces = NULL;
    cr_memwatch_worker_gone(w);
    w->closing = true;
    uv_close((uv_handle_t *)&w->deadline, worker_freed);
    maybe_finish_stop(sup);
}

struct cr_worker *cr_supervisor_worker(struct cr_supervisor *sup, int id)
{
    /* The slot's owner: the process not on its way out. */
    struct cr_worker *found = NULL;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->id == id && !w->replaces && !w->closing)
            found = w;
    return found;
}

unsigned cr_supervisor_count_ready(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        if ((w->state == CR_WS_READY || w->state == CR_WS_BLOCKED) && !w->retire_on_exit)
            n++;
    return n;
}

const char *cr_worker_state_name(const struct cr_worker *w)
{
    return cr_wstate_to_string(w->state);
}

void cr_supervisor_emit(struct cr_supervisor *sup, cJSON *obj);

static void emit_simple(struct cr_worker *w, const char *event, const char *extra_key,
                        const char *extra)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", event);
    cJSON_AddNumberToObject(o, "time_ms", (double)cr_wall_ms());
    cJSON_AddNumberToObject(o, "worker", w->id);
    cJSON_AddNumberToObject(o, "pid", w->pid);
    cJSON_AddNumberToObject(o, "generation", w->generation);
    if (extra_key)
        cJSON_AddStringToObject(o, extra_key, extra ? extra : "");
    cr_supervisor_emit(w->sup, o);
}

void cr_worker_signal(struct cr_worker *w, int sig, enum cr_kill_reason why, const char *text)
{
    if (!w->pid || !w->io)
        return;
    w->kill_reason = why;
    w->kill_signal = sig;
    if (sig > 0 && sig < 64)
        w->kill_sigmask |= 1ull << sig;
    if (text)
        snprintf(w->kill_text, sizeof(w->kill_text), "%s", text);
    /* Through the pidfd: the signal can only reach this process, never a
     * newer one that reused its pid. */
    extern int cr_io_pidfd(const struct cr_worker *w);
    if (syscall(SYS_pidfd_send_signal, cr_io_pidfd(w), sig, NULL, 0) < 0 && errno != ESRCH)
        cr_log_event(CR_LOG_WARNING, "signal-failed", w->id, w->pid, NULL,
                     "worker %d: sending signal %d failed: %s", w->id, sig, strerror(errno));
}

/* ---- spawning ---------------------------------------------------------- */

static bool env_is_ours(const char *e)
{
    static const char *const drop[] = {"LISTEN_FDS=", "LISTEN_PID=", "LISTEN_FDNAMES=",
                                       "NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=",
                                       "JOURNAL_STREAM=", "CORRAL_", "MAINPID="};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (strncmp(e, drop[i], strlen(drop[i])) == 0)
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
    for (char **e = environ; *e && r == 0; e++)
        if (!env_is_ours(*e) && !(c->threadpool && strncmp(*e, "UV_THREADPOOL_SIZE=", 19) == 0))
            r = strv_add(env, strdup(*e));
    *ret_slot = (int)env->n;
    r = r ?: strv_add(env, strdup(CR_SPAWN_LISTEN_PID_TEMPLATE));
    r = r ?: strv_add(env, strdup("LISTEN_FDS=1"));
    r = r ?: strv_add(env, fmt("LISTEN_FDNAMES=%s", fdname));
    r = r ?: strv_add(env, fmt("NOTIFY_SOCKET=%s", sup->notify_addr));
    r = r ?: strv_add(env, strdup("CORRAL_NOTIFY_FD=4"));
    r = r ?: strv_add(env, fmt("CORRAL_WORKER_ID=%d", w->id));
    r = r ?: strv_add(env, fmt("CORRAL_GENERATION=%u", w->generation));
    if (c->memory_max) {
        r = r ?: strv_add(env, fmt("CORRAL_MEMORY_MAX=%llu", (unsigned long long)c->memory_max));
        r = r ?: strv_add(env, fmt("CORRAL_HEAP_LIMIT=%llu",
                                   (unsigned long long)cr_config_heap_limit(c)));
    }
    if (c->threadpool)
        r = r ?: strv_add(env, fmt("UV_THREADPOOL_SIZE=%u", c->threadpool));
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
static uint64_t node_old_space_mb(const struct cr_config *c)
{
    uint64_t mb = cr_config_heap_limit(c) >> 20;
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
    if (r == 0 && c->node_heap && c->memory_max && is_node(c->argv[0]))
        r = strv_add(argv, fmt("--max-old-space-size=%llu", (unsigned long long)node_old_space_mb(c)));
    for (size_t i = 1; r == 0 && i < c->argc; i++)
        r = strv_add(argv, strdup(c->argv[i]));
    return r;
}

static uint64_t jitter(uint64_t max)
{
    /* The option is capped far below UINT64_MAX, so max + 1 cannot wrap. */
    return max ? (uint64_t)random() % (max + 1) : 0;
}

/* Generations never repeat within a slot, even when a new worker takes the
 * id of one still draining: each has a cgroup of its own. */
static unsigned next_generation(struct cr_supervisor *sup, int id)
{
    if ((size_t)id >= sup->ngenerations) {
        size_t n = (size_t)id + 16;
        unsigned *g = realloc(sup->generations, n * sizeof(*g));
        if (!g)
            return 0;
        memset(g + sup->ngenerations, 0, (n - sup->ngenerations) * sizeof(*g));
        sup->generations = g;
        sup->ngenerations = n;
    }
    return ++sup->generations[id];
}

/* Forks and execs the next generation of w. -errno when nothing runs. */
static int worker_spawn(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    struct strv env = {0}, argv = {0};
    struct cr_listener own = {.fd = -1};
    int outp[2] = {-1, -1}, ns[2] = {-1, -1};
    char *path = NULL;
    int slot, r;

    unsigned gen = next_generation(sup, w->id);
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
    w->tail_len = w->tail_head = w->out_line_len = 0;
    w->nstream.len = 0;
    w->oom_events = 0;
    w->seen = (struct cr_cgroup_events){0};
    w->soft_over = 0;
    w->soft_crossed_at = 0;
    w->status_text[0] = '\0';
    w->verdict = 0;
    w->verdict_text[0] = '\0';
    w->rss = w->cg_usage = 0;
    if (w->samples)
        cr_trend_ring_clear(w->samples);
    w->max_requests = sup->cfg.max_requests
                          ? sup->cfg.max_requests + jitter(sup->cfg.max_requests_jitter)
                          : 0;

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
    if (sup->cgroups && (r = cr_cg_worker_create(w)) < 0)
        goto out;
    cr_cg_worker_baseline(w);

    struct cr_spawn_opts o = {
        .path = path, .argv = argv.v, .envp = env.v, .listen_pid_slot = slot,
        .fd3 = l->fd, .fd4 = ns[1], .out_fd = outp[1],
        .attach = sup->cgroups ? cr_cg_attach_cb : NULL, .userdata = w,
    };
    struct cr_spawn_result res;
    if ((r = cr_spawn(&o, &res)) < 0) {
        cr_cg_worker_release(w);
        goto out;
    }
    w->pid = res.pid;
    w->exec_errno = res.exec_errno;
    w->spawned_at = cr_now_ms(sup);
    w->spawned_wall_ms = cr_wall_ms();
    w->ready_at = 0;
    w->last_report_at = w->spawned_at;

    extern int cr_io_adopt(struct cr_worker * w, int pidfd, int out_fd, int ns_fd);
    r = cr_io_adopt(w, res.pidfd, outp[0], ns[0]);
    outp[0] = ns[0] = -1; /* taken, even on failure */
    if (r < 0) {
        /* Without its watch the process cannot be supervised: end it and
         * reap it here, the one place that can. */
        kill(res.pid, SIGKILL);
        waitpid(res.pid, NULL, 0);
        w->pid = 0;
        cr_cg_worker_release(w);
        goto out;
    }
    if (w->exec_errno)
        cr_log_event(CR_LOG_ERR, "exec-failed", w->id, w->pid, NULL,
                     "worker %d: cannot execute %s: %s", w->id, path, strerror(w->exec_errno));
    else
        cr_log_event(CR_LOG_INFO, "spawned", w->id, w->pid, NULL,
                     "worker %d spawned: pid %d, generation %u%s", w->id, (int)w->pid,
                     w->generation, w->replaces ? " (replacement)" : "");
    emit_simple(w, "spawned", NULL, NULL);
    r = 0;
out:
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

/* Starts generation n+1 of w, or — when even fork/cgroup setup fails —
 * treats it like an unplanned death so the restart policy throttles it. */
static void start_or_backoff(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    int r = worker_spawn(w);
    if (r == 0) {
        w->state = CR_WS_STARTING;
        set_deadline(w, sup->cfg.start_timeout_ms);
        return;
    }
    cr_log_event(CR_LOG_ERR, "spawn-failed", w->id, 0, NULL, "worker %d: spawn failed: %s",
                 w->id, strerror(-r));
    if (w->replaces) {
        /* A failed replacement leaves the old worker serving. */
        worker_remove(w);
        return;
    }
    struct cr_restart_policy p = {
        sup->cfg.backoff_initial_ms, sup->cfg.backoff_max_ms, sup->cfg.backoff_reset_ms,
        sup->cfg.crash_budget,       sup->cfg.crash_window_ms, sup->cfg.failed_retry_ms};
    struct cr_restart_decision d = cr_restart_decide(&p, &w->restart, cr_now_ms(sup), 0, false);
    w->state = d.next;
    set_deadline(w, d.delay_ms);
}

/* ---- rolling replacement ------------------------------------------------ */

static unsigned replacements_in_progress(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->replaces)
            n++;
    return n;
}

static void pump_recycles(struct cr_supervisor *sup);

static void start_replacement(struct cr_worker *old)
{
    struct cr_worker *r = worker_new(old->sup, old->id);
    if (!r)
        return;
    old->recycle_queued = false;
    r->generation = old->generation;
    r->restart = old->restart;
    r->restarts = old->restarts;
    r->oom_kills = old->oom_kills;
    r->replaces = old;
    old->replaced_by = r;
    start_or_backoff(r);
}

static void pump_recycles(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if (replacements_in_progress(sup) >= sup->cfg.recycle_parallel)
            break;
        if (w->recycle_queued && !w->replaced_by && !w->retire_on_exit &&
            (w->state == CR_WS_READY || w->state == CR_WS_BLOCKED))
            start_replacement(w);
    }
    bool pending = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->recycle_queued || w->replaces)
            pending = true;
    if (!pending && sup->reloading) {
        sup->reloading = false;
        if (sup->reload_failed)
            cr_log(CR_LOG_ERR, "reload finished: %u replacement(s) died before ready; their "
                               "old workers keep serving", sup->reload_failed);
        else
            cr_log(CR_LOG_NOTICE, "reload complete: every worker replaced");
        sup->reload_failed = 0;
        cr_sd_update(sup);
    }
}

void cr_worker_recycle(struct cr_worker *w, const char *why)
{
    if (w->recycle_queued || w->replaced_by || w->retire_on_exit || w->replaces ||
        !cr_wstate_has_process(w->state) || w->state == CR_WS_DRAINING ||
        w->state == CR_WS_KILLING || cr_now_ms(w->sup) < w->recycle_after)
        return;
    w->recycle_queued = true;
    snprintf(w->recycle_text, sizeof(w->recycle_text), "%s", why);
    cr_log_event(CR_LOG_NOTICE, "recycle", w->id, w->pid, NULL, "worker %d: recycle: %s", w->id,
                 why);
    emit_simple(w, "recycling", "reason", why);
    pump_recycles(w->sup);
}

/* Asks a worker to go away for good (stop, scale-down, handed over). */
static void drain(struct cr_worker *w, enum cr_kill_reason why, const char *text)
{
    w->retire_on_exit = true;
    w->recycle_queued = false;
    /* Only a drain that really sends SIGTERM changes the ledger: a worker
     * corrald is already killing (hang, stop timeout) dies for that. */
    if (w->state == CR_WS_STARTING || w->state == CR_WS_READY || w->state == CR_WS_BLOCKED) {
        w->kill_reason = why;
        if (text && text != w->kill_text)
            snprintf(w->kill_text, sizeof(w->kill_text), "%s", text);
    }
    cr_worker_event(w, CR_WE_DRAIN);
}

/* ---- the lifecycle table's actions ------------------------------------- */

static void arm_watchdog(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    if (c->watchdog_ms && w->heartbeats)
        set_deadline(w, c->watchdog_ms);
    else
        clear_deadline(w);
}

static void act_become_ready(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    w->ready_at = cr_now_ms(sup);
    cr_log_event(CR_LOG_INFO, "ready", w->id, w->pid, NULL, "worker %d ready: pid %d after %llu ms",
                 w->id, (int)w->pid, (unsigned long long)(w->ready_at - w->spawned_at));
    emit_simple(w, "ready", NULL, NULL);
    arm_watchdog(w);
    if (w->replaces) {
        struct cr_worker *old = w->replaces;
        w->replaces = NULL;
        old->replaced_by = NULL;
        drain(old, CR_KILL_RECYCLE, old->recycle_text[0] ? old->recycle_text : "recycled");
    }
    cr_sd_update(sup);
    pump_recycles(sup);
}

static void act_flag_blocked(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    uint64_t silent = cr_now_ms(w->sup) - w->last_report_at;
    cr_log_event(CR_LOG_WARNING, "blocked", w->id, w->pid, NULL,
                 "worker %d blocked: no heartbeat for %llu ms (watchdog %llu ms)", w->id,
                 (unsigned long long)silent, (unsigned long long)c->watchdog_ms);
    emit_simple(w, "blocked", NULL, NULL);
    if (c->hang_timeout_ms)
        set_deadline(w, c->hang_timeout_ms > silent ? c->hang_timeout_ms - silent : 0);
    cr_sd_update(w->sup);
}

static void act_unblock(struct cr_worker *w)
{
    cr_log_event(CR_LOG_NOTICE, "unblocked", w->id, w->pid, NULL,
                 "worker %d unblocked: heartbeat again", w->id);
    emit_simple(w, "unblocked", NULL, NULL);
    arm_watchdog(w);
    cr_sd_update(w->sup);
}

#define HANG_ABORT_GRACE_MS 2000

static void act_kill_hang(struct cr_worker *w)
{
    char text[128];
    snprintf(text, sizeof(text), "no heartbeat for %llu ms (hang timeout %llu ms)",
             (unsigned long long)(cr_now_ms(w->sup) - w->last_report_at),
             (unsigned long long)w->sup->cfg.hang_timeout_ms);
    cr_log_event(CR_LOG_ERR, "hang-kill", w->id, w->pid, NULL,
                 "worker %d hung: %s; sending SIGABRT for a core, SIGKILL in %d ms", w->id, text,
                 HANG_ABORT_GRACE_MS);
    cr_worker_signal(w, SIGABRT, CR_KILL_HANG, text);
    set_deadline(w, HANG_ABORT_GRACE_MS);
}

static void act_send_term(struct cr_worker *w)
{
    enum cr_kill_reason why = w->kill_reason != CR_KILL_NONE ? w->kill_reason : CR_KILL_STOP;
    cr_log_event(CR_LOG_INFO, "draining", w->id, w->pid, NULL,
                 "worker %d draining (%s%s%s): SIGTERM, SIGKILL after %llu ms", w->id,
                 cr_kill_reason_to_string(why), w->kill_text[0] ? ": " : "", w->kill_text,
                 (unsigned long long)w->sup->cfg.stop_timeout_ms);
    emit_simple(w, "draining", "reason", cr_kill_reason_to_string(why));
    cr_worker_signal(w, SIGTERM, why, NULL);
    set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_sd_update(w->sup);
}

static void act_reap(struct cr_worker *w);

void cr_worker_event(struct cr_worker *w, enum cr_wevent e)
{
    const struct cr_transition *t = cr_lifecycle_step(w->state, e);
    if (!t)
        return;
    w->state = t->next;
    switch (t->action) {
    case CR_WA_NONE:
        break;
    case CR_WA_BECOME_READY:
        act_become_ready(w);
        break;
    case CR_WA_ARM_WATCHDOG:
        arm_watchdog(w);
        break;
    case CR_WA_FLAG_BLOCKED:
        act_flag_blocked(w);
        break;
    case CR_WA_UNBLOCK:
        act_unblock(w);
        break;
    case CR_WA_KILL_START_TIMEOUT:
        cr_log_event(CR_LOG_ERR, "start-timeout", w->id, w->pid, NULL,
                     "worker %d not ready after %llu ms: SIGKILL", w->id,
                     (unsigned long long)w->sup->cfg.start_timeout_ms);
        cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, "no READY=1 in time");
        break;
    case CR_WA_KILL_HANG:
        act_kill_hang(w);
        break;
    case CR_WA_KILL_HARD:
        cr_log_event(CR_LOG_ERR, "hang-kill", w->id, w->pid, NULL,
                     "worker %d survived SIGABRT: SIGKILL", w->id);
        cr_worker_signal(w, SIGKILL, CR_KILL_HANG, NULL);
        break;
    case CR_WA_SEND_TERM:
        act_send_term(w);
        break;
    case CR_WA_KILL_STOP_TIMEOUT:
        cr_log_event(CR_LOG_WARNING, "stop-timeout", w->id, w->pid, NULL,
                     "worker %d still draining after %llu ms: SIGKILL", w->id,
                     (unsigned long long)w->sup->cfg.stop_timeout_ms);
        cr_worker_signal(w, SIGKILL, CR_KILL_STOP_TIMEOUT, NULL);
        break;
    case CR_WA_REAP:
        act_reap(w);
        break;
    case CR_WA_SPAWN:
        start_or_backoff(w);
        break;
    case CR_WA_RETIRE:
        clear_deadline(w);
        worker_remove(w);
        break;
    case _CR_WA_MAX:
        break;
    }
}

/* ---- death -------------------------------------------------------------- */

/* A replacement died before it was ready: the old worker keeps serving, and
 * the next attempt to recycle it waits like a restart after a crash would —
 * otherwise a trigger that fires every sample would respawn in a storm. */
static void replacement_failed(struct cr_worker *r, uint64_t now, uint64_t uptime)
{
    struct cr_supervisor *sup = r->sup;
    struct cr_worker *old = r->replaces;
    struct cr_restart_policy p = {
        sup->cfg.backoff_initial_ms, sup->cfg.backoff_max_ms, sup->cfg.backoff_reset_ms,
        sup->cfg.crash_budget,       sup->cfg.crash_window_ms, sup->cfg.failed_retry_ms};
    struct cr_restart_decision d = cr_restart_decide(&p, &old->restart, now, uptime, false);
    uint64_t wait = d.delay_ms > p.backoff_initial_ms ? d.delay_ms : p.backoff_initial_ms;
    old->recycle_after = now + wait;
    old->recycle_queued = false;
    if (sup->reloading)
        sup->reload_failed++;
    cr_log_event(CR_LOG_WARNING, "replacement-failed", r->id, 0, NULL,
                 "worker %d: the replacement died before it was ready; the old worker keeps "
                 "serving; no new recycle for %llu ms", r->id, (unsigned long long)wait);
    worker_remove(r);
    pump_recycles(sup);
}

static void log_death(struct cr_worker *w, const struct cr_postmortem *pm)
{
    char status[40], peak[48], line[2048];
    snprintf(status, sizeof(status), "CORRAL_EXIT_STATUS=%d", pm->shell_status);
    snprintf(peak, sizeof(peak), "CORRAL_MEMORY_PEAK=%llu", (unsigned long long)pm->cg_peak);
    char death[48];
    snprintf(death, sizeof(death), "CORRAL_DEATH=%s", cr_death_to_string(pm->category));
    char gen[40];
    snprintf(gen, sizeof(gen), "CORRAL_GENERATION=%llu", (unsigned long long)pm->generation);
    cr_postmortem_format_logfmt(pm, line, sizeof(line));
    char pmf[2100];
    snprintf(pmf, sizeof(pmf), "CORRAL_POSTMORTEM=%s", line);
    const char *fields[] = {death, status, peak, gen, pmf, NULL};
    bool bad = !pm->planned && pm->category != CR_DEATH_EXIT_CLEAN;
    cr_log_event(bad ? CR_LOG_WARNING : CR_LOG_INFO, "died", w->id, w->pid, fields,
                 "worker %d (pid %d) died: %s — %s", w->id, (int)w->pid,
                 cr_death_to_string(pm->category), pm->reason);
}

static void act_reap(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    clear_deadline(w);
    cr_io_drain_output(w);

    char tail[CR_STDERR_TAIL];
    size_t tail_len = 0;
    cr_io_tail(w, tail, &tail_len);

    struct cr_postmortem *pm = calloc(1, sizeof(*pm));
    if (!pm)
        abort(); /* a supervisor without memory for 5 KiB cannot go on honestly */
    struct cr_death_evidence ev = {
        .cld_code = w->wait_code,
        .cld_status = w->wait_status,
        .exec_failed = w->exec_errno != 0,
        .exec_errno = w->exec_errno,
        .kill_reason = w->kill_reason,
        .kill_signal = w->kill_signal,
        .kill_sigmask = w->kill_sigmask,
        .kill_text = w->kill_text[0] ? w->kill_text : NULL,
        .fatal_heap_limit = w->fatal_heap_limit,
        .heap_used = w->last.heap_used,
        .heap_limit = w->last.heap_limit,
        .stderr_tail = tail,
        .stderr_len = tail_len,
        .uptime_ms = now - w->spawned_at,
    };
    cr_cg_worker_evidence(w, &ev, pm);

    struct cr_death_result res;
    if (cr_death_classify(&ev, &res) < 0) {
        res = (struct cr_death_result){.category = CR_DEATH_SIGNAL, .exit_code = -1};
        snprintf(res.reason, sizeof(res.reason), "unclassifiable wait status %d/%d", w->wait_code,
                 w->wait_status);
    }
    pm->worker_id = (unsigned)w->id;
    pm->pid = w->pid;
    pm->generation = w->generation;
    pm->start_ms = (int64_t)w->spawned_wall_ms;
    pm->end_ms = (int64_t)cr_wall_ms();
    pm->uptime_ms = ev.uptime_ms;
    pm->rss = w->rss ? w->rss : w->last.rss;
    pm->heap_used = w->last.heap_used;
    pm->heap_total = w->last.heap_total;
    pm->heap_limit = w->last.heap_limit;
    pm->external = w->last.external;
    pm->loop_delay_max_us = w->last.delay_max_us;
    cr_postmortem_set_death(pm, &res);
    cr_postmortem_set_stderr(pm, tail, tail_len);
    cr_history_push(sup->history, pm);
    sup->deaths_by_category[res.category]++;
    if (res.category == CR_DEATH_OOM_OWN_LIMIT || res.category == CR_DEATH_OOM_ANCESTOR_LIMIT ||
        res.category == CR_DEATH_OOM_SYSTEM)
        w->oom_kills++;
    snprintf(w->last_death, sizeof(w->last_death), "%s", cr_death_to_string(res.category));
    snprintf(w->last_death_reason, sizeof(w->last_death_reason), "%s", res.reason);
    log_death(w, pm);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "died");
    cJSON_AddNumberToObject(o, "time_ms", (double)cr_wall_ms());
    cJSON_AddNumberToObject(o, "worker", w->id);
    cJSON_AddNumberToObject(o, "pid", w->pid);
    cJSON_AddNumberToObject(o, "generation", w->generation);
    cJSON_AddStringToObject(o, "category", cr_death_to_string(res.category));
    cJSON_AddStringToObject(o, "reason", res.reason);
    cJSON_AddItemToObject(o, "postmortem", cr_postmortem_to_json(pm));
    cr_supervisor_emit(sup, o);
    free(pm);

    cr_cg_worker_release(w);
    w->pid = 0;
    w->recycle_queued = false; /* a recycle asked of this process died with it */

    /* What follows the death. */
    if (w->retire_on_exit || sup->stopping) {
        worker_remove(w);
        cr_sd_update(sup);
        return;
    }
    if (w->replaced_by) {
        /* Died while its replacement was starting: the replacement owns the slot now. */
        w->replaced_by->replaces = NULL;
        w->replaced_by->oom_kills = w->oom_kills;
        w->replaced_by->restarts = w->restarts;
        w->replaced_by = NULL;
        worker_remove(w);
        cr_sd_update(sup);
        return;
    }
    if (w->replaces) {
        replacement_failed(w, now, ev.uptime_ms);
        return;
    }
    struct cr_restart_policy p = {
        sup->cfg.backoff_initial_ms, sup->cfg.backoff_max_ms, sup->cfg.backoff_reset_ms,
        sup->cfg.crash_budget,       sup->cfg.crash_window_ms, sup->cfg.failed_retry_ms};
    struct cr_restart_decision d =
        cr_restart_decide(&p, &w->restart, now, ev.uptime_ms, res.planned);
    if (res.category == CR_DEATH_EXEC_FAILED) {
        /* Nothing will change by retrying fast: the program is not there. */
        d = (struct cr_restart_decision){.next = CR_WS_FAILED, .delay_ms = p.failed_retry_ms};
    }
    w->restarts++;
    w->state = d.next;
    if (d.next == CR_WS_FAILED) {
        cr_log_event(CR_LOG_ERR, "failed", w->id, 0, NULL,
                     "worker %d FAILED: %s; retrying every %llu ms", w->id,
                     d.crash_loop ? "crash loop (death budget exceeded)" : "cannot be started",
                     (unsigned long long)d.delay_ms);
        emit_simple(w, "failed", "reason", d.crash_loop ? "crash-loop" : "exec-failed");
    } else if (d.delay_ms) {
        cr_log_event(CR_LOG_INFO, "backoff", w->id, 0, NULL, "worker %d restarts in %llu ms",
                     w->id, (unsigned long long)d.delay_ms);
    }
    set_deadline(w, d.delay_ms);
    cr_sd_update(sup);
}

/* ---- operations ---------------------------------------------------------- */

static int lowest_free_id(struct cr_supervisor *sup)
{
    for (int id = 1;; id++) {
        bool used = false;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (w->id == id && !w->retire_on_exit)
                used = true;
        if (!used)
            return id;
    }
}

int cr_supervisor_scale(struct cr_supervisor *sup, unsigned n)
{
    if (sup->stopping)
        return -ESHUTDOWN;
    if (n == 0 || n > 4096)
        return -ERANGE;
    sup->target = n;
    sup->cfg.workers = n;
    unsigned have = 0;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (!w->retire_on_exit && !w->replaces)
            have++;
    while (have < n) {
        struct cr_worker *w = worker_new(sup, lowest_free_id(sup));
        if (!w)
            return -ENOMEM;
        start_or_backoff(w);
        have++;
    }
    /* Scale down: drain the highest ids first. */
    while (have > n) {
        struct cr_worker *top = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (!w->retire_on_exit && !w->replaces && (!top || w->id > top->id))
                top = w;
        if (!top)
            break;
        if (top->replaced_by)
            drain(top->replaced_by, CR_KILL_STOP, "scale down");
        drain(top, CR_KILL_STOP, "scale down");
        have--;
    }
    cr_sd_update(sup);
    return 0;
}

int cr_supervisor_restart(struct cr_supervisor *sup, int id, const char *why)
{
    if (sup->stopping)
        return -ESHUTDOWN;
    bool any = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if ((id && w->id != id) || w->retire_on_exit || w->replaces)
            continue;
        any = true;
        if (w->state == CR_WS_BACKOFF || w->state == CR_WS_FAILED)
            set_deadline(w, 0); /* restart now */
        else
            cr_worker_recycle(w, why);
    }
    return any ? 0 : -ENOENT;
}

void cr_supervisor_reload(struct cr_supervisor *sup, const char *why)
{
    if (sup->stopping)
        return;
    sup->reloading = true;
    sup->reload_failed = 0;
    cr_sd_notify(sup, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading: replacing every "
                      "worker",
                 (unsigned long long)(uv_hrtime() / 1000));
    cr_log(CR_LOG_NOTICE, "reload (%s): rolling replacement of every worker", why);
    cr_supervisor_restart(sup, 0, why);
    pump_recycles(sup);
}

int cr_supervisor_kill(struct cr_supervisor *sup, int id, int sig)
{
    struct cr_worker *w = cr_supervisor_worker(sup, id);
    if (!w)
        return -ENOENT;
    if (!w->pid || !cr_wstate_has_process(w->state))
        return -ESRCH;
    char text[64];
    snprintf(text, sizeof(text), "signal %d sent by an operator", sig);
    cr_log_event(CR_LOG_NOTICE, "kill", w->id, w->pid, NULL, "worker %d: %s", w->id, text);
    cr_worker_signal(w, sig, CR_KILL_MANUAL, text);
    return 0;
}

int cr_supervisor_set(struct cr_supervisor *sup, const char *key, const char *value, char *err,
                      size_t errlen)
{
    int r = cr_config_set(&sup->cfg, key, value, true, err, errlen);
    if (r < 0)
        return r;
    cr_log(CR_LOG_NOTICE, "set %s = %s", key, value);
    if (strcmp(key, "workers") == 0)
        return cr_supervisor_scale(sup, sup->cfg.workers ? sup->cfg.workers : sup->target);
    if (strcmp(key, "log-level") == 0)
        cr_log_set_level(sup->cfg.log_level);
    if (strncmp(key, "memory-", 7) == 0)
        cr_cg_apply_limits(sup);
    if (strcmp(key, "sample-interval") == 0)
        cr_memwatch_restart_timer(sup);
    return 0;
}

static void close_cb_noop(uv_handle_t *h)
{
    (void)h;
}

static void finish_stop(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    cr_log(CR_LOG_NOTICE, "every worker is gone; exiting");
    extern void cr_control_close(struct cr_control * c);
    if (sup->control)
        cr_control_close(sup->control);
    sup->control = NULL;
    uv_handle_t *hs[] = {(uv_handle_t *)&sup->sig_term,     (uv_handle_t *)&sup->sig_int,
                         (uv_handle_t *)&sup->sig_hup,      (uv_handle_t *)&sup->sample_timer,
                         (uv_handle_t *)&sup->sd_timer,     (uv_handle_t *)&sup->notify_poll,
                         (uv_handle_t *)&sup->cg_trash_timer, (uv_handle_t *)&sup->finish_timer};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i]->type != UV_UNKNOWN_HANDLE && !uv_is_closing(hs[i]))
            uv_close(hs[i], close_cb_noop);
}

/* Once stopping and empty, exit from the next loop turn: a control client
 * whose `stop` emptied the table still gets its answer queued first. */
static void maybe_finish_stop(struct cr_supervisor *sup)
{
    if (!sup->stopping || sup->workers || sup->finish_timer.type == UV_UNKNOWN_HANDLE ||
        uv_is_active((uv_handle_t *)&sup->finish_timer) ||
        uv_is_closing((uv_handle_t *)&sup->finish_timer))
        return;
    uv_timer_start(&sup->finish_timer, finish_stop, 0, 0);
}

void cr_supervisor_stop(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    sup->stopping = true;
    cr_log(CR_LOG_NOTICE, "stopping: draining %u worker(s)", cr_supervisor_count_ready(sup));
    /* Draining may take up to the stop timeout: tell systemd so it waits. */
    cr_sd_notify(sup, "STOPPING=1\nSTATUS=stopping: draining workers\nEXTEND_TIMEOUT_USEC=%llu",
                 (unsigned long long)(sup->cfg.stop_timeout_ms + 5000) * 1000);
    /* Drain from a snapshot: draining a process-less worker frees it. */
    struct cr_worker *w = sup->workers;
    while (w) {
        struct cr_worker *next = w->next;
        drain(w, CR_KILL_STOP, "corrald stopping");
        w = next;
    }
    maybe_finish_stop(sup);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct cr_supervisor *sup = h->data;
    if (signum == SIGHUP) {
        cr_supervisor_reload(sup, "SIGHUP");
        return;
    }
    if (sup->stopping) {
        cr_log(CR_LOG_NOTICE, "%s again: still draining", strsignal(signum));
        return;
    }
    cr_log(CR_LOG_NOTICE, "%s received", strsignal(signum));
    cr_supervisor_stop(sup);
}

/* ---- start-up ------------------------------------------------------------ */

static char *default_worker_path(void)
{
    const char *env = getenv("CORRAL_WORKER");
    if (env && *env)
        return strdup(env);
    /* In a build tree the worker sits in ../worker/ next to supervisor/. */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *cand = fmt("%s/../worker/corral-worker", self);
            if (cand && access(cand, X_OK) == 0)
                return cand;
            free(cand);
        }
    }
    return strdup(CR_LIBEXECDIR "/corral/corral-worker");
}

static int open_listener(struct cr_supervisor *sup)
{
    int r = cr_listen_from_systemd(&sup->listener);
    if (r < 0)
        return r;
    if (r > 0) {
        cr_log(CR_LOG_INFO, "listening on %s (socket-activated, fd %d, name '%s')",
               sup->listener.addr, sup->listener.fd, sup->listener.name);
        if (sup->cfg.balance == CR_BALANCE_REUSEPORT)
            cr_log(CR_LOG_WARNING, "balance=reuseport ignored: the socket comes from systemd");
        return 0;
    }
    bool rp = sup->cfg.balance == CR_BALANCE_REUSEPORT;
    /* reuseport: corrald holds a bound, non-listening socket that reserves
     * the port (port 0 resolves here once); each worker gets its own. */
    r = cr_listen_bind(sup->cfg.listen, rp, !rp, &sup->listener);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "cannot listen on %s: %s", sup->cfg.listen, strerror(-r));
        return r;
    }
    cr_log(CR_LOG_INFO, "listening on %s (%s)", sup->listener.addr,
           cr_balance_to_string(sup->cfg.balance));
    return 0;
}

int cr_supervisor_start(struct cr_supervisor *sup, uv_loop_t *loop)
{
    int r;
    sup->loop = loop;
    sup->notify_fd = -1;
    sup->listener.fd = -1;
    sup->started_at = uv_now(loop);
    sup->started_wall_ms = cr_wall_ms();
    srandom((unsigned)(getpid() ^ sup->started_wall_ms));

    uv_signal_init(loop, &sup->sig_term);
    uv_signal_init(loop, &sup->sig_int);
    uv_signal_init(loop, &sup->sig_hup);
    sup->sig_term.data = sup->sig_int.data = sup->sig_hup.data = sup;
    uv_signal_start(&sup->sig_term, on_signal, SIGTERM);
    uv_signal_start(&sup->sig_int, on_signal, SIGINT);
    uv_signal_start(&sup->sig_hup, on_signal, SIGHUP);
    uv_timer_init(loop, &sup->sample_timer);
    uv_timer_init(loop, &sup->sd_timer);
    uv_timer_init(loop, &sup->cg_trash_timer);
    uv_timer_init(loop, &sup->finish_timer);
    sup->sample_timer.data = sup->sd_timer.data = sup->cg_trash_timer.data = sup;
    sup->finish_timer.data = sup;

    if ((r = cr_history_new(sup->cfg.history, &sup->history)) < 0)
        return r;
    sup->worker_path = default_worker_path();
    if (!sup->worker_path)
        return -ENOMEM;
    cr_sd_init(sup);
    if ((r = open_listener(sup)) < 0)
        return r;
    if ((r = cr_notify_open(sup->notify_addr, sizeof(sup->notify_addr), &sup->notify_fd)) < 0) {
        cr_log(CR_LOG_ERR, "cannot open the worker notify socket: %s", strerror(-r));
        return r;
    }
    if ((r = cr_io_notify_start(sup)) < 0)
        return r;
    if ((r = cr_cg_setup(sup)) < 0)
        return r;
    extern int cr_control_open(struct cr_supervisor * sup);
    if ((r = cr_control_open(sup)) < 0)
        return r;

    sup->target = sup->cfg.workers ? sup->cfg.workers : uv_available_parallelism();
    cr_log(CR_LOG_NOTICE, "corrald %s starting %u worker(s): %s", CR_VERSION, sup->target,
           sup->cfg.argc ? sup->cfg.argv[0] : sup->worker_path);
    for (unsigned i = 1; i <= sup->target; i++) {
        struct cr_worker *w = worker_new(sup, (int)i);
        if (!w)
            return -ENOMEM;
        start_or_backoff(w);
    }
    cr_memwatch_start(sup);
    cr_sd_update(sup);
    return 0;
}

void cr_supervisor_done(struct cr_supervisor *sup)
{
    cr_cg_done(sup);
    if (sup->notify_fd >= 0)
        close(sup->notify_fd);
    cr_listen_close(&sup->listener);
    sup->history = cr_history_free(sup->history);
    free(sup->worker_path);
    free(sup->generations);
    cr_config_done(&sup->cfg);
}
