/* The reference worker's page: the request it serves, and its stack on
 * request (trace.h). */
#include "trace.h"

#include <errno.h>
#include <execinfo.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "wpage.h"

#define STACK_FRAMES 64
/* The loop thread answers the signal in microseconds unless the kernel has
 * it stopped; past this the answer says so. */
#define CAPTURE_WAIT_MS 500
/* The signal that asks the loop thread for its frames: one this program
 * uses for nothing else. */
#define CAPTURE_SIGNAL SIGUSR2

static struct {
    void *page;
    uint32_t seq;  /* the request record's sequence (loop thread only) */
    uint32_t seen; /* the stack request word before stacks were offered */
    pthread_t loop;
    /* Filled by the loop thread's handler, read by the stack thread once
     * `taken` is posted. */
    void *frames[STACK_FRAMES];
    int nframes;
    sem_t taken;
} T;

static void on_capture(int sig)
{
    (void)sig;
    int saved = errno;
    T.nframes = backtrace(T.frames, STACK_FRAMES);
    sem_post(&T.taken);
    errno = saved;
}

/* The text of the loop thread's frames, as glibc names them (functions of
 * the worker's own are named when it exports its symbols: -rdynamic), from
 * the frame the signal interrupted down. */
static size_t format_frames(char *buf, size_t size)
{
    char **names = backtrace_symbols(T.frames, T.nframes);
    size_t len = 0;
    /* The handler's own frame and the signal trampoline come first. */
    int skip = T.nframes > 2 ? 2 : 0;
    for (int i = skip, n = 0; i < T.nframes && len + 1 < size; i++, n++) {
        /* "/usr/lib/x/libuv.so.1(uv_run+0xc4) [0x7f…]" → "libuv.so.1(uv_run+0xc4)" */
        const char *name = names ? names[i] : "?", *paren = strchr(name, '(');
        const char *slash = paren ? memrchr(name, '/', (size_t)(paren - name)) : NULL;
        const char *bracket = strstr(name, ") [");
        int nl = bracket ? (int)(bracket + 1 - name) : (int)strlen(name);
        if (slash) {
            nl -= (int)(slash + 1 - name);
            name = slash + 1;
        }
        int w = snprintf(buf + len, size - len, "#%d %.*s\n", n, nl, name);
        if (w < 0)
            break;
        len += (size_t)w < size - len ? (size_t)w : size - len - 1;
    }
    free(names);
    return len;
}

static void answer(uint32_t req)
{
    char *text = T.page ? (char *)T.page + CR_WPAGE_OFF_STACK : NULL;
    size_t len;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += CAPTURE_WAIT_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    /* A capture that came after its request gave up (the loop thread
     * answered past CAPTURE_WAIT_MS) left its post behind: without this,
     * the next request would take those old frames at once. */
    while (sem_trywait(&T.taken) == 0)
        ;
    int r = pthread_kill(T.loop, CAPTURE_SIGNAL);
    while (r == 0 && (r = sem_timedwait(&T.taken, &until)) < 0 && errno == EINTR)
        ;
    if (r == 0)
        len = format_frames(text, CR_WPAGE_STACK_MAX);
    else
        len = (size_t)snprintf(text, CR_WPAGE_STACK_MAX,
                               "(the loop thread did not answer within %d ms)\n",
                               CAPTURE_WAIT_MS);
    memcpy((char *)T.page + CR_WPAGE_OFF_SOURCE, "corral-worker", sizeof("corral-worker"));
    atomic_store_explicit(cr_wpage_u32(T.page, CR_WPAGE_OFF_STACK_LEN), (uint32_t)len,
                          memory_order_relaxed);
    atomic_store_explicit(cr_wpage_u32(T.page, CR_WPAGE_OFF_STACK_ANS), req,
                          memory_order_release);
}

/* Sleeps on the request word; corrald raises it and wakes the futex. The
 * word's value before the page said stacks are answered is in T.seen: a
 * request made before this thread first ran is still answered. */
static void *stack_thread(void *arg)
{
    (void)arg;
    _Atomic uint32_t *word = cr_wpage_u32(T.page, CR_WPAGE_OFF_STACK_REQ);
    uint32_t seen = T.seen;
    for (;;) {
        syscall(SYS_futex, word, FUTEX_WAIT, seen, NULL, NULL, 0);
        uint32_t req = atomic_load_explicit(word, memory_order_acquire);
        if (req == seen)
            continue; /* a spurious wake */
        seen = req;
        answer(req);
    }
    return NULL;
}

int cr_trace_open(void)
{
    const char *env = getenv(CR_WPAGE_ENV);
    if (!env)
        return 0;
    char *end;
    long fd = strtol(env, &end, 10);
    struct stat st;
    if (*end || fd < 0 || fd > INT_MAX || fstat((int)fd, &st) < 0)
        return -EBADF;
    if (st.st_size < CR_WPAGE_SIZE)
        return -EINVAL;
    void *p = mmap(NULL, CR_WPAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    close((int)fd); /* the mapping keeps it; children of the worker do not get it */
    if (atomic_load_explicit(cr_wpage_u32(p, CR_WPAGE_OFF_MAGIC), memory_order_acquire) !=
        CR_WPAGE_MAGIC) {
        munmap(p, CR_WPAGE_SIZE);
        return -EPROTO;
    }
    T.page = p;
    T.loop = pthread_self();
    T.seen = atomic_load_explicit(cr_wpage_u32(p, CR_WPAGE_OFF_STACK_REQ), memory_order_acquire);
    unsigned features = CR_WPAGE_F_REQUEST;
    /* backtrace() loads libgcc on its first call: done here, not in the
     * signal handler. */
    T.nframes = backtrace(T.frames, 1);
    struct sigaction sa = {.sa_handler = on_capture, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    pthread_t th;
    pthread_attr_t at;
    if (sem_init(&T.taken, 0, 0) == 0 && sigaction(CAPTURE_SIGNAL, &sa, NULL) == 0 &&
        pthread_attr_init(&at) == 0) {
        /* The thread only waits: a small stack, every signal blocked so
         * that none of the process's is delivered to it. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_attr_setstacksize(&at, 64 * 1024);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        if (pthread_create(&th, &at, stack_thread, NULL) == 0)
            features |= CR_WPAGE_F_STACK;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&at);
    }
    atomic_store_explicit(cr_wpage_u32(p, CR_WPAGE_OFF_FEATURES), features, memory_order_release);
    return 1;
}

void cr_trace_request(uint32_t inflight, uint64_t count, uint64_t started_ns, const char *method,
                      const char *path, const char *query)
{
    if (!T.page)
        return;
    char target[CR_WPAGE_TARGET_MAX];
    size_t pl = strlen(path), ql = *query ? strlen(query) : 0, tl = pl;
    if (tl > sizeof(target))
        tl = sizeof(target);
    memcpy(target, path, tl);
    if (ql && tl < sizeof(target)) {
        target[tl++] = '?';
        size_t n = ql < sizeof(target) - tl ? ql : sizeof(target) - tl;
        memcpy(target + tl, query, n);
        tl += n;
    }
    cr_wpage_write_request(T.page, &T.seq, inflight, started_ns ? started_ns : 1, count, method,
                           strlen(method), target, tl);
}

void cr_trace_idle(uint32_t inflight, uint64_t count)
{
    if (T.page)
        cr_wpage_write_request(T.page, &T.seq, inflight, 0, count, "", 0, "", 0);
}
