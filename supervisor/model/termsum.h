/* termsum: the summary corrald leaves where an orchestrator looks after the
 * container ended — Kubernetes shows a container's termination message
 * (terminationMessagePath, /dev/termination-log, at most 4096 bytes) in
 * `kubectl describe pod`. It says what corrald knows and the container's
 * exit code cannot: which worker died of what, with the evidence, and why
 * corrald itself exits.
 *
 * Pure: renders into a buffer; the caller writes it (outputs/termlog.c).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "death.h"

struct cr_history;

/* Kubernetes reads at most this many bytes of the message. */
#define CR_TERMSUM_MAX 4096

enum cr_termsum_phase {
    CR_TERMSUM_RUNNING,  /* written at start-up and at every death */
    CR_TERMSUM_STOPPING, /* the stop began (why says what asked for it) */
    CR_TERMSUM_EXITED,   /* the last word: exit_code and why */
};

struct cr_termsum {
    const char *version;
    int pid;
    enum cr_termsum_phase phase;
    int exit_code;   /* CR_TERMSUM_EXITED */
    const char *why; /* what stops it, or why it exits (NULL = not known) */
    int64_t now_ms, started_ms; /* wall clock, unix ms */
    unsigned target, ready;
    const unsigned *by_category;      /* _CR_DEATH_MAX counts, or NULL */
    const struct cr_history *history; /* the deaths, newest first; may be NULL */
};

/* Renders t into buf: a first line on corrald (running, stopping or the
 * exit code and why), a line of death counts by category, then the
 * newest deaths, those corrald did not ask for first (time, worker, pid, category, status as a shell shows it,
 * the classifier's sentence), each cut to a line of at most 320 bytes, as
 * many as fit, and a last line counting the ones left out. Always
 * NUL-terminated and shorter than min(size, CR_TERMSUM_MAX). Returns the
 * length, or -EINVAL for a NULL argument or size < 256. */
int cr_termsum_render(const struct cr_termsum *t, char *buf, size_t size);
