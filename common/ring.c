/* cr_ring: bounded ring indices. See ring.h. */
#include "ring.h"

size_t cr_ring_push(struct cr_ring *r, size_t cap)
{
    size_t slot = r->head % cap;
    r->head = (slot + 1) % cap;
    if (r->len < cap)
        r->len++;
    return slot;
}

size_t cr_ring_oldest(const struct cr_ring *r, size_t cap, size_t i)
{
    return (r->head + cap - r->len + i) % cap;
}

size_t cr_ring_newest(const struct cr_ring *r, size_t cap, size_t i)
{
    return (r->head + cap - 1 - i) % cap;
}

void cr_ring_clear(struct cr_ring *r)
{
    r->head = r->len = 0;
}
