/* Real-kernel test of cr_cgroup: needs root and the memory controller;
 * exits 77 (skip) where absent. Everything lives under
 * /corral-test-<pid>-x at the root of the memory hierarchy and is removed.
 * It causes two real OOM kills of its own children (100 MB each against a
 * 64 MB limit) and prints the counters it measured. On cgroup v2 (the VM
 * test runs it in a guest) it checks the v2 counters and delegation. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_cgroup.h"

#define MB (1024u * 1024u)

static int failures;
static char top[128];

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int r_ = (expr);                                                                           \
        if (r_ < 0) {                                                                              \
            fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #expr, strerror(-r_));         \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static struct cr_cgroup *mk(const char *sub)
{
    char rel[256];
    struct cr_cgroup *cg = NULL;
    snprintf(rel, sizeof rel, "%s%s", top, sub);
    int r = cr_cgroup_open(rel, true, &cg);
    if (r < 0) {
        fprintf(stderr, "open %s: %s\n", rel, strerror(-r));
        exit(1);
    }
    return cg;
}

/* Forks a child that waits on a gate until the parent has attached it to
 * cg, then maps and touches mb megabytes. Returns its wait status. */
static int run_hog(struct cr_cgroup *cg, unsigned mb)
{
    int gate[2], status = 0;
    if (pipe2(gate, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(gate[1]);
        alarm(30); /* a hog that is never killed must not hang the test */
        if (read(gate[0], &c, 1) != 1)
            _exit(3);
        size_t len = (size_t)mb * MB;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            _exit(4);
        for (size_t i = 0; i < len; i += 4096)
            p[i] = 1;
        _exit(0);
    }
    close(gate[0]);
    CHECK(pid > 0);
    CHECK_OK(cr_cgroup_attach(cg, pid));
    CHECK(write(gate[1], "g", 1) == 1);
    close(gate[1]);
    CHECK(waitpid(pid, &status, 0) == pid);
    return status;
}

static bool readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static struct cr_cgroup_events events(struct cr_cgroup *cg, bool local)
{
    struct cr_cgroup_events ev = {0};
    CHECK_OK(cr_cgroup_read_events(cg, local, &ev));
    return ev;
}

static void test_own_limit(struct cr_cgroup *parent, struct cr_cgroup *own)
{
    uint64_t v, peak = 0, usage = 1;
    struct cr_cgroup_stat st;
    int fd = -1, pfd = -1;

    CHECK_OK(cr_cgroup_set_max(own, 64 * MB));
    CHECK_OK(cr_cgroup_get_max(own, &v));
    CHECK(v == 64 * MB);
    CHECK_OK(cr_cgroup_oom_fd(own, &fd));
    CHECK_OK(cr_cgroup_oom_fd(parent, &pfd));
    struct cr_cgroup_events b = events(own, true), pb = events(parent, false);
    CHECK(!readable(fd, 0));

    int status = run_hog(own, 100);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(readable(fd, 2000));
    bool parent_woke = readable(pfd, 100);
    cr_cgroup_oom_fd_drain(fd);
    CHECK(!readable(fd, 0));

    struct cr_cgroup_events a = events(own, true), pa = events(parent, false);
    printf("own-limit: own oom_kill +%" PRIu64 " max(failcnt) +%" PRIu64
           "; parent oom_kill +%" PRIu64 " max +%" PRIu64 "; parent eventfd %s\n",
           a.oom_kill - b.oom_kill, a.max - b.max, pa.oom_kill - pb.oom_kill, pa.max - pb.max,
           parent_woke ? "fired" : "silent");
    CHECK(a.oom_kill - b.oom_kill == 1);
    CHECK(a.max > b.max);
    CHECK(pa.oom_kill == pb.oom_kill && pa.max == pb.max);
    CHECK(!parent_woke);

    CHECK_OK(cr_cgroup_read_peak(own, &peak));
    CHECK(peak >= 60 * MB && peak <= 64 * MB);
    CHECK_OK(cr_cgroup_read_usage(own, &usage));
    CHECK(usage < 64 * MB);
    CHECK_OK(cr_cgroup_read_stat(own, &st));
    printf("own-limit: peak %" PRIu64 " usage %" PRIu64 " anon %" PRIu64 " file %" PRIu64
           " kernel %" PRIu64 "\n",
           peak, usage, st.anon, st.file, st.kernel);
    close(fd);
    close(pfd);
}

static void test_ancestor_limit(struct cr_cgroup *top_cg, struct cr_cgroup *anc,
                                struct cr_cgroup *w1, struct cr_cgroup *w2)
{
    int fd_top = -1, fd_anc = -1, fd_w1 = -1, fd_w2 = -1;
    CHECK_OK(cr_cgroup_set_max(anc, 64 * MB));
    CHECK_OK(cr_cgroup_set_max(w1, 512 * MB));
    CHECK_OK(cr_cgroup_oom_fd(top_cg, &fd_top));
    CHECK_OK(cr_cgroup_oom_fd(anc, &fd_anc));
    CHECK_OK(cr_cgroup_oom_fd(w1, &fd_w1));
    CHECK_OK(cr_cgroup_oom_fd(w2, &fd_w2));
    struct cr_cgroup_events ab = events(anc, false), wb = events(w1, true);

    int status = run_hog(w1, 100);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    bool w1_woke = readable(fd_w1, 2000), anc_woke = readable(fd_anc, 100);
    bool w2_woke = readable(fd_w2, 100), top_woke = readable(fd_top, 100);

    struct cr_cgroup_events aa = events(anc, false), wa = events(w1, true);
    printf("ancestor-limit: w1 oom_kill +%" PRIu64 " max +%" PRIu64 "; anc oom_kill +%" PRIu64
           " max +%" PRIu64 "; eventfd w1 %s anc %s sibling %s grandparent %s\n",
           wa.oom_kill - wb.oom_kill, wa.max - wb.max, aa.oom_kill - ab.oom_kill, aa.max - ab.max,
           w1_woke ? "fired" : "silent", anc_woke ? "fired" : "silent",
           w2_woke ? "fired" : "silent", top_woke ? "fired" : "silent");
    /* The facts documented in cr_cgroup.h for the death classifier. */
    CHECK(wa.oom_kill - wb.oom_kill == 1);
    CHECK(wa.max == wb.max);
    CHECK(aa.max > ab.max);
    CHECK(aa.oom_kill == ab.oom_kill);
    CHECK(w1_woke && anc_woke && !top_woke);
    close(fd_top);
    close(fd_anc);
    close(fd_w1);
    close(fd_w2);
}

/* set_max must order the v1 memsw write around the limit write; start from
 * a memsw limit left at 64M (e.g. by an older run) and raise past it. */
static void test_limits(struct cr_cgroup *cg)
{
    uint64_t v = 0;
    CHECK_OK(cr_cgroup_set_max(cg, 64 * MB));
    if (cr_cgroup_layout(cg) == CR_CGROUP_V1) {
        char path[512];
        snprintf(path, sizeof path, "%s/memory.memsw.limit_in_bytes", cr_cgroup_fs_path(cg));
        FILE *f = fopen(path, "we");
        if (f) {
            fprintf(f, "%u", 64 * MB);
            CHECK(fclose(f) == 0);
        }
        CHECK(cr_cgroup_set_high(cg, 32 * MB) == -EOPNOTSUPP);
        CHECK(cr_cgroup_delegate_setup("/", "x", NULL) == -EOPNOTSUPP);
        CHECK(cr_cgroup_enable_subtree("/") == -EOPNOTSUPP);
    } else {
        CHECK_OK(cr_cgroup_set_high(cg, 32 * MB));
    }
    CHECK_OK(cr_cgroup_set_max(cg, 128 * MB));
    CHECK_OK(cr_cgroup_get_max(cg, &v));
    CHECK(v == 128 * MB);
    CHECK_OK(cr_cgroup_set_max(cg, 32 * MB));
    CHECK_OK(cr_cgroup_get_max(cg, &v));
    CHECK(v == 32 * MB);
    CHECK_OK(cr_cgroup_set_max(cg, CR_CGROUP_UNLIMITED));
    CHECK_OK(cr_cgroup_get_max(cg, &v));
    CHECK(v == CR_CGROUP_UNLIMITED);
}

static int open_fds(void)
{
    int n = 0;
    char path[64];
    for (int fd = 0; fd < 1024; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        n += access(path, F_OK) == 0;
    }
    return n;
}

/* A group that keeps its files open reads fresh values through them, and
 * opens each file once; a group readied ahead hands over its cgroup.procs
 * and OOM descriptors once, and the cgroup.procs one moves a child in. */
static void test_kept_and_ahead(struct cr_cgroup *cg)
{
    uint64_t v = 0;
    struct cr_cgroup_events ev;
    int fds0 = open_fds();
    cr_cgroup_keep_open(cg);
    CHECK_OK(cr_cgroup_set_max(cg, 64 * MB));
    CHECK_OK(cr_cgroup_get_max(cg, &v));
    CHECK(v == 64 * MB);
    CHECK_OK(cr_cgroup_read_events(cg, true, &ev));
    int fds = open_fds();
    CHECK(fds > fds0); /* kept */
    CHECK_OK(cr_cgroup_set_max(cg, 96 * MB));
    CHECK_OK(cr_cgroup_get_max(cg, &v));
    CHECK(v == 96 * MB); /* a pread from 0 shows the new value */
    CHECK_OK(cr_cgroup_read_events(cg, true, &ev));
    CHECK(open_fds() == fds); /* nothing opened again */

    cr_cgroup_ready_ahead(cg);
    int procs = cr_cgroup_procs_fd(cg), oom = -1;
    CHECK(procs >= 0);
    CHECK_OK(cr_cgroup_oom_fd(cg, &oom));
    int fds_taken = open_fds();
    int again = cr_cgroup_procs_fd(cg); /* handed over once: opened afresh */
    CHECK(again >= 0 && again != procs);
    CHECK(open_fds() == fds_taken + 1);
    close(again);
    pid_t pid = fork();
    if (pid == 0)
        _exit(write(procs, "0", 1) == 1 ? 0 : 1);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(procs);
    close(oom);
    CHECK_OK(cr_cgroup_set_max(cg, CR_CGROUP_UNLIMITED));

    /* A kept group removed and made again under its name: the stale
     * descriptor's read fails and the file is opened afresh. */
    struct cr_cgroup *kept = mk("/kept"), *again_cg;
    cr_cgroup_keep_open(kept);
    CHECK_OK(cr_cgroup_set_max(kept, 64 * MB));
    CHECK_OK(cr_cgroup_get_max(kept, &v));
    CHECK(v == 64 * MB);
    CHECK_OK(cr_cgroup_remove(kept, 2000));
    again_cg = mk("/kept");
    CHECK_OK(cr_cgroup_set_max(again_cg, 48 * MB));
    CHECK_OK(cr_cgroup_get_max(kept, &v));
    CHECK(v == 48 * MB);
    CHECK_OK(cr_cgroup_remove(again_cg, 2000));
    cr_cgroup_free(again_cg);
    cr_cgroup_free(kept);
}

static void test_reclaim(struct cr_cgroup *top_cg)
{
    struct cr_cgroup *w7 = mk("/w7"), *w8 = mk("/w8"), *other = mk("/other"), *w9 = mk("/w9");
    unsigned removed = 99, left = 99;
    int gate[2];
    CHECK(pipe2(gate, O_CLOEXEC) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(gate[1]);
        alarm(30);
        (void)read(gate[0], &c, 1); /* EOF when the parent closes the gate */
        _exit(0);
    }
    close(gate[0]);
    CHECK_OK(cr_cgroup_attach(w9, pid));
    CHECK_OK(cr_cgroup_reclaim_stale(cr_cgroup_rel(top_cg), "w", &removed, &left));
    printf("reclaim: removed %u left %u\n", removed, left);
    CHECK(removed == 2 && left == 1);
    struct cr_cgroup *probe = NULL;
    CHECK(cr_cgroup_open(cr_cgroup_rel(w7), false, &probe) == -ENOENT);
    CHECK_OK(cr_cgroup_open(cr_cgroup_rel(other), false, &probe));
    probe = cr_cgroup_free(probe);
    CHECK(cr_cgroup_remove(w9, 0) == -EBUSY); /* a live task stays put */
    close(gate[1]);
    CHECK(waitpid(pid, NULL, 0) == pid);
    CHECK_OK(cr_cgroup_remove(w9, 2000));
    CHECK_OK(cr_cgroup_remove(other, 2000));
    cr_cgroup_free(w7);
    cr_cgroup_free(w8);
    cr_cgroup_free(other);
    cr_cgroup_free(w9);
}

/* cgroup v2 (run by the VM test, in a guest with systemd and the unified
 * hierarchy). Expectations from the kernel's cgroup-v2 documentation:
 * memory.events.local of the group whose limit was hit counts max/oom, the
 * victim's group counts oom_kill; an enclosing limit moves the ancestor's
 * local max/oom and only oom_kill in the leaf. */
static void test_v2(struct cr_cgroup *top_cg)
{
    CHECK_OK(cr_cgroup_enable_subtree(cr_cgroup_rel(top_cg)));
    struct cr_cgroup *lim = mk("/limits"), *own = mk("/own"), *anc = mk("/anc");
    test_limits(lim);
    test_kept_and_ahead(lim);

    /* Own limit. */
    int fd = -1;
    CHECK_OK(cr_cgroup_set_max(own, 64 * MB));
    CHECK_OK(cr_cgroup_oom_fd(own, &fd));
    struct cr_cgroup_events b = events(own, true);
    int status = run_hog(own, 100);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(readable(fd, 2000)); /* inotify on memory.events */
    cr_cgroup_oom_fd_drain(fd);
    struct cr_cgroup_events a = events(own, true);
    printf("v2 own-limit: oom_kill +%" PRIu64 " oom +%" PRIu64 " max +%" PRIu64 "\n",
           a.oom_kill - b.oom_kill, a.oom - b.oom, a.max - b.max);
    CHECK(a.oom_kill - b.oom_kill == 1);
    CHECK(a.oom > b.oom && a.max > b.max);
    uint64_t peak = 0;
    CHECK_OK(cr_cgroup_read_peak(own, &peak));
    CHECK(peak >= 60 * MB && peak <= 64 * MB);
    close(fd);

    /* Enclosing limit: anc has it, the leaf has none. */
    CHECK_OK(cr_cgroup_enable_subtree(cr_cgroup_rel(anc)));
    struct cr_cgroup *leaf = mk("/anc/w1");
    CHECK_OK(cr_cgroup_set_max(anc, 64 * MB));
    struct cr_cgroup_events lb = events(leaf, true), ab = events(anc, true);
    status = run_hog(leaf, 100);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct cr_cgroup_events la = events(leaf, true), aa = events(anc, true);
    printf("v2 ancestor-limit: leaf oom_kill +%" PRIu64 " oom +%" PRIu64 " max +%" PRIu64
           "; anc oom +%" PRIu64 " max +%" PRIu64 "\n",
           la.oom_kill - lb.oom_kill, la.oom - lb.oom, la.max - lb.max, aa.oom - ab.oom,
           aa.max - ab.max);
    CHECK(la.oom_kill - lb.oom_kill == 1);
    CHECK(la.oom == lb.oom && la.max == lb.max);
    CHECK(aa.oom > ab.oom && aa.max > ab.max);

    /* Delegation: a group holding a process gets a leaf for it and the
     * memory controller for its subtree. */
    struct cr_cgroup *svc = mk("/svc");
    int gate[2];
    CHECK(pipe2(gate, O_CLOEXEC) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(gate[1]);
        alarm(30);
        (void)read(gate[0], &c, 1);
        _exit(0);
    }
    close(gate[0]);
    CHECK_OK(cr_cgroup_attach(svc, pid));
    char *leaf_rel = NULL;
    CHECK_OK(cr_cgroup_delegate_setup(cr_cgroup_rel(svc), "supervisor", &leaf_rel));
    char *where = NULL;
    CHECK_OK(cr_cgroup_of_pid(pid, &where));
    CHECK(where && leaf_rel && strcmp(where, leaf_rel) == 0);
    struct cr_cgroup *w = mk("/svc/workers");
    CHECK_OK(cr_cgroup_set_max(w, 64 * MB)); /* memory.max exists: +memory is on */
    close(gate[1]);
    CHECK(waitpid(pid, NULL, 0) == pid);
    struct cr_cgroup *sup_cg = NULL;
    CHECK_OK(cr_cgroup_open(leaf_rel, false, &sup_cg));
    struct cr_cgroup *order[] = {w, sup_cg, svc, leaf, anc, own, lim};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        if (order[i])
            CHECK_OK(cr_cgroup_remove(order[i], 2000));
        cr_cgroup_free(order[i]);
    }
    free(leaf_rel);
    free(where);
}

int main(void)
{
    enum cr_cgroup_layout l;
    char *mount = NULL, *self = NULL;
    if (geteuid() != 0 || cr_cgroup_detect(&l, &mount) < 0 || l == CR_CGROUP_NONE) {
        printf("SKIP: needs root and a memory cgroup controller\n");
        return 77;
    }
    printf("layout %s at %s\n", cr_cgroup_layout_to_string(l), mount);
    CHECK_OK(cr_cgroup_of_pid(0, &self));
    printf("own memory cgroup: %s\n", self ? self : "?");
    snprintf(top, sizeof top, "/corral-test-%d-x", (int)getpid());
    if (l == CR_CGROUP_V2) {
        struct cr_cgroup *top_cg = mk("");
        test_v2(top_cg);
        CHECK_OK(cr_cgroup_remove(top_cg, 2000));
        cr_cgroup_free(top_cg);
        free(mount);
        free(self);
        printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
        return failures ? 1 : 0;
    }
    struct cr_cgroup *top_cg = mk(""), *own = mk("/own"), *w1 = mk("/anc/w1"), *w2 = mk("/anc/w2");
    struct cr_cgroup *anc = mk("/anc"), *lim = mk("/limits");

    test_limits(lim);
    test_kept_and_ahead(lim);
    test_own_limit(top_cg, own);
    test_ancestor_limit(top_cg, anc, w1, w2);
    test_reclaim(top_cg);

    /* v1: removing a group signals its OOM eventfd once (documented in
     * cr_cgroup.h: readiness is a hint, the counters are the verdict). */
    struct cr_cgroup *gone = mk("/gone");
    int gfd = -1;
    CHECK_OK(cr_cgroup_oom_fd(gone, &gfd));
    CHECK(!readable(gfd, 0));
    CHECK_OK(cr_cgroup_remove(gone, 2000));
    bool gone_woke = readable(gfd, 1000);
    printf("removal: eventfd %s\n", gone_woke ? "fired" : "silent");
    CHECK(gone_woke);
    close(gfd);
    cr_cgroup_free(gone);

    struct cr_cgroup *order[] = {lim, w2, w1, anc, own, top_cg};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        CHECK_OK(cr_cgroup_remove(order[i], 2000));
        cr_cgroup_free(order[i]);
    }
    free(mount);
    free(self);
    printf("%s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
