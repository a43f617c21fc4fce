/* The shell-wrapper rule against real processes: `sh -c 'exec …'` dies of
 * the signal itself, `sh -c '…; exit $?'` exits 128+N. The siginfo comes
 * from a real waitid(); the classification is the pure function. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "death.h"

/* Runs /bin/sh -c script, collects its stderr (up to size-1 bytes) and its
 * siginfo. No core files: RLIMIT_CORE is 0 in the child. */
static void run_sh(const char *script, siginfo_t *info, char *err, size_t size, size_t *err_len)
{
    int fds[2];
    pid_t pid;
    ssize_t n;

    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        dup2(fds[1], STDERR_FILENO);
        execl("/bin/sh", "sh", "-c", script, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *err_len = 0;
    while (*err_len + 1 < size && (n = read(fds[0], err + *err_len, size - 1 - *err_len)) > 0)
        *err_len += (size_t)n;
    err[*err_len] = '\0';
    close(fds[0]);
    memset(info, 0, sizeof(*info));
    assert_int_equal(waitid(P_PID, (id_t)pid, info, WEXITED), 0);
}

static struct cr_death_evidence evidence(const siginfo_t *info)
{
    return (struct cr_death_evidence){.cld_code = info->si_code, .cld_status = info->si_status};
}

static void test_exec_gives_real_signal(void **state)
{
    siginfo_t info;
    char err[256];
    size_t len;
    struct cr_death_result r;

    run_sh("exec sh -c 'kill -KILL $$'", &info, err, sizeof(err), &len);
    assert_int_equal(info.si_code, CLD_KILLED);
    assert_int_equal(info.si_status, SIGKILL);

    struct cr_death_evidence ev = evidence(&info);
    ev.kill_reason = CR_KILL_STOP_TIMEOUT;
    ev.kill_signal = SIGKILL;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_STOP_TIMEOUT);
    assert_false(r.via_shell);
    assert_int_equal(r.signal, SIGKILL);
    assert_int_equal(r.shell_status, 137);
}

static void test_exit_status_gives_137(void **state)
{
    siginfo_t info;
    char err[256];
    size_t len;
    struct cr_death_result r;

    run_sh("sh -c 'kill -KILL $$'; exit $?", &info, err, sizeof(err), &len);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, 137);

    /* with supporting evidence: the signal */
    struct cr_death_evidence ev = evidence(&info);
    ev.kill_reason = CR_KILL_STOP_TIMEOUT;
    ev.kill_signal = SIGKILL;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_STOP_TIMEOUT);
    assert_true(r.via_shell);
    assert_int_equal(r.signal, SIGKILL);
    assert_int_equal(r.shell_status, 137);

    /* without: just an exit code */
    ev = evidence(&info);
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_EXIT_ERROR);
    assert_false(r.via_shell);
    assert_int_equal(r.exit_code, 137);
}

static void test_heap_abort_through_shell(void **state)
{
    siginfo_t info;
    char err[256];
    size_t len;
    struct cr_death_result r;

    run_sh("sh -c 'echo \"FATAL: heap limit reached\" >&2; kill -ABRT $$'; exit $?", &info, err,
           sizeof(err), &len);
    assert_int_equal(info.si_code, CLD_EXITED);
    assert_int_equal(info.si_status, 134);

    struct cr_death_evidence ev = evidence(&info);
    ev.stderr_tail = err;
    ev.stderr_len = len;
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_HEAP_LIMIT);
    assert_true(r.via_shell);
    assert_int_equal(r.signal, SIGABRT);

    run_sh("exec sh -c 'kill -ABRT $$'", &info, err, sizeof(err), &len);
    assert_int_equal(info.si_status, SIGABRT);
    assert_true(info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED);
    ev = evidence(&info);
    assert_int_equal(cr_death_classify(&ev, &r), 0);
    assert_int_equal(r.category, CR_DEATH_ABORT);
    assert_int_equal(r.shell_status, 134);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_gives_real_signal),
        cmocka_unit_test(test_exit_status_gives_137),
        cmocka_unit_test(test_heap_abort_through_shell),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
