/* Unit tests of the accept queue's state (model/acceptq.c): the waited
 * bound of one socket across samples, rounds over several sockets, and the
 * saturated / drained transitions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "acceptq.h"

#define SEEN(s, len, now, w, ne)                                                             \
    do {                                                                                   \
        struct cr_acceptq_seen x_ = cr_acceptq_sock_observe((s), (len), (now));            \
        assert_int_equal(x_.waited_ms, (w));                                               \
        assert_int_equal(x_.nonempty_ms, (ne));                                            \
    } while (0)

/* A queue seen empty, then non-empty: the upper bound counts from the last
 * empty sample, the lower one from the first non-empty; both grow while it
 * stays non-empty whatever its length does, and are 0 again (and count
 * afresh) once it is seen empty. */
static void test_bounds(void **state)
{
    (void)state;
    struct cr_acceptq_sock s = {0};
    SEEN(&s, 0, 1000, 0, 0);
    SEEN(&s, 0, 1025, 0, 0);
    SEEN(&s, 3, 1050, 25, 0);
    SEEN(&s, 14, 1075, 50, 25);
    SEEN(&s, 1, 1100, 75, 50); /* turned over, never empty */
    SEEN(&s, 0, 1125, 0, 0);
    SEEN(&s, 2, 1150, 25, 0);
    /* A gap before the first non-empty sample (an empty queue is read
     * every 100 ms) widens the upper bound only. */
    SEEN(&s, 0, 1200, 0, 0);
    SEEN(&s, 9, 1300, 100, 0);
    SEEN(&s, 9, 1325, 125, 25);
}

/* The first sample bounds nothing before it (a socket from systemd may
 * hold older connections): it counts from there. */
static void test_first_sample(void **state)
{
    (void)state;
    struct cr_acceptq_sock s = {0};
    SEEN(&s, 5, 500, 0, 0);
    SEEN(&s, 5, 525, 25, 25);
    /* A clock that went back (never on the loop's clock) is a fresh start,
     * not a wrapped number. */
    SEEN(&s, 5, 400, 0, 0);
}

static enum cr_acceptq_change round1(struct cr_acceptq_figures *f, uint32_t len, uint32_t max,
                                     uint64_t waited, uint64_t nonempty, uint64_t now,
                                     uint64_t threshold)
{
    struct cr_acceptq_round r = {0};
    cr_acceptq_round_add(&r, len, max,
                         (struct cr_acceptq_seen){.waited_ms = waited, .nonempty_ms = nonempty});
    return cr_acceptq_end(f, &r, now, threshold);
}

/* Saturated once the queue was seen non-empty for the threshold, once per
 * episode, with the episode's worst kept; drained when it falls back (the
 * queue was seen empty); counted. A wide upper bound alone (a gap before
 * the first non-empty sample) saturates nothing. */
static void test_saturation(void **state)
{
    (void)state;
    struct cr_acceptq_figures f = {0};
    assert_false(f.known);
    assert_int_equal(round1(&f, 0, 1024, 0, 0, 1000, 100), CR_ACCEPTQ_SAME);
    assert_true(f.known);
    assert_int_equal(f.max, 1024);
    assert_int_equal(round1(&f, 4, 1024, 150, 0, 1100, 100), CR_ACCEPTQ_SAME);
    assert_int_equal(round1(&f, 9, 1024, 175, 75, 1175, 100), CR_ACCEPTQ_SAME);
    assert_int_equal(round1(&f, 14, 1024, 200, 100, 1200, 100), CR_ACCEPTQ_SATURATED);
    assert_true(f.saturated);
    assert_int_equal(f.saturations, 1);
    assert_int_equal(f.saturated_at, 1200);
    assert_int_equal(f.nonempty_ms, 100);
    assert_int_equal(round1(&f, 20, 1024, 225, 125, 1225, 100), CR_ACCEPTQ_SAME);
    assert_int_equal(round1(&f, 6, 1024, 250, 150, 1250, 100), CR_ACCEPTQ_SAME);
    assert_int_equal(f.peak_length, 20);
    assert_int_equal(f.peak_waited_ms, 250);
    assert_int_equal(f.length, 6);

    char line[256];
    assert_int_equal(round1(&f, 0, 1024, 0, 0, 1275, 100), CR_ACCEPTQ_DRAINED);
    assert_false(f.saturated);
    cr_acceptq_format(&f, CR_ACCEPTQ_DRAINED, line, sizeof line);
    assert_string_equal(line, "accept queue drained after 75 ms saturated: 0 connections waiting "
                              "now; at worst 20 waited up to 250 ms");

    /* A second episode: counted, its own peak. */
    assert_int_equal(round1(&f, 2, 1024, 250, 100, 1500, 100), CR_ACCEPTQ_SATURATED);
    assert_int_equal(f.saturations, 2);
    assert_int_equal(f.peak_length, 2);
    cr_acceptq_format(&f, CR_ACCEPTQ_SATURATED, line, sizeof line);
    assert_string_equal(line, "accept queue saturated: 2 connections waiting, the queue not seen "
                              "empty for 100 ms, the oldest waiting up to 250 ms (backlog 1024)");
}

/* Threshold 0 is off: nothing saturates, and turning it off ends an
 * episode without a drained event (nothing was seen to empty). */
static void test_off(void **state)
{
    (void)state;
    struct cr_acceptq_figures f = {0};
    assert_int_equal(round1(&f, 50, 128, 60000, 60000, 61000, 0), CR_ACCEPTQ_SAME);
    assert_false(f.saturated);
    assert_int_equal(round1(&f, 50, 128, 61000, 61000, 62000, 100), CR_ACCEPTQ_SATURATED);
    assert_int_equal(round1(&f, 50, 128, 62000, 62000, 63000, 0), CR_ACCEPTQ_SAME);
    assert_false(f.saturated);
    assert_int_equal(f.saturations, 1);
}

/* One socket per worker: lengths and backlogs add up, the bound is the
 * worst socket's (one blocked worker's queue saturates even when the
 * others keep theirs empty); a round without a socket is unknown, and
 * ends a saturation (its queue went away with its worker). */
static void test_many_sockets(void **state)
{
    (void)state;
    struct cr_acceptq_figures f = {0};
    struct cr_acceptq_sock a = {0}, b = {0};
    struct cr_acceptq_round r = {0};
    uint64_t t = 0;
    for (int i = 0; i < 8; i++, t += 25) {
        r = (struct cr_acceptq_round){0};
        cr_acceptq_round_add(&r, 0, 1024, cr_acceptq_sock_observe(&a, 0, t));
        cr_acceptq_round_add(&r, 7, 1024, cr_acceptq_sock_observe(&b, i ? 7 : 0, t));
        enum cr_acceptq_change c = cr_acceptq_end(&f, &r, t, 100);
        assert_int_equal(c, i == 5 ? CR_ACCEPTQ_SATURATED : CR_ACCEPTQ_SAME);
    }
    assert_int_equal(f.sockets, 2);
    assert_int_equal(f.length, 7);
    assert_int_equal(f.max, 2048);
    assert_int_equal(f.waited_ms, 175);
    assert_int_equal(f.nonempty_ms, 150);
    char line[256];
    cr_acceptq_format(&f, CR_ACCEPTQ_SATURATED, line, sizeof line);
    assert_non_null(strstr(line, "summed over the workers' sockets"));

    r = (struct cr_acceptq_round){0};
    assert_int_equal(cr_acceptq_end(&f, &r, t, 100), CR_ACCEPTQ_DRAINED);
    assert_false(f.known);
    assert_false(f.saturated);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_first_sample),
        cmocka_unit_test(test_saturation),
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_many_sockets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
