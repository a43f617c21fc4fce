/* Unit tests of enclosing-group discovery on fixture trees: the root of a
 * cgroup namespace (a container's own group, limited to 200 MiB) counts as
 * an enclosing group on v1 and v2, the host's root never does; and the
 * --no-cgroups reading: the counters of corrald's own group (the
 * namespace root) before and after an OOM at the container's limit,
 * assembled the way supervisor/host/cgsetup.c does, classify as
 * oom-ancestor-limit, never oom-system. Data: $CR_TEST_DATA/{ns,host}-v{1,2}. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "cr_cgroup.h"
#include "death.h"

static char *tree(const char *name)
{
    static char path[1024];
    const char *dir = getenv("CR_TEST_DATA");
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void expect_chain(const char *mount, enum cr_cgroup_layout l, const char *rel,
                         bool self, const char *const *want, size_t nwant)
{
    struct cr_cgroup **v = NULL;
    size_t n = 99;
    assert_int_equal(cr_cgroup_enclosing(mount, l, rel, self, &v, &n), (int)nwant);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(cr_cgroup_rel(v[i]), want[i]);
    cr_cgroup_free_list(v, n);
}

static void test_ns_root_counts_v1(void **state)
{
    (void)state;
    const char *const want[] = {"/workers", "/"};
    expect_chain(tree("ns-v1/before"), CR_CGROUP_V1, "/workers", true, want, 2);
    expect_chain(tree("ns-v1/before"), CR_CGROUP_V1, "/workers", false, want + 1, 1);
}

static void test_ns_root_counts_v2(void **state)
{
    (void)state;
    const char *const want[] = {"/workers", "/"};
    expect_chain(tree("ns-v2/before"), CR_CGROUP_V2, "/workers", true, want, 2);
}

static void test_host_root_never_counts(void **state)
{
    (void)state;
    const char *const want[] = {"/workers"};
    /* v1: the root's limit reads unlimited; v2: the root has no memory.max. */
    expect_chain(tree("host-v1"), CR_CGROUP_V1, "/workers", true, want, 1);
    expect_chain(tree("host-v2"), CR_CGROUP_V2, "/workers", true, want, 1);
    expect_chain(tree("host-v1"), CR_CGROUP_V1, "/", true, NULL, 0);
    expect_chain(tree("host-v2"), CR_CGROUP_V2, "/", true, NULL, 0);
}

static void test_missing_groups_are_skipped(void **state)
{
    (void)state;
    /* A v1 container in the host's namespace: /proc/self/cgroup names
     * /docker/<id>, the mount shows the container's group at its root. */
    const char *const want[] = {"/"};
    expect_chain(tree("ns-v1/before"), CR_CGROUP_V1, "/docker/abc", true, want, 1);
}

static void test_bad_args(void **state)
{
    (void)state;
    struct cr_cgroup **v = NULL;
    size_t n = 0;
    assert_int_equal(cr_cgroup_enclosing(tree("host-v1"), CR_CGROUP_V1, "rel", true, &v, &n),
                     -EINVAL);
    struct cr_cgroup *cg = NULL;
    assert_int_equal(cr_cgroup_open_at(tree("host-v1"), CR_CGROUP_NONE, "/", &cg), -EINVAL);
    assert_int_equal(cr_cgroup_open_at(tree("host-v1"), CR_CGROUP_V1, "/nope", &cg), -ENOENT);
}

static struct cr_oom_delta events_at(const char *mount, enum cr_cgroup_layout l, const char *rel)
{
    struct cr_cgroup *cg = NULL;
    struct cr_cgroup_events e = {0};
    assert_int_equal(cr_cgroup_open_at(mount, l, rel, &cg), 0);
    assert_int_equal(cr_cgroup_read_events(cg, true, &e), 0);
    cr_cgroup_free(cg);
    return (struct cr_oom_delta){.max = e.max, .oom = e.oom, .oom_kill = e.oom_kill};
}

static struct cr_oom_delta minus(struct cr_oom_delta a, struct cr_oom_delta b)
{
    return (struct cr_oom_delta){a.max - b.max, a.oom - b.oom, a.oom_kill - b.oom_kill};
}

/* --no-cgroups in a container: corrald and its workers live in the
 * namespace root "/", the only enclosing group, whose limit is the
 * container's. The system-wide counter moved as well (it always does). */
static struct cr_death_result shared_death(const char *v, enum cr_cgroup_layout l, int cld_code,
                                           int status, uint64_t sys)
{
    char before[1100], after[1100];
    snprintf(before, sizeof before, "%s/before", tree(v));
    snprintf(after, sizeof after, "%s/after", tree(v));
    struct cr_oom_delta d = minus(events_at(after, l, "/"), events_at(before, l, "/"));
    struct cr_cgroup *root = NULL;
    uint64_t limit = 0, peak = 0;
    assert_int_equal(cr_cgroup_open_at(after, l, "/", &root), 0);
    assert_int_equal(cr_cgroup_get_max(root, &limit), 0);
    assert_int_equal(cr_cgroup_read_peak(root, &peak), 0);
    cr_cgroup_free(root);
    assert_int_equal(limit, 200u << 20);
    struct cr_death_evidence ev = {
        .cld_code = cld_code,
        .cld_status = status,
        .cg = l == CR_CGROUP_V2 ? CR_DEATH_CG_V2 : CR_DEATH_CG_V1,
        .own = {.oom_kill = d.oom_kill},
        .own_shared = true,
        .own_path = "/",
        .ancestor = d,
        .ancestor_path = "/",
        .ancestor_limit = limit,
        .ancestor_peak = peak,
        .system_oom_kill = sys,
        .uptime_ms = 2000,
    };
    struct cr_death_result r;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    return r;
}

static void test_no_cgroups_container_oom(void **state)
{
    (void)state;
    enum cr_cgroup_layout ls[] = {CR_CGROUP_V1, CR_CGROUP_V2};
    const char *vs[] = {"ns-v1", "ns-v2"};
    for (int i = 0; i < 2; i++) {
        struct cr_death_result r = shared_death(vs[i], ls[i], CLD_KILLED, SIGKILL, 1);
        assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
        assert_false(r.inferred);
        assert_non_null(strstr(r.reason, "200.0 MiB"));
        assert_non_null(strstr(r.reason, "--no-cgroups"));
        /* The same through a shell wrapper: 137. */
        r = shared_death(vs[i], ls[i], CLD_EXITED, 137, 1);
        assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
        assert_int_equal(r.shell_status, 137);
    }
}

/* The machine ran out: the shared group counted the kill, no limit counter
 * moved anywhere, the system counter did. */
static void test_no_cgroups_system_oom(void **state)
{
    (void)state;
    struct cr_death_evidence ev = {
        .cld_code = CLD_KILLED, .cld_status = SIGKILL, .cg = CR_DEATH_CG_V1,
        .own = {.oom_kill = 1}, .own_shared = true, .own_path = "/",
        .ancestor = {.oom_kill = 1}, .system_oom_kill = 1,
    };
    struct cr_death_result r;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_OOM_SYSTEM);
    /* With an ancestor's limit counter moving it is never oom-system. */
    ev.ancestor.max = 3;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    /* No system counter, no limit counter: the enclosing limit, inferred. */
    ev.ancestor.max = 0;
    ev.system_oom_kill = 0;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_OOM_ANCESTOR_LIMIT);
    assert_true(r.inferred);
}

/* Another container's OOM moved the host-wide counter while this worker was
 * killed from outside: its shared group counted no kill, so no OOM. */
static void test_no_cgroups_foreign_oom(void **state)
{
    (void)state;
    struct cr_death_evidence ev = {
        .cld_code = CLD_KILLED, .cld_status = SIGKILL, .cg = CR_DEATH_CG_V2,
        .own_shared = true, .own_path = "/", .system_oom_kill = 4,
    };
    struct cr_death_result r;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_SIGNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ns_root_counts_v1),
        cmocka_unit_test(test_ns_root_counts_v2),
        cmocka_unit_test(test_host_root_never_counts),
        cmocka_unit_test(test_missing_groups_are_skipped),
        cmocka_unit_test(test_bad_args),
        cmocka_unit_test(test_no_cgroups_container_oom),
        cmocka_unit_test(test_no_cgroups_system_oom),
        cmocka_unit_test(test_no_cgroups_foreign_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
