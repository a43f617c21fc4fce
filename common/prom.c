/* cr_prom: Prometheus text builder. See prom.h. */
#include "prom.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decimal.h"

static bool grow(struct cr_prom *p, size_t need)
{
    if (p->buf && p->cap - p->len > need)
        return true; /* room already: no realloc per write */
    size_t max = p->max ? p->max : CR_PROM_MAX;
    size_t cap = p->cap ? p->cap : 4096;
    while (cap - p->len <= need) {
        if (cap >= max)
            return false;
        cap *= 2;
    }
    if (cap > max)
        cap = max;
    if (cap - p->len <= need)
        return false;
    char *b = realloc(p->buf, cap);
    if (!b)
        return false;
    p->buf = b;
    p->cap = cap;
    return true;
}

/* One pass when the line fits in what is left (nearly always): printing
 * every line twice, once to measure, doubled /metrics' cost. */
void cr_prom_printf(struct cr_prom *p, const char *fmt, ...)
{
    va_list ap;
    if (p->failed)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(p->buf ? p->buf + p->len : NULL, p->buf ? p->cap - p->len : 0, fmt, ap);
    va_end(ap);
    if (n >= 0 && p->buf && (size_t)n < p->cap - p->len) {
        p->len += (size_t)n;
        return;
    }
    if (n < 0 || !grow(p, (size_t)n)) {
        p->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(p->buf + p->len, p->cap - p->len, fmt, ap);
    va_end(ap);
    p->len += (size_t)n;
}

static void put(struct cr_prom *p, const char *s, size_t n)
{
    if (p->failed)
        return;
    if (!grow(p, n)) {
        p->failed = true;
        return;
    }
    memcpy(p->buf + p->len, s, n);
    p->len += n;
}

static void put_str(struct cr_prom *p, const char *s)
{
    put(p, s, strlen(s));
}

/* "name{labels} " (no braces without labels). */
static void sample_head(struct cr_prom *p, const char *name, const char *labels)
{
    put_str(p, name);
    if (labels && *labels) {
        put(p, "{", 1);
        put_str(p, labels);
        put(p, "}", 1);
    }
    put(p, " ", 1);
}

void cr_prom_family(struct cr_prom *p, const char *name, const char *type, const char *help)
{
    cr_prom_printf(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void cr_prom_sample(struct cr_prom *p, const char *name, const char *labels, double value)
{
    /* Most samples are whole numbers (bytes, counts): below the bound
     * their digits are what "%.17g" prints, at a fraction of its cost. */
    if (!signbit(value) && value < (double)CR_DECIMAL_G17_BELOW &&
        value == (double)(uint64_t)value) {
        char d[CR_DECIMAL_U64_SIZE];
        size_t n = cr_decimal_u64(d, (uint64_t)value);
        d[n++] = '\n';
        sample_head(p, name, labels);
        put(p, d, n);
    } else if (labels && *labels) {
        cr_prom_printf(p, "%s{%s} %.17g\n", name, labels, value);
    } else {
        cr_prom_printf(p, "%s %.17g\n", name, value);
    }
}

void cr_prom_sample_us(struct cr_prom *p, const char *name, const char *labels, uint64_t us)
{
    if (us >= CR_PROM_US_EXACT_BELOW) {
        /* Not reached by any real delay; printed as it always was. */
        if (labels && *labels)
            cr_prom_printf(p, "%s{%s} %.6f\n", name, labels, (double)us / 1e6);
        else
            cr_prom_printf(p, "%s %.6f\n", name, (double)us / 1e6);
        return;
    }
    char d[CR_DECIMAL_U64_SIZE + 8];
    size_t n = cr_decimal_u64(d, us / 1000000);
    char frac[CR_DECIMAL_U64_SIZE];
    size_t fn = cr_decimal_u64(frac, us % 1000000);
    d[n++] = '.';
    for (size_t i = fn; i < 6; i++)
        d[n++] = '0';
    memcpy(d + n, frac, fn);
    n += fn;
    d[n++] = '\n';
    sample_head(p, name, labels);
    put(p, d, n);
}

void cr_prom_gauge(struct cr_prom *p, const char *name, const char *help, double value)
{
    cr_prom_family(p, name, "gauge", help);
    cr_prom_sample(p, name, NULL, value);
}

void cr_prom_counter(struct cr_prom *p, const char *name, const char *help, double value)
{
    cr_prom_family(p, name, "counter", help);
    cr_prom_sample(p, name, NULL, value);
}

int cr_prom_take(struct cr_prom *p, char **ret_text, size_t *ret_len)
{
    if (!p->failed && !p->buf && !grow(p, 0))
        p->failed = true;
    if (p->failed) {
        free(p->buf);
        *p = (struct cr_prom){0};
        return -ENOMEM;
    }
    p->buf[p->len] = '\0';
    *ret_text = p->buf;
    if (ret_len)
        *ret_len = p->len;
    *p = (struct cr_prom){0};
    return 0;
}
