/* corralctl's points in time: see when.h. */
#include "when.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "units.h"

#define UNIX_S_FROM  1000000000ull    /* 2001-09-09: a bare number this big is a time */
#define UNIX_MS_FROM 1000000000000ull /* ... and this big, in milliseconds */

/* n digits at *p into *ret, moving *p. */
static bool digits(const char **p, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *ret = v;
    return true;
}

static bool lit(const char **p, char c)
{
    if (**p != c)
        return false;
    (*p)++;
    return true;
}

/* ISO 8601 as when.h writes it; false when s is not one. */
static bool parse_iso(const char *s, int64_t *ret_ms)
{
    const char *p = s;
    struct tm tm = {0};
    int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
    if (!digits(&p, 4, &y) || !lit(&p, '-') || !digits(&p, 2, &mo) || !lit(&p, '-') ||
        !digits(&p, 2, &d))
        return false;
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!digits(&p, 2, &h) || !lit(&p, ':') || !digits(&p, 2, &mi))
            return false;
        if (lit(&p, ':')) {
            if (!digits(&p, 2, &sec))
                return false;
            if (lit(&p, '.') || lit(&p, ',')) {
                int n = 0, scale = 100;
                if (*p < '0' || *p > '9')
                    return false;
                while (*p >= '0' && *p <= '9') {
                    if (n < 3)
                        ms += (*p - '0') * scale, scale /= 10;
                    p++, n++;
                }
            }
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return false;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t;
    if (!*p) { /* no zone: local time */
        tm.tm_isdst = -1;
        t = mktime(&tm);
    } else {
        int off = 0;
        if (lit(&p, 'Z') || lit(&p, 'z')) {
            off = 0;
        } else {
            int sign = *p == '+' ? 1 : *p == '-' ? -1 : 0, oh, om = 0;
            if (!sign)
                return false;
            p++;
            if (!digits(&p, 2, &oh))
                return false;
            if (*p) {
                lit(&p, ':');
                if (!digits(&p, 2, &om))
                    return false;
            }
            if (oh > 23 || om > 59)
                return false;
            off = sign * (oh * 3600 + om * 60);
        }
        if (*p)
            return false;
        t = timegm(&tm) - off;
    }
    if (t == (time_t)-1)
        return false;
    *ret_ms = (int64_t)t * 1000 + ms;
    return true;
}

int ctl_parse_since(const char *s, int64_t now_ms, int64_t *ret_ms, char *err, size_t errlen)
{
    uint64_t v;
    if (!s || !*s)
        goto bad;
    if (s[0] == '@') {
        /* Seconds that fit in int64 milliseconds: v * 1000 below must not
         * overflow (a signed overflow, undefined). */
        if (cr_units_parse_uint(s + 1, 0, INT64_MAX / 1000, &v) < 0)
            goto bad;
        *ret_ms = (int64_t)v * 1000;
        return 0;
    }
    if (strspn(s, "0123456789") == strlen(s) && cr_units_parse_uint(s, 0, INT64_MAX, &v) == 0 &&
        v >= UNIX_S_FROM) {
        *ret_ms = v >= UNIX_MS_FROM ? (int64_t)v : (int64_t)v * 1000;
        return 0;
    }
    if (parse_iso(s, ret_ms))
        return 0;
    /* A duration ago, in the grammar of every corral program. */
    if (cr_units_parse_ms(s, 1000, (uint64_t)now_ms, &v) == 0) {
        *ret_ms = now_ms - (int64_t)v;
        return 0;
    }
bad:
    snprintf(err, errlen,
             "--since: '%s' is neither a duration (10m, 2h), an ISO 8601 time "
             "(2026-12-01T09:00:00Z) nor a Unix time (@1796000000)",
             s ? s : "");
    return -EINVAL;
}

const char *ctl_fmt_iso_utc(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char day[32];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03dZ", day, (int)(ms - (int64_t)t * 1000));
    return buf;
}

const char *ctl_fmt_local(int64_t ms, char *buf, size_t len)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}
