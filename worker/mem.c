/* /alloc (managed heap), /buffer (off-heap), /free, /memory. */
#include "router.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define MB (1u << 20)

struct garbage {
    struct cr_app *app;
    struct cr_heap_list list;
};

/* Runs after the response was written: what was not retained is freed. */
static void garbage_free(void *arg)
{
    struct garbage *g = arg;
    cr_heap_list_release(&g->app->heap, &g->list);
    free(g);
}

void cr_ep_memory_json(struct cr_app *app, char *buf, size_t size)
{
    struct cr_heap_stats st;
    uint64_t rss = 0;
    cr_heap_stats(&app->heap, &st);
    cr_report_rss(&rss);
    snprintf(
        buf, size,
        "{\"heap_used\":%zu,\"heap_total\":%zu,\"heap_limit\":%zu,\"external\":%zu,\"rss\":%llu,"
        "\"retained_heap_chunks\":%zu,\"retained_external_chunks\":%zu}",
        st.used, st.total, st.limit, st.external, (unsigned long long)rss, app->retained.count,
        app->retained_ext.count);
}

void cr_ep_alloc(struct cr_app *app, struct cr_req *req, const struct cr_query *q, bool external)
{
    uint64_t mb, retain;
    if (!cr_query_uint(req, q, "mb", 0, 1u << 20, 10, &mb) ||
        !cr_query_uint(req, q, "retain", 0, 1, 0, &retain))
        return;
    struct garbage *g = NULL;
    if (!retain) {
        g = calloc(1, sizeof(*g));
        if (!g) {
            cr_req_error(req, 500, "out of memory");
            return;
        }
        g->app = app;
    }
    struct cr_heap_list *into =
        retain ? (external ? &app->retained_ext : &app->retained) : &g->list;
    /* 1 MB at a time, like a heap growing object by object: at the limit the
     * heap is full, not short of one big request. */
    for (uint64_t i = 0; i < mb; i++) {
        struct cr_heap_chunk *c;
        int r = external ? cr_heap_alloc_external(&app->heap, MB - 4096, &c)
                         : cr_heap_alloc(&app->heap, MB - 4096, &c);
        if (r == -ENOSPC)
            cr_app_heap_fatal(app, MB);
        if (r < 0) {
            if (g)
                garbage_free(g);
            cr_req_error(req, 500, "mmap failed");
            return;
        }
        cr_heap_list_add(into, c);
    }
    if (g)
        cr_req_on_free(req, garbage_free, g);
    char buf[512];
    cr_ep_memory_json(app, buf, sizeof(buf));
    cr_req_respondf(
        req, 200, "{\"allocated_mb\":%llu,\"retained\":%s,\"where\":\"%s\",\"memory\":%s}",
        (unsigned long long)mb, retain ? "true" : "false", external ? "external" : "heap", buf);
}

void cr_ep_free(struct cr_app *app, struct cr_req *req)
{
    size_t h = cr_heap_list_release(&app->heap, &app->retained);
    size_t e = cr_heap_list_release(&app->heap, &app->retained_ext);
    char buf[512];
    cr_ep_memory_json(app, buf, sizeof(buf));
    cr_req_respondf(req, 200, "{\"freed_heap\":%zu,\"freed_external\":%zu,\"memory\":%s}", h, e,
                    buf);
}
