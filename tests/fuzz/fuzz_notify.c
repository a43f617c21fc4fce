/* The worker → corrald notify protocol: one datagram parsed whole, and the
 * same bytes as the stream transport, cut into pieces whose sizes come
 * from the input itself (so the fuzzer explores every split). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "notify.h"

#define CHECK(x) ((x) ? (void)0 : abort())

static void check_msg(const struct cr_notify_msg *m)
{
    /* Text fields stay NUL-terminated within their arrays. */
    CHECK(memchr(m->status, '\0', sizeof(m->status)) != NULL);
    CHECK(memchr(m->fatal, '\0', sizeof(m->fatal)) != NULL);
}

static void datagram(const uint8_t *data, size_t size)
{
    struct cr_notify_msg m;
    unsigned bad = 0;
    memset(&m, 0xA5, sizeof(m)); /* the parser must not rely on a zeroed msg */
    cr_notify_parse((const char *)data, size, &m, &bad);
    check_msg(&m);
    cr_notify_parse((const char *)data, size, &m, NULL); /* ret_bad is optional */
    check_msg(&m);
}

static void stream(const uint8_t *data, size_t size)
{
    static struct cr_notify_stream s;
    static char msg[CR_NOTIFY_MAX + 2];
    memset(&s, 0, sizeof(s));
    /* Piece sizes from a cheap generator seeded by the input's length and
     * first byte: deterministic for one input, different across inputs. */
    uint32_t seed = (uint32_t)size * 2654435761u ^ (size ? data[0] : 0);
    size_t off = 0;
    while (off < size) {
        seed = seed * 1103515245u + 12345u;
        size_t piece = 1 + (seed >> 16) % 700;
        if (piece > size - off)
            piece = size - off;
        size_t pos = 0;
        while (pos < piece) {
            size_t used = 0, mlen = 0;
            int r = cr_notify_stream_feed(&s, (const char *)data + off + pos, piece - pos, &used,
                                          msg, &mlen);
            CHECK(used <= piece - pos);
            CHECK(s.len <= CR_NOTIFY_MAX);
            pos += used;
            if (r < 0) {
                /* corrald closes such a stream; start a fresh one. */
                memset(&s, 0, sizeof(s));
                continue;
            }
            if (r == 0) {
                CHECK(pos == piece);
                break;
            }
            CHECK(mlen >= 2 && mlen <= CR_NOTIFY_MAX);
            CHECK(msg[mlen - 1] == '\n' && msg[mlen - 2] == '\n');
            struct cr_notify_msg m;
            unsigned bad = 0;
            cr_notify_parse(msg, mlen, &m, &bad);
            check_msg(&m);
        }
        off += piece;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    datagram(data, size);
    stream(data, size);
    return 0;
}
