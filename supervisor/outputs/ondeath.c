/* --on-death PROGRAM: see ondeath.h. */
#include "ondeath.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "control_cmd.h"
#include "death.h"
#include "events.h"
#include "history.h"
#include "log.h"
#include "priority.h"
#include "reaper.h"
#include "view.h"

_Static_assert(64 <= CR_REAPER_FOREIGN_MAX,
               "every run --on-death-parallel allows is registered with the reaper");

/* One death's run: waiting in the queue, then running. Its four handles
 * (process, stdin, output, timer) are closed one by one; the last close
 * frees it. */
struct run {
    struct cr_ondeath *od;
    struct run *next; /* the queue */
    char *json;       /* the post-mortem line; freed once written */
    size_t json_len;
    int worker, pid;
    unsigned generation;
    bool planned;
    char category[32];

    uv_process_t proc;
    uv_pipe_t in, out;
    uv_timer_t timer; /* the timeout; after the exit, the output's drain */
    uv_write_t wr;
    int run_pid;
    uint64_t started_at; /* loop ms */
    unsigned open;       /* handles not closed yet */
    bool exited, out_done, timed_out, reported;
    int64_t exit_status;
    int term_signal;

    char env[5][96]; /* the variables of the death, for its environment */
    char line[CR_ONDEATH_LINE + 1];
    size_t line_len;
    bool line_cut; /* the line in progress was cut: skip to its end */
    unsigned lines;
    unsigned long unlogged; /* lines past CR_ONDEATH_LINES */
    char rbuf[4096];
};

struct cr_ondeath {
    const struct cr_supervisor *sup;
    uv_loop_t *loop;
    struct cr_ondeath_host host;
    uv_timer_t kick; /* starts the next run on a later loop turn */
    struct run *head, *tail;
    bool finished;
    struct cr_ondeath_stats st;
};

/* ---- the queue ---- */

static void on_kick(uv_timer_t *t);

/* The next start, on a later loop turn. */
static void kick(struct cr_ondeath *od)
{
    if (!od->finished && !uv_is_active((uv_handle_t *)&od->kick))
        uv_timer_start(&od->kick, on_kick, 0, 0);
}

static void run_free(struct run *r)
{
    free(r->json);
    free(r);
}

static void push(struct cr_ondeath *od, const struct cr_event *ev)
{
    const struct cr_postmortem *pm = ev->postmortem;
    const char *cat = cr_death_to_string(pm->category);
    if (od->st.pending >= CR_ONDEATH_QUEUE) {
        od->st.dropped++;
        cr_log_event(CR_LOG_WARNING, "on-death", (int)pm->worker_id, pm->pid, NULL,
                     "on-death: %u deaths already wait (at most %u runs at once): worker %u's "
                     "(pid %d, %s) runs nothing; %llu dropped so far",
                     od->st.pending, cr_supervisor_config(od->sup)->on_death_parallel,
                     pm->worker_id, pm->pid, cat ? cat : "?", (unsigned long long)od->st.dropped);
        return;
    }
    struct run *r = calloc(1, sizeof(*r));
    cJSON *o = r ? cr_postmortem_to_json(pm) : NULL;
    /* Exactly the history's record: the same rendering, the same line. */
    char *line = o ? cr_control_print_line(o, NULL) : NULL;
    cJSON_Delete(o);
    if (!line) {
        free(r);
        od->st.dropped++;
        cr_log(CR_LOG_ERR, "on-death: out of memory: worker %u's death runs nothing",
               pm->worker_id);
        return;
    }
    *r = (struct run){
        .od = od,
        .json = line,
        .json_len = strlen(line),
        .worker = (int)pm->worker_id,
        .pid = pm->pid,
        .generation = (unsigned)pm->generation,
        .planned = pm->planned,
    };
    snprintf(r->category, sizeof(r->category), "%s", cat ? cat : "unknown");
    if (od->tail)
        od->tail->next = r;
    else
        od->head = r;
    od->tail = r;
    od->st.pending++;
    kick(od);
}

static struct run *pop(struct cr_ondeath *od)
{
    struct run *r = od->head;
    if (r) {
        od->head = r->next;
        if (!od->head)
            od->tail = NULL;
        r->next = NULL;
        od->st.pending--;
    }
    return r;
}

/* ---- a run's end ---- */

static void on_closed(uv_handle_t *h)
{
    struct run *r = h->data;
    if (--r->open == 0)
        run_free(r);
}

/* Each handle once; r->open counted them when they were made. */
static void close_one(struct run *r, uv_handle_t *h)
{
    if (h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h)) {
        h->data = r;
        uv_close(h, on_closed);
    }
}

/* The run's output so far, as log lines: control bytes become '?'. */
static void emit(struct run *r)
{
    if (r->lines >= CR_ONDEATH_LINES) {
        r->unlogged++;
    } else {
        r->lines++;
        r->line[r->line_len] = '\0';
        for (size_t i = 0; i < r->line_len; i++)
            if ((unsigned char)r->line[i] < 0x20 && r->line[i] != '\t')
                r->line[i] = '?';
        cr_log_event(CR_LOG_INFO, "on-death", r->worker, r->run_pid, NULL, "on-death[%d] w%d: %s%s",
                     r->run_pid, r->worker, r->line, r->line_len == CR_ONDEATH_LINE ? "…" : "");
    }
    r->line_len = 0;
}

static void take_output(struct run *r, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n') {
            if (!r->line_cut)
                emit(r);
            r->line_cut = false;
            continue;
        }
        if (r->line_cut)
            continue;
        r->line[r->line_len++] = buf[i];
        if (r->line_len == CR_ONDEATH_LINE) { /* logged cut; the rest of it is skipped */
            emit(r);
            r->line_cut = true;
        }
    }
}

static void report(struct run *r)
{
    struct cr_ondeath *od = r->od;
    uint64_t ms = uv_now(od->loop) - r->started_at;
    const struct cr_config *cfg = cr_supervisor_config(od->sup);
    if (r->line_len)
        emit(r);
    if (r->unlogged)
        cr_log_event(CR_LOG_WARNING, "on-death", r->worker, r->run_pid, NULL,
                     "on-death[%d] w%d: %lu more output lines not logged (%u a run)", r->run_pid,
                     r->worker, r->unlogged, CR_ONDEATH_LINES);
    if (r->timed_out) {
        od->st.timed_out++;
        cr_log_event(CR_LOG_WARNING, "on-death", r->worker, r->run_pid, NULL,
                     "on-death[%d] w%d: killed after %llu ms (--on-death-timeout %llu ms)",
                     r->run_pid, r->worker, (unsigned long long)ms,
                     (unsigned long long)cfg->on_death_timeout_ms);
    } else if (r->term_signal) {
        od->st.failed++;
        cr_log_event(CR_LOG_WARNING, "on-death", r->worker, r->run_pid, NULL,
                     "on-death[%d] w%d: killed by signal %d (%s) after %llu ms", r->run_pid,
                     r->worker, r->term_signal, strsignal(r->term_signal), (unsigned long long)ms);
    } else if (r->exit_status) {
        od->st.failed++;
        cr_log_event(CR_LOG_WARNING, "on-death", r->worker, r->run_pid, NULL,
                     "on-death[%d] w%d: exited %lld after %llu ms", r->run_pid, r->worker,
                     (long long)r->exit_status, (unsigned long long)ms);
    } else {
        od->st.succeeded++;
        cr_log_event(CR_LOG_INFO, "on-death", r->worker, r->run_pid, NULL,
                     "on-death[%d] w%d: exited 0 after %llu ms", r->run_pid, r->worker,
                     (unsigned long long)ms);
    }
}

/* Once the program has exited and its output is read (or given up on),
 * the run is over: its slot goes to the next death. */
static void maybe_finish(struct run *r)
{
    if (!r->exited || !r->out_done || r->reported)
        return;
    r->reported = true;
    report(r);
    r->od->st.running--;
    kick(r->od);
    close_one(r, (uv_handle_t *)&r->timer);
}

static void on_drained(uv_timer_t *t)
{
    struct run *r = t->data;
    /* A child of the program still holds the pipe: what it writes now
     * belongs to nobody's run. */
    r->out_done = true;
    close_one(r, (uv_handle_t *)&r->out);
    maybe_finish(r);
}

static void on_run_exit(uv_process_t *p, int64_t exit_status, int term_signal)
{
    struct run *r = p->data;
    r->exited = true;
    r->exit_status = exit_status;
    r->term_signal = r->timed_out ? 0 : term_signal;
    r->od->host.reaped(r->od->host.ctx, r->run_pid);
    close_one(r, (uv_handle_t *)&r->proc);
    close_one(r, (uv_handle_t *)&r->in); /* a write still pending is cancelled */
    uv_timer_stop(&r->timer);
    if (!r->out_done) {
        r->timer.data = r;
        uv_timer_start(&r->timer, on_drained, CR_ONDEATH_DRAIN_MS, 0);
    }
    maybe_finish(r);
}

static void on_timeout(uv_timer_t *t)
{
    struct run *r = t->data;
    if (r->exited)
        return;
    r->timed_out = true;
    /* Its own session and group (UV_PROCESS_DETACHED): everything it
     * started goes too. The leader is not reaped yet, so the group id is
     * still its. */
    kill(-r->run_pid, SIGKILL);
    uv_process_kill(&r->proc, SIGKILL);
}

/* ---- a run's start ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct run *r = h->data;
    *buf = uv_buf_init(r->rbuf, sizeof(r->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct run *r = s->data;
    if (n > 0) {
        take_output(r, buf->base, (size_t)n);
        return;
    }
    if (n == 0)
        return;
    /* EOF (or an error): the output is complete. */
    r->out_done = true;
    close_one(r, (uv_handle_t *)&r->out);
    if (r->exited)
        uv_timer_stop(&r->timer);
    maybe_finish(r);
}

static void on_written(uv_write_t *w, int status)
{
    struct run *r = w->data;
    free(r->json);
    r->json = NULL;
    /* EOF on its stdin. A program that exits without reading gets EPIPE
     * here (SIGPIPE is ignored): nothing to report. */
    close_one(r, (uv_handle_t *)&r->in);
}

/* corrald's environment for the run: its interface to systemd and corral's
 * own variables left out, the death's added (held in r). NULL when out of
 * memory; free() it. */
static char **run_env(struct run *r)
{
    static const char *const deny[] = {
        "LISTEN_FDS=",    "LISTEN_PID=",   "LISTEN_FDNAMES=", "NOTIFY_SOCKET=",
        "WATCHDOG_USEC=", "WATCHDOG_PID=", "JOURNAL_STREAM=", "CORRAL_"};
    size_t n = 0, k = 0;
    while (environ && environ[n])
        n++;
    char **env = calloc(n + 6, sizeof(char *));
    if (!env)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        bool denied = false;
        for (size_t d = 0; d < sizeof(deny) / sizeof(deny[0]) && !denied; d++)
            denied = strncmp(environ[i], deny[d], strlen(deny[d])) == 0;
        if (!denied)
            env[k++] = environ[i];
    }
    snprintf(r->env[0], sizeof(r->env[0]), "CORRAL_WORKER_ID=%d", r->worker);
    snprintf(r->env[1], sizeof(r->env[1]), "CORRAL_PID=%d", r->pid);
    snprintf(r->env[2], sizeof(r->env[2]), "CORRAL_GENERATION=%u", r->generation);
    snprintf(r->env[3], sizeof(r->env[3]), "CORRAL_DEATH_CATEGORY=%s", r->category);
    snprintf(r->env[4], sizeof(r->env[4]), "CORRAL_DEATH_PLANNED=%d", r->planned ? 1 : 0);
    for (int i = 0; i < 5; i++)
        env[k++] = r->env[i];
    env[k] = NULL;
    return env;
}

static void start(struct cr_ondeath *od, struct run *r)
{
    const struct cr_config *cfg = cr_supervisor_config(od->sup);
    const char *path = cfg->on_death;
    uv_file fds[2] = {-1, -1};
    char **env = NULL;
    int e;
    uv_pipe_init(od->loop, &r->in, 0);
    uv_pipe_init(od->loop, &r->out, 0);
    uv_timer_init(od->loop, &r->timer);
    r->open = 3; /* and the process's, once uv_spawn has made it */
    r->proc.data = r->in.data = r->out.data = r->timer.data = r;
    if (!path) { /* `set on-death none` since the death */
        e = -ECANCELED;
        goto fail;
    }
    if (!(env = run_env(r))) {
        e = UV_ENOMEM;
        goto fail;
    }
    /* One pipe for stdout and stderr, so that the log keeps their order;
     * corrald's end non-blocking, the program's as it expects. */
    if ((e = uv_pipe(fds, UV_NONBLOCK_PIPE, 0)) < 0 || (e = uv_pipe_open(&r->out, fds[0])) < 0)
        goto fail;
    fds[0] = -1;
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&r->in},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
        {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
    };
    char *args[] = {(char *)path, NULL};
    uv_process_options_t o = {
        .exit_cb = on_run_exit,
        .file = path,
        .args = args,
        .env = env,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    uint64_t t0 = uv_hrtime();
    e = uv_spawn(od->loop, &r->proc, &o);
    uint64_t spawn_ns = uv_hrtime() - t0;
    r->open++;
    close(fds[1]);
    fds[1] = -1;
    if (e < 0) {
        close_one(r, (uv_handle_t *)&r->proc); /* libuv wants a failed spawn's handle closed */
        goto fail;
    }
    free(env);
    env = NULL;
    r->run_pid = r->proc.pid;
    r->started_at = uv_now(od->loop);
    od->st.started++;
    od->st.running++;
    if (od->host.started(od->host.ctx, r->run_pid) < 0) {
        /* Cannot happen (the static assertion above): were it unwatched,
         * the orphan scan might reap it before libuv. */
        cr_log(CR_LOG_ERR, "on-death[%d]: cannot watch it: killed", r->run_pid);
        kill(-r->run_pid, SIGKILL);
    }
    /* Back to the nice corrald was started with: a run is no more urgent
     * than the workers it reports on. */
    const struct cr_priority *prio = od->host.priority ? od->host.priority(od->host.ctx) : NULL;
    if (prio && prio->nice_now != prio->nice)
        setpriority(PRIO_PROCESS, (id_t)r->run_pid, prio->nice);
    cr_log_event(CR_LOG_INFO, "on-death", r->worker, r->run_pid, NULL,
                 "on-death[%d] w%d: %s runs for pid %d (%s)", r->run_pid, r->worker, path, r->pid,
                 r->category);
    cr_log(CR_LOG_DEBUG, "on-death[%d]: uv_spawn held the loop %.2f ms", r->run_pid,
           (double)spawn_ns / 1e6);
    r->wr.data = r;
    uv_buf_t b = uv_buf_init(r->json, (unsigned)r->json_len);
    if (uv_write(&r->wr, (uv_stream_t *)&r->in, &b, 1, on_written) < 0)
        close_one(r, (uv_handle_t *)&r->in);
    uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
    uv_timer_start(&r->timer, on_timeout, cfg->on_death_timeout_ms, 0);
    return;
fail:
    if (fds[0] >= 0)
        close(fds[0]);
    if (fds[1] >= 0)
        close(fds[1]);
    free(env);
    od->st.spawn_failed++;
    if (e == -ECANCELED)
        cr_log(CR_LOG_NOTICE, "on-death: unset since worker %d's death: nothing runs", r->worker);
    else
        cr_log_event(CR_LOG_WARNING, "on-death", r->worker, r->pid, NULL,
                     "on-death: cannot run %s for worker %d (pid %d, %s): %s", path, r->worker,
                     r->pid, r->category, uv_strerror(e));
    close_one(r, (uv_handle_t *)&r->in);
    close_one(r, (uv_handle_t *)&r->out);
    close_one(r, (uv_handle_t *)&r->timer);
    kick(od);
}

/* One start per loop turn: uv_spawn forks corrald and waits for the exec. */
static void on_kick(uv_timer_t *t)
{
    struct cr_ondeath *od = t->data;
    const struct cr_config *cfg = cr_supervisor_config(od->sup);
    if (od->finished || od->st.running >= cfg->on_death_parallel || !od->head)
        return;
    start(od, pop(od));
    if (od->head && od->st.running < cfg->on_death_parallel)
        kick(od);
}

/* ---- the output's interface ---- */

int cr_ondeath_new(const struct cr_supervisor *sup, uv_loop_t *loop,
                   const struct cr_ondeath_host *host, struct cr_ondeath **ret)
{
    struct cr_ondeath *od = calloc(1, sizeof(*od));
    if (!od)
        return -ENOMEM;
    *od = (struct cr_ondeath){.sup = sup, .loop = loop, .host = *host};
    uv_timer_init(loop, &od->kick);
    od->kick.data = od;
    *ret = od;
    return 0;
}

void cr_ondeath_on_event(void *arg, const struct cr_event *ev)
{
    struct cr_ondeath *od = arg;
    if (ev->type == CR_EV_FINISHED) {
        od->finished = true;
        if (od->st.pending)
            cr_log(CR_LOG_NOTICE, "on-death: corrald stops: %u deaths waiting run nothing",
                   od->st.pending);
        for (struct run *r; (r = pop(od));) {
            od->st.dropped++;
            run_free(r);
        }
        uv_close((uv_handle_t *)&od->kick, NULL);
        return;
    }
    if (ev->type != CR_EV_WORKER_DIED || !ev->postmortem || od->finished)
        return;
    if (!cr_supervisor_config(od->sup)->on_death || cr_supervisor_stopping(od->sup))
        return;
    push(od, ev);
}

void cr_ondeath_stats(const struct cr_ondeath *od, struct cr_ondeath_stats *ret)
{
    *ret = od ? od->st : (struct cr_ondeath_stats){0};
}

struct cr_ondeath *cr_ondeath_free(struct cr_ondeath *od)
{
    free(od);
    return NULL;
}
