/* Real-kernel test of cr_cgroup_kill / cr_cgroup_kill_stale: a process and
 * the children it forked (the shape `sh -c 'sleep 600 & exec worker'`
 * leaves) all die when their group is killed, and a group left behind by a
 * dead supervisor is emptied by kill_stale. Needs root and the memory
 * controller; exits 77 (skip) where absent. Everything lives under
 * /corral-test-<pid>-kill at the root of the memory hierarchy. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cr_cgroup.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Forks `sh -c '<script>'` into cg (attached before exec, behind a gate),
 * returns its pid. */
static pid_t spawn_in(struct cr_cgroup *cg, const char *script)
{
    int gate[2];
    char c;
    if (pipe2(gate, O_CLOEXEC) < 0)
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(gate[1]);
        if (read(gate[0], &c, 1) < 0)
            _exit(127);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    close(gate[0]);
    if (cr_cgroup_attach(cg, pid) < 0) {
        fprintf(stderr, "attach failed\n");
        exit(1);
    }
    close(gate[1]);
    return pid;
}

static size_t procs(struct cr_cgroup *cg)
{
    size_t n = 0;
    if (cr_cgroup_count_procs(cg, &n) < 0)
        return (size_t)-1;
    return n;
}

/* Waits (bounded: 5 s, or 60 s for many) for the group to hold exactly
 * want processes. */
static bool wait_procs(struct cr_cgroup *cg, size_t want)
{
    for (int i = 0; i < (want > 100 ? 6000 : 500); i++) {
        if (procs(cg) == want)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    fprintf(stderr, "group %s holds %zu processes, want %zu\n", cr_cgroup_rel(cg), procs(cg), want);
    return false;
}

static void reap_orphans(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* Reaps the killed processes re-parented to us (bounded: 5 s) until the
 * group is empty, as corrald (a subreaper) does. */
static bool wait_empty(struct cr_cgroup *cg)
{
    for (int i = 0; i < 500 && procs(cg) != 0; i++) {
        reap_orphans();
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    return wait_procs(cg, 0);
}

int main(void)
{
    enum cr_cgroup_layout l;
    struct cr_cgroup *top = NULL, *w = NULL, *stale = NULL;
    char rel[128];
    unsigned n = 0;
    int status;

    if (geteuid() != 0 || cr_cgroup_detect(&l, NULL) < 0 || l == CR_CGROUP_NONE) {
        printf("skip: needs root and the memory controller\n");
        return 77;
    }
    /* The grandchildren are re-parented to us when their shell dies, so
     * we reap them and the groups can empty, as corrald (a subreaper) does. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return 1;
    snprintf(rel, sizeof rel, "/corral-test-%d-kill", (int)getpid());
    if (cr_cgroup_open(rel, true, &top) < 0)
        return 1;
    snprintf(rel, sizeof rel, "/corral-test-%d-kill/w1-1", (int)getpid());
    CHECK(cr_cgroup_open(rel, true, &w) == 0);
    snprintf(rel, sizeof rel, "/corral-test-%d-kill/w2-1", (int)getpid());
    CHECK(cr_cgroup_open(rel, true, &stale) == 0);
    if (!w || !stale)
        goto out;

    /* A worker with two background children, then itself waiting. */
    pid_t pid = spawn_in(w, "sleep 600 & sleep 600 & exec sleep 600");
    CHECK(wait_procs(w, 3));
    CHECK(cr_cgroup_kill(w, SIGKILL, &n) == 0);
    printf("kill: signalled %u of 3 (%s)\n", n, cr_cgroup_layout_to_string(l));
    CHECK(n == 3);
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(wait_empty(w));
    CHECK(cr_cgroup_remove(w, 1000) == 0);

    /* A child that keeps forking while it is killed: every round catches
     * what the previous one missed. */
    pid = spawn_in(stale, "while :; do sleep 600 & done");
    /* Until the loop has forked at least once (slow in an emulated guest). */
    for (int i = 0; i < 500 && procs(stale) < 2; i++)
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    n = 0;
    CHECK(cr_cgroup_kill_stale(cr_cgroup_rel(top), "w", 0, &n) == 0);
    printf("kill_stale: signalled %u\n", n);
    CHECK(n >= 2);
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    CHECK(wait_empty(stale));
    CHECK(cr_cgroup_remove(stale, 1000) == 0);

    /* More processes than a 4 KiB read of cgroup.procs holds (~1000 pids
     * of 4-7 digits): the list is read whole, and every one is killed. */
    snprintf(rel, sizeof rel, "/corral-test-%d-kill/w3-1", (int)getpid());
    struct cr_cgroup *many = NULL;
    CHECK(cr_cgroup_open(rel, true, &many) == 0);
    if (many) {
        pid = spawn_in(many, "i=1; while [ $i -lt 1000 ]; do sleep 600 & i=$((i + 1)); done; "
                             "exec sleep 600");
        CHECK(wait_procs(many, 1000));
        /* The case this is about: the list is longer than the first read. */
        char path[512], text[16384];
        snprintf(path, sizeof path, "%s/cgroup.procs", cr_cgroup_fs_path(many));
        FILE *f = fopen(path, "re");
        size_t len = f ? fread(text, 1, sizeof text, f) : 0;
        if (f)
            fclose(f);
        if (len < 4096) /* short pids (a young PID namespace): still a kill of 1000 */
            printf("note: cgroup.procs is %zu bytes, read in one go here\n", len);
        n = 0;
        CHECK(cr_cgroup_kill(many, SIGKILL, &n) == 0);
        printf("kill of 1000: signalled %u\n", n);
        CHECK(n == 1000);
        CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
        CHECK(wait_empty(many));
        CHECK(cr_cgroup_remove(many, 1000) == 0);
        cr_cgroup_free(many);
    }

    /* The root group is never killed. */
    struct cr_cgroup *root = NULL;
    if (cr_cgroup_open("/", false, &root) == 0)
        CHECK(cr_cgroup_kill(root, SIGKILL, NULL) == -EPERM);
    cr_cgroup_free(root);

    /* The pure parser. */
    pid_t pids[4];
    size_t np = 0;
    CHECK(cr_cgroup_parse_procs("12\n345\n", pids, 4, &np) == 0 && np == 2 && pids[1] == 345);
    CHECK(cr_cgroup_parse_procs("", pids, 4, &np) == 0 && np == 0);
    CHECK(cr_cgroup_parse_procs("12\nx\n", pids, 4, &np) == -EINVAL);
    CHECK(cr_cgroup_parse_procs("-3\n", pids, 4, &np) == -EINVAL);
    CHECK(cr_cgroup_parse_procs("1\n2\n3\n4\n5\n", pids, 4, &np) == -ENOBUFS);
out:
    reap_orphans();
    if (w)
        cr_cgroup_remove(w, 1000);
    if (stale)
        cr_cgroup_remove(stale, 1000);
    cr_cgroup_remove(top, 1000);
    cr_cgroup_free(w);
    cr_cgroup_free(stale);
    cr_cgroup_free(top);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
