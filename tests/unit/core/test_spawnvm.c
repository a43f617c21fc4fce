/* Starting a program in a CLONE_VM child that corrald does not wait for
 * (spawnvm.h), for real, through corral-exec: argv and the environment
 * arrive intact, fds land at their numbers, LISTEN_PID is filled in, the
 * worker has its own session, default dispositions and an empty mask
 * whatever corrald's are, a line corral-exec cannot read and a program
 * that cannot be run are reported as CR_SPAWN_HELPER, and every block is
 * unmapped once its child has exec'd or exited. Skipped where the way is not available
 * (not x86-64): cmocka reports them skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawnchild.h"
#include "spawnvm.h"

struct run {
    char out[512];
    int status;
    int report[2];
    ssize_t report_len;
};

/* Runs argv[0] with a pipe at fd 3 and the exec pipe at 5; collects what
 * the child wrote to fd 3, its exit status and the exec pipe's report. */
static pid_t run(struct cr_spawn_vm *vm, const char *helper, char *const *argv,
                 char *const *envp, struct run *ret)
{
    int p3[2], pe[2];
    assert_int_equal(pipe2(p3, O_CLOEXEC), 0);
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    int hi3 = fcntl(p3[1], F_DUPFD_CLOEXEC, 10), hie = fcntl(pe[1], F_DUPFD_CLOEXEC, 10);
    close(p3[1]);
    close(pe[1]);
    pid_t pid = cr_spawn_vm_start(vm, helper, argv, envp,
                                  &(struct cr_spawn_vm_fds){.out = -1, .fd3 = hi3, .fd4 = -1, .fd5 = -1,
                                                            .err_w = hie, .procs = -1});
    close(hi3);
    close(hie);
    if (pid < 0) {
        close(p3[0]);
        close(pe[0]);
        return pid;
    }
    memset(ret, 0, sizeof(*ret));
    size_t n = 0;
    ssize_t r;
    while ((r = read(p3[0], ret->out + n, sizeof(ret->out) - 1 - n)) > 0)
        n += (size_t)r;
    assert_int_equal(waitpid(pid, &ret->status, 0), pid);
    ret->report_len = read(pe[0], ret->report, sizeof(ret->report));
    close(p3[0]);
    close(pe[0]);
    return pid;
}

/* The child exited 127 after saying, on the pipe, that corral-exec could
 * not run (err). */
static void assert_helper_report(const struct run *r, int err)
{
    assert_true(WIFEXITED(r->status) && WEXITSTATUS(r->status) == 127);
    assert_int_equal(r->report_len, (ssize_t)sizeof(r->report));
    assert_int_equal(r->report[0], CR_SPAWN_HELPER);
    assert_int_equal(r->report[1], err);
}

/* corral-exec as meson built it; skips where the CLONE_VM child is not
 * available (not x86-64) or outside meson. */
static const char *helper_or_skip(struct cr_spawn_vm *vm)
{
    const char *helper = getenv("CORRAL_EXEC_BIN");
    if (!cr_spawn_vm_usable(vm) || !helper)
        skip();
    return helper;
}

static void test_arguments_fds_session_signals(void **state)
{
    struct cr_spawn_vm *vm = *state;
    const char *helper = helper_or_skip(vm);
    /* corrald's own state the worker must not keep: the child runs with it
     * (signals blocked until it no longer shares corrald's memory), and
     * corral-exec resets it. Signal 32 is glibc's own (signal() refuses
     * it): ignored here through the system call, as an environment may
     * hand it down (dpkg-buildpackage does). */
    signal(SIGTERM, SIG_IGN);
    unsigned long ign[4] = {(unsigned long)SIG_IGN}, was[4] = {0};
    assert_int_equal(syscall(SYS_rt_sigaction, 32, ign, was, sizeof(uint64_t)), 0);
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    char listen_pid[] = CR_SPAWN_LISTEN_PID_TEMPLATE;
    char *const envp[] = {"FOO=b a r", listen_pid, "PATH=/usr/bin:/bin", NULL};
    struct cr_spawn_child c = {.ppid = getpid(), .err_fd = CR_SPAWN_HELPER_ERR_FD,
                               .procs_fd = -1, .listen_pid_slot = 1};
    char spec[256];
    assert_true(cr_spawn_child_format(&c, spec, sizeof(spec)) > 0);
    char *const argv[] = {"corral-exec", spec, "/bin/sh", "sh", "-c",
                          "printf '%s|%s|%s|%s|' \"$1\" \"$FOO\" \"$LISTEN_PID\" "
                          "\"$(cut -d' ' -f6 /proc/$$/stat)\" >&3;"
                          "echo $$ >&3;"
                          /* read by the shell itself: a grep would race
                           * the shell's own masking around its fork */
                          "while read -r k v; do case $k in SigBlk:|SigIgn:) "
                          "echo \"$k $v\" >&3;; esac; done < /proc/$$/status",
                          "sh", "one two", NULL};
    struct run r;
    pid_t pid = run(vm, helper, argv, envp, &r);
    signal(SIGTERM, SIG_DFL);
    syscall(SYS_rt_sigaction, 32, was, NULL, sizeof(uint64_t));
    sigprocmask(SIG_UNBLOCK, &usr2, NULL);
    if (pid == -ENOSYS)
        skip();
    assert_true(pid > 0);
    assert_true(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    assert_int_equal(r.report_len, 0); /* EOF: exec'd */
    char want[64];
    snprintf(want, sizeof(want), "one two|b a r|%d|%d|%d\n", (int)pid, (int)pid, (int)pid);
    assert_memory_equal(r.out, want, strlen(want));
    assert_non_null(strstr(r.out, "SigBlk: 0000000000000000\n"));
    assert_non_null(strstr(r.out, "SigIgn: 0000000000000000\n"));
    assert_int_equal(cr_spawn_vm_in_flight(vm), 0);
}

/* corral-exec refuses a line it cannot read, on the pipe, as its own
 * stage: corrald then stops using it rather than blaming the worker. */
static void test_bad_line_refused(void **state)
{
    struct cr_spawn_vm *vm = *state;
    const char *helper = helper_or_skip(vm);
    char *const argv[] = {"corral-exec", "corral0:1:5:-:-:-:-:-:-", "/bin/true", "true", NULL};
    char *const envp[] = {NULL};
    struct run r;
    pid_t pid = run(vm, helper, argv, envp, &r);
    if (pid == -ENOSYS)
        skip();
    assert_true(pid > 0);
    assert_helper_report(&r, EPROTO);
}

static void test_missing_program_reported(void **state)
{
    struct cr_spawn_vm *vm = *state;
    char *const argv[] = {"x", NULL};
    char *const envp[] = {NULL};
    struct run r;
    pid_t pid = run(vm, "/nonexistent/corral-exec", argv, envp, &r);
    if (pid == -ENOSYS)
        skip();
    assert_true(pid > 0);
    assert_helper_report(&r, ENOENT);
    assert_int_equal(cr_spawn_vm_in_flight(vm), 0);
}

static void test_many_blocks_all_unmapped(void **state)
{
    struct cr_spawn_vm *vm = *state;
    char *const argv[] = {"true", NULL};
    char *const envp[] = {NULL};
    pid_t pids[64];
    for (int i = 0; i < 64; i++) {
        pids[i] = cr_spawn_vm_start(vm, "/bin/true", argv, envp,
                                    &(struct cr_spawn_vm_fds){-1, -1, -1, -1, -1, -1});
        if (pids[i] == -ENOSYS)
            skip();
        assert_true(pids[i] > 0);
    }
    for (int i = 0; i < 64; i++) {
        int st;
        assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    /* Every child has exec'd and exited: the kernel cleared every tid word. */
    assert_int_equal(cr_spawn_vm_in_flight(vm), 0);
}

static int setup(void **state)
{
    struct cr_spawn_vm *vm;
    if (cr_spawn_vm_new(&vm) < 0)
        return -1;
    *state = vm;
    return 0;
}

static int teardown(void **state)
{
    cr_spawn_vm_free(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_arguments_fds_session_signals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_line_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_program_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_blocks_all_unmapped, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
