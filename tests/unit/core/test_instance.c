/* The default instance name (supervisor/model/instance.c). The values are pinned:
 * a change of hash would give every running service a new instance name,
 * and a corrald restarted after a crash would no longer find its own stale
 * groups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "instance.h"

/* The published FNV-1a 64-bit test vectors (Fowler/Noll/Vo, and
 * draft-eastlake-fnv's test suite). */
static void fnv1a64_vectors(void **state)
{
    assert_true(cr_instance_fnv1a64("", 0) == UINT64_C(0xcbf29ce484222325));
    assert_true(cr_instance_fnv1a64("a", 1) == UINT64_C(0xaf63dc4c8601ec8c));
    assert_true(cr_instance_fnv1a64("foobar", 6) == UINT64_C(0x85944171f73967e8));
}

/* xor-folded to 48 bits: (h >> 48) ^ (h & 0xffffffffffff), 12 hex digits. */
static void names_pinned(void **state)
{
    char name[CR_INSTANCE_DEFAULT_SIZE];
    cr_instance_default_name("/run/corral/control.sock", name); /* h = 5314da8fa113ffb5 */
    assert_string_equal(name, "da8fa113aca1");
    cr_instance_default_name("/tmp/corral.sock", name); /* h = b7ed098228ac591b */
    assert_string_equal(name, "098228aceef6");          /* leading zero kept */
    cr_instance_default_name("", name);                 /* h = cbf29ce484222325 */
    assert_string_equal(name, "9ce48422e8d7");
}

/* A name is always 12 lowercase hex digits: a valid --instance. */
static void names_are_valid_instances(void **state)
{
    const char *paths[] = {"/", "/a", "/a/b/c.sock", "/srv/app/run/corral/control.sock"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        char name[CR_INSTANCE_DEFAULT_SIZE];
        memset(name, 'Z', sizeof(name));
        cr_instance_default_name(paths[i], name);
        assert_int_equal(strlen(name), 12);
        assert_int_equal(strspn(name, "0123456789abcdef"), 12);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fnv1a64_vectors),
        cmocka_unit_test(names_pinned),
        cmocka_unit_test(names_are_valid_instances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
