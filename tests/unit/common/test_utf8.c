/* UTF-8 validation (common/utf8.c), shared by the control protocol and the
 * post-mortem's stderr tail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "utf8.h"

#define SEQ(lit) cr_utf8_seq((const unsigned char *)(lit), sizeof(lit) - 1)

static void sequences(void **state)
{
    (void)state;
    assert_int_equal(SEQ("a"), 1);
    assert_int_equal(cr_utf8_seq((const unsigned char *)"", 1), 1); /* NUL is valid */
    assert_int_equal(cr_utf8_seq((const unsigned char *)"a", 0), 0); /* nothing there */
    assert_int_equal(SEQ("\xc3\xa9"), 2);
    assert_int_equal(SEQ("\xe2\x82\xac"), 3);
    assert_int_equal(SEQ("\xf0\x9f\x98\x80"), 4);
    assert_int_equal(SEQ("\xc3"), 0);             /* cut */
    assert_int_equal(SEQ("\xc0\xaf"), 0);         /* overlong '/' */
    assert_int_equal(SEQ("\xe0\x80\x80"), 0);     /* overlong */
    assert_int_equal(SEQ("\xed\xa0\x80"), 0);     /* surrogate */
    assert_int_equal(SEQ("\xf4\x90\x80\x80"), 0); /* above U+10FFFF */
    assert_int_equal(SEQ("\xc3\x28"), 0);         /* bad continuation */
}

static void prefixes(void **state)
{
    (void)state;
    assert_int_equal(cr_utf8_valid_prefix("abc", 3), 3);
    assert_int_equal(cr_utf8_valid_prefix("a\xc3\xa9z", 4), 4);
    assert_int_equal(cr_utf8_valid_prefix("a\xc3", 2), 1);
    assert_int_equal(cr_utf8_valid_prefix("ab\x80" "cd", 5), 2);
    assert_int_equal(cr_utf8_valid_prefix("", 0), 0);
}

/* The prefix skips ASCII eight bytes at a time: a bad byte or a multibyte
 * character anywhere in or across those words must still be found. */
static void long_runs(void **state)
{
    (void)state;
    char buf[64];
    for (size_t at = 0; at < sizeof(buf); at++) {
        memset(buf, 'a', sizeof(buf));
        buf[at] = '\x80';
        assert_int_equal(cr_utf8_valid_prefix(buf, sizeof(buf)), at);
        /* An é straddling a word boundary, then a bad byte further on. */
        memset(buf, 'a', sizeof(buf));
        if (at + 1 < sizeof(buf)) {
            memcpy(buf + at, "\xc3\xa9", 2);
            assert_int_equal(cr_utf8_valid_prefix(buf, sizeof(buf)), sizeof(buf));
            buf[sizeof(buf) - 1] = '\xff';
            size_t want = at + 2 == sizeof(buf) ? at : sizeof(buf) - 1;
            assert_int_equal(cr_utf8_valid_prefix(buf, sizeof(buf)), want);
        }
        /* A character cut by the end of the buffer. */
        memset(buf, 'a', sizeof(buf));
        buf[at] = '\xe2';
        assert_int_equal(cr_utf8_valid_prefix(buf, at + 1), at);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sequences),
        cmocka_unit_test(prefixes),
        cmocka_unit_test(long_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
