#include "notify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool parse_u64(const char *v, size_t n, uint64_t *ret)
{
    if (n == 0 || n > 20)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        uint64_t d = (uint64_t)(v[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *ret = x;
    return true;
}

static bool parse_double(const char *v, size_t n, double *ret)
{
    char tmp[32];
    if (n == 0 || n >= sizeof(tmp))
        return false;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    char *end;
    errno = 0;
    double d = strtod(tmp, &end);
    if (errno || *end || d != d)
        return false;
    *ret = d;
    return true;
}

struct u64_key {
    const char *key;
    unsigned bit;
    size_t off;
};

#define U(k, b, f) {k, b, offsetof(struct cr_notify_msg, f)}
static const struct u64_key u64_keys[] = {
    U(CR_NK_HEAP_USED, CR_NF_HEAP_USED, heap_used),
    U(CR_NK_HEAP_TOTAL, CR_NF_HEAP_TOTAL, heap_total),
    U(CR_NK_HEAP_LIMIT, CR_NF_HEAP_LIMIT, heap_limit),
    U(CR_NK_EXTERNAL, CR_NF_EXTERNAL, external),
    U(CR_NK_RSS, CR_NF_RSS, rss),
    U(CR_NK_DELAY_P50, CR_NF_DELAY_P50, delay_p50_us),
    U(CR_NK_DELAY_P99, CR_NF_DELAY_P99, delay_p99_us),
    U(CR_NK_DELAY_MAX, CR_NF_DELAY_MAX, delay_max_us),
    U(CR_NK_INFLIGHT, CR_NF_INFLIGHT, inflight),
    U(CR_NK_REQUESTS, CR_NF_REQUESTS, requests),
    U(CR_NK_POOL_QUEUE, CR_NF_POOL_QUEUE, pool_queue),
};

/* "name:used/size,..." — every entry well formed, names [a-z0-9_], at most
 * CR_NOTIFY_SPACES_MAX of them — into m; false (m untouched) otherwise. */
static bool parse_spaces(const char *v, size_t n, struct cr_notify_msg *m)
{
    struct cr_heap_space sp[CR_NOTIFY_SPACES_MAX];
    unsigned count = 0;
    size_t i = 0;
    while (i < n) {
        if (count == CR_NOTIFY_SPACES_MAX)
            return false;
        size_t e = i;
        while (e < n && v[e] != ',')
            e++;
        const char *colon = memchr(v + i, ':', e - i);
        const char *slash = colon ? memchr(colon, '/', (size_t)(v + e - colon)) : NULL;
        size_t nl = colon ? (size_t)(colon - (v + i)) : 0;
        if (!slash || nl == 0 || nl >= sizeof(sp[0].name))
            return false;
        for (size_t k = 0; k < nl; k++) {
            char c = v[i + k];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
                return false;
        }
        struct cr_heap_space *s = &sp[count];
        memcpy(s->name, v + i, nl);
        s->name[nl] = '\0';
        if (!parse_u64(colon + 1, (size_t)(slash - colon - 1), &s->used) ||
            !parse_u64(slash + 1, (size_t)(v + e - slash - 1), &s->size))
            return false;
        count++;
        i = e + 1;
        if (e < n && i == n)
            return false; /* a trailing comma */
    }
    if (!count)
        return false;
    memcpy(m->spaces, sp, count * sizeof(sp[0]));
    m->nspaces = count;
    return true;
}

static void copy_str(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static bool key_is(const char *k, size_t kn, const char *want)
{
    return strlen(want) == kn && memcmp(k, want, kn) == 0;
}

static void parse_line(const char *k, size_t kn, const char *v, size_t vn,
                       struct cr_notify_msg *m, unsigned *bad)
{
    if (key_is(k, kn, CR_NK_READY)) {
        if (vn == 1 && v[0] == '1')
            m->present |= CR_NF_READY;
        return;
    }
    if (key_is(k, kn, CR_NK_WATCHDOG)) {
        if (vn == 1 && v[0] == '1')
            m->present |= CR_NF_WATCHDOG;
        return;
    }
    if (key_is(k, kn, CR_NK_STOPPING)) {
        if (vn == 1 && v[0] == '1')
            m->present |= CR_NF_STOPPING;
        return;
    }
    if (key_is(k, kn, CR_NK_STATUS)) {
        copy_str(m->status, sizeof(m->status), v, vn);
        m->present |= CR_NF_STATUS;
        return;
    }
    if (key_is(k, kn, CR_NK_FATAL)) {
        copy_str(m->fatal, sizeof(m->fatal), v, vn);
        m->present |= CR_NF_FATAL;
        return;
    }
    if (key_is(k, kn, CR_NK_HEAP_SPACES)) {
        if (parse_spaces(v, vn, m))
            m->present |= CR_NF_HEAP_SPACES;
        else
            (*bad)++;
        return;
    }
    if (key_is(k, kn, CR_NK_ELU)) {
        double d;
        if (parse_double(v, vn, &d) && d >= 0 && d <= 1) {
            m->elu = d;
            m->present |= CR_NF_ELU;
        } else {
            (*bad)++;
        }
        return;
    }
    for (size_t i = 0; i < sizeof(u64_keys) / sizeof(u64_keys[0]); i++)
        if (key_is(k, kn, u64_keys[i].key)) {
            uint64_t x;
            if (parse_u64(v, vn, &x)) {
                *(uint64_t *)((char *)m + u64_keys[i].off) = x;
                m->present |= u64_keys[i].bit;
            } else {
                (*bad)++;
            }
            return;
        }
}

void cr_notify_parse(const char *buf, size_t len, struct cr_notify_msg *ret, unsigned *ret_bad)
{
    unsigned bad = 0;
    *ret = (struct cr_notify_msg){0};
    size_t i = 0;
    while (i < len) {
        const char *line = buf + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t)(nl - line) : len - i;
        const char *eq = memchr(line, '=', n);
        if (eq)
            parse_line(line, (size_t)(eq - line), eq + 1, n - (size_t)(eq - line) - 1, ret, &bad);
        i += n + 1;
    }
    if (ret_bad)
        *ret_bad = bad;
}

int cr_notify_stream_feed(struct cr_notify_stream *s, const char *data, size_t len,
                          size_t *ret_used, char *ret_msg, size_t *ret_msg_len)
{
    size_t used = 0;
    /* Copy byte by byte until the buffer holds "\n\n": messages are tiny,
     * and this keeps the framing obviously right. */
    while (used < len) {
        if (s->len >= CR_NOTIFY_MAX) {
            *ret_used = used;
            return -EMSGSIZE;
        }
        s->buf[s->len++] = data[used++];
        if (s->len >= 2 && s->buf[s->len - 1] == '\n' && s->buf[s->len - 2] == '\n') {
            memcpy(ret_msg, s->buf, s->len);
            *ret_msg_len = s->len;
            s->len = 0;
            *ret_used = used;
            return 1;
        }
        /* A lone "\n" at the start of a message is noise between messages. */
        if (s->len == 1 && s->buf[0] == '\n')
            s->len = 0;
    }
    *ret_used = used;
    return 0;
}
