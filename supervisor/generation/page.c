/* A generation's worker page, corrald's side (page.h). */
#include "page.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gen.h"
#include "history.h"
#include "utf8.h"

struct cr_page {
    void *map;
    uint32_t first; /* the first stack request asked of this page, 0: none yet */
    uint32_t asked; /* the last one */
};

/* Stack requests are numbered across every page of this corrald, not per
 * page: a number a client holds names one process's request, never a
 * later process's of the same worker. */
static uint32_t last_ask;
static bool wrapped; /* last_ask went past 2^32 - 1: every number was asked */

int cr_page_new(struct cr_page **ret, int *ret_fd)
{
    struct cr_page *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    int fd = memfd_create("corral-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int r = 0;
    if (fd < 0 || ftruncate(fd, CR_WPAGE_SIZE) < 0 ||
        /* The worker may write, never resize: a shrunk file would fault
         * corrald's reads past its end (SIGBUS). */
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        r = -errno;
    if (r == 0) {
        p->map = mmap(NULL, CR_WPAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p->map == MAP_FAILED) {
            p->map = NULL;
            r = -errno;
        }
    }
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        free(p);
        return r;
    }
    /* The first page is touched here, by corrald, so it is charged to
     * corrald's group, not to the worker's. */
    atomic_store_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_VERSION), CR_WPAGE_VERSION,
                          memory_order_relaxed);
    atomic_store_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_MAGIC), CR_WPAGE_MAGIC,
                          memory_order_release);
    *ret = p;
    *ret_fd = fd;
    return 0;
}

struct cr_page *cr_page_free(struct cr_page *p)
{
    if (p) {
        munmap(p->map, CR_WPAGE_SIZE);
        free(p);
    }
    return NULL;
}

void cr_page_release(struct cr_gen *g)
{
    g->page = cr_page_free(g->page);
    free(g->stack.text);
    g->stack = (struct cr_gen_stack){0};
}

unsigned cr_page_features(const struct cr_page *p)
{
    if (!p)
        return 0;
    return atomic_load_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_FEATURES),
                                memory_order_acquire);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A target is the worker's bytes: anything that is not printable ASCII
 * becomes '?', so that a log line or a JSON string carries it as is. */
static void printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

/* The stack text is the worker's bytes too, and goes into JSON (the
 * `stack` answer, the post-mortem) that must be valid UTF-8: an invalid
 * sequence (a text cut in the middle of a character: the Python helper
 * cuts at CR_WPAGE_STACK_MAX bytes) or a NUL becomes '?', in place. */
static void valid_utf8(char *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t n = s[i] ? cr_utf8_seq((const unsigned char *)s + i, len - i) : 0;
        if (n == 0)
            s[i++] = '?';
        else
            i += n;
    }
}

void cr_page_request(const struct cr_page *p, struct cr_request_seen *ret)
{
    *ret = (struct cr_request_seen){0};
    struct cr_wpage_request r;
    if (!(cr_page_features(p) & CR_WPAGE_F_REQUEST) || !cr_wpage_read_request(p->map, &r))
        return;
    ret->known = true;
    ret->inflight = r.inflight;
    ret->serving = r.started_ns != 0;
    if (!ret->serving)
        return;
    uint64_t now = mono_ns();
    ret->age_ms = now > r.started_ns ? (now - r.started_ns) / 1000000u : 0;
    memcpy(ret->method, r.method, sizeof(ret->method));
    memcpy(ret->target, r.target, sizeof(ret->target));
    printable(ret->method);
    printable(ret->target);
}

uint32_t cr_page_ask_stack(struct cr_page *p)
{
    if (!(cr_page_features(p) & CR_WPAGE_F_STACK))
        return 0;
    if (++last_ask == 0) { /* 0 means "none" */
        last_ask = 1;
        wrapped = true;
    }
    p->asked = last_ask;
    if (!p->first)
        p->first = p->asked;
    atomic_store_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_STACK_REQ), p->asked,
                          memory_order_release);
    /* A shared futex: the worker's stack thread may sleep on this word
     * (one that polls it instead finds it on its next look). */
    syscall(SYS_futex, cr_wpage_u32(p->map, CR_WPAGE_OFF_STACK_REQ), FUTEX_WAKE, INT_MAX, NULL,
            NULL, 0);
    return p->asked;
}

bool cr_page_asked(const struct cr_page *p, uint32_t n)
{
    return p && p->first && n && n - p->first <= p->asked - p->first;
}

bool cr_page_ever_asked(uint32_t n)
{
    return n && (wrapped || n <= last_ask);
}

bool cr_page_answered(const struct cr_page *p, uint32_t n)
{
    if (!p || !n)
        return false;
    /* An answer to a later request is a fresher stack: it answers n too
     * (a hang's trace and a `corralctl stack` may ask at once). */
    uint32_t ans = atomic_load_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_STACK_ANS),
                                        memory_order_acquire);
    return ans && (int32_t)(ans - n) >= 0;
}

int cr_page_stack(const struct cr_page *p, uint32_t n, char *buf, size_t size, char *source,
                  size_t source_size)
{
    if (!cr_page_answered(p, n))
        return 0;
    /* The answer is read as it stands: a worker rewrites it only when
     * corrald asks again, and it asks again only for a hang's trace and
     * for `corralctl stack` (a copy taken while the two cross may mix
     * them; it is a stack either way, and valid text below). */
    uint32_t len = atomic_load_explicit(cr_wpage_u32(p->map, CR_WPAGE_OFF_STACK_LEN),
                                        memory_order_relaxed);
    if (len > CR_WPAGE_STACK_MAX)
        len = CR_WPAGE_STACK_MAX;
    if (len > size - 1)
        len = (uint32_t)(size - 1);
    memcpy(buf, (const char *)p->map + CR_WPAGE_OFF_STACK, len);
    buf[len] = '\0';
    valid_utf8(buf, len);
    size_t sl = strnlen((const char *)p->map + CR_WPAGE_OFF_SOURCE, CR_WPAGE_SOURCE_MAX);
    if (sl > source_size - 1)
        sl = source_size - 1;
    memcpy(source, (const char *)p->map + CR_WPAGE_OFF_SOURCE, sl);
    source[sl] = '\0';
    printable(source);
    return 1;
}
