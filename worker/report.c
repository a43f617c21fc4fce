/* The periodic report (contract in docs/worker-protocol.md). */
#include "app.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int cr_report_rss(uint64_t *ret_bytes)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    int err = errno;
    close(fd);
    if (n <= 0)
        return n < 0 ? -err : -EIO;
    buf[n] = '\0';
    unsigned long long size, resident;
    if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
        return -EIO;
    *ret_bytes = resident * (uint64_t)sysconf(_SC_PAGESIZE);
    return 0;
}

int cr_report_format(struct cr_app *app, const struct cr_loop_window *w, char *buf, size_t size)
{
    struct cr_heap_stats st;
    uint64_t rss = 0;
    cr_heap_stats(&app->heap, &st);
    cr_report_rss(&rss);
    const struct cr_server_stats *ss = cr_server_stats(app->srv);
    int n =
        snprintf(buf, size,
                 CR_NK_WATCHDOG "=1\n" CR_NK_HEAP_USED "=%zu\n" CR_NK_HEAP_TOTAL "=%zu\n"
                 CR_NK_HEAP_LIMIT "=%zu\n" CR_NK_EXTERNAL "=%zu\n" CR_NK_RSS "=%llu\n"
                 CR_NK_DELAY_P50 "=%llu\n" CR_NK_DELAY_P99 "=%llu\n" CR_NK_DELAY_MAX "=%llu\n"
                 CR_NK_ELU "=%.3f\n" CR_NK_INFLIGHT "=%llu\n" CR_NK_REQUESTS "=%llu\n"
                 CR_NK_POOL_QUEUE "=%llu",
                 st.used, st.total, st.limit, st.external, (unsigned long long)rss,
                 (unsigned long long)w->p50_us, (unsigned long long)w->p99_us,
                 (unsigned long long)w->max_us, w->elu, (unsigned long long)ss->inflight,
                 (unsigned long long)ss->requests, (unsigned long long)app->pool_queue);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}
