/* The worker's managed heap and its off-heap buffers.
 *
 * The managed heap is an accounting allocator with a hard limit, the analog
 * of V8's old space and --max-old-space-size: allocations past the limit
 * fail, and the caller is expected to die the way V8 does (SIGABRT).
 * heap_total is what the heap has reserved (live chunks plus a small cache
 * of freed ones kept for reuse, like V8 keeping pages after a GC),
 * heap_used is live bytes. Off-heap buffers (Node's Buffers) are counted
 * only as "external": they are limited by nothing but the cgroup.
 * Every page is touched on allocation so RSS and the cgroup see it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct cr_heap_chunk;

struct cr_heap {
    size_t limit;
    size_t used;
    size_t cached; /* freed chunk bytes kept mapped for reuse */
    size_t cache_cap;
    size_t external;
    struct cr_heap_chunk *cache; /* freed heap chunks */
};

struct cr_heap_stats {
    size_t used, total, limit, external;
};

void cr_heap_init(struct cr_heap *h, size_t limit);
/* Unmaps the cache. Live chunks belong to their owners. */
void cr_heap_done(struct cr_heap *h);

/* Allocates size bytes of managed heap, touched. Returns 0 with *ret,
 * -ENOSPC when it would pass the limit (nothing allocated), -ENOMEM when
 * the system refused. */
int cr_heap_alloc(struct cr_heap *h, size_t size, struct cr_heap_chunk **ret);
/* Allocates size bytes off-heap (external), touched. Same returns, never
 * -ENOSPC. */
int cr_heap_alloc_external(struct cr_heap *h, size_t size, struct cr_heap_chunk **ret);

/* Frees one chunk (heap or external); NULL is fine. */
void cr_heap_release(struct cr_heap *h, struct cr_heap_chunk *c);

/* A list of chunks held together (a request's garbage, the retained set). */
struct cr_heap_list {
    struct cr_heap_chunk *first;
    size_t count;
};
void cr_heap_list_add(struct cr_heap_list *l, struct cr_heap_chunk *c);
/* Frees all chunks of l; returns how many bytes were freed. */
size_t cr_heap_list_release(struct cr_heap *h, struct cr_heap_list *l);

void cr_heap_stats(const struct cr_heap *h, struct cr_heap_stats *ret);
