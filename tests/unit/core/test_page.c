/* corrald's side of the worker page (generation/page.c) against real
 * writers: the reference worker's C writer (common/wpage.h) in a thread,
 * and the Python helper's (examples/python/corral_notify.py, Page) in a
 * python3 process, each rewriting the request record as fast as it can
 * while corrald's reader (cr_page_request) reads it. A record the reader
 * takes must be one a writer wrote whole: a method with its own target,
 * the count in flight that goes with it. And a stack answer in bytes a
 * worker chose is returned as valid UTF-8 (it goes into JSON). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "page.h"
#include "utf8.h"
#include "wpage.h"

/* The two records the writers alternate between, and the idle one. */
#define M_A           "GET"
#define M_B           "POSTXXXXXXXXXXXX" /* CR_WPAGE_METHOD_MAX bytes: the whole field */
#define WRITE_SECONDS 3

struct tally {
    unsigned long reads, whole, a, b, idle, torn;
};

/* A record as corrald read it is one of the three the writers write. */
static void judge(const struct cr_request_seen *r, struct tally *t)
{
    t->reads++;
    if (!r->known)
        return; /* rewritten on every try: said unknown, never wrong */
    t->whole++;
    size_t tl = strlen(r->target);
    bool ok;
    if (!r->serving) {
        ok = r->inflight == 0 && !r->method[0] && tl == 0;
        t->idle += ok;
    } else {
        char fill = strcmp(r->method, M_A) == 0 ? 'a' : strcmp(r->method, M_B) == 0 ? 'b' : 0;
        ok = fill && r->inflight == 1 && tl == CR_WPAGE_TARGET_MAX && r->target[0] == '/';
        for (size_t i = 1; ok && i < tl; i++)
            ok = r->target[i] == fill;
        t->a += ok && fill == 'a';
        t->b += ok && fill == 'b';
    }
    if (!ok && t->torn++ < 3)
        print_message("torn record taken whole: serving=%d inflight=%u method='%s' target "
                      "length %zu, starts '%.12s'\n",
                      r->serving, r->inflight, r->method, tl, r->target);
}

static void *map_fd(int fd)
{
    void *m = mmap(NULL, CR_WPAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    return m;
}

static void test_sealed(void **state)
{
    (void)state;
    struct cr_page *p;
    int fd;
    assert_int_equal(cr_page_new(&p, &fd), 0);
    int seals = fcntl(fd, F_GET_SEALS);
    assert_true(seals >= 0);
    assert_true((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
                (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    assert_int_equal(ftruncate(fd, 0), -1);
    assert_int_equal(errno, EPERM);
    /* Nothing offered yet: no stack is asked for, no record read. */
    assert_int_equal(cr_page_ask_stack(p), 0);
    struct cr_request_seen r;
    cr_page_request(p, &r);
    assert_false(r.known);
    close(fd);
    cr_page_free(p);
}

/* ---- the C writer ---- */

struct cwriter {
    void *map;
    atomic_bool stop;
};

/* A record stays a moment, as a request does: the reader sees each kind. */
static void hold(void)
{
    for (volatile int i = 0; i < 2000; i++)
        ;
}

static void *c_writer(void *arg)
{
    struct cwriter *w = arg;
    char ta[CR_WPAGE_TARGET_MAX], tb[CR_WPAGE_TARGET_MAX];
    memset(ta, 'a', sizeof ta);
    memset(tb, 'b', sizeof tb);
    ta[0] = tb[0] = '/';
    uint32_t seq = 0;
    uint64_t n = 0;
    while (!atomic_load(&w->stop)) {
        cr_wpage_write_request(w->map, &seq, 1, 1000 + n, n, M_A, strlen(M_A), ta, sizeof ta);
        hold();
        cr_wpage_write_request(w->map, &seq, 0, 0, n, "", 0, "", 0);
        hold();
        cr_wpage_write_request(w->map, &seq, 1, 2000 + n, n, M_B, strlen(M_B), tb, sizeof tb);
        hold();
        cr_wpage_write_request(w->map, &seq, 0, 0, n++, "", 0, "", 0);
        hold();
    }
    return NULL;
}

static void test_c_writer_never_torn(void **state)
{
    (void)state;
    struct cr_page *p;
    int fd;
    assert_int_equal(cr_page_new(&p, &fd), 0);
    struct cwriter w = {.map = map_fd(fd)};
    atomic_store_explicit(cr_wpage_u32(w.map, CR_WPAGE_OFF_FEATURES), CR_WPAGE_F_REQUEST,
                          memory_order_release);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, c_writer, &w), 0);
    struct tally t = {0};
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* At least a second, and until each kind was seen (a loaded machine
     * may leave the writer thread unscheduled for a while), 20 s at most. */
    do {
        for (int i = 0; i < 10000; i++) {
            struct cr_request_seen r;
            cr_page_request(p, &r);
            judge(&r, &t);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 1 ||
             ((!t.a || !t.b || !t.idle) && now.tv_sec - t0.tv_sec < 20));
    atomic_store(&w.stop, true);
    pthread_join(th, NULL);
    print_message("C writer: %lu reads, %lu whole (%lu GET, %lu POST, %lu idle), %lu torn\n",
                  t.reads, t.whole, t.a, t.b, t.idle, t.torn);
    assert_int_equal(t.torn, 0);
    assert_true(t.a > 0 && t.b > 0 && t.idle > 0);
    munmap(w.map, CR_WPAGE_SIZE);
    close(fd);
    cr_page_free(p);
}

/* ---- the Python helper's writer ---- */

static const char py_writer[] = "import sys, time\n"
                                "sys.path.insert(0, sys.argv[1])\n"
                                "import corral_notify\n"
                                "pg = corral_notify.Page()\n"
                                "assert pg.map is not None, 'no page'\n"
                                "ta, tb = '/' + 'a' * 383, '/' + 'b' * 383\n"
                                "end = time.monotonic() + float(sys.argv[2])\n"
                                "while time.monotonic() < end:\n"
                                "    for _ in range(100):\n"
                                "        pg.end(pg.begin('" M_A "', ta))\n"
                                "        pg.end(pg.begin('" M_B "', tb))\n";

static void test_python_writer_never_torn(void **state)
{
    (void)state;
    const char *python = getenv("PYTHON"), *dir = getenv("CORRAL_PY_HELPER");
    if (!python || !dir)
        skip();
    struct cr_page *p;
    int fd;
    assert_int_equal(cr_page_new(&p, &fd), 0);
    char secs[8];
    snprintf(secs, sizeof secs, "%d", WRITE_SECONDS);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (dup2(fd, CR_WPAGE_FD) < 0)
            _exit(126);
        setenv(CR_WPAGE_ENV, "5", 1);
        execl(python, python, "-c", py_writer, dir, secs, (char *)NULL);
        _exit(127);
    }
    struct tally t = {0};
    int status = 0;
    /* Bounded: the writer stops after WRITE_SECONDS; 30 s at most here. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 30) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("the Python writer did not end");
        }
        for (int i = 0; i < 10000; i++) {
            struct cr_request_seen r;
            cr_page_request(p, &r);
            judge(&r, &t);
        }
    }
    print_message("Python writer: %lu reads, %lu whole (%lu GET, %lu POST, %lu idle), %lu torn\n",
                  t.reads, t.whole, t.a, t.b, t.idle, t.torn);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(t.torn, 0);
    /* The reader saw the writer at work, or the test proved nothing. */
    assert_true(t.a > 0 && t.b > 0 && t.idle > 0);
    close(fd);
    cr_page_free(p);
}

/* ---- the stack answer ---- */

static void test_stack_answer_is_valid_utf8(void **state)
{
    (void)state;
    struct cr_page *p;
    int fd;
    assert_int_equal(cr_page_new(&p, &fd), 0);
    char *m = map_fd(fd);
    atomic_store_explicit(cr_wpage_u32(m, CR_WPAGE_OFF_FEATURES), CR_WPAGE_F_STACK,
                          memory_order_release);
    uint32_t n = cr_page_ask_stack(p);
    assert_int_not_equal(n, 0);
    char buf[64], src[40];
    assert_int_equal(cr_page_stack(p, n, buf, sizeof buf, src, sizeof src), 0); /* not yet */
    /* A text cut in the middle of "€" (e2 82 ac), a NUL, a lone 0xff, and
     * a whole "é"; a source with a control byte. */
    static const char text[] = "ok \xe2\x82|x\0y\xff\xc3\xa9\n";
    size_t len = sizeof(text) - 1;
    memcpy(m + CR_WPAGE_OFF_STACK, text, len);
    memcpy(m + CR_WPAGE_OFF_SOURCE, "py\x01th", 6);
    atomic_store_explicit(cr_wpage_u32(m, CR_WPAGE_OFF_STACK_LEN), (uint32_t)len,
                          memory_order_relaxed);
    atomic_store_explicit(cr_wpage_u32(m, CR_WPAGE_OFF_STACK_ANS), n, memory_order_release);
    assert_int_equal(cr_page_stack(p, n, buf, sizeof buf, src, sizeof src), 1);
    assert_int_equal(cr_utf8_valid_prefix(buf, strlen(buf)), strlen(buf));
    assert_string_equal(buf, "ok ??|x?y?\xc3\xa9\n");
    assert_string_equal(src, "py?th");
    munmap(m, CR_WPAGE_SIZE);
    close(fd);
    cr_page_free(p);
}

/* Request numbers name one page's requests: a worker's next process (a
 * new page) never takes a number its last one was asked with, so a client
 * holding one cannot be answered by another process's stack. */
static void test_stack_numbers_name_one_page(void **state)
{
    (void)state;
    struct cr_page *a, *b;
    int fa, fb;
    assert_int_equal(cr_page_new(&a, &fa), 0);
    assert_int_equal(cr_page_new(&b, &fb), 0);
    char *ma = map_fd(fa), *mb = map_fd(fb);
    atomic_store_explicit(cr_wpage_u32(ma, CR_WPAGE_OFF_FEATURES), CR_WPAGE_F_STACK,
                          memory_order_release);
    atomic_store_explicit(cr_wpage_u32(mb, CR_WPAGE_OFF_FEATURES), CR_WPAGE_F_STACK,
                          memory_order_release);
    assert_false(cr_page_asked(b, 1)); /* never asked */
    uint32_t a1 = cr_page_ask_stack(a), a2 = cr_page_ask_stack(a);
    uint32_t b1 = cr_page_ask_stack(b);
    assert_true(a1 && a2 && b1 && a1 != a2 && b1 != a1 && b1 != a2);
    assert_true(cr_page_asked(a, a1) && cr_page_asked(a, a2) && cr_page_asked(b, b1));
    assert_false(cr_page_asked(b, a1));
    assert_false(cr_page_asked(b, a2));
    assert_false(cr_page_asked(a, b1));
    assert_false(cr_page_asked(a, 0));
    assert_false(cr_page_asked(NULL, a1));
    /* Asked of some page, or never. */
    assert_true(cr_page_ever_asked(a1) && cr_page_ever_asked(b1));
    assert_false(cr_page_ever_asked(b1 + 1000));
    assert_false(cr_page_ever_asked(0));
    munmap(ma, CR_WPAGE_SIZE);
    munmap(mb, CR_WPAGE_SIZE);
    close(fa);
    close(fb);
    cr_page_free(a);
    cr_page_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed),
        cmocka_unit_test(test_c_writer_never_torn),
        cmocka_unit_test(test_python_writer_never_torn),
        cmocka_unit_test(test_stack_answer_is_valid_utf8),
        cmocka_unit_test(test_stack_numbers_name_one_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
