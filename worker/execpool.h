/* CPU-bound child processes under a concurrency limit with a bounded queue
 * (more CPU-bound children than cores only add switching): at most `limit` children run (0 = unlimited), at most
 * `queue_cap` wait, and a submission beyond that fails at once so the
 * caller can answer 503 instead of making everyone late. */
#pragma once

#include <stdint.h>
#include <uv.h>

struct cr_exec_result {
    int error; /* 0, or a libuv error when the spawn failed */
    int64_t exit_status;
    int term_signal;
    uint64_t queued_ns, start_ns, end_ns; /* uv_hrtime stamps */
};

typedef void (*cr_exec_done)(void *ud, const struct cr_exec_result *res);

struct cr_exec_job;

struct cr_execpool {
    uv_loop_t *loop;
    char *path; /* the program, run as `path <ms>` */
    char **env; /* our environment minus what only we may see */
    unsigned limit, queue_cap;
    unsigned running, queued;
    struct cr_exec_job *qhead, *qtail;
    uint64_t started, rejected, failed;
};

/* Returns 0 or -ENOMEM. path is copied. */
int cr_execpool_init(struct cr_execpool *p, uv_loop_t *loop, const char *path, unsigned limit,
                     unsigned queue_cap);
/* Frees what init allocated; fails queued jobs with UV_ECANCELED. */
void cr_execpool_done(struct cr_execpool *p);

/* Runs `path ms` now or later; done(ud, res) is called exactly once when it
 * ended (or could not start). Returns 0, -EAGAIN when the queue is full
 * (done is not called), or -ENOMEM. */
int cr_execpool_submit(struct cr_execpool *p, unsigned ms, cr_exec_done done, void *ud);
