/* Endpoints that use the thread pool, child processes or parse bodies. */
#include "router.h"

#include "crypto.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILE_CHUNK (1u << 20)

static unsigned long long us(uint64_t ns)
{
    return (unsigned long long)(ns / 1000u);
}

/* ---- /hash, /hashsync: pbkdf2-sha512 like Node's crypto.pbkdf2 ---- */

struct hash_op {
    uv_work_t work;
    struct cr_app *app;
    struct cr_req *req;
    unsigned iter;
    int ok;
    uint64_t queued_ns, start_ns, end_ns;
    unsigned char out[64];
};

static void hash_run(struct hash_op *op)
{
    static const char pass[] = "corral", salt[] = "corral-salt";
    op->start_ns = uv_hrtime();
    op->ok = cr_crypto_pbkdf2_sha512(pass, sizeof(pass) - 1, (const unsigned char *)salt,
                                     sizeof(salt) - 1, (int)op->iter, op->out, sizeof(op->out));
    op->end_ns = uv_hrtime();
}

static void hash_respond(struct hash_op *op, bool sync)
{
    if (!op->ok) {
        cr_req_error(op->req, 500, "pbkdf2 failed");
        return;
    }
    char hex[17];
    for (int i = 0; i < 8; i++)
        snprintf(hex + 2 * i, 3, "%02x", op->out[i]);
    cr_req_respondf(op->req, 200,
                    "{\"iter\":%u,\"pool\":%s,\"queued_us\":%llu,\"start_us\":%llu,\"end_us\":%llu,"
                    "\"digest\":\"%s\"}",
                    op->iter, sync ? "false" : "true", us(op->queued_ns), us(op->start_ns),
                    us(op->end_ns), hex);
}

static void hash_work(uv_work_t *w)
{
    hash_run(w->data);
    /* OpenSSL keeps per-thread state that pool threads (never joined) would
     * leak at exit; drop it after each job, it is cheap next to pbkdf2. */
    cr_crypto_thread_stop();
}

static void hash_after(uv_work_t *w, int status)
{
    struct hash_op *op = w->data;
    op->app->pool_queue--;
    if (status < 0)
        cr_req_error(op->req, 500, "cancelled");
    else
        hash_respond(op, false);
    free(op);
}

void cr_ep_hash(struct cr_app *app, struct cr_req *req, const struct cr_query *q, bool sync)
{
    uint64_t iter;
    if (!cr_query_uint(req, q, "iter", 1, 10000000, 100000, &iter))
        return;
    /* libcrypto is loaded by the first hash request, on the loop, not at
     * start-up: it is not needed to serve /light (see crypto.h). */
    if (cr_crypto_load() < 0) {
        cr_req_error(req, 500, cr_crypto_error());
        return;
    }
    struct hash_op *op = calloc(1, sizeof(*op));
    if (!op) {
        cr_req_error(req, 500, "out of memory");
        return;
    }
    op->app = app;
    op->req = req;
    op->iter = (unsigned)iter;
    op->queued_ns = uv_hrtime();
    if (sync) {
        hash_run(op);
        hash_respond(op, true);
        free(op);
        return;
    }
    op->work.data = op;
    int r = uv_queue_work(app->loop, &op->work, hash_work, hash_after);
    if (r < 0) {
        cr_req_error(req, 500, uv_strerror(r));
        free(op);
        return;
    }
    app->pool_queue++;
    app->pool_jobs++;
}

/* ---- /file: N MB of reads through uv_fs_read, 1 MB per pool job ---- */

struct file_op {
    struct cr_datafile_wait wait; /* first: the callback casts back */
    uv_fs_t fs;
    struct cr_app *app;
    struct cr_req *req;
    char *buf;
    uint64_t left, done, off, start_ns, reads;
};

static void file_next(struct file_op *op);

static void file_finish(struct file_op *op, int err)
{
    if (err < 0)
        cr_req_error(op->req, 500, uv_strerror(err));
    else
        cr_req_respondf(op->req, 200,
                        "{\"bytes\":%llu,\"reads\":%llu,\"start_us\":%llu,\"end_us\":%llu}",
                        (unsigned long long)op->done, (unsigned long long)op->reads,
                        us(op->start_ns), us(uv_hrtime()));
    free(op->buf);
    free(op);
}

static void file_read_cb(uv_fs_t *fs)
{
    struct file_op *op = fs->data;
    ssize_t n = fs->result;
    uv_fs_req_cleanup(fs);
    op->app->pool_queue--;
    if (n <= 0) {
        file_finish(op, n < 0 ? (int)n : UV_EIO);
        return;
    }
    op->done += (uint64_t)n;
    op->left -= (uint64_t)n < op->left ? (uint64_t)n : op->left;
    op->off = (op->off + (uint64_t)n) % op->app->file.size;
    op->reads++;
    file_next(op);
}

static void file_next(struct file_op *op)
{
    if (!op->left) {
        file_finish(op, 0);
        return;
    }
    uint64_t room = op->app->file.size - op->off;
    size_t len = FILE_CHUNK;
    if (len > op->left)
        len = (size_t)op->left;
    if (len > room)
        len = (size_t)room;
    uv_buf_t b = uv_buf_init(op->buf, (unsigned)len);
    op->fs.data = op;
    int r =
        uv_fs_read(op->app->loop, &op->fs, op->app->file.fd, &b, 1, (int64_t)op->off, file_read_cb);
    if (r < 0) {
        file_finish(op, r);
        return;
    }
    op->app->pool_queue++;
    op->app->pool_jobs++;
}

/* The data file is ready (status 0) or could not be made. */
static void file_ready(struct cr_datafile_wait *w, int status)
{
    struct file_op *op = (struct file_op *)w;
    op->start_ns = uv_hrtime(); /* the reads start now, as they would have */
    if (status < 0)
        file_finish(op, status);
    else
        file_next(op);
}

void cr_ep_file(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    uint64_t mb;
    if (!cr_query_uint(req, q, "mb", 1, 1024, 1, &mb))
        return;
    if (app->file.state == CR_DATAFILE_OFF) {
        cr_req_error(req, 503, "the test file is disabled (--file-size 0)");
        return;
    }
    struct file_op *op = calloc(1, sizeof(*op));
    char *buf = malloc(FILE_CHUNK);
    if (!op || !buf) {
        free(op);
        free(buf);
        cr_req_error(req, 500, "out of memory");
        return;
    }
    op->app = app;
    op->req = req;
    op->buf = buf;
    op->left = mb << 20;
    op->start_ns = uv_hrtime();
    int r = cr_datafile_use(&app->file, &op->wait, file_ready);
    if (r == 0)
        file_next(op);
    else if (r < 0)
        file_finish(op, r);
}

/* ---- POST /json: parsed on the loop, like JSON.parse ---- */

static uint64_t count_items(const cJSON *item)
{
    uint64_t n = 0;
    for (const cJSON *c = item; c; c = c->next)
        n += 1 + count_items(c->child);
    return n;
}

void cr_ep_json(struct cr_app *app, struct cr_req *req)
{
    if (!req->body_len) {
        cr_req_error(req, 400, "empty body");
        return;
    }
    uint64_t t0 = uv_hrtime();
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(req->body, req->body_len, &end, false);
    uint64_t t1 = uv_hrtime();
    if (!root) {
        char msg[80];
        snprintf(msg, sizeof(msg), "invalid JSON at byte %zu",
                 end && end >= req->body ? (size_t)(end - req->body) : (size_t)0);
        cr_req_error(req, 400, msg);
        return;
    }
    uint64_t top = (uint64_t)cJSON_GetArraySize(root);
    uint64_t all = count_items(root) - 1; /* the root is not an element */
    cJSON_Delete(root);
    cr_req_respondf(req, 200,
                    "{\"elements\":%llu,\"top_level\":%llu,\"bytes\":%zu,\"parse_us\":%llu}",
                    (unsigned long long)all, (unsigned long long)top, req->body_len, us(t1 - t0));
}

/* ---- /exec: corral-burn children under a limit with a bounded queue ---- */

static void exec_done(void *ud, const struct cr_exec_result *res)
{
    struct cr_req *req = ud;
    if (res->error) {
        cr_req_error(req, 500, uv_strerror(res->error));
        return;
    }
    bool ok = res->exit_status == 0 && res->term_signal == 0;
    cr_req_respondf(
        req, ok ? 200 : 500,
        "{\"exit\":%lld,\"signal\":%d,\"queued_us\":%llu,\"start_us\":%llu,\"end_us\":%llu}",
        (long long)res->exit_status, res->term_signal, us(res->queued_ns), us(res->start_ns),
        us(res->end_ns));
}

void cr_ep_exec(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    uint64_t ms;
    if (!cr_query_uint(req, q, "ms", 0, 60000, 100, &ms))
        return;
    int r = cr_execpool_submit(&app->exec, (unsigned)ms, exec_done, req);
    if (r == -EAGAIN) {
        cr_req_set_header(req, "Retry-After: 1");
        cr_req_error(req, 503, "exec queue full");
    } else if (r < 0) {
        cr_req_error(req, 500, "out of memory");
    }
}
