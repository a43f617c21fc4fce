/* cr_prom: Prometheus text builder. See prom.h. */
#include "prom.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(struct cr_prom *p, size_t need)
{
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

void cr_prom_printf(struct cr_prom *p, const char *fmt, ...)
{
    va_list ap;
    if (p->failed)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !grow(p, (size_t)n)) {
        p->failed = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(p->buf + p->len, p->cap - p->len, fmt, ap);
    va_end(ap);
    p->len += (size_t)n;
}

void cr_prom_family(struct cr_prom *p, const char *name, const char *type, const char *help)
{
    cr_prom_printf(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void cr_prom_sample(struct cr_prom *p, const char *name, const char *labels, double value)
{
    if (labels && *labels)
        cr_prom_printf(p, "%s{%s} %.17g\n", name, labels, value);
    else
        cr_prom_printf(p, "%s %.17g\n", name, value);
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
