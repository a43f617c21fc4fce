/* corral-burn MS: burns MS milliseconds of CPU time (not wall time: on a
 * crowded machine it takes longer, since more CPU-bound children than
 * cores only share them), then exits 0. The child program of the worker's /exec endpoint. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: corral-burn MS\n");
        return argc == 2 ? 0 : 2;
    }
    char *end;
    errno = 0;
    unsigned long ms = strtoul(argv[1], &end, 10);
    if (errno || !*argv[1] || *end || argv[1][0] == '-' || ms > 3600000ul) {
        fprintf(stderr, "corral-burn: MS must be an integer in 0..3600000\n");
        return 2;
    }
    unsigned long long stop = cpu_ns() + ms * 1000000ull;
    volatile unsigned long long x = 0;
    while (cpu_ns() < stop)
        for (int i = 0; i < 10000; i++)
            x += (unsigned long long)i * 2654435761u;
    return 0;
}
