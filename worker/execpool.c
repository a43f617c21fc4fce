#include "execpool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

struct cr_exec_job {
    struct cr_execpool *pool;
    struct cr_exec_job *next;
    uv_process_t proc;
    unsigned ms;
    cr_exec_done done;
    void *ud;
    struct cr_exec_result res;
};

/* Children get neither our listening socket's activation variables nor our
 * notify channel: they must not pose as us. */
static bool private_var(const char *e)
{
    static const char *const names[] = {
        "LISTEN_FDS=",       "LISTEN_PID=",    "LISTEN_FDNAMES=", "NOTIFY_SOCKET=",
        "CORRAL_NOTIFY_FD=", "WATCHDOG_USEC=", "WATCHDOG_PID="};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(e, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

int cr_execpool_init(struct cr_execpool *p, uv_loop_t *loop, const char *path, unsigned limit,
                     unsigned queue_cap)
{
    memset(p, 0, sizeof(*p));
    p->loop = loop;
    p->limit = limit;
    p->queue_cap = queue_cap;
    p->path = strdup(path ? path : "");
    size_t n = 0;
    while (environ[n])
        n++;
    p->env = calloc(n + 1, sizeof(char *));
    if (!p->path || !p->env) {
        cr_execpool_done(p);
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!private_var(environ[i]))
            p->env[k++] = environ[i];
    return 0;
}

static void finish(struct cr_exec_job *j)
{
    j->res.end_ns = uv_hrtime();
    j->done(j->ud, &j->res);
    free(j);
}

void cr_execpool_done(struct cr_execpool *p)
{
    while (p->qhead) {
        struct cr_exec_job *j = p->qhead;
        p->qhead = j->next;
        j->res.error = UV_ECANCELED;
        finish(j);
    }
    p->qtail = NULL;
    p->queued = 0;
    free(p->path);
    free(p->env);
    p->path = NULL;
    p->env = NULL;
}

static void start_next(struct cr_execpool *p);

static void proc_closed(uv_handle_t *h)
{
    struct cr_exec_job *j = h->data;
    struct cr_execpool *p = j->pool;
    finish(j);
    start_next(p);
}

static void exit_cb(uv_process_t *proc, int64_t status, int sig)
{
    struct cr_exec_job *j = proc->data;
    j->res.exit_status = status;
    j->res.term_signal = sig;
    j->pool->running--;
    uv_close((uv_handle_t *)proc, proc_closed);
}

static void spawn(struct cr_execpool *p, struct cr_exec_job *j)
{
    char ms[24];
    snprintf(ms, sizeof(ms), "%u", j->ms);
    char *args[] = {p->path, ms, NULL};
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = 2},
    };
    uv_process_options_t opt = {
        .exit_cb = exit_cb,
        .file = p->path,
        .args = args,
        .env = p->env,
        .stdio_count = 3,
        .stdio = stdio,
    };
    j->proc.data = j;
    j->res.start_ns = uv_hrtime();
    int r = uv_spawn(p->loop, &j->proc, &opt);
    if (r < 0) {
        /* uv_spawn initialised the handle even on failure: close it. */
        j->res.error = r;
        p->failed++;
        uv_close((uv_handle_t *)&j->proc, proc_closed);
        return;
    }
    p->running++;
    p->started++;
}

static void start_next(struct cr_execpool *p)
{
    while (p->qhead && (p->limit == 0 || p->running < p->limit)) {
        struct cr_exec_job *j = p->qhead;
        p->qhead = j->next;
        if (!p->qhead)
            p->qtail = NULL;
        p->queued--;
        spawn(p, j);
    }
}

int cr_execpool_submit(struct cr_execpool *p, unsigned ms, cr_exec_done done, void *ud)
{
    bool can_run = p->limit == 0 || p->running < p->limit;
    if (!can_run && p->queued >= p->queue_cap) {
        p->rejected++;
        return -EAGAIN;
    }
    struct cr_exec_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->pool = p;
    j->ms = ms;
    j->done = done;
    j->ud = ud;
    j->res.queued_ns = uv_hrtime();
    if (p->qtail)
        p->qtail->next = j;
    else
        p->qhead = j;
    p->qtail = j;
    p->queued++;
    start_next(p);
    return 0;
}
