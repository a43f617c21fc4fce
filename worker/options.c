#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

/* Every range below is the one in `nums`; a unit test checks that each
 * range printed by cr_units_range appears here. */
const char cr_wopts_usage[] =
    "Usage: corral-worker [OPTIONS]\n"
    "The corral reference worker: an HTTP/1.1 server on the listening socket\n"
    "passed as fd 3 (LISTEN_FDS=1), reporting to NOTIFY_SOCKET.\n\n"
    "  --listen HOST:PORT       bind this address when no socket is passed\n"
    "  --heap-limit SIZE        managed heap limit, 64K to 1T (default: CORRAL_HEAP_LIMIT,\n"
    "                           else 75% of CORRAL_MEMORY_MAX, else 256M)\n"
    "  --loop-resolution MS     loop-delay sampling timer, 1ms to 10s (default 10)\n"
    "  --report-interval MS     WATCHDOG/metrics report period, 10ms to 1h (default 1000)\n"
    "  --drain-timeout MS       SIGTERM drain bound, 0ms to 1h (default 10s)\n"
    "  --header-timeout MS      first byte to end of headers, else 408; 0ms to 1h\n"
    "                           (default 10s)\n"
    "  --request-timeout MS     first byte to end of body, else 408; 0ms to 1h (default 30s)\n"
    "  --keepalive-timeout MS   idle keep-alive connection lifetime, 0ms to 1h (default 5s)\n"
    "  --max-body SIZE          request body cap, else 413; 0 to 1G (default 1M)\n"
    "  --max-header SIZE        request line + headers cap, else 431; 64 to 1M (default 16K)\n"
    "  --exec-concurrency N     /exec children at once, 0 to 4096, 0 = unlimited\n"
    "                           (default: cores)\n"
    "  --exec-queue N           /exec requests waiting, past it 503; 0 to 1000000\n"
    "                           (default 64)\n"
    "  --file-size SIZE         size of the /file test file, 0 to 64G (default 10M, 0 = off)\n"
    "  --burn PATH              the corral-burn helper for /exec\n"
    "  --version                print the version\n"
    "  --help                   this text\n"
    "Whole numbers only: SIZE takes K, M, G or T (1024-based); MS takes ms, s, m or h\n"
    "(a bare number is milliseconds).\n";

/* The heap limit's range, shared by the flag and the environment. */
#define HEAP_MIN (64ull << 10)
#define HEAP_MAX (1ull << 40)

static int parse_listen(struct cr_wopts *o, const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof(o->listen_host))
        return -EINVAL;
    uint64_t port;
    if (cr_units_parse_uint(colon + 1, 0, 65535, &port) < 0)
        return -EINVAL;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:80 */
        h++;
        hl -= 2;
    }
    memcpy(o->listen_host, h, hl);
    o->listen_host[hl] = '\0';
    o->listen_port = (int)port;
    return 0;
}

static void defaults(struct cr_wopts *o, unsigned ncpu)
{
    *o = (struct cr_wopts){
        .heap_limit = 256u << 20,
        .loop_resolution_ms = 10,
        .report_interval_ms = 1000,
        .drain_timeout_ms = 10000,
        .header_timeout_ms = 10000,
        .request_timeout_ms = 30000,
        .keepalive_timeout_ms = 5000,
        .exec_concurrency = ncpu ? ncpu : 1,
        .exec_queue = 64,
        .max_body = 1u << 20,
        .max_header = 16u << 10,
        .file_size = 10u << 20,
        .listen_port = -1,
    };
    uint64_t v;
    const char *e = getenv("CORRAL_HEAP_LIMIT");
    if (e && cr_units_parse_size(e, HEAP_MAX, &v) == 0 && v >= HEAP_MIN) {
        o->heap_limit = v;
    } else {
        e = getenv("CORRAL_MEMORY_MAX");
        if (e && cr_units_parse_size(e, HEAP_MAX, &v) == 0 && v - v / 4 >= HEAP_MIN)
            o->heap_limit = v - v / 4;
    }
}

enum {
    O_LISTEN = 256,
    O_HEAP,
    O_RES,
    O_REPORT,
    O_DRAIN,
    O_HDR_TO,
    O_REQ_TO,
    O_KA_TO,
    O_BODY,
    O_HDR,
    O_EXEC_C,
    O_EXEC_Q,
    O_FILE,
    O_BURN,
    O_VERSION,
    O_HELP
};

static const struct option longopts[] = {
    {"listen", required_argument, NULL, O_LISTEN},
    {"heap-limit", required_argument, NULL, O_HEAP},
    {"loop-resolution", required_argument, NULL, O_RES},
    {"report-interval", required_argument, NULL, O_REPORT},
    {"drain-timeout", required_argument, NULL, O_DRAIN},
    {"header-timeout", required_argument, NULL, O_HDR_TO},
    {"request-timeout", required_argument, NULL, O_REQ_TO},
    {"keepalive-timeout", required_argument, NULL, O_KA_TO},
    {"max-body", required_argument, NULL, O_BODY},
    {"max-header", required_argument, NULL, O_HDR},
    {"exec-concurrency", required_argument, NULL, O_EXEC_C},
    {"exec-queue", required_argument, NULL, O_EXEC_Q},
    {"file-size", required_argument, NULL, O_FILE},
    {"burn", required_argument, NULL, O_BURN},
    {"version", no_argument, NULL, O_VERSION},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

/* The numeric options: where each goes, its grammar and its range. */
static const struct num {
    int opt;
    enum cr_units_kind kind;
    size_t off;
    size_t size; /* of the field: sizeof(unsigned) or sizeof(uint64_t) */
    uint64_t min, max;
} nums[] = {
#define N(o, k, f, lo, hi)                                                                         \
    {                                                                                              \
        o, k, offsetof(struct cr_wopts, f), sizeof(((struct cr_wopts *)0)->f), lo, hi              \
    }
    N(O_HEAP, CR_UNITS_SIZE, heap_limit, HEAP_MIN, HEAP_MAX),
    N(O_RES, CR_UNITS_DURATION, loop_resolution_ms, 1, 10000),
    N(O_REPORT, CR_UNITS_DURATION, report_interval_ms, 10, 3600000),
    N(O_DRAIN, CR_UNITS_DURATION, drain_timeout_ms, 0, 3600000),
    N(O_HDR_TO, CR_UNITS_DURATION, header_timeout_ms, 0, 3600000),
    N(O_REQ_TO, CR_UNITS_DURATION, request_timeout_ms, 0, 3600000),
    N(O_KA_TO, CR_UNITS_DURATION, keepalive_timeout_ms, 0, 3600000),
    N(O_BODY, CR_UNITS_SIZE, max_body, 0, 1ull << 30),
    N(O_HDR, CR_UNITS_SIZE, max_header, 64, 1u << 20),
    N(O_EXEC_C, CR_UNITS_NUMBER, exec_concurrency, 0, 4096),
    N(O_EXEC_Q, CR_UNITS_NUMBER, exec_queue, 0, 1000000),
    N(O_FILE, CR_UNITS_SIZE, file_size, 0, 64ull << 30),
#undef N
};

static int parse_num(const struct num *n, const char *arg, uint64_t *ret)
{
    int r;
    if (n->kind == CR_UNITS_SIZE)
        r = cr_units_parse_size(arg, n->max, ret);
    else if (n->kind == CR_UNITS_DURATION)
        r = cr_units_parse_ms(arg, 1, n->max, ret);
    else
        r = cr_units_parse_uint(arg, 0, n->max, ret);
    return r == 0 && *ret < n->min ? -ERANGE : r;
}

/* Returns 0, or a negative errno with the grammar's message in err. */
static int apply(struct cr_wopts *o, int opt, const char *name, const char *arg, char *err,
                 size_t errlen)
{
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        const struct num *n = &nums[i];
        uint64_t v;
        int r;
        if (n->opt != opt)
            continue;
        if ((r = parse_num(n, arg, &v)) < 0) {
            cr_units_error(err, errlen, name, arg, n->kind, r, n->min, n->max);
            return r;
        }
        if (n->size == sizeof(unsigned))
            *(unsigned *)((char *)o + n->off) = (unsigned)v;
        else
            *(uint64_t *)((char *)o + n->off) = v;
        return 0;
    }
    switch (opt) {
    case O_LISTEN:
        if (parse_listen(o, arg) < 0) {
            snprintf(err, errlen, "--%s: '%s' is not HOST:PORT (port 0 to 65535)", name, arg);
            return -EINVAL;
        }
        return 0;
    case O_BURN:
        o->burn = arg;
        return 0;
    case O_VERSION:
        o->version = true;
        return 0;
    case O_HELP:
        o->help = true;
        return 0;
    default:
        snprintf(err, errlen, "unknown option --%s", name);
        return -EINVAL;
    }
}

int cr_wopts_range_text(size_t i, const char **ret_name, char *buf, size_t len)
{
    if (i >= sizeof(nums) / sizeof(nums[0]))
        return -ENOENT;
    *ret_name = longopts[nums[i].opt - O_LISTEN].name;
    cr_units_range(buf, len, nums[i].kind, nums[i].min, nums[i].max);
    return 0;
}

int cr_wopts_parse(struct cr_wopts *o, int argc, char **argv, unsigned ncpu, char *err,
                   size_t errlen)
{
    defaults(o, ncpu);
    optind = 0; /* full reset: parse may be called more than once */
    opterr = 0;
    for (;;) {
        int idx = -1;
        int opt = getopt_long(argc, argv, "h", longopts, &idx);
        if (opt == -1)
            break;
        if (opt == 'h')
            opt = O_HELP;
        if (opt == '?' || opt == ':') {
            snprintf(err, errlen, "unknown option or missing value: %s", argv[optind - 1]);
            return -EINVAL;
        }
        if (apply(o, opt, longopts[idx >= 0 ? idx : opt - O_LISTEN].name, optarg ? optarg : "", err,
                  errlen) < 0)
            return -EINVAL;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument: %s", argv[optind]);
        return -EINVAL;
    }
    return 0;
}
