/* spawnvm: starting corral-exec without ever waiting for it.
 *
 * posix_spawn() shares corrald's memory with the child (no page tables
 * copied) but, being vfork, holds corrald until the child has exec'd; in
 * a trace of `scale 1000` that wait was 0.44 ms median, 4 ms at p99 and up
 * to 8.8 ms, most of it the child waiting for a CPU behind the workers
 * that were starting. Here the child shares corrald's memory the same way
 * (CLONE_VM) without CLONE_VFORK: corrald returns as soon as the child
 * exists. The child runs a few raw system calls on a stack of its own
 * (its session, fds 0-6) and execs corral-exec, which resets signal
 * dispositions and mask and does the rest as on the other paths
 * (spawnchild.h).
 *
 * Sharing memory without vfork's pause has three rules, kept here:
 *   - the child touches only its own block (stack, argv, envp) and
 *     read-only data, and makes system calls without libc (errno and every
 *     other thread-local live in memory it shares with corrald's loop);
 *   - the block is freed only once the kernel has cleared the child's tid
 *     word in it (CLONE_CHILD_CLEARTID: at its exec or its exit; kernels
 *     before 5.16 skip that for a child that dies dumping core, whose
 *     block then stays mapped: 36 KiB, for a child killed by a signal
 *     before it could exec);
 *   - every signal stays blocked from before the clone until corral-exec
 *     runs in a memory of its own: no handler of corrald's runs in the
 *     child, and no core dump of the child takes corrald with it.
 * Only on x86-64; elsewhere, where clone refuses these flags, and under
 * valgrind (which aborts on them), cr_spawn_vm_start says -ENOSYS and the
 * caller uses posix_spawn. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct cr_spawn_vm;

/* The fds the child puts at 1-6 (out at 1 and 2), -1 for none. All are
 * CLOEXEC in corrald and above 9. */
struct cr_spawn_vm_fds {
    int out, fd3, fd4, fd5, err_w, procs;
};

/* A new, empty set of blocks in flight. -ENOMEM. */
int cr_spawn_vm_new(struct cr_spawn_vm **ret);

/* Frees the set and the blocks whose child has left them; a block still in
 * use (a child that has neither exec'd nor exited yet) is left mapped, as
 * unmapping it would crash that child. Returns NULL. */
struct cr_spawn_vm *cr_spawn_vm_free(struct cr_spawn_vm *vm);

/* Starts helper with argv and envp (copied) in a CLONE_VM child. Returns
 * its pid (reap it like any child), -ENOSYS when this way is not
 * available here (use another), or -errno. Never waits for the child. */
pid_t cr_spawn_vm_start(struct cr_spawn_vm *vm, const char *helper, char *const *argv,
                        char *const *envp, const struct cr_spawn_vm_fds *fds);

/* Whether cr_spawn_vm_start may work here (false for NULL). */
bool cr_spawn_vm_usable(const struct cr_spawn_vm *vm);

/* How many blocks are still mapped (for tests and status). */
unsigned cr_spawn_vm_in_flight(struct cr_spawn_vm *vm);
