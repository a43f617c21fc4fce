/* cr_cgroup: the processes of a group, and killing all of them.
 *
 * A worker's death, a stop and a reload must leave nothing of the worker
 * behind: PR_SET_PDEATHSIG covers the direct child only, so a worker's
 * children (`sh -c 'sleep 600 & exec worker'`) would keep the listening
 * socket and the group. The group is the one complete list of what a worker
 * started, so it is what gets killed. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cr_cgroup_internal.h"

#define PROCS_TEXT_MAX (256 * 1024) /* ~36,000 pids: more than any worker group has */
#define KILL_ROUNDS 64

int cr_cgroup_parse_procs(const char *text, pid_t *pids, size_t cap, size_t *ret_n)
{
    size_t n = 0;
    const char *p = text;
    if (!text || !ret_n)
        return -EINVAL;
    while (*p) {
        char *end;
        long v;
        if (*p == '\n') {
            p++;
            continue;
        }
        errno = 0;
        v = strtol(p, &end, 10);
        if (end == p || errno || v <= 0 || v > INT32_MAX || (*end != '\n' && *end != '\0'))
            return -EINVAL;
        if (n == cap)
            return -ENOBUFS;
        pids[n++] = (pid_t)v;
        p = end;
    }
    *ret_n = n;
    return 0;
}

int cr_cgroup_read_procs(struct cr_cgroup *cg, pid_t **ret, size_t *ret_n)
{
    char small[4096];
    char *text = small;
    size_t size = sizeof small, n = 0;
    pid_t *pids = NULL;
    if (!cg || !ret || !ret_n)
        return -EINVAL;
    /* A dying worker's group is empty, or holds a few leftovers: a stack
     * buffer first, and the big one (whose allocation is an mmap and an
     * munmap, at every death) only when that is full. */
    int r = cr_cgroup_read_file(cg->path, "cgroup.procs", small, sizeof small);
    if (r == -EFBIG) {
        size = PROCS_TEXT_MAX;
        text = malloc(size);
        if (!text)
            return -ENOMEM;
        r = cr_cgroup_read_file(cg->path, "cgroup.procs", text, size);
    }
    if (r >= 0) {
        /* A pid takes at least two bytes of the text ("1\n"). */
        pids = malloc(sizeof *pids * (size / 2));
        r = pids ? cr_cgroup_parse_procs(text, pids, size / 2, &n) : -ENOMEM;
    }
    if (text != small)
        free(text);
    if (r < 0) {
        free(pids);
        return r;
    }
    *ret = pids;
    *ret_n = n;
    return 0;
}

int cr_cgroup_count_procs(struct cr_cgroup *cg, size_t *ret_n)
{
    pid_t *pids = NULL;
    size_t n = 0;
    int r = cr_cgroup_read_procs(cg, &pids, &n);
    free(pids);
    if (r >= 0 && ret_n)
        *ret_n = n;
    return r;
}

/* True when pid's memory cgroup is still cg: a pid read from cgroup.procs
 * may have exited and been reused by the time it is signalled. Checked
 * after the pidfd is open, so the pidfd names the process that was checked. */
static bool still_member(const struct cr_cgroup *cg, pid_t pid)
{
    char *rel = NULL;
    bool same = cr_cgroup_of_pid(pid, &rel) == 0 && strcmp(rel, cg->rel) == 0;
    free(rel);
    return same;
}

/* 1 when the process was signalled, 0 when it was already gone or had
 * left the group, -errno otherwise. */
static int kill_member(const struct cr_cgroup *cg, pid_t pid, int sig)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    int r = 0;
    if (fd < 0) {
        if (errno == ESRCH)
            return 0;
        if (errno != ENOSYS)
            return -errno;
        /* Kernels before 5.3 (and valgrind): plain kill, with the
         * membership check narrowing the reuse window. */
        if (!still_member(cg, pid))
            return 0;
        return kill(pid, sig) == 0 ? 1 : errno == ESRCH ? 0 : -errno;
    }
    if (still_member(cg, pid))
        r = syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0 ? 1 : errno == ESRCH ? 0 : -errno;
    close(fd);
    return r;
}

static bool seen(const pid_t *done, size_t ndone, pid_t pid)
{
    for (size_t i = 0; i < ndone; i++)
        if (done[i] == pid)
            return true;
    return false;
}

/* Rounds of read-and-signal until a round finds no process it has not
 * signalled yet: a process forked before its parent got the signal shows
 * up in the next read. */
static int kill_rounds(struct cr_cgroup *cg, int sig, unsigned *ret_signalled)
{
    pid_t *done = NULL;
    size_t ndone = 0, cap = 0;
    int r = 0;
    for (unsigned round = 0; round < KILL_ROUNDS && r >= 0; round++) {
        pid_t *pids = NULL;
        size_t n = 0;
        bool fresh = false;
        r = cr_cgroup_read_procs(cg, &pids, &n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
            if (seen(done, ndone, pids[i]))
                continue;
            fresh = true;
            if (ndone == cap) {
                size_t ncap = cap ? cap * 2 : 16;
                pid_t *p = realloc(done, sizeof *p * ncap);
                if (!p) {
                    r = -ENOMEM;
                    break;
                }
                done = p;
                cap = ncap;
            }
            done[ndone++] = pids[i];
            int k = kill_member(cg, pids[i], sig);
            if (k < 0)
                r = k;
            else if (k > 0 && ret_signalled)
                (*ret_signalled)++;
        }
        free(pids);
        if (!fresh)
            break;
    }
    free(done);
    return r;
}

int cr_cgroup_kill(struct cr_cgroup *cg, int sig, unsigned *ret_signalled)
{
    unsigned count = 0;
    int r;
    if (!cg || sig <= 0)
        return -EINVAL;
    if (strcmp(cg->rel, "/") == 0)
        return -EPERM;
    /* v2 (5.14+): one write kills every process, including those forked
     * while the kernel walks the group. Count them first, for the log. */
    if (sig == SIGKILL && cg->layout == CR_CGROUP_V2 && cr_cgroup_has_file(cg->path, "cgroup.kill")) {
        size_t n = 0;
        (void)cr_cgroup_count_procs(cg, &n);
        r = cr_cgroup_write_file(cg->path, "cgroup.kill", "1");
        if (r >= 0) {
            if (ret_signalled)
                *ret_signalled = (unsigned)n;
            return 0;
        }
    }
    r = kill_rounds(cg, sig, &count);
    if (r < 0)
        return r;
    if (ret_signalled)
        *ret_signalled = count;
    return 0;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits, until the deadline, for the group to hold no process. */
static void wait_empty(struct cr_cgroup *cg, uint64_t deadline)
{
    size_t n = 1;
    while (cr_cgroup_count_procs(cg, &n) == 0 && n > 0 && mono_ms() < deadline)
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
}

struct stale {
    uint64_t deadline;
    unsigned killed;
};

static int kill_one(const char *rel, void *userdata)
{
    struct stale *st = userdata;
    struct cr_cgroup *cg = NULL;
    unsigned n = 0;
    int r = cr_cgroup_open(rel, false, &cg);
    if (r == -ENOENT)
        return 0;
    if (r >= 0 && (r = cr_cgroup_kill(cg, SIGKILL, &n)) >= 0 && n) {
        st->killed += n;
        wait_empty(cg, st->deadline);
    }
    cr_cgroup_free(cg);
    return r;
}

int cr_cgroup_kill_stale(const char *parent_rel, const char *prefix, unsigned timeout_ms,
                         unsigned *ret_killed)
{
    struct stale st = {.deadline = mono_ms() + timeout_ms};
    int r = cr_cgroup_each_child(parent_rel, prefix, kill_one, &st);
    if (r >= 0 && ret_killed)
        *ret_killed = st.killed;
    return r;
}
