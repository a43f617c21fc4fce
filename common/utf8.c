/* cr_utf8: UTF-8 validation. See utf8.h. */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

size_t cr_utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp, min;
    if (n == 0)
        return 0;
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2, cp = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef)
        len = 3, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* Eight bytes at once while they are all ASCII: the control socket scrubs
 * every reply (status at 256 workers is 200 KiB, almost all ASCII), and
 * going a byte at a time through cr_utf8_seq was a tenth of its cost. */
static size_t ascii_run(const unsigned char *u, size_t n)
{
    size_t i = 0;
    for (uint64_t w; n - i >= sizeof(w); i += sizeof(w)) {
        memcpy(&w, u + i, sizeof(w));
        if (w & UINT64_C(0x8080808080808080))
            break;
    }
    return i;
}

size_t cr_utf8_valid_prefix(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k;
    while (i < n) {
        i += ascii_run(u + i, n - i);
        if (i == n || !(k = cr_utf8_seq(u + i, n - i)))
            break;
        i += k;
    }
    return i;
}
