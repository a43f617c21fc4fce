/* Unit tests of the pure cgroup file parsers, on real samples: v1 files
 * captured from a Linux 6.18 host (tests/data/cgroups/v1, taken from a
 * group right after an OOM kill) and v2 files in the exact kernel format
 * (tests/data/cgroups/v2). The data dir comes from $CR_TEST_DATA. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cr_cgroup.h"

static char *slurp(const char *rel)
{
    static char buf[16384];
    char path[1024];
    const char *dir = getenv("CR_TEST_DATA");
    assert_non_null(dir);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    assert_true(n < sizeof buf - 1);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_u64(void **state)
{
    uint64_t v = 1;
    (void)state;
    assert_int_equal(cr_cgroup_parse_u64(slurp("v2/memory.max"), &v), 0);
    assert_true(v == CR_CGROUP_UNLIMITED);
    assert_int_equal(cr_cgroup_parse_u64(slurp("v2/memory.max.limited"), &v), 0);
    assert_true(v == 67108864u);
    assert_int_equal(cr_cgroup_parse_u64(slurp("v1/memory.limit_in_bytes"), &v), 0);
    assert_true(v == 67108864u);
    /* 9223372036854771712: v1's "no limit", INT64_MAX rounded to a page. */
    assert_int_equal(cr_cgroup_parse_u64(slurp("v1/memory.limit_in_bytes.unlimited"), &v), 0);
    assert_true(v == CR_CGROUP_UNLIMITED);
    assert_int_equal(cr_cgroup_parse_u64(slurp("v1/memory.failcnt"), &v), 0);
    assert_true(v > 0);
    assert_int_equal(cr_cgroup_parse_u64("9223372036854700000\n", &v), 0);
    assert_true(v == 9223372036854700000u);
    assert_int_equal(cr_cgroup_parse_u64("18446744073709551616", &v), -ERANGE);
    assert_int_equal(cr_cgroup_parse_u64("", &v), -EINVAL);
    assert_int_equal(cr_cgroup_parse_u64("12 13\n", &v), -EINVAL);
    assert_int_equal(cr_cgroup_parse_u64("-5", &v), -EINVAL);
    assert_int_equal(cr_cgroup_parse_u64("maxi", &v), -EINVAL);
}

static void test_stat_v2(void **state)
{
    struct cr_cgroup_stat st;
    (void)state;
    assert_int_equal(cr_cgroup_parse_stat(slurp("v2/memory.stat"), CR_CGROUP_V2, &st), 0);
    assert_true(st.anon == 58916864u);
    assert_true(st.file == 20336640u);
    assert_true(st.kernel == 3104768u);
    assert_true(st.slab == 2434944u);
    assert_true(st.sock == 8192u);
    assert_true(st.shmem == 1052672u);
    /* No "kernel" line before 5.18: kernel_stack + pagetables + percpu + slab. */
    assert_int_equal(cr_cgroup_parse_stat(slurp("v2/memory.stat.5.10"), CR_CGROUP_V2, &st), 0);
    assert_true(st.kernel == 98304u + 5760u + 777216u);
    assert_true(st.anon == 12783616u);
    assert_true(st.slab == 777216u);
}

static void test_stat_v1(void **state)
{
    struct cr_cgroup_stat st;
    (void)state;
    const char *text = slurp("v1/memory.stat");
    assert_int_equal(cr_cgroup_parse_stat(text, CR_CGROUP_V1, &st), 0);
    /* The sample is a leaf: total_* equals the local lines; check against
     * the file's own numbers rather than constants. */
    unsigned long long rss = 0, cache = 0, shmem = 0;
    assert_non_null(strstr(text, "\ntotal_rss "));
    sscanf(strstr(text, "\ntotal_rss ") + 1, "total_rss %llu", &rss);
    sscanf(strstr(text, "\ntotal_cache ") + 1, "total_cache %llu", &cache);
    sscanf(strstr(text, "\ntotal_shmem ") + 1, "total_shmem %llu", &shmem);
    assert_true(rss > 30u << 20); /* the sampler held 30 MB of anon memory */
    assert_true(st.anon == rss);
    assert_true(st.file == cache);
    assert_true(st.shmem == shmem);
    assert_true(st.kernel == 0 && st.slab == 0 && st.sock == 0);
    /* total_* wins over the local lines. */
    assert_int_equal(
        cr_cgroup_parse_stat("rss 10\ncache 20\ntotal_rss 30\ntotal_cache 40\n", CR_CGROUP_V1, &st),
        0);
    assert_true(st.anon == 30 && st.file == 40);
    assert_int_equal(cr_cgroup_parse_stat("rss 10\nrss_huge 4\ncache 20\n", CR_CGROUP_V1, &st), 0);
    assert_true(st.anon == 10 && st.file == 20);
}

static void test_stat_bad(void **state)
{
    struct cr_cgroup_stat st;
    (void)state;
    assert_int_equal(cr_cgroup_parse_stat("", CR_CGROUP_V2, &st), -EINVAL);
    assert_int_equal(cr_cgroup_parse_stat("anon\n", CR_CGROUP_V2, &st), -EINVAL);
    assert_int_equal(cr_cgroup_parse_stat("anon x\n", CR_CGROUP_V2, &st), -EINVAL);
    assert_int_equal(cr_cgroup_parse_stat("anon 1\n", CR_CGROUP_NONE, &st), -EINVAL);
    assert_int_equal(cr_cgroup_parse_stat(slurp("v2/proc-self-cgroup"), CR_CGROUP_V2, &st),
                     -EINVAL);
}

static void test_events_v2(void **state)
{
    struct cr_cgroup_events ev;
    (void)state;
    assert_int_equal(cr_cgroup_parse_events(slurp("v2/memory.events"), &ev), 0);
    assert_true(ev.low == 0 && ev.high == 0 && ev.max == 1789 && ev.oom == 3);
    assert_true(ev.oom_kill == 2 && ev.oom_group_kill == 0 && !ev.under_oom);
    assert_int_equal(cr_cgroup_parse_events(slurp("v2/memory.events.local"), &ev), 0);
    assert_true(ev.max == 0 && ev.oom == 0 && ev.oom_kill == 2);
    /* A 5.x kernel without oom_group_kill still parses. */
    assert_int_equal(cr_cgroup_parse_events("low 1\nhigh 2\nmax 3\noom 4\noom_kill 5\n", &ev), 0);
    assert_true(ev.low == 1 && ev.high == 2 && ev.max == 3 && ev.oom == 4 && ev.oom_kill == 5);
    assert_int_equal(cr_cgroup_parse_events("low 1 2\n", &ev), -EINVAL);
    assert_int_equal(cr_cgroup_parse_events(slurp("v2/memory.max"), &ev), -EINVAL);
}

static void test_oom_control_v1(void **state)
{
    struct cr_cgroup_events ev;
    (void)state;
    assert_int_equal(cr_cgroup_parse_oom_control(slurp("v1/memory.oom_control"), &ev), 0);
    assert_true(ev.oom_kill == 1 && !ev.under_oom && ev.max == 0);
    assert_int_equal(cr_cgroup_parse_oom_control(slurp("v1/memory.oom_control.under_oom"), &ev), 0);
    assert_true(ev.oom_kill == 0 && ev.under_oom);
    assert_int_equal(cr_cgroup_parse_oom_control(slurp("v2/memory.events"), &ev), -EINVAL);
    assert_int_equal(cr_cgroup_parse_oom_control("", &ev), -EINVAL);
}

static void test_proc_cgroup(void **state)
{
    char *rel = NULL;
    (void)state;
    const char *v1 = slurp("v1/proc-self-cgroup");
    assert_int_equal(cr_cgroup_parse_proc_cgroup(v1, CR_CGROUP_V1, &rel), 0);
    assert_non_null(strstr(v1, rel));
    assert_true(rel[0] == '/' && strlen(rel) > 1);
    assert_null(strchr(rel, '\n'));
    free(rel);
    assert_int_equal(cr_cgroup_parse_proc_cgroup(v1, CR_CGROUP_V2, &rel), 0); /* hybrid "0::/" */
    assert_string_equal(rel, "/");
    free(rel);
    assert_int_equal(cr_cgroup_parse_proc_cgroup(slurp("v2/proc-self-cgroup"), CR_CGROUP_V2, &rel),
                     0);
    assert_string_equal(rel, "/system.slice/corral.service/supervisor");
    free(rel);
    assert_int_equal(cr_cgroup_parse_proc_cgroup(slurp("v2/proc-self-cgroup"), CR_CGROUP_V1, &rel),
                     -ENOENT);
    /* "memory" must be a whole item of the controller list. */
    assert_int_equal(cr_cgroup_parse_proc_cgroup("4:nomemory,cpu:/x\n", CR_CGROUP_V1, &rel),
                     -ENOENT);
    assert_int_equal(cr_cgroup_parse_proc_cgroup("4:cpu,memory:/a:b\n", CR_CGROUP_V1, &rel), 0);
    assert_string_equal(rel, "/a:b");
    free(rel);
    assert_int_equal(cr_cgroup_parse_proc_cgroup("garbage\n", CR_CGROUP_V1, &rel), -EINVAL);
}

static void test_controllers(void **state)
{
    char req[64];
    (void)state;
    assert_int_equal(cr_cgroup_parse_controllers(slurp("v2/cgroup.controllers"), req, sizeof req),
                     0);
    assert_string_equal(req, "+memory +pids +cpu");
    assert_int_equal(cr_cgroup_parse_controllers("memory\n", req, sizeof req), 0);
    assert_string_equal(req, "+memory");
    assert_int_equal(
        cr_cgroup_parse_controllers(slurp("v2/cgroup.controllers.nomemory"), req, sizeof req),
        -ENODEV);
    assert_int_equal(cr_cgroup_parse_controllers("cpuset memory pids\n", req, 10), -ENOBUFS);
}

static void test_parent_and_names(void **state)
{
    char *p;
    (void)state;
    p = cr_cgroup_parent("/a/b");
    assert_string_equal(p, "/a");
    free(p);
    p = cr_cgroup_parent("/a");
    assert_string_equal(p, "/");
    free(p);
    p = cr_cgroup_parent("/");
    assert_string_equal(p, "/");
    free(p);
    assert_null(cr_cgroup_parent("a/b"));
    assert_string_equal(cr_cgroup_layout_to_string(CR_CGROUP_V1), "v1");
    assert_string_equal(cr_cgroup_layout_to_string(CR_CGROUP_V2), "v2");
    assert_null(cr_cgroup_layout_to_string(_CR_CGROUP_LAYOUT_MAX));
}

/* CPU quotas: whole CPUs rounded up, "max" and v1's -1 as none. The v1
 * files were read off a Linux 6.18 host (root, and a group given 150000
 * of a 100000 µs period); the v2 ones are in the kernel's format. */
static void test_cpu_quota(void **state)
{
    unsigned n = 99;
    (void)state;
    assert_int_equal(cr_cgroup_parse_cpu_max(slurp("v2/cpu.max"), &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(cr_cgroup_parse_cpu_max(slurp("v2/cpu.max.half"), &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(cr_cgroup_parse_cpu_max(slurp("v2/cpu.max.limited"), &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cr_cgroup_parse_cpu_max("200000 100000\n", &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cr_cgroup_parse_cpu_max("200001 100000\n", &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(cr_cgroup_parse_cpu_max("1000 100000\n", &n), 0);
    assert_int_equal(n, 1); /* a hundredth of a CPU still runs one worker */
    assert_int_equal(cr_cgroup_parse_cpu_max("", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cpu_max("max\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cpu_max("100000 0\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cpu_max("100000 max\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cpu_max("1 2 3\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cpu_max("x 100000\n", &n), -EINVAL);

    n = 99;
    char quota[32], period[32];
    snprintf(quota, sizeof quota, "%s", slurp("v1/cpu.cfs_quota_us.unlimited"));
    snprintf(period, sizeof period, "%s", slurp("v1/cpu.cfs_period_us"));
    assert_int_equal(cr_cgroup_parse_cfs(quota, period, &n), 0);
    assert_int_equal(n, 0);
    snprintf(quota, sizeof quota, "%s", slurp("v1/cpu.cfs_quota_us"));
    assert_int_equal(cr_cgroup_parse_cfs(quota, period, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(cr_cgroup_parse_cfs("100000\n", "100000\n", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(cr_cgroup_parse_cfs("250000\n", "50000\n", &n), 0);
    assert_int_equal(n, 5);
    assert_int_equal(cr_cgroup_parse_cfs("-2\n", "100000\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cfs("100000\n", "0\n", &n), -EINVAL);
    assert_int_equal(cr_cgroup_parse_cfs(NULL, period, &n), -EINVAL);
}

/* PSI: memory.pressure's two lines (the kernel's format); the host's
 * /proc/pressure/memory has the same. */
static void test_pressure(void **state)
{
    struct cr_cgroup_pressure p;
    (void)state;
    assert_int_equal(cr_cgroup_parse_pressure(slurp("v2/memory.pressure"), &p), 0);
    assert_true(p.some_avg10 > 12.49 && p.some_avg10 < 12.51);
    assert_true(p.some_avg60 > 3.24 && p.some_avg60 < 3.26);
    assert_true(p.full_avg10 > 3.99 && p.full_avg10 < 4.01);
    assert_int_equal(p.some_total_us, 4567890);
    assert_int_equal(p.full_total_us, 123456);
    /* "full" may be missing (the CPU's before 5.13): zero. */
    assert_int_equal(cr_cgroup_parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
                                              &p),
                     0);
    assert_true(p.full_avg10 == 0 && p.full_total_us == 0);
    assert_int_equal(cr_cgroup_parse_pressure("", &p), -EINVAL);
    assert_int_equal(cr_cgroup_parse_pressure("full avg10=1 avg60=1 avg300=1 total=1\n", &p),
                     -EINVAL);
    assert_int_equal(cr_cgroup_parse_pressure("some avg10=x avg60=0 avg300=0 total=0\n", &p),
                     -EINVAL);
    assert_int_equal(cr_cgroup_parse_pressure("some avg10=-1 avg60=0 avg300=0 total=0\n", &p),
                     -EINVAL);
    assert_int_equal(cr_cgroup_parse_pressure(NULL, &p), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64),
        cmocka_unit_test(test_stat_v2),
        cmocka_unit_test(test_stat_v1),
        cmocka_unit_test(test_stat_bad),
        cmocka_unit_test(test_events_v2),
        cmocka_unit_test(test_oom_control_v1),
        cmocka_unit_test(test_proc_cgroup),
        cmocka_unit_test(test_controllers),
        cmocka_unit_test(test_parent_and_names),
        cmocka_unit_test(test_cpu_quota),
        cmocka_unit_test(test_pressure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
