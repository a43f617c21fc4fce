/* taskstats: the netlink messages of the kernel's taskstats interface
 * (linux/taskstats.h) that say a task is exiting — built and read without
 * I/O, so that the parser is unit-tested and fuzzed alone. exitnotice.c
 * does the socket.
 *
 * The kernel sends them from do_exit() before it frees the address space
 * (taskstats_exit() precedes exit_mm()): a worker's death is known while
 * its memory is still being torn down — 3 ms for a 40 MiB Node process,
 * 100 ms for one of 1 GiB on this machine — instead of after, when the
 * pidfd says it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What one exit message says: a thread (pid) ended; when whole_group, the
 * last thread of process tgid did, so the process is dead. A message with
 * only a thread (no group part) is a single-threaded process's death when
 * pid is a process id, or one thread's end in a process that goes on: the
 * caller tells them apart. */
struct cr_taskstats_exit {
    pid_t pid;
    pid_t tgid; /* 0 without the group part */
    bool whole_group;
};

/* Calls fn for each exit found in a buffer of netlink messages as read
 * from the socket (family: the taskstats generic netlink family id).
 * Anything else (errors, other messages, truncated or malformed
 * attributes) is skipped. Returns the number of exits found. */
size_t cr_taskstats_scan(const void *buf, size_t len, uint16_t family,
                         void (*fn)(void *ctx, const struct cr_taskstats_exit *e), void *ctx);

/* The family id from a CTRL_CMD_GETFAMILY answer, 0 when absent; *error
 * gets a netlink error (negative errno) if the answer is one, else 0. */
uint16_t cr_taskstats_family_id(const void *buf, size_t len, int *error);

/* Whether a process whose exit message came is on its way out, from the
 * stat of its main thread (/proc/<pid>/stat from the third field on, as
 * cr_proc_stat gives it): the kernel's flags (9th field) hold PF_EXITING,
 * set before the message is sent, and — for a message of the main thread
 * alone (whole_group false) — no other thread is left (num_threads, the
 * 20th). */
bool cr_taskstats_exiting(const char *stat, bool whole_group);

/* Whether buf holds the kernel's answer (NLMSG_ERROR) to request seq;
 * *error gets its code: 0 for an acknowledgement, else a negative errno. */
bool cr_taskstats_ack(const void *buf, size_t len, uint32_t seq, int *error);

/* Builds the request messages into buf (size bytes): CTRL_CMD_GETFAMILY
 * for "TASKSTATS", and TASKSTATS_CMD_GET registering (or deregistering)
 * a listener for the cpus in cpulist ("0-7"), which the kernel acknowledges
 * (NLM_F_ACK: an error comes back as one). Returns the length, or 0 if
 * buf is too small. */
size_t cr_taskstats_getfamily_msg(void *buf, size_t size, uint32_t seq);
size_t cr_taskstats_listen_msg(void *buf, size_t size, uint16_t family, uint32_t seq,
                               const char *cpulist, bool on);
