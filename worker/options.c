#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cr_wopts_usage[] =
    "Usage: corral-worker [OPTIONS]\n"
    "The corral reference worker: an HTTP/1.1 server on the listening socket\n"
    "passed as fd 3 (LISTEN_FDS=1), reporting to NOTIFY_SOCKET.\n\n"
    "  --listen HOST:PORT       bind this address when no socket is passed\n"
    "  --heap-limit SIZE        managed heap limit (default: CORRAL_HEAP_LIMIT,\n"
    "                           else 75% of CORRAL_MEMORY_MAX, else 256M)\n"
    "  --loop-resolution MS     loop-delay sampling timer (default 10)\n"
    "  --report-interval MS     WATCHDOG/metrics report period (default 1000)\n"
    "  --drain-timeout MS       SIGTERM drain bound (default 10s)\n"
    "  --header-timeout MS      first byte to end of headers, else 408 (default 10s)\n"
    "  --request-timeout MS     first byte to end of body, else 408 (default 30s)\n"
    "  --keepalive-timeout MS   idle keep-alive connection lifetime (default 5s)\n"
    "  --max-body SIZE          request body cap, else 413 (default 1M)\n"
    "  --max-header SIZE        request line + headers cap, else 431 (default 16K)\n"
    "  --exec-concurrency N     /exec children at once, 0 = unlimited (default: cores)\n"
    "  --exec-queue N           /exec requests waiting, past it 503 (default 64)\n"
    "  --file-size SIZE         size of the /file test file (default 10M, 0 = off)\n"
    "  --burn PATH              the corral-burn helper for /exec\n"
    "  --version                print the version\n"
    "  --help                   this text\n"
    "SIZE takes K/M/G suffixes (1024-based); MS takes ms or s suffixes.\n";

int cr_wopts_parse_size(const char *s, size_t *ret)
{
    if (!s || !*s || *s == '-')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    default:
        break;
    }
    if (shift && (*end == 'i' || *end == 'B'))
        end += *end == 'i' && end[1] == 'B' ? 2 : 1;
    if (*end || (shift && v > (SIZE_MAX >> shift)))
        return -EINVAL;
    *ret = (size_t)(v << shift);
    return 0;
}

int cr_wopts_parse_ms(const char *s, uint64_t *ret)
{
    if (!s || !*s || *s == '-')
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    if (strcmp(end, "s") == 0) {
        if (v > UINT64_MAX / 1000)
            return -EINVAL;
        v *= 1000;
    } else if (*end && strcmp(end, "ms") != 0) {
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static int parse_uint(const char *s, unsigned *ret)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > UINT_MAX)
        return -EINVAL;
    *ret = (unsigned)v;
    return 0;
}

static int parse_listen(struct cr_wopts *o, const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof(o->listen_host))
        return -EINVAL;
    unsigned port;
    if (parse_uint(colon + 1, &port) < 0 || port > 65535)
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
    size_t v;
    const char *e = getenv("CORRAL_HEAP_LIMIT");
    if (e && cr_wopts_parse_size(e, &v) == 0 && v) {
        o->heap_limit = v;
    } else {
        e = getenv("CORRAL_MEMORY_MAX");
        if (e && cr_wopts_parse_size(e, &v) == 0 && v)
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

static int apply(struct cr_wopts *o, int opt, const char *arg)
{
    switch (opt) {
    case O_LISTEN:
        return parse_listen(o, arg);
    case O_HEAP:
        return cr_wopts_parse_size(arg, &o->heap_limit) < 0 || !o->heap_limit ? -EINVAL : 0;
    case O_RES:
        return cr_wopts_parse_ms(arg, &o->loop_resolution_ms) < 0 || !o->loop_resolution_ms
                   ? -EINVAL
                   : 0;
    case O_REPORT:
        return cr_wopts_parse_ms(arg, &o->report_interval_ms) < 0 || !o->report_interval_ms
                   ? -EINVAL
                   : 0;
    case O_DRAIN:
        return cr_wopts_parse_ms(arg, &o->drain_timeout_ms);
    case O_HDR_TO:
        return cr_wopts_parse_ms(arg, &o->header_timeout_ms);
    case O_REQ_TO:
        return cr_wopts_parse_ms(arg, &o->request_timeout_ms);
    case O_KA_TO:
        return cr_wopts_parse_ms(arg, &o->keepalive_timeout_ms);
    case O_BODY:
        return cr_wopts_parse_size(arg, &o->max_body);
    case O_HDR:
        return cr_wopts_parse_size(arg, &o->max_header) < 0 || o->max_header < 64 ? -EINVAL : 0;
    case O_EXEC_C:
        return parse_uint(arg, &o->exec_concurrency);
    case O_EXEC_Q:
        return parse_uint(arg, &o->exec_queue);
    case O_FILE:
        return cr_wopts_parse_size(arg, &o->file_size);
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
        return -EINVAL;
    }
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
        if (apply(o, opt, optarg) < 0) {
            snprintf(err, errlen, "invalid value for --%s: '%s'",
                     longopts[idx >= 0 ? idx : opt - O_LISTEN].name, optarg ? optarg : "");
            return -EINVAL;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument: %s", argv[optind]);
        return -EINVAL;
    }
    return 0;
}
