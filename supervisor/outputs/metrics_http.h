/* cr_metrics_http: a tiny HTTP/1.1 listener for Prometheus (`--metrics-listen
 * HOST:PORT`). Answers `GET /metrics` (and HEAD) with the text exposition
 * format 0.0.4 from cr_metrics_text(), `/livez` and `/readyz` for probes;
 * everything else gets 404/405. One
 * request per connection, request head capped at CR_METRICS_HTTP_MAX_REQUEST
 * bytes, idle connections closed after CR_METRICS_HTTP_TIMEOUT_MS. */
#pragma once

#include <uv.h>

struct cr_supervisor;
struct cr_metrics_http;

#define CR_METRICS_HTTP_MAX_REQUEST 8192
#define CR_METRICS_HTTP_TIMEOUT_MS 10000
#define CR_METRICS_HTTP_MAX_CLIENTS 64

/* Binds sup->cfg.metrics_listen ("127.0.0.1:9464", "[::1]:9464") on
 * sup->loop and starts serving. Returns 0 with *ret set, or a negative
 * libuv/errno code. Does not log. */
int cr_metrics_http_open(uv_loop_t *loop, const char *listen, const struct cr_supervisor *sup,
                         struct cr_metrics_http **ret);
/* The bound address ("127.0.0.1:9464", the port resolved when 0 was asked). */
void cr_metrics_http_addr(const struct cr_metrics_http *m, char *buf, size_t len);
/* Closes the listener and every connection; frees once the handles are
 * closed. Accepts NULL. */
void cr_metrics_http_close(struct cr_metrics_http *m);
