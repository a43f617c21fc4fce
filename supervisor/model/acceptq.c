/* The accept queue's state: see acceptq.h. */
#include "acceptq.h"

#include <stdio.h>

struct cr_acceptq_seen cr_acceptq_sock_observe(struct cr_acceptq_sock *s, uint32_t length,
                                               uint64_t now)
{
    /* The first sample bounds nothing before it (a socket handed over by
     * systemd may hold connections older than corrald): it counts from
     * there. A clock that went back starts afresh too. */
    if (!s->seen || length == 0 || now < s->empty_at || (s->busy_at && now < s->busy_at)) {
        s->seen = true;
        s->empty_at = now;
        s->busy_at = 0;
    }
    if (!length)
        return (struct cr_acceptq_seen){0};
    if (!s->busy_at)
        s->busy_at = now;
    return (struct cr_acceptq_seen){.waited_ms = now - s->empty_at,
                                    .nonempty_ms = now - s->busy_at};
}

void cr_acceptq_round_add(struct cr_acceptq_round *r, uint32_t length, uint32_t max,
                          struct cr_acceptq_seen seen)
{
    r->sockets++;
    r->length += length;
    r->max += max;
    if (seen.waited_ms > r->waited_ms)
        r->waited_ms = seen.waited_ms;
    if (seen.nonempty_ms > r->nonempty_ms)
        r->nonempty_ms = seen.nonempty_ms;
}

enum cr_acceptq_change cr_acceptq_end(struct cr_acceptq_figures *f,
                                      const struct cr_acceptq_round *r, uint64_t now,
                                      uint64_t threshold_ms)
{
    f->known = r->sockets > 0;
    f->sockets = r->sockets;
    f->length = r->length;
    f->max = r->max;
    f->waited_ms = r->waited_ms;
    f->nonempty_ms = r->nonempty_ms;
    f->sampled_at = now;
    bool over = threshold_ms && f->known && r->nonempty_ms >= threshold_ms;
    if (f->saturated && over) {
        if (r->length > f->peak_length)
            f->peak_length = r->length;
        if (r->waited_ms > f->peak_waited_ms)
            f->peak_waited_ms = r->waited_ms;
        return CR_ACCEPTQ_SAME;
    }
    if (over) {
        f->saturated = true;
        f->saturated_at = now;
        f->saturations++;
        f->peak_length = r->length;
        f->peak_waited_ms = r->waited_ms;
        return CR_ACCEPTQ_SATURATED;
    }
    if (!f->saturated)
        return CR_ACCEPTQ_SAME;
    f->saturated = false;
    /* Turned off (threshold 0) is no drain: nothing was seen to empty. */
    return threshold_ms ? CR_ACCEPTQ_DRAINED : CR_ACCEPTQ_SAME;
}

int cr_acceptq_format(const struct cr_acceptq_figures *f, enum cr_acceptq_change c, char *buf,
                      size_t size)
{
    if (c == CR_ACCEPTQ_SATURATED)
        return snprintf(buf, size,
                        "accept queue saturated: %u connection%s waiting, the queue not seen "
                        "empty for %llu ms, the oldest waiting up to %llu ms (backlog %u%s)",
                        f->length, f->length == 1 ? "" : "s",
                        (unsigned long long)f->nonempty_ms, (unsigned long long)f->waited_ms,
                        f->max, f->sockets > 1 ? ", summed over the workers' sockets" : "");
    if (c == CR_ACCEPTQ_DRAINED)
        return snprintf(buf, size,
                        "accept queue drained after %llu ms saturated: %u connection%s waiting "
                        "now; at worst %u waited up to %llu ms",
                        (unsigned long long)(f->sampled_at - f->saturated_at), f->length,
                        f->length == 1 ? "" : "s", f->peak_length,
                        (unsigned long long)f->peak_waited_ms);
    return snprintf(buf, size, "accept queue: %u of %u waiting, up to %llu ms", f->length, f->max,
                    (unsigned long long)f->waited_ms);
}
