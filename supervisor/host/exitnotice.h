/* exitnotice: an input — the kernel's word that a process is exiting, from
 * its taskstats exit messages (see taskstats.h), which come before the
 * kernel frees the process's memory. With it a warm spare takes a dead
 * worker's slot at once, however big the dead worker was; without it
 * (no CAP_NET_ADMIN, another network or pid namespace, a kernel without
 * CONFIG_TASKSTATS) corrald learns of the death from the pidfd, after the
 * teardown, as before.
 *
 * The kernel sends a message for every task that exits on the cpus
 * listened to — all of them — so the socket is opened only while spares
 * are kept; a lost message (full socket buffer) costs only the head start. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "taskstats.h"

struct cr_exitnotice;

typedef void (*cr_exitnotice_fn)(void *ctx, const struct cr_taskstats_exit *e);

/* Opens the taskstats socket, registers a listener for every possible cpu
 * and polls it on loop, calling fn for each exit. NULL on failure, with
 * why (a sentence) in buf. */
struct cr_exitnotice *cr_exitnotice_open(uv_loop_t *loop, cr_exitnotice_fn fn, void *ctx,
                                         char *why, size_t whylen);
/* Deregisters and closes; NULL is a no-op. */
void cr_exitnotice_close(struct cr_exitnotice *en);
/* Why the socket stopped being read (a poll error), or NULL while it is. */
const char *cr_exitnotice_failed(const struct cr_exitnotice *en);
