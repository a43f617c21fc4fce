#include "datafile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHUNK (1u << 20)

void cr_datafile_init(struct cr_datafile *d, uv_loop_t *loop, size_t size)
{
    const char *dir = getenv("TMPDIR");
    *d = (struct cr_datafile){
        .loop = loop,
        .size = size,
        .dir = dir && *dir ? dir : "/tmp",
        .fd = -1,
        .state = size ? CR_DATAFILE_NONE : CR_DATAFILE_OFF,
    };
    d->tail = &d->waiters;
}

/* Runs on a pool thread: returns the fd or -errno. */
static int make_file(const char *dir, size_t size)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/corral-worker-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
        if (fd < 0)
            return -errno;
        unlink(path);
    }
    char *chunk = malloc(CHUNK);
    if (!chunk) {
        close(fd);
        return -ENOMEM;
    }
    for (size_t i = 0; i < CHUNK; i++)
        chunk[i] = (char)('a' + i % 26);
    int r = fd;
    for (size_t off = 0; off < size;) {
        size_t n = size - off < CHUNK ? size - off : CHUNK;
        ssize_t w = pwrite(fd, chunk, n, (off_t)off);
        if (w <= 0) {
            r = w < 0 ? -errno : -EIO;
            close(fd);
            break;
        }
        off += (size_t)w;
    }
    free(chunk);
    return r;
}

static void make_work(uv_work_t *req)
{
    struct cr_datafile *d = req->data;
    d->make_result = make_file(d->dir, d->size);
}

static void make_after(uv_work_t *req, int status)
{
    struct cr_datafile *d = req->data;
    int r = status < 0 ? status : d->make_result;
    if (r >= 0 && d->done) { /* the worker is going; nobody will read it */
        close(r);
        r = -ECANCELED;
    }
    if (r >= 0) {
        d->fd = r;
        d->state = CR_DATAFILE_READY;
        r = 0;
    } else {
        d->state = CR_DATAFILE_NONE; /* the next request tries again */
    }
    struct cr_datafile_wait *w = d->waiters;
    d->waiters = NULL;
    d->tail = &d->waiters;
    while (w) {
        struct cr_datafile_wait *next = w->next;
        w->cb(w, r);
        w = next;
    }
}

int cr_datafile_use(struct cr_datafile *d, struct cr_datafile_wait *w, cr_datafile_cb cb)
{
    if (d->state == CR_DATAFILE_READY)
        return 0;
    if (d->state == CR_DATAFILE_OFF)
        return -ENODATA;
    if (d->state == CR_DATAFILE_NONE) {
        d->work.data = d;
        int r = uv_queue_work(d->loop, &d->work, make_work, make_after);
        if (r < 0)
            return r;
        d->state = CR_DATAFILE_MAKING;
    }
    w->cb = cb;
    w->next = NULL;
    *d->tail = w;
    d->tail = &w->next;
    return 1;
}

void cr_datafile_done(struct cr_datafile *d)
{
    d->done = true;
    d->state = CR_DATAFILE_OFF;
    if (d->fd >= 0)
        close(d->fd);
    d->fd = -1;
}
