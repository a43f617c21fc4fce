/* The wall clock, in the unit events and reports carry. A clock read is
 * not pure: model/ takes times as arguments and never reads this. */
#pragma once

#include <stdint.h>
#include <time.h>

/* Wall-clock milliseconds since the epoch. */
static inline uint64_t cr_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
