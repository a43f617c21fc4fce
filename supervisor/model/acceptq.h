/* cr_acceptq: the listening socket's accept queue as corrald sees it — the
 * connections the kernel has completed and no worker has accepted yet.
 * This is the one figure that says "add workers": a queue that does not
 * empty means every worker is busy when connections arrive.
 *
 * The accept watch (inputs/acceptwatch.c) samples each listening socket
 * on a timer (TCP_INFO: tcpi_unacked is the queue's length, tcpi_sacked
 * its backlog) and hands the readings here; this module keeps what they
 * mean. Pure: no I/O, no clock (the caller passes its loop time).
 *
 * What "waited" means, precisely: a socket's queue was last seen empty at
 * the sample at time E (or first sampled then); every connection waiting
 * at a later sample at time T arrived after E, so none of them has waited
 * longer than T - E. waited_ms is that bound, T - E, 0 when the queue is
 * seen empty. It is an upper bound at the sample resolution: a connection
 * that arrived just after E has waited T - E; one that arrived just before
 * T, next to nothing. A queue that turns over without ever being empty
 * at a sample (workers that accept a connection each as they come free,
 * but never catch up) keeps growing the bound: the workers have not caught
 * up in that time, which is what the bound is for. With one socket per
 * worker (--balance reuseport) each socket has its own bound and waited_ms
 * is the largest.
 *
 * The other bound, nonempty_ms: the queue was seen non-empty at every
 * sample from the first one after E (at time F) to T; T - F is how long it
 * has surely not been empty (at the samples), whatever the gaps between
 * them. waited_ms >= nonempty_ms, and the two differ by the gap before F.
 *
 * Saturated: nonempty_ms at or above a threshold (--saturated-after): the
 * queue was seen non-empty at every sample for that long. The lower bound,
 * so that a queue first seen non-empty after a long gap between samples
 * (the watch samples an empty queue less often) is not saturated at once.
 * It ends (drained) at the first round in which no socket is over the
 * threshold any more: every queue that was has been seen empty (or went
 * away with its worker). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One listening socket's queue across samples. */
struct cr_acceptq_sock {
    bool seen;         /* sampled at least once */
    uint64_t empty_at; /* E: loop ms of the last sample that saw it empty, or of the first */
    uint64_t busy_at;  /* F: the first sample after E that saw it non-empty; 0 = none */
};

/* What one sample of a socket says, in ms (both 0 when it is empty). */
struct cr_acceptq_seen {
    uint64_t waited_ms;   /* T - E: no connection waiting has waited longer */
    uint64_t nonempty_ms; /* T - F: seen non-empty at every sample for this long */
};

/* Takes one sample of a socket's queue (length connections waiting) at
 * loop time now. */
struct cr_acceptq_seen cr_acceptq_sock_observe(struct cr_acceptq_sock *s, uint32_t length,
                                               uint64_t now);

/* The figures the view shows and an autoscaler reads: one place, one
 * writer (the accept watch, through the functions below). */
struct cr_acceptq_figures {
    bool known;            /* at least one listening TCP socket was sampled */
    uint32_t sockets;      /* sampled in the last round (1 shared, or one per worker) */
    uint32_t length;       /* connections waiting, over every socket, at the last round */
    uint32_t max;          /* the backlog: at most this many can wait (summed) */
    uint64_t waited_ms;    /* the upper bound above, the largest of any socket; 0 = none waits */
    uint64_t nonempty_ms;  /* the lower bound above, the largest of any socket */
    uint64_t sampled_at;   /* loop ms of the last round */
    bool saturated;        /* waited_ms above the threshold (and not drained since) */
    uint64_t saturated_at; /* loop ms the current (or last) saturation began */
    uint64_t saturations;  /* saturations begun since corrald started */
    /* The current (or last) saturation's worst: the longest queue, the
     * largest bound. */
    uint32_t peak_length;
    uint64_t peak_waited_ms;
};

enum cr_acceptq_change {
    CR_ACCEPTQ_SAME,
    CR_ACCEPTQ_SATURATED, /* waited_ms went above the threshold */
    CR_ACCEPTQ_DRAINED,   /* no queue has waited that long any more */
};

/* A round of samples: begun zeroed, one add per socket read, ended. */
struct cr_acceptq_round {
    uint32_t sockets, length, max;
    uint64_t waited_ms, nonempty_ms;
};

void cr_acceptq_round_add(struct cr_acceptq_round *r, uint32_t length, uint32_t max,
                          struct cr_acceptq_seen seen);
/* Ends a round at loop time now into f: the figures become the round's,
 * and the saturation is judged against threshold_ms (0: off — no
 * saturation begins, and one under way ends without an event). A round
 * with no socket (none listening: every worker's own socket closed, or a
 * socket that is not TCP) leaves the figures unknown. Returns what
 * changed. */
enum cr_acceptq_change cr_acceptq_end(struct cr_acceptq_figures *f,
                                      const struct cr_acceptq_round *r, uint64_t now,
                                      uint64_t threshold_ms);

/* The log line of a change as of the last round, e.g. "accept queue
 * saturated: 20 connections waiting, the queue not seen empty for 100 ms,
 * the oldest waiting up to 200 ms (backlog 4096)". Returns snprintf's
 * count. */
int cr_acceptq_format(const struct cr_acceptq_figures *f, enum cr_acceptq_change c, char *buf,
                      size_t size);
