/* The slots: see slot.h. */
#include "slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cr_slot *cr_slots_get(const struct cr_slots *s, int id)
{
    return id > 0 && (size_t)id < s->n ? s->v[id] : NULL;
}

bool cr_slot_vacant(const struct cr_slot *slot)
{
    return !slot->holder && !slot->replacement;
}

struct cr_slot *cr_slots_open(struct cr_slots *s, int id)
{
    if (id <= 0 || id > CR_SLOT_MAX_ID)
        return NULL;
    if ((size_t)id >= s->n) {
        size_t n = (size_t)id + 16;
        struct cr_slot **v = realloc(s->v, n * sizeof(*v));
        if (!v)
            return NULL;
        memset(v + s->n, 0, (n - s->n) * sizeof(*v));
        s->v = v;
        s->n = n;
    }
    struct cr_slot *slot = s->v[id];
    if (slot && !cr_slot_vacant(slot))
        return NULL;
    if (!slot && !(slot = s->v[id] = calloc(1, sizeof(*slot))))
        return NULL;
    unsigned generation = slot->generation;
    *slot = (struct cr_slot){.id = id, .generation = generation, .last_death = _CR_DEATH_MAX};
    return slot;
}

int cr_slots_lowest_free(const struct cr_slots *s, int *from)
{
    int id = *from > 0 ? *from : 1;
    while ((size_t)id < s->n && s->v[id] && !cr_slot_vacant(s->v[id]))
        id++;
    *from = id + 1;
    return id;
}

void cr_slots_done(struct cr_slots *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    *s = (struct cr_slots){0};
}

unsigned cr_slot_next_generation(struct cr_slot *slot)
{
    return ++slot->generation ? slot->generation : ++slot->generation;
}

bool cr_death_is_oom_kill(enum cr_death d)
{
    return d == CR_DEATH_OOM_OWN_LIMIT || d == CR_DEATH_OOM_ANCESTOR_LIMIT ||
           d == CR_DEATH_OOM_SYSTEM || d == CR_DEATH_OOM_USERSPACE;
}

void cr_slot_record_death(struct cr_slot *slot, const struct cr_postmortem *pm)
{
    if (cr_death_is_oom_kill(pm->category))
        slot->oom_kills++;
    slot->last_death = pm->category;
    snprintf(slot->last_death_reason, sizeof(slot->last_death_reason), "%s", pm->reason);
}
