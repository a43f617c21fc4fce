#include "spawnproc.h"

#include "cr_config.h"
#include "spawnvm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Duplicates fd well above the target numbers 0..7, CLOEXEC, so the dup2
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

/* The descriptors a child starts from, all above 9 and CLOEXEC. */
struct fds {
    int err_r, err_w, fd3, fd4, fd5, out, procs;
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void fds_close(struct fds *f)
{
    close_fd(&f->err_r);
    close_fd(&f->err_w);
    close_fd(&f->fd3);
    close_fd(&f->fd4);
    close_fd(&f->fd5);
    close_fd(&f->out);
    close_fd(&f->procs);
}

static int fds_make(const struct cr_spawn_opts *o, struct fds *f)
{
    int errp[2], r;
    *f = (struct fds){-1, -1, -1, -1, -1, -1, -1};
    if (pipe2(errp, O_CLOEXEC) < 0)
        return -errno;
    r = dup_high(errp[0], &f->err_r);
    r = r ?: dup_high(errp[1], &f->err_w);
    close(errp[0]);
    close(errp[1]);
    r = r ?: dup_high(o->fd3, &f->fd3);
    r = r ?: dup_high(o->fd4, &f->fd4);
    r = r ?: dup_high(o->fd5, &f->fd5);
    r = r ?: dup_high(o->out_fd, &f->out);
    r = r ?: dup_high(o->procs_fd, &f->procs);
    if (r < 0)
        fds_close(f);
    return r;
}

static struct cr_spawn_child child_spec(const struct cr_spawn_opts *o, int err_fd, int procs_fd)
{
    return (struct cr_spawn_child){
        .ppid = getpid(), .err_fd = err_fd, .procs_fd = o->procs_fd >= 0 ? procs_fd : -1,
        .listen_pid_slot = o->listen_pid_slot,
        .has_nofile = o->nofile != NULL, .nofile = o->nofile ? *o->nofile : (struct rlimit){0},
        .set_ids = o->set_ids, .uid = o->uid, .gid = o->gid,
        .set_sched = o->set_sched, .nice = o->nice,
    };
}

/* The fork path's child: everything here runs between fork and exec, so
 * async-signal-safe calls only. */
static void __attribute__((noreturn))
child(const struct cr_spawn_opts *o, const struct cr_spawn_child *c, const struct fds *f)
{
    cr_spawn_child_default_signals();

    /* Our own session: a Ctrl-C on corrald's terminal must reach corrald
     * only, which then drains the workers in order. */
    setsid();
    int err = 0;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || (devnull == 0 ? fcntl(0, F_SETFD, 0) : dup2(devnull, 0)) < 0)
        err = errno;
    if (!err && f->out >= 0 && (dup2(f->out, 1) < 0 || dup2(f->out, 2) < 0))
        err = errno;
    if (!err && f->fd3 >= 0 && dup2(f->fd3, 3) < 0)
        err = errno;
    if (!err && f->fd4 >= 0 && dup2(f->fd4, 4) < 0)
        err = errno;
    if (!err && f->fd5 >= 0 && dup2(f->fd5, 5) < 0)
        err = errno;
    if (err) {
        int report[2] = {CR_SPAWN_EXEC, err};
        while (write(f->err_w, report, sizeof(report)) < 0 && errno == EINTR)
            ;
        _exit(127);
    }
    cr_spawn_child_finish(c, o->path, o->argv, o->envp);
}

static pid_t start_by_fork(const struct cr_spawn_opts *o, const struct fds *f)
{
    struct cr_spawn_child c = child_spec(o, f->err_w, f->procs);
    /* Block every signal across fork, as uv_spawn does: until the child has
     * reset them, libuv's handlers would run in the child and write into
     * the signal pipe it shares with the parent. The child unblocks after
     * resetting the dispositions. */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid = fork();
    if (pid == 0)
        child(o, &c, f);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return pid < 0 ? -fork_errno : pid;
}

/* corral-exec's argument vector: the line of the child's last steps, the
 * worker's path, the worker's argv. *ret_argv points into spec; free it. */
static int helper_argv(const struct cr_spawn_opts *o, char *spec, size_t spec_size,
                       char ***ret_argv)
{
    struct cr_spawn_child c = child_spec(o, CR_SPAWN_HELPER_ERR_FD, CR_SPAWN_HELPER_PROCS_FD);
    int r = cr_spawn_child_format(&c, spec, spec_size);
    if (r < 0)
        return r;
    size_t argc = 0;
    while (o->argv[argc])
        argc++;
    char **v = calloc(argc + 4, sizeof(*v));
    if (!v)
        return -ENOMEM;
    v[0] = (char *)"corral-exec";
    v[1] = spec;
    v[2] = (char *)o->path;
    memcpy(v + 3, o->argv, argc * sizeof(*v));
    *ret_argv = v;
    return 0;
}

/* posix_spawn() of corral-exec: glibc starts it with clone(CLONE_VM |
 * CLONE_VFORK), so corrald's page tables are never copied and fork's waits
 * on its libraries' mapping locks never happen; but corrald is held until
 * the child has exec'd corral-exec. The file actions put the worker's fds
 * at 0-5 and corral-exec's own at 6-7; every other fd is CLOEXEC. Returns
 * the pid, or -errno (nothing left running). */
static pid_t start_by_posix_spawn(const struct cr_spawn_opts *o, const struct fds *f,
                                  char **hargv)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t all;
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    int r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (f->out >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->out, 1);
    if (f->out >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->out, 2);
    if (f->fd3 >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->fd3, 3);
    if (f->fd4 >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->fd4, 4);
    if (f->fd5 >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->fd5, 5);
    r = r ?: posix_spawn_file_actions_adddup2(&fa, f->err_w, CR_SPAWN_HELPER_ERR_FD);
    if (f->procs >= 0)
        r = r ?: posix_spawn_file_actions_adddup2(&fa, f->procs, CR_SPAWN_HELPER_PROCS_FD);
    /* Every signal blocked until corral-exec, in a memory of its own,
     * resets the dispositions and the mask (a core dump of a child that
     * shares corrald's memory would take corrald with it on kernels before
     * 5.16); our own session, so a Ctrl-C on corrald's terminal reaches
     * corrald only. */
    r = r ?: posix_spawnattr_setsigdefault(&at, &all);
    r = r ?: posix_spawnattr_setsigmask(&at, &all);
    r = r ?: posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                               POSIX_SPAWN_SETSID);
    pid_t pid = -1;
    r = r ?: posix_spawn(&pid, o->helper, &fa, &at, hargv, o->envp);
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return r ? -r : pid;
}

/* corral-exec, started the cheapest way available: a CLONE_VM child that
 * corrald does not wait for (spawnvm.h), else posix_spawn. A helper that
 * is no longer there to run is noticed before either (-ENOENT, -EACCES):
 * the CLONE_VM child could only report it after the fact. */
static pid_t start_by_helper(const struct cr_spawn_opts *o, const struct fds *f)
{
    char spec[256];
    char **hargv;
    int r = helper_argv(o, spec, sizeof(spec), &hargv);
    if (r < 0)
        return r;
    pid_t pid = -ENOSYS;
    if (o->vm && access(o->helper, X_OK) < 0)
        pid = -errno;
    else if (o->vm)
        pid = cr_spawn_vm_start(o->vm, o->helper, hargv, o->envp,
                                &(struct cr_spawn_vm_fds){.out = f->out, .fd3 = f->fd3,
                                                          .fd4 = f->fd4, .fd5 = f->fd5,
                                                          .err_w = f->err_w, .procs = f->procs});
    if (pid == -ENOSYS)
        pid = start_by_posix_spawn(o, f, hargv);
    free(hargv);
    return pid;
}

bool cr_spawn_helper_unusable(int err)
{
    return err == ENOENT || err == EACCES || err == ENOEXEC || err == ENOTDIR ||
           err == ELIBBAD || err == EPERM || err == ELOOP || err == ENAMETOOLONG ||
           err == EPROTO;
}

static bool helper_missing(int r)
{
    return r < 0 && cr_spawn_helper_unusable(-r);
}

int cr_spawn_helper_probe(const char *helper, struct cr_spawn_vm *vm, int *ret_status)
{
    char *const argv[] = {(char *)"corral-exec", (char *)"--probe", NULL};
    char *const envp[] = {NULL};
    int p[2], err_w = -1, r;
    /* Non-blocking: a report is written before the child exits, and a
     * program that left a descendant holding the pipe must not hang the
     * start-up. */
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    if ((err_w = fcntl(p[1], F_DUPFD_CLOEXEC, 10)) < 0) {
        r = -errno;
        goto out;
    }
    pid_t pid = -ENOSYS;
    if (vm)
        pid = cr_spawn_vm_start(vm, helper, argv, envp,
                                &(struct cr_spawn_vm_fds){.out = -1, .fd3 = -1, .fd4 = -1, .fd5 = -1,
                                                          .err_w = err_w, .procs = -1});
    if (pid == -ENOSYS) {
        /* posix_spawn reports a failed exec itself, and reaps that child. */
        r = posix_spawn(&pid, helper, NULL, NULL, argv, envp);
        pid = r ? -r : pid;
    }
    close(err_w);
    close(p[1]);
    p[1] = -1;
    if ((r = pid) < 0)
        goto out;
    int st, report[2];
    while ((r = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    if (r < 0) {
        r = -errno;
        goto out;
    }
    if (vm)
        (void)cr_spawn_vm_in_flight(vm); /* unmaps the child's block */
    *ret_status = st;
    if (read(p[0], report, sizeof(report)) == (ssize_t)sizeof(report))
        r = -(report[1] > 0 ? report[1] : EIO);
    else
        r = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : WIFEXITED(st) && WEXITSTATUS(st) == 3 ? 1 : 2;
out:
    close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
    return r;
}

/* The parent's half once the child exists: its pidfd, and the exec pipe
 * handed over (f->err_r taken). On failure the child is killed and reaped
 * here: nothing else knows its pid. */
static int parent(pid_t pid, struct fds *f, struct cr_spawn_result *ret)
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
    int fl = fcntl(f->err_r, F_GETFL);
    fcntl(f->err_r, F_SETFL, fl | O_NONBLOCK);
    *ret = (struct cr_spawn_result){.pid = pid, .pidfd = pidfd, .exec_fd = f->err_r};
    f->err_r = -1;
    return 0;
}

int cr_spawn(const struct cr_spawn_opts *o, struct cr_spawn_result *ret, int *ret_helper_errno)
{
    struct fds f;
    int r = fds_make(o, &f);
    *ret_helper_errno = 0;
    if (r < 0)
        return r;
    pid_t pid = o->helper ? start_by_helper(o, &f) : -ENOENT;
    if (o->helper && helper_missing(pid))
        *ret_helper_errno = (int)-pid;
    if (!o->helper || helper_missing(pid))
        pid = start_by_fork(o, &f);
    close_fd(&f.err_w);
    r = pid < 0 ? (int)pid : parent(pid, &f, ret);
    fds_close(&f);
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
    *ret_stage = report[0] == CR_SPAWN_ATTACH || report[0] == CR_SPAWN_HELPER ? report[0]
                                                                              : CR_SPAWN_EXEC;
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

char *cr_spawn_helper_find(void)
{
    const char *how = getenv("CORRAL_SPAWN");
    if (how && strcmp(how, "fork") == 0)
        return NULL;
    char *p = cr_spawn_find_file("CORRAL_EXEC", "corral-exec", X_OK,
                                 CR_LIBEXECDIR "/corral/corral-exec");
    if (p && access(p, X_OK) != 0) {
        free(p);
        return NULL;
    }
    return p;
}
