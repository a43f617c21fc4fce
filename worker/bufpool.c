#include "bufpool.h"

#include <errno.h>
#include <stdlib.h>

int cr_bufpool_init(struct cr_bufpool *bp, size_t size, unsigned keep)
{
    bp->size = size;
    bp->keep = keep;
    bp->nfree = 0;
    bp->free = calloc(keep ? keep : 1, sizeof(void *));
    return bp->free ? 0 : -ENOMEM;
}

void cr_bufpool_done(struct cr_bufpool *bp)
{
    while (bp->nfree)
        free(bp->free[--bp->nfree]);
    free(bp->free);
    bp->free = NULL;
}

void *cr_bufpool_get(struct cr_bufpool *bp)
{
    if (bp->nfree)
        return bp->free[--bp->nfree];
    return malloc(bp->size);
}

void cr_bufpool_put(struct cr_bufpool *bp, void *buf)
{
    if (!buf)
        return;
    if (bp->nfree < bp->keep)
        bp->free[bp->nfree++] = buf;
    else
        free(buf);
}
