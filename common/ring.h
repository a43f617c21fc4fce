/* cr_ring: the index arithmetic of a bounded ring, shared by every ring in
 * corral (death history, memory samples, restart times). The caller owns
 * the typed storage (a fixed array or a flexible array member) and passes
 * its capacity to each call; the ring only says which slot to use. A
 * zero-initialised struct cr_ring is an empty ring, so rings can live in
 * calloc'd structures without an init call. When full, a push overwrites
 * the oldest slot.
 *
 *   struct cr_ring r = {0};
 *   T slots[8];
 *   slots[cr_ring_push(&r, 8)] = x;
 *   for (size_t i = 0; i < r.len; i++) use(slots[cr_ring_newest(&r, 8, i)]);
 */
#pragma once

#include <stddef.h>

struct cr_ring {
    size_t head; /* the slot the next push writes */
    size_t len;  /* slots in use, at most the capacity */
};

/* Capacity of a fixed array, for the cap arguments. */
#define CR_RING_CAP(array) (sizeof(array) / sizeof((array)[0]))

/* Claims the next slot (dropping the oldest when full) and returns its
 * index. cap must be > 0 and the same on every call. */
size_t cr_ring_push(struct cr_ring *r, size_t cap);

/* Index of the i-th oldest (cr_ring_oldest) or i-th newest (cr_ring_newest)
 * entry; i < r->len, else the result is meaningless. */
size_t cr_ring_oldest(const struct cr_ring *r, size_t cap, size_t i);
size_t cr_ring_newest(const struct cr_ring *r, size_t cap, size_t i);

/* Empties the ring (the storage is left as it is). */
void cr_ring_clear(struct cr_ring *r);
