/* cr_page: corrald's side of a generation's worker page (common/wpage.h):
 * the request the worker is serving, read at any moment, and the stack
 * exchange. One per generation, made at its spawn and kept after its death
 * until the post-mortem has read it (the next generation makes its own).
 * One writer: this module. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wpage.h"

struct cr_page;

struct cr_request_seen;
struct cr_gen;

/* A new page: a sealed memfd of CR_WPAGE_SIZE, mapped; *ret_fd is a
 * CLOEXEC descriptor of it for the child (the caller closes it once the
 * child has its copy). -errno on failure: the worker then runs without a
 * page, as with --no-worker-page. */
int cr_page_new(struct cr_page **ret, int *ret_fd);
/* NULL-safe; returns NULL. */
struct cr_page *cr_page_free(struct cr_page *p);

/* Frees a generation's page and the stack taken from it (a new
 * generation begins, or the worker goes). */
void cr_page_release(struct cr_gen *g);

/* What the worker said it keeps (CR_WPAGE_F_*); 0 for a NULL page. */
unsigned cr_page_features(const struct cr_page *p);

/* The request record now (history.h), its age against CLOCK_MONOTONIC.
 * known is false when there is no page, the worker keeps no record, or it
 * was being rewritten on every try. */
void cr_page_request(const struct cr_page *p, struct cr_request_seen *ret);

/* Asks the worker for its main thread's stack: the request's number (the
 * futex on it is woken), unique among this corrald's pages (until the
 * count wraps at 2^32). 0 when the worker does not answer stacks. */
uint32_t cr_page_ask_stack(struct cr_page *p);
/* Whether request n was asked of this page (of this process, not of an
 * earlier one of the same worker); of any page. */
bool cr_page_asked(const struct cr_page *p, uint32_t n);
bool cr_page_ever_asked(uint32_t n);
/* Whether the worker answered request n (or a later one): a load, no copy. */
bool cr_page_answered(const struct cr_page *p, uint32_t n);
/* The answer to request n (or to a later one), once the worker wrote it:
 * 1 with the text (cut to size - 1, NUL-terminated, valid UTF-8: an
 * invalid byte or a NUL is '?') and its source (printable ASCII), 0 while
 * it has not. */
int cr_page_stack(const struct cr_page *p, uint32_t n, char *buf, size_t size, char *source,
                  size_t source_size);
