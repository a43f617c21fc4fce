/* cr_io: the descriptors of one generation but its pidfd (reaper.h): its
 * output pipe (forwarded to the log, its tail kept for the post-mortem),
 * the stream form of the notify protocol, the cgroup OOM watch and the exec
 * pipe, and the /proc file its memory is read from. What they deliver goes
 * to the host's sink. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The last output bytes of a generation, kept for its post-mortem. */
#define CR_STDERR_TAIL 4096

struct cr_gen;

/* Takes the three descriptors (closed even on failure) and starts their
 * polls, plus the cgroup's OOM watch. exec_fd is cr_spawn()'s exec pipe:
 * a failed exec sets g->exit.exec_errno and tells the sink (exec_failed),
 * before the reap. -errno (-ENOMEM) when nothing could be kept. */
int cr_io_adopt(struct cr_gen *g, int out_fd, int ns_fd, int exec_fd);
/* Once reaped, before the sink hears of it: the exec pipe's last word (a
 * child writes it before it exits; told to the sink if not yet read). */
void cr_io_read_exec(struct cr_gen *g);
/* True once the exec pipe said the program runs (EOF): a process whose
 * exec failed, or is not known to have succeeded, never served. */
bool cr_io_execd(const struct cr_gen *g);
/* For the post-mortem: what the output pipe still holds, forwarded and
 * kept in the tail. */
void cr_io_drain_output(struct cr_gen *g);
/* The stderr tail, oldest byte first; buf holds CR_STDERR_TAIL bytes.
 * Empty when the generation wrote nothing (or its descriptors are gone). */
void cr_io_tail(const struct cr_gen *g, char *buf, size_t *len);
/* The generation's /proc/<pid>/statm (or smaps_rollup when pss) for the
 * memory watch: opened once the exec succeeded (smaps_rollup binds the
 * address space it was opened on) and kept for the generation — a pread
 * per sample instead of a path walk, an open and a close, and bound to
 * this process even after its pid is reused. reopen: open it afresh (the
 * last read found nothing: the process may have exec'd again, e.g. from a
 * shell wrapper). -1 before the exec, after the release, or when it
 * cannot be opened. */
int cr_io_mem_fd(struct cr_gen *g, bool pss, bool reopen);
/* Resident bytes now, for a view that answers a request (status, metrics):
 * one pread of the statm descriptor the memory watch opened, nothing
 * opened and nothing written (the watch stays the one writer of g->mem).
 * 0 when there is no such descriptor yet, when it is smaps_rollup (--pss:
 * a walk of the whole address space, too dear per request), or when the
 * process has exited (statm reads as zeros until the reap). */
uint64_t cr_io_resident_now(const struct cr_gen *g);
/* --balance reuseport: the worker's own listening socket, bound by
 * corrald for this generation. Without a copy of corrald's its queue could
 * not be read; with one, the socket stays in the reuseport group for as
 * long as corrald holds it, and the kernel keeps hashing connections onto
 * it even after the worker closed its own descriptor (a drain) or died —
 * connections that would wait unanswered and then be reset. So the copy
 * lives exactly as long as the worker accepts: taken at the spawn (fd is
 * owned from then on, closed if the generation has no descriptors),
 * dropped when the worker leaves the accepting states (the table's driver
 * calls cr_io_drop_listener as it does: a drain's SIGTERM, a kill, an exit
 * notice, the reap) and by cr_io_release. */
void cr_io_keep_listener(struct cr_gen *g, int fd);
void cr_io_drop_listener(struct cr_gen *g);
/* The accept queue of that socket, sampled at loop time now: 1 with
 * *length, *max and *seen (its bounds, acceptq.h) set; 0 when corrald
 * holds no such socket (shared balance, or dropped); -errno. */
struct cr_acceptq_seen;
int cr_io_listen_queue(struct cr_gen *g, uint64_t now, uint32_t *length, uint32_t *max,
                       struct cr_acceptq_seen *seen);
/* Lets go of the descriptors; they close once libuv is done with them. */
void cr_io_release(struct cr_gen *g);
