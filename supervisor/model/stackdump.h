/* cr_stackdump: a runtime's dump of its threads' stacks, found in the tail
 * of a dead worker's stderr. Python's faulthandler (PYTHONFAULTHANDLER=1,
 * which corrald sets for Python workers) prints every thread's traceback
 * when a fatal signal arrives — the SIGABRT of a hang kill among them:
 *
 *   Fatal Python error: Aborted
 *
 *   Thread 0x00007efcc0dfa6c0 (most recent call first):
 *     File "/srv/app.py", line 3 in other
 *
 *   Current thread 0x00007efcc1c3bb80 (most recent call first):
 *     File "/srv/app.py", line 8 in busy
 *
 *   Extension modules: ... (total: 2)
 *
 * Pure: no I/O. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The threads' part of the last dump in buf[0..len): from its first
 * "Thread 0x…" or "Current thread 0x…" line to the end of its last frame
 * line. true with *ret_off and *ret_len set, and *ret_source the dump's
 * maker ("faulthandler"); false when buf holds none. */
bool cr_stackdump_find(const char *buf, size_t len, size_t *ret_off, size_t *ret_len,
                       const char **ret_source);
