#include "heap.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct cr_heap_chunk {
    struct cr_heap_chunk *next;
    size_t size; /* mapped bytes, header page included */
    bool external;
};

static size_t page_size(void)
{
    static size_t ps;
    if (!ps)
        ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

void cr_heap_init(struct cr_heap *h, size_t limit)
{
    *h = (struct cr_heap){.limit = limit};
    /* Keep at most a sixteenth of the limit, capped, in the reuse cache. */
    h->cache_cap = limit / 16 < 16u << 20 ? limit / 16 : 16u << 20;
}

static void unmap(struct cr_heap_chunk *c)
{
    munmap(c, c->size);
}

void cr_heap_done(struct cr_heap *h)
{
    while (h->cache) {
        struct cr_heap_chunk *c = h->cache;
        h->cache = c->next;
        unmap(c);
    }
    h->cached = 0;
}

static size_t round_size(size_t size)
{
    size_t ps = page_size();
    /* The chunk header gets its own page so the payload stays aligned. */
    return (size + ps - 1) / ps * ps + ps;
}

/* Writes one byte per page: the kernel must back every page now. */
static void touch(struct cr_heap_chunk *c)
{
    size_t ps = page_size();
    volatile char *p = (volatile char *)c;
    for (size_t off = ps; off < c->size; off += ps)
        p[off] = (char)off | 1;
}

static struct cr_heap_chunk *map_chunk(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct cr_heap_chunk *c = p;
    c->size = size;
    c->next = NULL;
    return c;
}

static struct cr_heap_chunk *from_cache(struct cr_heap *h, size_t size)
{
    for (struct cr_heap_chunk **pp = &h->cache; *pp; pp = &(*pp)->next) {
        if ((*pp)->size == size) {
            struct cr_heap_chunk *c = *pp;
            *pp = c->next;
            h->cached -= size;
            c->next = NULL;
            return c;
        }
    }
    return NULL;
}

int cr_heap_alloc(struct cr_heap *h, size_t size, struct cr_heap_chunk **ret)
{
    size_t sz = round_size(size);
    if (sz < size || h->used + sz > h->limit)
        return -ENOSPC;
    struct cr_heap_chunk *c = from_cache(h, sz);
    if (!c) {
        c = map_chunk(sz);
        if (!c)
            return -ENOMEM;
    }
    c->external = false;
    touch(c);
    h->used += sz;
    *ret = c;
    return 0;
}

int cr_heap_alloc_external(struct cr_heap *h, size_t size, struct cr_heap_chunk **ret)
{
    size_t sz = round_size(size);
    if (sz < size)
        return -ENOMEM;
    struct cr_heap_chunk *c = map_chunk(sz);
    if (!c)
        return -ENOMEM;
    c->external = true;
    touch(c);
    h->external += sz;
    *ret = c;
    return 0;
}

void cr_heap_release(struct cr_heap *h, struct cr_heap_chunk *c)
{
    if (!c)
        return;
    if (c->external) {
        h->external -= c->size;
        unmap(c);
        return;
    }
    h->used -= c->size;
    if (h->cached + c->size <= h->cache_cap) {
        c->next = h->cache;
        h->cache = c;
        h->cached += c->size;
    } else {
        unmap(c);
    }
}

void cr_heap_list_add(struct cr_heap_list *l, struct cr_heap_chunk *c)
{
    c->next = l->first;
    l->first = c;
    l->count++;
}

size_t cr_heap_list_release(struct cr_heap *h, struct cr_heap_list *l)
{
    size_t freed = 0;
    while (l->first) {
        struct cr_heap_chunk *c = l->first;
        l->first = c->next;
        freed += c->size;
        cr_heap_release(h, c);
    }
    l->count = 0;
    return freed;
}

void cr_heap_stats(const struct cr_heap *h, struct cr_heap_stats *ret)
{
    ret->used = h->used;
    ret->total = h->used + h->cached;
    ret->limit = h->limit;
    ret->external = h->external;
}
