/* cr_units: the size and duration grammar. See units.h. */
#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Leading digits only: strtoull would accept blanks, a sign and "0x". */
static int digits(const char **sp, uint64_t *ret)
{
    const char *s = *sp;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    for (; *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *sp = s;
    *ret = v;
    return 0;
}

static int scale(uint64_t v, uint64_t mult, uint64_t max, uint64_t *ret)
{
    if (mult && v > UINT64_MAX / mult)
        return -ERANGE;
    v *= mult;
    if (max && v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

int cr_units_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
    uint64_t v;
    int r;
    if (!s || !ret)
        return -EINVAL;
    if ((r = digits(&s, &v)) < 0)
        return r;
    if (*s)
        return -EINVAL;
    if (v < min || (max && v > max))
        return -ERANGE;
    *ret = v;
    return 0;
}

int cr_units_parse_size(const char *s, uint64_t max, uint64_t *ret)
{
    static const char units[] = "KMGT";
    uint64_t v, mult = 1;
    int r;
    if (!s || !ret)
        return -EINVAL;
    if ((r = digits(&s, &v)) < 0)
        return r;
    /* memchr, not strchr: strchr would find the terminating NUL too. */
    const char *u = memchr(units, *s & ~0x20, sizeof(units) - 1);
    if (u) {
        mult = 1ull << (10 * (u - units + 1));
        s++;
        if (*s == 'i' || *s == 'I')
            s++;
    }
    if (*s == 'b' || *s == 'B')
        s++;
    if (*s)
        return -EINVAL;
    return scale(v, mult, max, ret);
}

int cr_units_parse_ms(const char *s, uint64_t bare_ms, uint64_t max_ms, uint64_t *ret)
{
    static const struct {
        const char *name;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    uint64_t v, mult = bare_ms;
    int r;
    if (!s || !ret)
        return -EINVAL;
    if ((r = digits(&s, &v)) < 0)
        return r;
    if (*s) {
        size_t i, n = sizeof(units) / sizeof(units[0]);
        for (i = 0; i < n; i++)
            if (strcasecmp(s, units[i].name) == 0)
                break;
        if (i == n)
            return -EINVAL;
        mult = units[i].ms;
    }
    return scale(v, mult, max_ms, ret);
}

const char *cr_units_format_size(char *buf, size_t len, uint64_t bytes)
{
    static const char units[] = "KMGT";
    int i = 4;
    while (i > 0 && (bytes == 0 || bytes % (1ull << (10 * i)) != 0))
        i--;
    if (i == 0)
        snprintf(buf, len, "%llu", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%llu%c", (unsigned long long)(bytes >> (10 * i)), units[i - 1]);
    return buf;
}

const char *cr_units_format_ms(char *buf, size_t len, uint64_t ms)
{
    if (ms && ms % 3600000 == 0)
        snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms && ms % 60000 == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
    else if (ms && ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(buf, len, "%llums", (unsigned long long)ms);
    return buf;
}

static const char *format(char *buf, size_t len, enum cr_units_kind kind, uint64_t v)
{
    if (kind == CR_UNITS_SIZE)
        return cr_units_format_size(buf, len, v);
    if (kind == CR_UNITS_DURATION)
        return cr_units_format_ms(buf, len, v);
    snprintf(buf, len, "%llu", (unsigned long long)v);
    return buf;
}

const char *cr_units_range(char *buf, size_t len, enum cr_units_kind kind, uint64_t min,
                           uint64_t max)
{
    char lo[32], hi[32];
    snprintf(buf, len, "%s to %s", format(lo, sizeof(lo), kind, min),
             format(hi, sizeof(hi), kind, max));
    return buf;
}

const char *cr_units_error(char *buf, size_t len, const char *name, const char *value,
                           enum cr_units_kind kind, int r, uint64_t min, uint64_t max)
{
    static const char *const what[] = {
        [CR_UNITS_NUMBER] = "not a whole number",
        [CR_UNITS_SIZE] = "not a size (a whole number with K, M, G or T: 64M)",
        [CR_UNITS_DURATION] = "not a duration (a whole number with ms, s, m or h: 500ms)",
    };
    char range[80];
    if (r == -ERANGE)
        snprintf(buf, len, "--%s: '%s' is out of range (%s)", name, value,
                 cr_units_range(range, sizeof(range), kind, min, max));
    else
        snprintf(buf, len, "--%s: '%s' is %s", name, value, what[kind]);
    return buf;
}
