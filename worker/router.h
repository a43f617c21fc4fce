/* Request routing and query-parameter validation. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "app.h"

#define CR_QUERY_MAX 8

struct cr_query {
    unsigned n;
    char *key[CR_QUERY_MAX];
    char *val[CR_QUERY_MAX];
};

/* The server handler: ud is the struct cr_app. */
void cr_router_handle(struct cr_req *req, void *ud);

/* Reads an unsigned parameter into *ret (def when absent). On a bad or
 * out-of-range value answers 400 with a message and returns false. */
bool cr_query_uint(struct cr_req *req, const struct cr_query *q, const char *key, uint64_t min,
                   uint64_t max, uint64_t def, uint64_t *ret);

/* router.c: GET /heavy, the loop burnt on purpose */
void cr_ep_heavy(struct cr_app *app, struct cr_req *req, const struct cr_query *q);
/* endpoints.c */
void cr_ep_hash(struct cr_app *app, struct cr_req *req, const struct cr_query *q, bool sync);
void cr_ep_file(struct cr_app *app, struct cr_req *req, const struct cr_query *q);
void cr_ep_json(struct cr_app *app, struct cr_req *req);
void cr_ep_exec(struct cr_app *app, struct cr_req *req, const struct cr_query *q);
/* mem.c */
void cr_ep_alloc(struct cr_app *app, struct cr_req *req, const struct cr_query *q, bool external);
void cr_ep_free(struct cr_app *app, struct cr_req *req);
void cr_ep_memory_json(struct cr_app *app, char *buf, size_t size);
