#include "events.h"

#include <errno.h>

int cr_events_subscribe(struct cr_events *bus, cr_event_fn fn, void *userdata)
{
    if (!fn)
        return -EINVAL;
    if (bus->n >= CR_EVENTS_MAX_SUBSCRIBERS)
        return -ENOSPC;
    bus->sub[bus->n].fn = fn;
    bus->sub[bus->n].userdata = userdata;
    bus->n++;
    return 0;
}

void cr_events_publish(const struct cr_events *bus, struct cr_event *ev)
{
    for (unsigned i = 0; i < bus->n; i++)
        bus->sub[i].fn(bus->sub[i].userdata, ev);
}

static const char *const names[_CR_EV_MAX] = {
    [CR_EV_WORKER_STATE] = "worker-state", [CR_EV_WORKER_RECYCLE] = "worker-recycle",
    [CR_EV_WORKER_DIED] = "worker-died",   [CR_EV_TABLE] = "table",
    [CR_EV_CONFIG] = "config",             [CR_EV_RELOAD] = "reload",
    [CR_EV_LAME_DUCK] = "lame-duck",       [CR_EV_STOPPING] = "stopping",
    [CR_EV_FINISHED] = "finished",
    [CR_EV_QUEUE_SATURATED] = "accept-queue-saturated",
    [CR_EV_QUEUE_DRAINED] = "accept-queue-drained",
    [CR_EV_SCALE] = "scale",
};

const char *cr_event_type_to_string(enum cr_event_type t)
{
    return (unsigned)t < _CR_EV_MAX ? names[t] : "?";
}
