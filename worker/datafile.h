/* The /file data: a file of a fixed size, made on first use.
 *
 * Writing 10 MB at start-up delayed READY by ~10 ms, for an endpoint most
 * workers never serve. The file is now written on the thread pool when the
 * first /file request asks for it; requests arriving meanwhile wait in a
 * list and all go on when it is ready. It is unlinked at birth (O_TMPFILE,
 * else mkstemp + unlink), so no exit path can leave it behind. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

enum cr_datafile_state {
    CR_DATAFILE_OFF,    /* size 0: /file is disabled */
    CR_DATAFILE_NONE,   /* not made yet (or the last attempt failed) */
    CR_DATAFILE_MAKING, /* a pool job is writing it */
    CR_DATAFILE_READY,
};

struct cr_datafile_wait;
typedef void (*cr_datafile_cb)(struct cr_datafile_wait *w, int status);

/* One waiting user, embedded in the caller's own request state. */
struct cr_datafile_wait {
    struct cr_datafile_wait *next;
    cr_datafile_cb cb;
};

struct cr_datafile {
    uv_loop_t *loop;
    size_t size;
    const char *dir; /* $TMPDIR or /tmp, read at init */
    int fd;          /* -1 until READY */
    int make_result; /* the pool job's fd or -errno */
    enum cr_datafile_state state;
    uv_work_t work;
    struct cr_datafile_wait *waiters, **tail;
    bool done; /* cr_datafile_done() ran: a file made after it is closed */
};

void cr_datafile_init(struct cr_datafile *d, uv_loop_t *loop, size_t size);

/* Returns 0 when the file is ready now (d->fd is valid; cb is not called),
 * 1 when w was queued: cb(w, 0) or cb(w, -errno) follows from a loop
 * callback; -ENODATA when the file is off, or a libuv error when the pool
 * job cannot be queued. */
int cr_datafile_use(struct cr_datafile *d, struct cr_datafile_wait *w, cr_datafile_cb cb);

/* Closes the file. Call after the loop ended (no job in flight). */
void cr_datafile_done(struct cr_datafile *d);
