/* A small free list of equal-sized read buffers, so a busy connection does
 * not malloc/free 64 KiB per read. */
#pragma once

#include <stddef.h>

struct cr_bufpool {
    size_t size;   /* bytes per buffer */
    unsigned keep; /* at most this many idle buffers are kept */
    unsigned nfree;
    void **free; /* keep slots */
};

/* Returns 0 or -ENOMEM. */
int cr_bufpool_init(struct cr_bufpool *bp, size_t size, unsigned keep);
void cr_bufpool_done(struct cr_bufpool *bp);
/* Returns a buffer of bp->size bytes, or NULL. */
void *cr_bufpool_get(struct cr_bufpool *bp);
/* Takes buf back (NULL is fine). */
void cr_bufpool_put(struct cr_bufpool *bp, void *buf);
