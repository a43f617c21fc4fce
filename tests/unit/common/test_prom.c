/* The Prometheus text builder (common/prom.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prom.h"

static void text(void **state)
{
    struct cr_prom p = CR_PROM_INIT;
    char *t;
    size_t len;
    cr_prom_gauge(&p, "a_bytes", "An a.", 1536);
    cr_prom_counter(&p, "b_total", "A b.", 0.25);
    cr_prom_family(&p, "c", "gauge", "A c.");
    cr_prom_sample(&p, "c", "worker=\"1\"", 3);
    cr_prom_sample(&p, "c", "", 4);
    cr_prom_printf(&p, "c{worker=\"%d\"} %.6f\n", 2, 0.5);
    assert_int_equal(cr_prom_take(&p, &t, &len), 0);
    const char want[] = "# HELP a_bytes An a.\n# TYPE a_bytes gauge\na_bytes 1536\n"
                        "# HELP b_total A b.\n# TYPE b_total counter\nb_total 0.25\n"
                        "# HELP c A c.\n# TYPE c gauge\nc{worker=\"1\"} 3\nc 4\n"
                        "c{worker=\"2\"} 0.500000\n";
    assert_string_equal(t, want);
    assert_int_equal(len, strlen(want));
    free(t);
    /* take resets: the builder can be used again. */
    assert_null(p.buf);
    assert_int_equal(cr_prom_take(&p, &t, NULL), 0);
    assert_string_equal(t, "");
    free(t);
}

static void grows_and_caps(void **state)
{
    struct cr_prom p = CR_PROM_INIT;
    char *t;
    size_t len;
    for (int i = 0; i < 10000; i++)
        cr_prom_sample(&p, "x_total", "worker=\"12345\"", i);
    assert_false(p.failed);
    assert_int_equal(cr_prom_take(&p, &t, &len), 0);
    assert_non_null(strstr(t, "x_total{worker=\"12345\"} 9999\n"));
    assert_true(len > 10000 * 20);
    free(t);

    /* Past the hard cap the builder fails and stays failed. */
    p = (struct cr_prom){.max = 64u << 10};
    char line[1000];
    memset(line, 'a', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\0';
    for (unsigned i = 0; i < 100 && !p.failed; i++)
        cr_prom_printf(&p, "%s", line);
    assert_true(p.failed);
    /* Everything that fitted was kept, nothing past the cap. */
    assert_true(p.len < 64u << 10);
    assert_true(p.len > (64u << 10) - sizeof(line));
    assert_true(p.cap <= 64u << 10);
    cr_prom_printf(&p, "more\n");
    t = NULL;
    assert_int_equal(cr_prom_take(&p, &t, &len), -ENOMEM);
    assert_null(t);
    assert_null(p.buf);
    /* The default cap is CR_PROM_MAX. */
    p = (struct cr_prom)CR_PROM_INIT;
    cr_prom_printf(&p, "%*s", (int)CR_PROM_MAX, "");
    assert_true(p.failed);
    assert_int_equal(cr_prom_take(&p, &t, &len), -ENOMEM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text),
        cmocka_unit_test(grows_and_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
