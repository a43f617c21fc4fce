/* Internals shared by server.c (connections, parsing) and response.c
 * (answers, ordered writes). Nothing outside those two includes this. */
#pragma once

#include "bufpool.h"
#include "http_parse.h"
#include "server.h"

enum conn_state {
    CONN_OPEN,    /* reading and answering */
    CONN_CLOSING, /* no more requests read; closes once the queue is written */
    CONN_LINGER,  /* FIN sent; unread input is discarded until EOF or timeout */
    CONN_CLOSED,  /* uv_close issued */
};

enum timer_kind { TIMER_NONE, TIMER_IDLE, TIMER_HEADERS, TIMER_REQUEST, TIMER_LINGER };

struct cr_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shut;
    struct cr_server *srv;
    struct cr_http_parse *hp;
    enum conn_state state;
    enum timer_kind timer_kind; /* what happens at the deadline */
    uint64_t deadline;          /* uv_now() ms of timer_kind's deadline */
    uint64_t timer_due;         /* when the libuv timer fires; 0 = not set */
    int open_handles;
    struct cr_req *cur;         /* the request being parsed */
    struct cr_req *head, *tail; /* parsed, not yet written out */
    unsigned depth;
    unsigned writes; /* uv_write requests in flight */
    bool reading;
    bool paused;   /* parser paused: pipeline full */
    char *pending; /* input left over when the parser paused */
    size_t pending_len;
    size_t hdr_bytes;
    char field[16]; /* start of the current header name, lowercased */
    size_t field_len;
    bool expect_continue;
    struct cr_conn *prev, *next;
};

struct cr_server {
    uv_loop_t *loop;
    struct cr_server_config cfg;
    cr_server_handler handler;
    void *ud;
    uv_tcp_t listener;
    uv_check_t accept_check; /* takes one pending connection per loop turn */
    bool accept_pending;
    bool check_open;
    bool listening;
    bool listener_open;
    bool draining;
    void (*drained)(void *ud);
    void *drained_ud;
    struct cr_conn *conns;
    struct cr_bufpool reads;
    struct cr_server_stats stats;
    char pid[16];
    char ident[112]; /* "X-Worker-Id: ..\r\nX-Worker-Pid: ..\r\n" */
    size_t ident_len;
    struct cr_req *live_head, *live_tail; /* dispatched, not answered; newest last */
    struct cr_req *spare; /* freed requests kept for reuse */
    unsigned nspare;
};

/* response.c */
void cr_conn_flush(struct cr_conn *c);
/* Queues an error answer for the request being parsed (or a new one) and
 * stops reading: the connection closes once it is written. */
void cr_conn_fail(struct cr_conn *c, int status, const char *msg);
void cr_req_free(struct cr_req *req);
/* A cleared request for c (from the spare list when it can). NULL on
 * allocation failure. */
struct cr_req *cr_req_new(struct cr_conn *c);
/* Frees the spare list (server teardown). */
void cr_req_spares_free(struct cr_server *srv);

/* server.c */
/* The request leaves the list of those being served (it was answered):
 * the worker page names the newest one left, or none. */
void cr_server_request_done(struct cr_server *srv, struct cr_req *req);
void cr_conn_close(struct cr_conn *c);
void cr_conn_feed(struct cr_conn *c, const char *data, size_t len);
void cr_conn_after_write(struct cr_conn *c);
void cr_server_check_drained(struct cr_server *srv);
