/* The termination message file: see termlog.h. */
#include "termlog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "cr_config.h"
#include "events.h"
#include "log.h"
#include "termsum.h"
#include "view.h"

#define DEFAULT_PATH "/dev/termination-log"

struct cr_termlog {
    const struct cr_supervisor *sup;
    int fd;
    char *path;
    enum cr_termsum_phase phase;
    char why[128];
    bool failed; /* a write failed: logged once */
    unsigned ready, target; /* as last written */
};

static void write_out(struct cr_termlog *t, int exit_code)
{
    char buf[CR_TERMSUM_MAX];
    struct cr_supervisor_view v;
    cr_view_supervisor(t->sup, &v);
    struct cr_termsum s = {
        .version = CR_VERSION,
        .pid = (int)getpid(),
        .phase = t->phase,
        .exit_code = exit_code,
        .why = t->why,
        .now_ms = (int64_t)cr_wall_ms(),
        .started_ms = (int64_t)v.started_wall_ms,
        .target = v.target,
        .ready = v.ready,
        .by_category = v.deaths_by_category,
        .history = cr_supervisor_history(t->sup),
    };
    t->ready = v.ready, t->target = v.target;
    int n = cr_termsum_render(&s, buf, sizeof buf);
    if (n < 0)
        return;
    /* Over the old text, then cut: never an empty file in between. */
    ssize_t w = pwrite(t->fd, buf, (size_t)n, 0);
    if ((w != n || ftruncate(t->fd, n) < 0) && !t->failed) {
        t->failed = true;
        cr_log(CR_LOG_WARNING, "cannot write the termination message to %s: %s", t->path,
               w < 0 ? strerror(errno) : w != n ? "short write" : strerror(errno));
    }
}

/* The file to write, or NULL: none. */
static const char *path_of(const struct cr_config *cfg)
{
    const char *path = cfg->termination_log;
    if (path && strcmp(path, "none") == 0)
        return NULL;
    /* Kubernetes makes the file for every container; elsewhere it is
     * absent, and corrald writes none unless asked. */
    if (!path && access(DEFAULT_PATH, W_OK) == 0)
        path = DEFAULT_PATH;
    return path;
}

void cr_termlog_usage(const struct cr_config *cfg, const char *err)
{
    const char *path = path_of(cfg);
    int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644) : -1;
    if (fd < 0)
        return;
    dprintf(fd, "corrald %s (pid %d) exited %d: the configuration was refused: %.3900s\n",
            CR_VERSION, (int)getpid(), CR_EXIT_USAGE, err);
    close(fd);
}

void cr_termlog_open(const struct cr_supervisor *sup, struct cr_termlog **ret)
{
    *ret = NULL;
    const char *path = path_of(cr_supervisor_config(sup));
    if (!path)
        return;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0) {
        cr_log(CR_LOG_WARNING, "--termination-log %s: %s; no termination message", path,
               strerror(errno));
        return;
    }
    struct cr_termlog *t = calloc(1, sizeof(*t));
    if (!t || !(t->path = strdup(path))) {
        free(t);
        close(fd);
        return;
    }
    t->sup = sup;
    t->fd = fd;
    t->phase = CR_TERMSUM_RUNNING;
    cr_log(CR_LOG_INFO, "termination message: %s, rewritten at every death and at exit", path);
    write_out(t, 0);
    *ret = t;
}

void cr_termlog_on_event(void *ctx, const struct cr_event *ev)
{
    struct cr_termlog *t = ctx;
    if (!t)
        return;
    switch (ev->type) {
    case CR_EV_WORKER_DIED:
        break;
    case CR_EV_TABLE: {
        /* The first line's "N of M ready" stays true while running. */
        struct cr_supervisor_view v;
        cr_view_supervisor(t->sup, &v);
        if (t->phase != CR_TERMSUM_RUNNING || (v.ready == t->ready && v.target == t->target))
            return;
        break;
    }
    case CR_EV_LAME_DUCK:
    case CR_EV_STOPPING:
        t->phase = CR_TERMSUM_STOPPING;
        snprintf(t->why, sizeof t->why, "%s%s", ev->reason ? ev->reason : "asked to stop",
                 ev->type == CR_EV_LAME_DUCK ? "; serving for --stop-delay, then draining"
                                             : "; draining");
        break;
    default:
        return;
    }
    write_out(t, 0);
}

void cr_termlog_exit(struct cr_termlog *t, int code, const char *why)
{
    if (!t)
        return;
    t->phase = CR_TERMSUM_EXITED;
    snprintf(t->why, sizeof t->why, "%s", why ? why : "");
    write_out(t, code);
    close(t->fd);
    free(t->path);
    free(t);
}
