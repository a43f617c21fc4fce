/* corralctl's points in time: what --since accepts, and how corralctl
 * writes a time for scripts. Pure but for the local time zone (mktime,
 * localtime_r): no I/O.
 *
 *   since = duration                 "10m", "2h", "90s", "500ms"; a bare
 *                                    number under 10^9 is seconds (the
 *                                    project's grammar, common/units.h):
 *                                    that long before now
 *         | "@" digits               Unix time in seconds
 *         | digits (>= 10^9)          Unix time: seconds, or milliseconds
 *                                    from 10^12 on
 *         | ISO 8601                 YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|±HH[:]MM],
 *                                    local time without a zone
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* s as Unix milliseconds (now_ms for a duration's "ago"). 0, or -EINVAL
 * with a message in err ("--since: '…' is not …"). */
int ctl_parse_since(const char *s, int64_t now_ms, int64_t *ret_ms, char *err, size_t errlen);

/* Unix ms as ISO 8601 in UTC with milliseconds: "2026-12-01T09:14:03.250Z".
 * Returns buf. */
const char *ctl_fmt_iso_utc(int64_t ms, char *buf, size_t len);
/* Unix ms as local "YYYY-MM-DD HH:MM:SS". Returns buf. */
const char *ctl_fmt_local(int64_t ms, char *buf, size_t len);
