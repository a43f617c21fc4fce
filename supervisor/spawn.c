#include "spawn.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Duplicates fd well above the target numbers 0..4, CLOEXEC, so the dup2
 * dance in the child can never clobber a source and only the dup2'd copies
 * survive exec. */
static int dup_high(int fd, int *ret)
{
    *ret = -1;
    if (fd < 0)
        return 0;
    int r = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (r < 0)
        return -errno;
    *ret = r;
    return 0;
}

static void write_pid(char *slot, pid_t pid)
{
    char digits[16];
    int n = 0;
    unsigned v = (unsigned)pid;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char *p = slot + strlen("LISTEN_PID=");
    while (n)
        *p++ = digits[--n];
    *p = '\0';
}

/* Supplementary groups, then the group, then the user (the other way round
 * the process would no longer be allowed to change its groups). Verified:
 * a worker that could get root back would make the drop meaningless.
 * Returns 0 or an errno. Async-signal-safe. */
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

/* Everything here runs between fork and exec: async-signal-safe calls only. */
/* Writes the pid's digits into the group's cgroup.procs. Async-signal-safe. */
static int self_attach(int procs_fd)
{
    char digits[16], buf[16];
    int n = 0, len = 0;
    unsigned v = (unsigned)getpid();
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        buf[len++] = digits[--n];
    ssize_t w;
    while ((w = write(procs_fd, buf, (size_t)len)) < 0 && errno == EINTR)
        ;
    return w == len ? 0 : w < 0 ? errno : EIO;
}

static void __attribute__((noreturn))
child(const struct cr_spawn_opts *o, int err_w, int fd3, int fd4, int out, pid_t ppid)
{
    sigset_t all;
    sigemptyset(&all);
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &all, NULL);

    /* Our own session: a Ctrl-C on corrald's terminal must reach corrald
     * only, which then drains the workers in order. */
    setsid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != ppid)
        _exit(127);

    /* Into the worker's cgroup before one instruction of the worker
     * program: the child moves itself, so the parent never waits for the
     * kernel's migration (on v1 it can wait for an RCU grace period). A
     * child that cannot enter its group never execs; the pipe says why. */
    int err = 0, stage = CR_SPAWN_EXEC;
    if (o->procs_fd >= 0 && (err = self_attach(o->procs_fd)) != 0)
        stage = CR_SPAWN_ATTACH;

    int devnull = err ? -1 : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (!err && (devnull < 0 || dup2(devnull, 0) < 0))
        err = errno;
    if (!err && out >= 0 && (dup2(out, 1) < 0 || dup2(out, 2) < 0))
        err = errno;
    if (!err && fd3 >= 0 && dup2(fd3, 3) < 0)
        err = errno;
    if (!err && fd4 >= 0 && dup2(fd4, 4) < 0)
        err = errno;
    if (!err && o->nofile && setrlimit(RLIMIT_NOFILE, o->nofile) < 0)
        err = errno;
    if (!err && o->set_ids) {
        err = drop_ids(o->uid, o->gid);
        /* A credential change clears the parent-death signal: set it again. */
        if (!err && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != ppid))
            err = ESRCH;
    }
    if (!err) {
        if (o->listen_pid_slot >= 0)
            write_pid(o->envp[o->listen_pid_slot], getpid());
        execve(o->path, o->argv, o->envp);
        err = errno;
    }
    int report[2] = {stage, err};
    while (write(err_w, report, sizeof(report)) < 0 && errno == EINTR)
        ;
    _exit(127);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The parent's half once the child exists: its pidfd, and the exec pipe
 * handed over (*err_r taken). On failure the child is killed and reaped
 * here: nothing else knows its pid. */
static int parent(pid_t pid, int *err_r, struct cr_spawn_result *ret)
{
    /* Without pidfds (kernels before 5.3, valgrind) the worker is watched
     * through SIGCHLD instead, and signalled by pid: safe, because a child
     * that corrald has not reaped cannot have its pid reused. */
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0 && errno != ENOSYS) {
        int r = -errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return r;
    }
    /* Not waiting for the exec: on a loaded machine the child may not run
     * for tens of milliseconds. The caller watches the pipe instead. */
    int fl = fcntl(*err_r, F_GETFL);
    fcntl(*err_r, F_SETFL, fl | O_NONBLOCK);
    *ret = (struct cr_spawn_result){.pid = pid, .pidfd = pidfd, .exec_fd = *err_r};
    *err_r = -1;
    return 0;
}

int cr_spawn(const struct cr_spawn_opts *o, struct cr_spawn_result *ret)
{
    int errp[2] = {-1, -1};
    int fd3 = -1, fd4 = -1, out = -1;
    int r;

    if (pipe2(errp, O_CLOEXEC) < 0) {
        r = -errno;
        goto out;
    }
    if ((r = dup_high(o->fd3, &fd3)) < 0 || (r = dup_high(o->fd4, &fd4)) < 0 ||
        (r = dup_high(o->out_fd, &out)) < 0)
        goto out;

    /* Block every signal across fork, as uv_spawn does: until the child has
     * reset them, libuv's handlers would run in the child and write into
     * the signal pipe it shares with the parent. The child unblocks after
     * resetting the dispositions. */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(o, errp[1], fd3, fd4, out, ppid);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (pid < 0) {
        r = -fork_errno;
        goto out;
    }
    close_fd(&errp[1]);
    r = parent(pid, &errp[0], ret);
out:
    close_fd(&errp[0]);
    close_fd(&errp[1]);
    close_fd(&fd3);
    close_fd(&fd4);
    close_fd(&out);
    return r;
}

int cr_spawn_read_exec(int exec_fd, int *ret_stage, int *ret_errno)
{
    int report[2];
    ssize_t n;
    while ((n = read(exec_fd, report, sizeof(report))) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
    if (n != (ssize_t)sizeof(report)) {
        *ret_stage = CR_SPAWN_EXEC;
        *ret_errno = 0; /* EOF: exec worked */
        return 0;
    }
    *ret_stage = report[0] == CR_SPAWN_ATTACH ? CR_SPAWN_ATTACH : CR_SPAWN_EXEC;
    *ret_errno = report[1] > 0 ? report[1] : EIO;
    return 0;
}

static bool runnable(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int cr_spawn_resolve(const char *name, char **ret_path)
{
    if (!name || !*name)
        return -ENOENT;
    if (strchr(name, '/')) {
        /* A path is taken as given: exec reports what is wrong with it. */
        *ret_path = strdup(name);
        return *ret_path ? 0 : -ENOMEM;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchrnul(path, ':');
        size_t dl = (size_t)(colon - path);
        char *cand = malloc(dl + strlen(name) + 2);
        if (!cand)
            return -ENOMEM;
        memcpy(cand, path, dl);
        cand[dl] = '/';
        strcpy(cand + dl + 1, name);
        if (dl && runnable(cand)) {
            *ret_path = cand;
            return 0;
        }
        free(cand);
        path = *colon ? colon + 1 : colon;
    }
    /* Not found: hand the bare name on, so exec's ENOENT is what gets reported. */
    *ret_path = strdup(name);
    return *ret_path ? 0 : -ENOMEM;
}

char *cr_spawn_find_file(const char *env_var, const char *rel, int mode, const char *installed)
{
    const char *env = getenv(env_var);
    if (env && *env)
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash) {
        char *cand;
        *slash = '\0';
        if (asprintf(&cand, "%s/%s", self, rel) < 0)
            return NULL; /* cand is undefined after a failure */
        if (access(cand, mode) == 0)
            return cand;
        free(cand);
    }
    return strdup(installed);
}
