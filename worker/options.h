/* corral-worker's command line and environment defaults. Pure: no I/O
 * besides getenv, so it is unit-testable. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_wopts {
    size_t heap_limit;
    uint64_t loop_resolution_ms;
    uint64_t report_interval_ms;
    uint64_t drain_timeout_ms;
    uint64_t header_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t keepalive_timeout_ms;
    unsigned exec_concurrency; /* 0 = unlimited */
    unsigned exec_queue;
    size_t max_body;
    size_t max_header;
    size_t file_size;
    char listen_host[64];
    int listen_port; /* -1: not given */
    const char *burn;
    bool help;
    bool version;
};

/* Parses "123", "64K", "256M", "2G" (powers of 1024). Returns 0 or -EINVAL. */
int cr_wopts_parse_size(const char *s, size_t *ret);
/* Parses "250", "250ms", "10s" into milliseconds. Returns 0 or -EINVAL. */
int cr_wopts_parse_ms(const char *s, uint64_t *ret);

/* Fills o from defaults, the environment (CORRAL_HEAP_LIMIT,
 * CORRAL_MEMORY_MAX) and argv; flags win. ncpu is the default exec
 * concurrency. Returns 0, or -EINVAL with a message in err. */
int cr_wopts_parse(struct cr_wopts *o, int argc, char **argv, unsigned ncpu, char *err,
                   size_t errlen);

extern const char cr_wopts_usage[];
