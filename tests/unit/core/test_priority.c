/* corrald's priority over its workers (priority.h): the pure parts, then
 * real raises, each in a child of its own so the test runner keeps its
 * priority. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/sched/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "priority.h"
#include "priority_set.h"

static void test_raised_nice(void **state)
{
    (void)state;
    assert_int_equal(cr_priority_raised_nice(0, 10), -10);
    assert_int_equal(cr_priority_raised_nice(5, 10), -5);
    assert_int_equal(cr_priority_raised_nice(-15, 10), -20);
    assert_int_equal(cr_priority_raised_nice(19, 39), -20);
    assert_int_equal(cr_priority_raised_nice(3, 0), 3);
    assert_int_equal(cr_priority_raised_nice(0, 4000000000u), -20);
}

static void test_parse_autogroup(void **state)
{
    (void)state;
    int n = 99;
    assert_int_equal(cr_priority_parse_autogroup("/autogroup-519000 nice 0\n", &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(cr_priority_parse_autogroup("/autogroup-7 nice -10\n", &n), 0);
    assert_int_equal(n, -10);
    assert_int_equal(cr_priority_parse_autogroup("/autogroup-7 nice 19", &n), 0);
    assert_int_equal(n, 19);
    static const char *bad[] = {
        NULL, "", "\n", "nice 0\n", "/autogroup-7 nice\n", "/autogroup-7 nice x\n",
        "/autogroup-7 nice 20\n", "/autogroup-7 nice -21\n", "/autogroup-7 nice 5 6\n",
        "/other-7 nice 0\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        n = 99;
        assert_int_equal(cr_priority_parse_autogroup(bad[i], &n), -EINVAL);
        assert_int_equal(n, 99);
    }
}

static void test_lowest_nice(void **state)
{
    (void)state;
    /* The kernel's is_nice_reduction: a nice down to 20 - limit. */
    assert_int_equal(cr_priority_lowest_nice(0), 19);
    assert_int_equal(cr_priority_lowest_nice(1), 19);
    assert_int_equal(cr_priority_lowest_nice(20), 0);
    assert_int_equal(cr_priority_lowest_nice(28), -8);
    assert_int_equal(cr_priority_lowest_nice(39), -19);
    assert_int_equal(cr_priority_lowest_nice(40), -20);
    assert_int_equal(cr_priority_lowest_nice(~0ull), -20);
}

static void test_parse_cpu_cgroup(void **state)
{
    (void)state;
    char path[64];
    bool v1 = false;
    /* A hybrid host: the v1 cpu hierarchy wins over the unified line. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("9:name=systemd:/\n4:memory:/a/b\n2:cpuacct:/\n"
                                                  "1:cpu:/\n0::/\n",
                                                  &v1, path, sizeof(path)),
                     0);
    assert_true(v1);
    assert_string_equal(path, "/");
    assert_int_equal(cr_priority_parse_cpu_cgroup("3:cpu,cpuacct:/system.slice/corral.service\n"
                                                  "0::/system.slice/corral.service\n",
                                                  &v1, path, sizeof(path)),
                     0);
    assert_true(v1);
    assert_string_equal(path, "/system.slice/corral.service");
    /* v2 only. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("0::/system.slice/corral.service/supervisor\n",
                                                  &v1, path, sizeof(path)),
                     0);
    assert_false(v1);
    assert_string_equal(path, "/system.slice/corral.service/supervisor");
    assert_int_equal(cr_priority_parse_cpu_cgroup("0::/\n", &v1, path, sizeof(path)), 0);
    assert_string_equal(path, "/");
    /* No cpu line and no unified line; a cpuacct alone is not cpu. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("2:cpuacct:/\n4:memory:/\n", &v1, path,
                                                  sizeof(path)),
                     -ENOENT);
    assert_int_equal(cr_priority_parse_cpu_cgroup("", &v1, path, sizeof(path)), -ENOENT);
    static const char *bad[] = {"garbage\n", "1:cpu\n", "1:cpu:\n", "1:cpu:relative\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        assert_int_equal(cr_priority_parse_cpu_cgroup(bad[i], &v1, path, sizeof(path)), -EINVAL);
    /* A path may hold ':'; "cpuacct,cpu" is cpu, "name=cpu" is not; the last
     * line need not end in a newline; blank lines are skipped. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("1:name=cpu:/n\n\n0::/a:b", &v1, path,
                                                  sizeof(path)),
                     0);
    assert_false(v1);
    assert_string_equal(path, "/a:b");
    assert_int_equal(cr_priority_parse_cpu_cgroup("0::/u\n3:cpuacct,cpu:/x:y", &v1, path,
                                                  sizeof(path)),
                     0);
    assert_true(v1);
    assert_string_equal(path, "/x:y");
    /* Only hierarchy 0 is the unified one. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("5::/x\n", &v1, path, sizeof(path)), -ENOENT);
    /* A path that does not fit is refused, not cut. */
    assert_int_equal(cr_priority_parse_cpu_cgroup("0::/abcdefgh\n", &v1, path, 8), -EINVAL);
}

/* In a child: a failed check exits with its line number. */
#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);   \
            _exit(1);                                                               \
        }                                                                           \
    } while (0)

static void in_child(void (*fn)(void))
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* CAP_SYS_NICE in the effective set (bit 23): root in a container may
 * lack it. */
static bool has_cap_sys_nice(void)
{
    char line[256];
    bool cap = false;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "CapEff:", 7) == 0)
            cap = strtoull(line + 7, NULL, 16) >> 23 & 1;
    if (f)
        fclose(f);
    return cap;
}

/* The lowest nice this process may take: any with the capability, else
 * what RLIMIT_NICE allows. */
static int lowest_allowed(void)
{
    struct rlimit rl;
    if (has_cap_sys_nice())
        return -20;
    if (getrlimit(RLIMIT_NICE, &rl) < 0)
        return 19;
    return cr_priority_lowest_nice(rl.rlim_cur == RLIM_INFINITY ? 40 : rl.rlim_cur);
}

/* This host's CPU controller leaves the test in its root group, where
 * autogroups apply: a v1 cpu hierarchy at "/" whose root is the real one
 * (the machine CI runs on). Elsewhere corrald may rightly say they do not. */
static bool known_root_cpu_group(void)
{
    char text[4096] = "";
    int fd = open("/proc/self/cgroup", O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return false;
    bool v1_cpu_root = strstr(text, ":cpu:/\n") || strstr(text, ":cpu,cpuacct:/\n") ||
                       strstr(text, ":cpuacct,cpu:/\n");
    return v1_cpu_root && (access("/sys/fs/cgroup/cpu/release_agent", F_OK) == 0 ||
                           access("/sys/fs/cgroup/cpu,cpuacct/release_agent", F_OK) == 0);
}

static struct sched_attr attr_now(void)
{
    struct sched_attr a = {0};
    CHECK(syscall(SYS_sched_getattr, 0, &a, sizeof(a), 0) == 0);
    return a;
}

static int autogroup_nice(void)
{
    char text[64] = "";
    int fd = open("/proc/self/autogroup", O_RDONLY), n = 99;
    CHECK(fd >= 0 && read(fd, text, sizeof(text) - 1) > 0);
    close(fd);
    CHECK(cr_priority_parse_autogroup(text, &n) == 0);
    return n;
}

static bool autogroups_on(void)
{
    char c = '0';
    int fd = open("/proc/sys/kernel/sched_autogroup_enabled", O_RDONLY);
    if (fd >= 0) {
        if (read(fd, &c, 1) != 1)
            c = '0';
        close(fd);
    }
    return c == '1';
}

/* What the kernel says afterwards is what *ret says; and what a worker
 * gets back is what the thread was started with. */
static void raise_and_give_back(void)
{
    CHECK(setpriority(PRIO_PROCESS, 0, 2) == 0);
    struct cr_priority p;
    CHECK(cr_priority_raise(10, &p) == 0);
    CHECK(p.policy == SCHED_NORMAL && p.nice == 2);
    struct sched_attr a = attr_now();
    CHECK(a.sched_nice == p.nice_now);
    CHECK(a.sched_runtime == p.slice_now);
    /* 10 levels, or as far as RLIMIT_NICE allows, or none. */
    int lowest = lowest_allowed(), want = lowest > -8 ? lowest : -8;
    if (want > 2)
        want = 2;
    CHECK(p.nice_now == want);
    CHECK((p.nice_err == 0) == (want == -8));
    /* 6.12 and later take the slice; older kernels report none. */
    CHECK(p.slice_now == CR_PRIORITY_SLICE_NS || p.slice_now == 0);
    CHECK(cr_priority_raised(&p) == (p.nice_now != 2 || p.slice_now != p.slice_ns ||
                                     p.autogroup == CR_PRIORITY_AUTOGROUP_RAISED));
    /* The test is not its session's leader: its autogroup is the
     * session's, and stays as it was. */
    CHECK(p.autogroup != CR_PRIORITY_AUTOGROUP_RAISED);
    if (!autogroups_on())
        CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_OFF);
    else if (known_root_cpu_group())
        CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_NOT_LEADER);
    else
        CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_NOT_LEADER ||
              p.autogroup == CR_PRIORITY_AUTOGROUP_NOT_ROOT);
    CHECK(cr_priority_changed(&p) == (p.nice_now != 2 || p.slice_now != p.slice_ns));

    /* What a worker is given: the nice, and the kernel's default slice,
     * which is what this thread was started with. */
    CHECK(cr_priority_set_self(p.nice, 0) == 0);
    a = attr_now();
    CHECK(a.sched_nice == 2 && a.sched_runtime == p.slice_ns);
    CHECK(getpriority(PRIO_PROCESS, 0) == 2);
}

static void test_raise_and_give_back(void **state)
{
    (void)state;
    in_child(raise_and_give_back);
}

/* Leading its own session, corrald raises the session's autogroup too. */
static void leader(void)
{
    CHECK(setsid() == getpid());
    bool on = autogroups_on();
    int before = on ? autogroup_nice() : 0;
    struct cr_priority p;
    CHECK(cr_priority_raise(10, &p) == 0);
    if (!on) {
        CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_OFF);
        return;
    }
    /* 10 levels; without the capability as far as RLIMIT_NICE allows
     * (a nice >= 0 needs nothing); or none. */
    int allowed = lowest_allowed() < 0 ? lowest_allowed() : 0;
    int want = cr_priority_raised_nice(before, 10);
    if (allowed > want)
        want = allowed;
    if (known_root_cpu_group()) {
        if (want < before) {
            CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_RAISED);
            CHECK(p.autogroup_nice == want);
            CHECK(p.autogroup_limited == (want != cr_priority_raised_nice(before, 10)));
        } else {
            /* EAGAIN: another process changed an autogroup within 100 ms. */
            CHECK(p.autogroup == CR_PRIORITY_AUTOGROUP_FAILED &&
                  (p.autogroup_err == EPERM || p.autogroup_err == EAGAIN));
        }
    }
    /* Wherever it is: what corrald says is what the kernel holds. */
    if (p.autogroup == CR_PRIORITY_AUTOGROUP_RAISED) {
        CHECK(autogroup_nice() == p.autogroup_nice && cr_priority_raised(&p));
    } else {
        CHECK(p.autogroup != CR_PRIORITY_AUTOGROUP_OFF);
        CHECK(autogroup_nice() == before);
    }
}

static void test_leader_raises_its_autogroup(void **state)
{
    (void)state;
    in_child(leader);
}

/* Levels 0, or a policy other than SCHED_NORMAL: nothing changes. */
static void left_alone(void)
{
    struct sched_attr before = attr_now();
    struct cr_priority p;
    CHECK(cr_priority_raise(0, &p) == 0);
    CHECK(!cr_priority_raised(&p) && !cr_priority_changed(&p));
    struct sched_attr a = attr_now();
    CHECK(a.sched_nice == before.sched_nice && a.sched_runtime == before.sched_runtime);

    struct sched_attr batch = {
        .size = sizeof(batch), .sched_policy = SCHED_BATCH, .sched_nice = before.sched_nice,
    };
    CHECK(syscall(SYS_sched_setattr, 0, &batch, 0) == 0);
    CHECK(cr_priority_raise(10, &p) == 0);
    CHECK(p.policy == SCHED_BATCH && !cr_priority_raised(&p) && !cr_priority_changed(&p));
    a = attr_now();
    CHECK(a.sched_policy == SCHED_BATCH && a.sched_nice == before.sched_nice);
}

/* A worker may not climb above the nice it is given: RLIMIT_NICE goes
 * down to it, never up. */
static void test_capped_rlimit(void **state)
{
    (void)state;
    assert_int_equal(cr_priority_nice_rlimit(0), 20);
    assert_int_equal(cr_priority_nice_rlimit(-10), 30);
    assert_int_equal(cr_priority_nice_rlimit(19), 1);
    assert_int_equal(cr_priority_nice_rlimit(-20), 40);
    /* A unit's LimitNICE=-10 (30): a worker at nice 0 gets 20. */
    unsigned long long cur = 30, max = 30;
    assert_true(cr_priority_capped_rlimit(0, &cur, &max));
    assert_true(cur == 20 && max == 20);
    assert_int_equal(cr_priority_lowest_nice(cur), 0);
    /* Each limit on its own; unlimited is capped too. */
    cur = 2, max = ~0ull;
    assert_true(cr_priority_capped_rlimit(5, &cur, &max));
    assert_true(cur == 2 && max == 15);
    /* Never raised: the default 0 stays. */
    cur = 0, max = 0;
    assert_false(cr_priority_capped_rlimit(-20, &cur, &max));
    assert_true(cur == 0 && max == 0);
    cur = 20, max = 20;
    assert_false(cr_priority_capped_rlimit(0, &cur, &max));
}

/* The real call: it lowers what it can (raising a hard limit needs
 * CAP_SYS_RESOURCE, which a container may lack: then the test starts from
 * the limits it has) and never raises. */
static void cap_nice(void)
{
    struct rlimit rl = {.rlim_cur = 30, .rlim_max = 35};
    if (setrlimit(RLIMIT_NICE, &rl) < 0)
        CHECK(getrlimit(RLIMIT_NICE, &rl) == 0);
    unsigned long long cur = rl.rlim_cur, max = rl.rlim_max;
    cr_priority_capped_rlimit(0, &cur, &max);
    CHECK(cr_priority_cap_nice(0) == 0);
    CHECK(getrlimit(RLIMIT_NICE, &rl) == 0);
    CHECK(rl.rlim_cur == cur && rl.rlim_max == max);
    CHECK(rl.rlim_cur <= 20 && rl.rlim_max <= 20);
    CHECK(cr_priority_cap_nice(-10) == 0);
    CHECK(getrlimit(RLIMIT_NICE, &rl) == 0);
    CHECK(rl.rlim_cur == cur && rl.rlim_max == max);
    /* At the thread's own nice: 5 here, so at most 15. */
    CHECK(setpriority(PRIO_PROCESS, 0, 5) == 0);
    CHECK(cr_priority_cap_nice_here() == 0);
    CHECK(getrlimit(RLIMIT_NICE, &rl) == 0);
    CHECK(rl.rlim_cur <= 15 && rl.rlim_max <= 15);
    CHECK(rl.rlim_cur == (cur < 15 ? cur : 15) && rl.rlim_max == (max < 15 ? max : 15));
}

static void test_cap_nice(void **state)
{
    (void)state;
    in_child(cap_nice);
}

static void test_left_alone(void **state)
{
    (void)state;
    in_child(left_alone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_raised_nice),
        cmocka_unit_test(test_parse_autogroup),
        cmocka_unit_test(test_lowest_nice),
        cmocka_unit_test(test_parse_cpu_cgroup),
        cmocka_unit_test(test_raise_and_give_back),
        cmocka_unit_test(test_leader_raises_its_autogroup),
        cmocka_unit_test(test_left_alone),
        cmocka_unit_test(test_capped_rlimit),
        cmocka_unit_test(test_cap_nice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
