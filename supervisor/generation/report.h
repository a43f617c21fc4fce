/* cr_report: what a worker reported of itself over the notify protocol —
 * the sticky fields of its last reports, its STATUS= text, X_FATAL, and how
 * far it speaks the protocol. One writer: this module (the notify input
 * hands each message to cr_report_take; a spawn resets it). */
#pragma once

#include <stdint.h>

#include "notify.h"

/* How far a worker speaks the protocol; it only goes up. */
enum cr_speech {
    CR_SPEECH_SILENT, /* nothing received */
    CR_SPEECH_SPOKE,  /* some message received (auto readiness: it speaks the protocol) */
    CR_SPEECH_BEATS,  /* WATCHDOG=1 received: a silence of its loop is news */
};

enum cr_fatal {
    CR_FATAL_NONE,
    CR_FATAL_HEAP_LIMIT, /* X_FATAL=heap-limit: it is about to abort at its heap limit */
};

struct cr_report {
    struct cr_notify_msg last; /* sticky: a field is known once its CR_NF_ bit is present */
    enum cr_speech speech;
    enum cr_fatal fatal;
    char status_text[256];
    uint64_t last_at; /* loop ms of the last message (the spawn, before any) */
    uint64_t elu_at;  /* loop ms of the last message with X_ELU; 0: none yet */
    uint64_t elu_period_ms; /* between the last two of those: the worker's report
                               period (CORRAL_REPORT_INTERVAL_MS, --report-interval);
                               0 before two */
};

/* What one message changed, for the caller to act on. */
enum {
    CR_REPORT_FIRST = 1u << 0,      /* the first message of this generation */
    CR_REPORT_FATAL_HEAP = 1u << 1, /* X_FATAL=heap-limit, newly */
};

/* A new generation spawned at loop time now: nothing known. */
void cr_report_reset(struct cr_report *r, uint64_t now);
/* Takes message m received at now: updates what it carries (fields are
 * sticky) and returns the CR_REPORT_ bits of what changed. */
unsigned cr_report_take(struct cr_report *r, const struct cr_notify_msg *m, uint64_t now);
