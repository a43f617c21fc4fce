/* HTTP/1.1 request parsing: the one place that knows the parser library,
 * shared by the worker and corrald's metrics listener.
 *
 * Wraps Node's classic http-parser (Debian 12) or llhttp (CR_HTTP_LLHTTP=1)
 * behind one callback shape, so no other file includes a parser header.
 * Callbacks return 0 to continue, non-zero to stop parsing with an error
 * (the caller already knows why); a NULL callback means "go on". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_http_parse;

struct cr_http_parse_cbs {
    int (*on_begin)(void *ud);
    int (*on_url)(void *ud, const char *at, size_t len);
    int (*on_header_field)(void *ud, const char *at, size_t len);
    int (*on_header_value)(void *ud, const char *at, size_t len);
    int (*on_headers_complete)(void *ud);
    int (*on_body)(void *ud, const char *at, size_t len);
    int (*on_complete)(void *ud);
    /* Optional: a chunk's declared size, before its data arrives. */
    int (*on_chunk_header)(void *ud, uint64_t size);
};

/* Allocates a request parser. Returns NULL on allocation failure. The
 * callbacks table must outlive the parser. */
struct cr_http_parse *cr_http_parse_new(const struct cr_http_parse_cbs *cbs, void *ud);
struct cr_http_parse *cr_http_parse_free(struct cr_http_parse *p);

/* Feeds len bytes. Sets *ret_used to the bytes consumed. Returns 0 when all
 * were consumed, -EAGAIN when a callback paused the parser (the rest must be
 * fed again after cr_http_parse_resume), -EBADMSG on a protocol error or a
 * callback error. After an error the parser is dead. */
int cr_http_parse_feed(struct cr_http_parse *p, const char *data, size_t len, size_t *ret_used);

/* Signals end of input; returns -EBADMSG if a message was cut short. */
int cr_http_parse_finish(struct cr_http_parse *p);

/* Pauses from inside a callback: feed stops right after the current one. */
void cr_http_parse_pause(struct cr_http_parse *p);
void cr_http_parse_resume(struct cr_http_parse *p);

/* Valid from on_headers_complete on; the content length only inside
 * on_headers_complete (the parser counts it down while reading the body). */
const char *cr_http_parse_method(const struct cr_http_parse *p);
bool cr_http_parse_keep_alive(const struct cr_http_parse *p);
bool cr_http_parse_is_upgrade(const struct cr_http_parse *p);
unsigned cr_http_parse_version(const struct cr_http_parse *p); /* major*10+minor */
/* Returns 0 and the declared Content-Length, or -ENODATA when absent. */
int cr_http_parse_content_length(const struct cr_http_parse *p, uint64_t *ret_len);
/* Whether the current message's body is chunked: from on_headers_complete
 * until the next message begins, with either library. */
bool cr_http_parse_chunked(const struct cr_http_parse *p);

/* A short description of the last error, for 400 bodies. */
const char *cr_http_parse_error(const struct cr_http_parse *p);
