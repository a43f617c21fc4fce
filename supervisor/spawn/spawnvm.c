#include "spawnvm.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawnchild.h"

/* What the child runs on, in one private mapping: this header, then
 * argv's and envp's pointer arrays and strings, then the stack up to the
 * end. */
struct block {
    /* CLONE_CHILD_CLEARTID's word: the kernel writes 0 here (and wakes a
     * futex) when the child execs or exits. Until then the block is the
     * child's. */
    pid_t tid;
    struct block *next;
    size_t size;
    const char *helper;
    char **argv;
    char **envp;
    struct cr_spawn_vm_fds fds;
};

struct cr_spawn_vm {
    struct block *head;
    bool unsupported; /* clone refused the flags once: do not ask again */
};

#define STACK_SIZE (32 * 1024)

#if defined(__x86_64__)
#define HAVE_RAW_SYSCALL 1
/* A system call without libc: no errno, no thread-local anything. */
static inline __attribute__((always_inline)) long raw4(long n, long a, long b, long c, long d)
{
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}

#if defined(__clang__)
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))
#else
#define NO_COVERAGE
#endif

/* The child. Not instrumented: ASan's, UBSan's and the fuzzer's hooks would
 * use memory and thread-locals shared with corrald. Every signal stays
 * blocked, as corrald blocked them around the clone, until corral-exec
 * runs in a memory of its own: no handler of corrald's can run here, and
 * no core dump here can take corrald with it (kernels before 5.16 kill
 * every process sharing the dumper's memory). corral-exec resets the
 * dispositions and the mask. Every path ends in execve or exit. */
__attribute__((no_sanitize_address, no_sanitize("undefined"), noinline)) NO_COVERAGE static int
child(void *arg)
{
    struct block *b = arg;
    /* Our own session: a Ctrl-C on corrald's terminal must reach corrald
     * only, which then drains the workers in order. */
    raw4(SYS_setsid, 0, 0, 0, 0);
    long r = raw4(SYS_openat, AT_FDCWD, (long)"/dev/null", O_RDONLY | O_CLOEXEC, 0);
    if (r >= 0)
        r = r == 0 ? raw4(SYS_fcntl, 0, F_SETFD, 0, 0) : raw4(SYS_dup3, r, 0, 0, 0);
    const int from[] = {b->fds.out, b->fds.out,   b->fds.fd3,
                        b->fds.fd4, b->fds.fd5,   b->fds.err_w,
                        b->fds.procs};
    const int to[] = {1, 2, 3, 4, 5, CR_SPAWN_HELPER_ERR_FD, CR_SPAWN_HELPER_PROCS_FD};
    for (int i = 0; r >= 0 && i < 7; i++)
        if (from[i] >= 0)
            r = raw4(SYS_dup3, from[i], to[i], 0, 0);
    int stage = CR_SPAWN_EXEC;
    if (r >= 0) {
        r = raw4(SYS_execve, (long)b->helper, (long)b->argv, (long)b->envp, 0);
        stage = CR_SPAWN_HELPER;
    }
    int report[2] = {stage, (int)-r};
    raw4(SYS_write, b->fds.err_w, (long)report, sizeof(report), 0);
    raw4(SYS_exit, 127, 0, 0, 0);
    return 127;
}
#endif

int cr_spawn_vm_new(struct cr_spawn_vm **ret)
{
    struct cr_spawn_vm *vm = calloc(1, sizeof(*vm));
    if (!vm)
        return -ENOMEM;
    /* valgrind takes a CLONE_VM child that is not a thread for a clone it
     * does not implement, and stops the whole run rather than failing the
     * call. Its preload library gives it away. */
    const char *preload = getenv("LD_PRELOAD");
    vm->unsupported = preload && strstr(preload, "vgpreload");
    *ret = vm;
    return 0;
}

static bool left(struct block *b)
{
    return __atomic_load_n(&b->tid, __ATOMIC_ACQUIRE) == 0;
}

/* Unmaps every block whose child has left it. */
static void sweep(struct cr_spawn_vm *vm)
{
    for (struct block **p = &vm->head; *p;) {
        struct block *b = *p;
        if (left(b)) {
            *p = b->next;
            munmap(b, b->size);
        } else {
            p = &b->next;
        }
    }
}

struct cr_spawn_vm *cr_spawn_vm_free(struct cr_spawn_vm *vm)
{
    if (!vm)
        return NULL;
    sweep(vm);
    free(vm);
    return NULL;
}

bool cr_spawn_vm_usable(const struct cr_spawn_vm *vm)
{
#ifdef HAVE_RAW_SYSCALL
    return vm && !vm->unsupported;
#else
    (void)vm;
    return false;
#endif
}

unsigned cr_spawn_vm_in_flight(struct cr_spawn_vm *vm)
{
    sweep(vm);
    unsigned n = 0;
    for (struct block *b = vm->head; b; b = b->next)
        n++;
    return n;
}

#ifdef HAVE_RAW_SYSCALL
static size_t vec_size(char *const *v, size_t *ret_n)
{
    size_t n = 0, bytes = 0;
    for (; v[n]; n++)
        bytes += strlen(v[n]) + 1;
    *ret_n = n;
    return bytes + (n + 1) * sizeof(char *);
}

/* Copies v into *cursor (pointers first, then strings); returns the copy. */
static char **vec_copy(char *const *v, size_t n, char **cursor)
{
    char **out = (char **)(void *)*cursor;
    char *s = *cursor + (n + 1) * sizeof(char *);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(v[i]) + 1;
        memcpy(s, v[i], l);
        out[i] = s;
        s += l;
    }
    out[n] = NULL;
    *cursor = s;
    return out;
}
#endif

pid_t cr_spawn_vm_start(struct cr_spawn_vm *vm, const char *helper, char *const *argv,
                        char *const *envp, const struct cr_spawn_vm_fds *fds)
{
#ifndef HAVE_RAW_SYSCALL
    (void)vm, (void)helper, (void)argv, (void)envp, (void)fds;
    return -ENOSYS;
#else
    if (vm->unsupported)
        return -ENOSYS;
    sweep(vm);
    size_t na, ne, hl = strlen(helper) + 1;
    size_t data = sizeof(struct block) + hl + vec_size(argv, &na) + vec_size(envp, &ne) + 64;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (data + STACK_SIZE + page - 1) / page * page;
    struct block *b = mmap(NULL, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (b == MAP_FAILED)
        return -errno;
    char *cursor = (char *)(b + 1);
    b->size = size;
    b->helper = memcpy(cursor, helper, hl);
    cursor += hl;
    cursor = (char *)(((uintptr_t)cursor + 15) & ~(uintptr_t)15);
    b->argv = vec_copy(argv, na, &cursor);
    cursor = (char *)(((uintptr_t)cursor + 15) & ~(uintptr_t)15);
    b->envp = vec_copy(envp, ne, &cursor);
    b->fds = *fds;
    b->tid = -1; /* the child's until the kernel clears it */
    char *stack_top = (char *)b + size;

    /* Every signal blocked across the clone, and in the child until
     * corral-exec unblocks them (see child()). */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid = clone(child, stack_top, CLONE_VM | CLONE_CHILD_CLEARTID | SIGCHLD, b, NULL,
                      NULL, &b->tid);
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (pid < 0) {
        munmap(b, size);
        if (err == EINVAL || err == ENOSYS) {
            vm->unsupported = true;
            return -ENOSYS;
        }
        return -err;
    }
    b->next = vm->head;
    vm->head = b;
    return pid;
#endif
}
