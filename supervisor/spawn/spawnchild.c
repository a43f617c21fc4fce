#include "spawnchild.h"

#include "priority_set.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The line is ten fields separated by ':', '-' for an absent one:
 *   corral3:PPID:ERR_FD:PROCS_FD:LISTEN_PID_SLOT:NOFILE_CUR:NOFILE_MAX:UID:GID:NICE
 * NICE is the nice plus 20 (0 to 39).
 * The leading tag makes a line from another build fail to parse rather
 * than be misread. */
#define TAG "corral3"
#define FIELDS 9

int cr_spawn_child_format(const struct cr_spawn_child *c, char *buf, size_t n)
{
    char f[FIELDS][24];
    unsigned long long v[FIELDS] = {
        (unsigned long long)c->ppid, (unsigned long long)c->err_fd,
        (unsigned long long)c->procs_fd, (unsigned long long)c->listen_pid_slot,
        (unsigned long long)c->nofile.rlim_cur, (unsigned long long)c->nofile.rlim_max,
        (unsigned long long)c->uid, (unsigned long long)c->gid,
        (unsigned long long)(c->nice + 20),
    };
    bool absent[FIELDS] = {
        false, false, c->procs_fd < 0, c->listen_pid_slot < 0,
        !c->has_nofile, !c->has_nofile, !c->set_ids, !c->set_ids,
        !c->set_sched,
    };
    for (int i = 0; i < FIELDS; i++)
        snprintf(f[i], sizeof(f[i]), absent[i] ? "-" : "%llu", v[i]);
    int len = snprintf(buf, n, TAG ":%s:%s:%s:%s:%s:%s:%s:%s:%s", f[0], f[1], f[2], f[3],
                       f[4], f[5], f[6], f[7], f[8]);
    return len < 0 || (size_t)len >= n ? -ENOSPC : len;
}

/* One field: digits up to max, or '-' (absent) when allowed. Advances *s
 * past the field and its separator. */
static int field(const char **s, unsigned long long max, bool may_be_absent, bool *ret_absent,
                 unsigned long long *ret)
{
    const char *p = *s;
    if (*p == '-') {
        if (!may_be_absent)
            return -EINVAL;
        *ret_absent = true;
        *ret = 0;
        p++;
    } else {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || v > max)
            return -EINVAL;
        *ret_absent = false;
        *ret = v;
        p = end;
    }
    if (*p != ':' && *p != '\0')
        return -EINVAL;
    *s = *p ? p + 1 : p;
    return *p ? 1 : 0; /* 1: more follows */
}

int cr_spawn_child_parse(const char *s, struct cr_spawn_child *ret)
{
    if (!s || strncmp(s, TAG ":", strlen(TAG ":")) != 0)
        return -EINVAL;
    s += strlen(TAG ":");
    const unsigned long long max[FIELDS] = {
        INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, UINT64_MAX, UINT64_MAX, UINT32_MAX - 1,
        UINT32_MAX - 1, 39,
    };
    const bool optional[FIELDS] = {false, false, true, true, true, true, true, true, true};
    unsigned long long v[FIELDS];
    bool absent[FIELDS];
    for (int i = 0; i < FIELDS; i++) {
        int r = field(&s, max[i], optional[i], &absent[i], &v[i]);
        if (r < 0 || (r == 0) != (i == FIELDS - 1))
            return -EINVAL;
    }
    /* The pairs are present together or not at all; corrald is never pid 0. */
    if (absent[4] != absent[5] || absent[6] != absent[7] || v[0] == 0)
        return -EINVAL;
    *ret = (struct cr_spawn_child){
        .ppid = (pid_t)v[0],
        .err_fd = (int)v[1],
        .procs_fd = absent[2] ? -1 : (int)v[2],
        .listen_pid_slot = absent[3] ? -1 : (int)v[3],
        .has_nofile = !absent[4],
        .nofile = {.rlim_cur = (rlim_t)v[4], .rlim_max = (rlim_t)v[5]},
        .set_ids = !absent[6],
        .uid = (uid_t)v[6],
        .gid = (gid_t)v[7],
        .set_sched = !absent[8],
        .nice = (int)v[8] - 20,
    };
    return 0;
}

bool cr_spawn_child_slot_ok(const char *entry)
{
    return strncmp(entry, "LISTEN_PID=", strlen("LISTEN_PID=")) == 0 &&
           strlen(entry) >= strlen(CR_SPAWN_LISTEN_PID_TEMPLATE);
}

/* Everything below runs between fork and exec: async-signal-safe calls only. */

static int digits_of(unsigned v, char *buf)
{
    char d[16];
    int n = 0, len = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        buf[len++] = d[--n];
    return len;
}

/* Writes the pid's digits into the group's cgroup.procs. */
static int self_attach(int procs_fd)
{
    char buf[16];
    int len = digits_of((unsigned)getpid(), buf);
    ssize_t w;
    while ((w = write(procs_fd, buf, (size_t)len)) < 0 && errno == EINTR)
        ;
    return w == len ? 0 : w < 0 ? errno : EIO;
}

/* Supplementary groups, then the group, then the user (the other way round
 * the process would no longer be allowed to change its groups). Verified:
 * a worker that could get root back would make the drop meaningless.
 * Returns 0 or an errno. */
static int drop_ids(uid_t uid, gid_t gid)
{
    if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        return errno;
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return errno;
    if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
        return EPERM;
    if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
        return EPERM;
    return 0;
}

/* The child dies with corrald; and if corrald died before the signal was
 * armed, the child is an orphan already and must not start a worker. */
static int die_with_parent(pid_t ppid)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return errno;
    return getppid() == ppid ? 0 : ESRCH;
}

void cr_spawn_child_default_signals(void)
{
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    /* glibc keeps the signals below SIGRTMIN for itself (thread
     * cancellation, setxid) and its signal() refuses them; one inherited
     * as ignored (seen under dpkg-buildpackage) would stay ignored in the
     * worker. The system call resets them: an all-zero kernel sigaction is
     * SIG_DFL, no flags, an empty mask, whatever the architecture's layout. */
    for (int s = 32; s < SIGRTMIN; s++) {
        unsigned long dfl[4] = {0};
        syscall(SYS_rt_sigaction, s, dfl, NULL, sizeof(uint64_t));
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

void cr_spawn_child_finish(const struct cr_spawn_child *c, const char *path, char *const *argv,
                           char *const *envp)
{
    int stage = CR_SPAWN_EXEC;
    int err = die_with_parent(c->ppid);
    /* Into the worker's cgroup before one instruction of the worker
     * program: the child moves itself, so corrald never waits for the
     * kernel's migration (on v1 it can wait for an RCU grace period). A
     * child that cannot enter its group never execs; the pipe says why. */
    if (!err && c->procs_fd >= 0 && (err = self_attach(c->procs_fd)) != 0)
        stage = CR_SPAWN_ATTACH;
    if (!err && c->has_nofile && setrlimit(RLIMIT_NOFILE, &c->nofile) < 0)
        err = errno;
    /* corrald runs above its workers (priority.h); a worker gets the nice
     * corrald was started with and the kernel's default slice. Lowering
     * one's own priority needs no privilege. A unit's LimitNICE= (corrald's
     * nice without CAP_SYS_NICE) is inherited: the worker's RLIMIT_NICE is
     * lowered to the nice it runs at, raised or not (priority-boost 0, a
     * raise that failed), so no worker can climb over corrald. */
    if (!err && c->set_sched)
        err = cr_priority_set_self(c->nice, 0);
    if (!err)
        err = cr_priority_cap_nice_here();
    /* A credential change clears the parent-death signal: arm it again. */
    if (!err && c->set_ids && (err = drop_ids(c->uid, c->gid)) == 0)
        err = die_with_parent(c->ppid);
    /* The slot must hold the padded template: an index alone could point
     * at another variable if the environment moved. */
    char *slot = !err && c->listen_pid_slot >= 0 ? envp[c->listen_pid_slot] : NULL;
    if (slot && !cr_spawn_child_slot_ok(slot))
        err = EPROTO;
    if (!err) {
        if (slot) {
            char *p = slot + strlen("LISTEN_PID=");
            p[digits_of((unsigned)getpid(), p)] = '\0';
        }
        execve(path, argv, envp);
        err = errno;
    }
    int report[2] = {stage, err};
    while (write(c->err_fd, report, sizeof(report)) < 0 && errno == EINTR)
        ;
    _exit(127);
}
