/* corral-worker's command line and environment defaults. Pure: no I/O
 * besides getenv, so it is unit-testable. Sizes and durations follow
 * common/units.h, the grammar corrald uses too. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_wopts {
    uint64_t heap_limit;
    uint64_t loop_resolution_ms;
    uint64_t report_interval_ms;
    uint64_t drain_timeout_ms;
    uint64_t header_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t keepalive_timeout_ms;
    unsigned exec_concurrency; /* 0 = unlimited */
    unsigned exec_queue;
    uint64_t max_body;
    uint64_t max_header;
    uint64_t file_size;
    char listen_host[64];
    int listen_port; /* -1: not given */
    const char *burn;
    bool help;
    bool version;
};

/* Fills o from defaults, the environment (CORRAL_HEAP_LIMIT,
 * CORRAL_MEMORY_MAX) and argv; flags win. ncpu is the default exec
 * concurrency. Returns 0, or -EINVAL with a message in err. */
int cr_wopts_parse(struct cr_wopts *o, int argc, char **argv, unsigned ncpu, char *err,
                   size_t errlen);

extern const char cr_wopts_usage[];

/* The i-th numeric option's name and range as --help must print it, for
 * the test that keeps cr_wopts_usage true. -ENOENT past the last. */
int cr_wopts_range_text(size_t i, const char **ret_name, char *buf, size_t len);
