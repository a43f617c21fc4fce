/* cr_decimal: whole numbers as decimal text, for the outputs that print
 * thousands of them per request (status, /metrics). snprintf("%llu") costs
 * five times as much, and cJSON's and Prometheus' "%g" doubles far more
 * (measured at 256 workers: most of a status request). Pure. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Room for any uint64_t (20 digits) and the NUL. */
#define CR_DECIMAL_U64_SIZE 21

/* printf's "%.15g" (cJSON's number format) and "%.17g" (the Prometheus
 * builder's) print a whole number as its plain digits below these bounds,
 * in exponent form from them on: below, cr_decimal_u64's text stands in
 * for theirs byte for byte. */
#define CR_DECIMAL_G15_BELOW UINT64_C(1000000000000000)
#define CR_DECIMAL_G17_BELOW UINT64_C(100000000000000000)

/* Writes v's decimal digits (no sign, no leading zeros; "0" for 0) and a
 * NUL into buf. Returns the number of digits. */
size_t cr_decimal_u64(char buf[CR_DECIMAL_U64_SIZE], uint64_t v);
