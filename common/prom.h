/* cr_prom: a builder of the Prometheus text exposition format (0.0.4),
 * used by corrald's /metrics and the worker's. The buffer grows as needed up
 * to a hard cap (max, CR_PROM_MAX when 0); past it, or when memory runs out, the builder
 * turns failed, ignores further writes, and cr_prom_take reports -ENOMEM.
 *
 *   struct cr_prom p = CR_PROM_INIT;
 *   cr_prom_family(&p, "x_bytes", "gauge", "What x is.");
 *   cr_prom_sample(&p, "x_bytes", "worker=\"1\"", 42);
 *   r = cr_prom_take(&p, &text, &len);   // caller frees text
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CR_PROM_MAX (64u << 20)

struct cr_prom {
    char *buf;
    size_t len, cap;
    size_t max; /* hard cap on cap; 0 = CR_PROM_MAX */
    bool failed;
};

#define CR_PROM_INIT                                                                               \
    {                                                                                              \
        0                                                                                          \
    }

/* printf into the buffer: for lines the helpers below do not cover. */
void cr_prom_printf(struct cr_prom *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "# HELP name help" and "# TYPE name type". */
void cr_prom_family(struct cr_prom *p, const char *name, const char *type, const char *help);

/* "name{labels} value" (no braces when labels is NULL or empty); the value
 * is written exactly, as "%.17g" writes it (a whole number as its digits).
 * labels are written as given: the caller quotes them. */
void cr_prom_sample(struct cr_prom *p, const char *name, const char *labels, double value);

/* Below this many microseconds, us / 1e6 as a double is within half a
 * microsecond of the true value, so "%.6f" prints its exact digits. */
#define CR_PROM_US_EXACT_BELOW UINT64_C(1000000000000000)

/* A sample of us microseconds in seconds, as "%.6f" prints us / 1e6
 * ("0.001500" for 1500). */
void cr_prom_sample_us(struct cr_prom *p, const char *name, const char *labels, uint64_t us);

/* A family with one unlabelled sample. */
void cr_prom_gauge(struct cr_prom *p, const char *name, const char *help, double value);
void cr_prom_counter(struct cr_prom *p, const char *name, const char *help, double value);

/* Hands the text over (NUL-terminated, "" when nothing was written) and
 * resets p. Returns 0, or -ENOMEM when the builder failed (then nothing is
 * handed over and the buffer is freed). ret_len may be NULL. */
int cr_prom_take(struct cr_prom *p, char **ret_text, size_t *ret_len);
