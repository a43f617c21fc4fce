/* priority_set: the one scheduling call a new worker makes before exec
 * (spawnchild.c), apart from priority.c's raise so that corral-exec links
 * nothing else. */
#pragma once

#include <stdint.h>

/* Sets the calling thread's nice and slice (0: the kernel's default),
 * policy SCHED_OTHER. Async-signal-safe (between fork and exec). Returns
 * 0 or an errno. */
int cr_priority_set_self(int nice, uint64_t slice_ns);
