/* A runtime's stack dump found in a stderr tail (model/stackdump.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "stackdump.h"

/* What Python 3.11 printed at a hang kill's SIGABRT (PYTHONFAULTHANDLER=1):
 * a thread asleep, the main one busy; then what came after. */
static const char DUMP[] =
    "127.0.0.1 - - [04/Dec/2026 22:10:01] \"GET /light HTTP/1.1\" 200 -\n"
    "Fatal Python error: Aborted\n"
    "\n"
    "Thread 0x00007efcc0dfa6c0 (most recent call first):\n"
    "  File \"/tmp/fh/busy.py\", line 3 in other\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 982 in run\n"
    "\n"
    "Current thread 0x00007efcc1c3bb80 (most recent call first):\n"
    "  File \"/tmp/fh/busy.py\", line 8 in busy\n"
    "  File \"/tmp/fh/busy.py\", line 9 in <module>\n"
    "\n"
    "Extension modules: _cffi_backend (total: 1)\n";

static void test_python_dump(void **state)
{
    (void)state;
    size_t off, len;
    const char *src;
    assert_true(cr_stackdump_find(DUMP, sizeof(DUMP) - 1, &off, &len, &src));
    assert_string_equal(src, "faulthandler");
    char got[512];
    memcpy(got, DUMP + off, len);
    got[len] = '\0';
    assert_string_equal(got, "Thread 0x00007efcc0dfa6c0 (most recent call first):\n"
                             "  File \"/tmp/fh/busy.py\", line 3 in other\n"
                             "  File \"/usr/lib/python3.11/threading.py\", line 982 in run\n"
                             "\n"
                             "Current thread 0x00007efcc1c3bb80 (most recent call first):\n"
                             "  File \"/tmp/fh/busy.py\", line 8 in busy\n"
                             "  File \"/tmp/fh/busy.py\", line 9 in <module>");
}

static void test_cut_and_absent(void **state)
{
    (void)state;
    size_t off, len;
    const char *src;
    /* The tail ends inside the dump: what is there is kept. */
    const char *cut = strstr(DUMP, " line 8 in busy");
    size_t n = (size_t)(cut - DUMP);
    assert_true(cr_stackdump_find(DUMP, n, &off, &len, &src));
    assert_int_equal(off + len, n);
    /* No fatal error line, or one without threads: nothing. */
    const char *plain = "Traceback (most recent call last):\n  File \"x\", line 1\nKeyError\n";
    assert_false(cr_stackdump_find(plain, strlen(plain), &off, &len, &src));
    const char *bare = "Fatal Python error: Aborted\n\n<no Python frame>\n";
    assert_false(cr_stackdump_find(bare, strlen(bare), &off, &len, &src));
    assert_false(cr_stackdump_find("", 0, &off, &len, &src));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_python_dump),
        cmocka_unit_test(test_cut_and_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
