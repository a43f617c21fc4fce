/* The HTTP/1.1 server: listening handle, connections, requests, responses.
 *
 * Connections keep-alive and pipeline; requests of one connection are
 * dispatched as soon as they are parsed and answered strictly in order.
 * Every request handed to the handler must be answered exactly once with
 * cr_req_respond (or a wrapper), possibly later from any loop callback. If
 * the client goes away first the request becomes an orphan: it stays valid
 * until answered, and the answer is dropped. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct cr_server;
struct cr_conn;

struct cr_server_config {
    size_t max_header;             /* url + header bytes; past it: 431 */
    size_t max_body;               /* past it: 413 */
    uint64_t header_timeout_ms;    /* first byte to end of headers; past it: 408 */
    uint64_t request_timeout_ms;   /* first byte to end of body; past it: 408 */
    uint64_t keepalive_timeout_ms; /* idle connection is closed after it */
    unsigned max_pipeline;         /* parsed-but-unwritten requests per connection */
    const char *worker_id;         /* X-Worker-Id */
};

struct cr_req {
    /* Read-only for handlers. */
    struct cr_server *srv;
    const char *method; /* static string */
    char *path;         /* NUL-terminated, no query */
    char *query;        /* NUL-terminated, "" when none */
    char *body;         /* NUL-terminated copy of the body, or NULL */
    size_t body_len;
    bool head; /* a HEAD request: the body is not sent */

    /* Private to server.c. */
    struct cr_conn *conn; /* NULL once orphaned */
    struct cr_req *next;
    char *url;
    size_t url_len;
    size_t body_cap;
    bool keep_alive, responded, written;
    int status;
    char extra[96]; /* one extra header line without CRLF, or "" */
    uv_buf_t wbuf;
    uv_write_t wr;
    void (*on_free)(void *);
    void *on_free_arg;
    struct cr_req *spare_next; /* on the server's list of spare requests */
    /* On the server's list of requests being served (the worker page
     * names its newest), from its dispatch to its answer. */
    struct cr_req *live_prev, *live_next;
    bool live;
    uint64_t started_ns; /* uv_hrtime() at the dispatch */
    /* Inline storage, last (not cleared on reuse): a short URL and a small
     * response need no allocation of their own. */
    char url_small[64];
    char out_small[384];
};

typedef void (*cr_server_handler)(struct cr_req *req, void *ud);

struct cr_server_stats {
    uint64_t requests; /* requests dispatched to the handler */
    uint64_t inflight; /* dispatched, not yet answered (orphans included) */
    uint64_t connections;
    uint64_t accepted;
    uint64_t by_status[600]; /* responses written or dropped, per status */
};

/* Creates a server on loop. cfg is copied (worker_id must outlive it).
 * Returns 0 or -errno. */
int cr_server_new(uv_loop_t *loop, const struct cr_server_config *cfg, cr_server_handler handler,
                  void *ud, struct cr_server **ret_srv);

/* Serves on an inherited listening fd (already bound and listening), or
 * binds host:port itself. Return 0 or a libuv error. */
int cr_server_adopt(struct cr_server *srv, int fd);
int cr_server_listen(struct cr_server *srv, const char *host, int port, int backlog);

/* Starts a graceful drain: stops accepting, closes idle connections, lets
 * in-flight requests finish (their responses say Connection: close), then
 * calls done once nothing is left. */
void cr_server_drain(struct cr_server *srv, void (*done)(void *ud), void *ud);

/* Closes every connection at once (drain timeout). In-flight requests
 * become orphans. */
void cr_server_close_all(struct cr_server *srv);

/* Frees the server once drained (all handles closed). */
void cr_server_free(struct cr_server *srv);

const struct cr_server_stats *cr_server_stats(const struct cr_server *srv);

/* Answers req. body is copied. Never fails from the caller's view: on
 * allocation failure the connection is closed instead. */
void cr_req_respond(struct cr_req *req, int status, const char *ctype, const char *body,
                    size_t len);
/* A JSON body built printf-style. */
void cr_req_respondf(struct cr_req *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* {"error":msg} with the given status. */
void cr_req_error(struct cr_req *req, int status, const char *msg);
/* Adds one header line (no CRLF) to the coming response. */
void cr_req_set_header(struct cr_req *req, const char *line);
/* fn(arg) runs when the request is freed, after its response was written. */
void cr_req_on_free(struct cr_req *req, void (*fn)(void *), void *arg);
