/* Real-kernel test of the freezer (cr_cgroup_freeze.c): a busy process in a
 * frozen group makes no progress, resumes after thaw, and a frozen process
 * killed with SIGKILL dies once thawed; the group is removed afterwards.
 * v1: a group of the freezer hierarchy; v2: cgroup.freeze of a memory group.
 * Also the pure parsers. Needs root and a freezer; exits 77 where absent.
 * Groups live under /corral-test-<pid>-freeze at the root and are removed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static void ms(long n)
{
    nanosleep(&(struct timespec){.tv_sec = n / 1000, .tv_nsec = (n % 1000) * 1000000L}, NULL);
}

static void parsers(void)
{
    enum cr_freeze_state s = CR_FREEZE_THAWED;
    CHECK(cr_freezer_parse_state(CR_FREEZER_V1, "FROZEN\n", &s) == 0 && s == CR_FREEZE_FROZEN);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V1, "FREEZING\n", &s) == 0 && s == CR_FREEZE_FREEZING);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V1, "THAWED", &s) == 0 && s == CR_FREEZE_THAWED);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V1, "FROZENX\n", &s) == -EINVAL);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V2, "populated 1\nfrozen 1\n", &s) == 0 &&
          s == CR_FREEZE_FROZEN);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V2, "populated 1\nfrozen 0\n", &s) == 0 &&
          s == CR_FREEZE_THAWED);
    CHECK(cr_freezer_parse_state(CR_FREEZER_V2, "populated 1\n", &s) == -EINVAL);
    char *rel = NULL;
    CHECK(cr_freezer_parse_proc_cgroup("7:blkio:/\n6:freezer:/a/b\n0::/\n", &rel) == 0 && rel &&
          strcmp(rel, "/a/b") == 0);
    free(rel);
    rel = NULL;
    CHECK(cr_freezer_parse_proc_cgroup("4:cpu,freezer,memory:/x\n", &rel) == 0 && rel &&
          strcmp(rel, "/x") == 0);
    free(rel);
    CHECK(cr_freezer_parse_proc_cgroup("4:memory:/x\n0::/\n", &rel) == -ENOENT);
}

static bool wait_state(struct cr_freezer *f, enum cr_freeze_state want)
{
    for (int i = 0; i < 500; i++) {
        enum cr_freeze_state s;
        if (cr_freezer_state(f, &s) == 0 && s == want)
            return true;
        ms(10);
    }
    return false;
}

/* A child spinning on a shared counter, in the freezer group from before exec
 * (here: before its first increment, behind a gate). */
static pid_t spin(struct cr_freezer *f, struct cr_cgroup *cg, volatile unsigned long *counter)
{
    int gate[2];
    char c;
    if (pipe2(gate, O_CLOEXEC) < 0)
        exit(1);
    pid_t pid = fork();
    if (pid == 0) {
        close(gate[1]);
        if (read(gate[0], &c, 1) < 0)
            _exit(1);
        for (;;)
            (*counter)++;
    }
    close(gate[0]);
    if ((cg && cr_cgroup_attach(cg, pid) < 0) || cr_freezer_attach(f, pid) < 0) {
        fprintf(stderr, "attach failed\n");
        kill(pid, SIGKILL);
        exit(1);
    }
    close(gate[1]);
    return pid;
}

/* Waits (bounded: 5 s, on a loaded machine the child may wait for a core)
 * for the counter to move past from. */
static bool moves(volatile unsigned long *counter, unsigned long from)
{
    for (int i = 0; i < 500 && *counter <= from; i++)
        ms(10);
    return *counter > from;
}

static void freeze_thaw_kill(struct cr_freezer *f, struct cr_cgroup *cg)
{
    volatile unsigned long *counter =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (counter == MAP_FAILED)
        exit(1);
    pid_t pid = spin(f, cg, counter);
    CHECK(moves(counter, 0));
    CHECK(cr_freezer_set(f, true) == 0);
    CHECK(wait_state(f, CR_FREEZE_FROZEN));
    unsigned long a = *counter;
    ms(100);
    CHECK(*counter == a); /* frozen: no progress at all */
    CHECK(cr_freezer_set(f, false) == 0);
    CHECK(wait_state(f, CR_FREEZE_THAWED));
    CHECK(moves(counter, a)); /* thawed: it runs again */

    /* Killed while frozen: dead once thawed (v1 keeps the kill pending). */
    CHECK(cr_freezer_set(f, true) == 0);
    CHECK(wait_state(f, CR_FREEZE_FROZEN));
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(cr_freezer_set(f, false) == 0);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    munmap((void *)counter, 4096);
}

int main(void)
{
    parsers();
    enum cr_freezer_kind k = CR_FREEZER_NONE;
    if (geteuid() != 0 || cr_freezer_detect(&k) < 0 || k == CR_FREEZER_NONE) {
        fprintf(stderr, "skip: needs root and a cgroup freezer (%s)\n", cr_freezer_kind_to_string(k));
        return failures ? 1 : 77;
    }
    char rel[64];
    snprintf(rel, sizeof rel, "/corral-test-%d-freeze", (int)getpid());
    struct cr_cgroup *cg = NULL, *parent = NULL;
    struct cr_freezer *f = NULL;
    int r;
    if (k == CR_FREEZER_V2) {
        char leaf[96];
        snprintf(leaf, sizeof leaf, "%s/s1", rel);
        r = cr_cgroup_open(rel, true, &parent);
        r = r < 0 ? r : cr_cgroup_open(leaf, true, &cg);
        r = r < 0 ? r : cr_freezer_open(cg, NULL, false, &f);
    } else {
        char leaf[96];
        snprintf(leaf, sizeof leaf, "%s/s1", rel);
        r = cr_freezer_open(NULL, leaf, true, &f);
    }
    if (r < 0) {
        fprintf(stderr, "cannot open a %s group under %s: %s\n", cr_freezer_kind_to_string(k), rel,
                strerror(-r));
        return 1;
    }
    printf("freezer: %s at %s\n", cr_freezer_kind_to_string(k), cr_freezer_rel(f));
    freeze_thaw_kill(f, cg);

    /* Clean up everything this test made. */
    for (int i = 0; i < 100 && (k == CR_FREEZER_V2 ? cr_cgroup_remove(cg, 0) : cr_freezer_remove(f)) == -EBUSY; i++)
        ms(10);
    if (k == CR_FREEZER_V1) {
        struct cr_freezer *top = NULL;
        CHECK(cr_freezer_open(NULL, rel, false, &top) == 0);
        CHECK(cr_freezer_remove(top) == 0);
        CHECK(cr_freezer_open(NULL, rel, false, &top) == -ENOENT);
        cr_freezer_free(top);
    } else {
        CHECK(cr_cgroup_remove(parent, 1000) == 0);
    }
    cr_freezer_free(f);
    cr_cgroup_free(cg);
    cr_cgroup_free(parent);
    printf("%s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
