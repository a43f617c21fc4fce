/* cr_units: the one size and duration grammar of corrald, corralctl and
 * the worker.
 *
 *   size      = digits [ "K" | "M" | "G" | "T" ] [ "i" ] [ "B" ]   (1024-based;
 *               also a bare "B"; case-insensitive)
 *   duration  = digits [ "ms" | "s" | "m" | "h" ]
 *
 * Whole numbers only: no sign, no blanks, no decimal point, no hex. A bare
 * number of a duration is in the caller's unit (corrald: seconds for most
 * timeouts, milliseconds for MS options; the worker: milliseconds).
 * Overflow is checked. Pure: no I/O, no logging.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Parses a size into bytes, refusing anything above max (0 = UINT64_MAX).
 * Returns 0, -EINVAL (not a size) or -ERANGE (above max or overflow). */
int cr_units_parse_size(const char *s, uint64_t max, uint64_t *ret);

/* Parses a duration into milliseconds; a bare number is multiplied by
 * bare_ms (1 = milliseconds, 1000 = seconds). Returns 0, -EINVAL or -ERANGE
 * (above max_ms, 0 = UINT64_MAX). */
int cr_units_parse_ms(const char *s, uint64_t bare_ms, uint64_t max_ms, uint64_t *ret);

/* Parses a whole number in [min, max]. Returns 0, -EINVAL or -ERANGE. */
int cr_units_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

enum cr_units_kind { CR_UNITS_NUMBER, CR_UNITS_SIZE, CR_UNITS_DURATION };

/* The one error text for a refused value, the same in every program:
 *   --NAME: 'VALUE' is not a size (a whole number with K, M, G or T: 64M)
 *   --NAME: 'VALUE' is not a duration (a whole number with ms, s, m or h: 500ms)
 *   --NAME: 'VALUE' is not a whole number
 *   --NAME: 'VALUE' is out of range (MIN to MAX)
 * r is the parser's return value (-ERANGE picks the last form); min and max
 * are in bytes, milliseconds or units and are written in the grammar
 * (64M, 30s). Returns buf. */
const char *cr_units_error(char *buf, size_t len, const char *name, const char *value,
                           enum cr_units_kind kind, int r, uint64_t min, uint64_t max);

/* Writes a range "MIN to MAX" in the grammar, as the error and --help
 * print it. Returns buf. */
const char *cr_units_range(char *buf, size_t len, enum cr_units_kind kind, uint64_t min,
                           uint64_t max);

/* Writes a byte count the way the grammar reads it back: the largest exact
 * unit (65536 → "64K", 3 << 30 → "3G", 1000 → "1000"). Returns buf. */
const char *cr_units_format_size(char *buf, size_t len, uint64_t bytes);

/* Writes milliseconds in the largest exact unit (90000 → "90s",
 * 3600000 → "1h", 250 → "250ms"). Returns buf. */
const char *cr_units_format_ms(char *buf, size_t len, uint64_t ms);
