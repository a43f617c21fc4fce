/* spawncap: how many workers may be starting at once, adapted to how long
 * the loop's turns take while it spawns (pacer.c) — pure arithmetic.
 *
 * --spawn-parallel is the ceiling. Workers that start compete for the
 * cores with corrald: at `scale 1000` on 2 cores, 4 starting at once kept
 * corrald runnable-but-waiting for a second in total and made loop turns
 * of 5-20 ms; 1 at a time kept pings under 7 ms at p99 but took 7.8 s
 * instead of 2.9 s. So the cap halves after a turn longer than
 * CR_SPAWN_LAG_HIGH_US and grows by one after CR_SPAWN_CALM_TURNS turns
 * shorter than CR_SPAWN_LAG_LOW_US: as many at once as the machine takes
 * without holding the loop. */
#pragma once

#include <stdint.h>

#define CR_SPAWN_LAG_HIGH_US 4000
#define CR_SPAWN_LAG_LOW_US 2000
#define CR_SPAWN_CALM_TURNS 16

/* The next cap (1..max) after a turn of turn_us; *calm counts the short
 * turns in a row. A cap of 0 (or above max) starts at max. */
static inline unsigned cr_spawn_cap_adapt(unsigned cap, unsigned max, uint64_t turn_us,
                                          unsigned *calm)
{
    if (max < 1)
        max = 1;
    if (cap == 0 || cap > max)
        cap = max;
    if (turn_us > CR_SPAWN_LAG_HIGH_US) {
        *calm = 0;
        return cap > 1 ? cap / 2 : 1;
    }
    if (turn_us >= CR_SPAWN_LAG_LOW_US) {
        *calm = 0;
        return cap;
    }
    if (++*calm < CR_SPAWN_CALM_TURNS)
        return cap;
    *calm = 0;
    return cap < max ? cap + 1 : max;
}
