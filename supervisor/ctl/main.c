/* corralctl: the command-line client of corrald's control socket.
 * Exit codes: 0 ok, 1 corrald refused the command (ok:false), 2 usage,
 * 3 cannot connect (or the connection broke). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "cr_config.h"
#include "render.h"
#include "top.h"
#include "units.h"
#include "when.h"
#include "why.h"

enum { EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

enum format { FORMAT_HUMAN, FORMAT_NDJSON, FORMAT_CSV };

struct opts {
    const char *socket;
    bool json;
    int timeout_ms;
    enum format format; /* history */
    const char *since;  /* history: --since as given */
    int64_t since_ms;   /* ... as a Unix time */
    bool ascii;         /* why */
    const char *file;   /* why: a saved post-mortem instead of corrald's */
};

static void usage(FILE *f)
{
    fputs("Usage: corralctl [--json] [--socket PATH] COMMAND [ARG]...\n"
          "Steer and inspect corrald over its control socket.\n\n"
          "Commands:\n"
          "  status                 supervisor summary and one row per worker\n"
          "  workers                the worker table\n"
          "  worker ID              everything about one worker\n"
          "  history [N]            the last N deaths (default: all kept); for scripts\n"
          "                         --format ndjson|csv, and --since T (10m, 2h, an ISO 8601\n"
          "                         or Unix time): the deaths that ended since then\n"
          "  why [WORKER|PID]       why the newest death (of that worker, else that pid)\n"
          "                         happened, on one screen; --ascii; --file F reads a saved\n"
          "                         post-mortem (- : standard input) instead of corrald\n"
          "  scale N                run N workers\n"
          "  restart ID|all         rolling restart of one worker or all\n"
          "  reload                 rolling restart of all workers (new config)\n"
          "  kill ID SIGNAL         send SIGNAL (KILL, TERM, 9, ...) to a worker\n"
          "  stack ID               the stack of a worker's main thread, now (workers that\n"
          "                         answer on their page: corral-worker, the Node agent,\n"
          "                         the Python helper)\n"
          "  set KEY VALUE          change a live setting (memory-max 256M, ...)\n"
          "  events                 follow lifecycle events, one line each\n"
          "  top                    live view, redrawn every second; q quits\n"
          "  metrics                Prometheus text exposition\n"
          "  ping                   check that corrald answers\n"
          "  stop                   drain every worker and stop corrald\n\n"
          "Options:\n"
          "  -j, --json             print the raw protocol response(s)\n"
          "  -s, --socket PATH      control socket (default: $RUNTIME_DIRECTORY/control.sock,\n"
          "                         else /run/corral/control.sock if present, else ./corral.sock)\n"
          "  -t, --timeout SEC      wait this long for an answer, 1s to 24h (default 10)\n"
          "  -f, --format FORMAT    history: human (default), ndjson or csv\n"
          "      --since T          history: deaths that ended at T or later\n"
          "      --ascii            why: ASCII sparklines (also when the locale is not UTF-8)\n"
          "      --file PATH        why: render a saved post-mortem, - for standard input\n"
          "  -h, --help             show this help\n"
          "  -V, --version          show the version\n\n"
          "Exit status: 0 ok, 1 refused by corrald, 2 usage error, 3 cannot connect.\n",
          f);
}

/* A whole-number argument in the grammar corrald uses, or -1. */
static long int_arg(const char *s)
{
    uint64_t v;
    return cr_units_parse_uint(s, 0, LONG_MAX, &v) < 0 ? -1 : (long)v;
}

/* Builds the request for argv (the command and its arguments); NULL and a
 * message on a usage error. */
static cJSON *build_request(int argc, char **argv)
{
    static const struct {
        const char *name;
        int min, max;
    } cmds[] = {{"status", 0, 0}, {"workers", 0, 0}, {"worker", 1, 1},  {"history", 0, 1},
                {"scale", 1, 1},  {"restart", 1, 1}, {"reload", 0, 0},  {"kill", 2, 2},
                {"set", 2, 2},    {"events", 0, 0},  {"metrics", 0, 0}, {"stop", 0, 0},
                {"ping", 0, 0},   {"top", 0, 0},     {"why", 0, 1},     {"stack", 1, 1}};
    const char *name = argv[0];
    int nargs = argc - 1;
    size_t i = 0;
    while (i < sizeof(cmds) / sizeof(cmds[0]) && strcmp(cmds[i].name, name) != 0)
        i++;
    if (i == sizeof(cmds) / sizeof(cmds[0])) {
        fprintf(stderr, "corralctl: unknown command '%s' (see --help)\n", name);
        return NULL;
    }
    if (nargs < cmds[i].min || nargs > cmds[i].max) {
        fprintf(stderr, "corralctl: wrong number of arguments for '%s' (see --help)\n", name);
        return NULL;
    }
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "cmd", strcmp(name, "top") == 0 ? "status" : name);
    long v = nargs ? int_arg(argv[1]) : 0;
    const char *key = strcmp(name, "history") == 0 ? "n"
                      : strcmp(name, "scale") == 0 ? "workers"
                                                   : "worker";
    if (nargs && strcmp(name, "set") == 0) {
        cJSON_AddStringToObject(req, "key", argv[1]);
        cJSON_AddStringToObject(req, "value", argv[2]);
    } else if (nargs && strcmp(name, "restart") == 0 && strcmp(argv[1], "all") == 0) {
        cJSON_AddStringToObject(req, "worker", "all");
    } else if (nargs && v < 0) {
        fprintf(stderr, "corralctl: '%s' is not a number\n", argv[1]);
        cJSON_Delete(req);
        return NULL;
    } else if (nargs) {
        cJSON_AddNumberToObject(req, key, (double)v);
    }
    if (nargs == 2 && strcmp(name, "kill") == 0) {
        long sig = int_arg(argv[2]);
        if (sig >= 0)
            cJSON_AddNumberToObject(req, "signal", (double)sig);
        else
            cJSON_AddStringToObject(req, "signal", argv[2]);
    }
    return req;
}

/* The options that belong to one command: given with another, a usage error. */
static int check_opts(const struct opts *o, const char *cmd)
{
    bool history = strcmp(cmd, "history") == 0, why = strcmp(cmd, "why") == 0;
    const char *bad = !history && o->format != FORMAT_HUMAN ? "--format"
                      : !history && o->since                ? "--since"
                      : !why && o->ascii                    ? "--ascii"
                      : !why && o->file                     ? "--file"
                                                            : NULL;
    if (bad) {
        fprintf(stderr, "corralctl: %s is for '%s' only\n", bad,
                strcmp(bad, "--format") == 0 || strcmp(bad, "--since") == 0 ? "history" : "why");
        return -1;
    }
    if (o->json && o->format != FORMAT_HUMAN) {
        fprintf(stderr, "corralctl: --json and --format: choose one\n");
        return -1;
    }
    return 0;
}

static void print_human(const struct opts *o, const char *cmd, const cJSON *res)
{
    struct ctl_style st = ctl_style_for(stdout);
    const cJSON *v;
    if (strcmp(cmd, "status") == 0) {
        ctl_print_supervisor(stdout, &st, cJSON_GetObjectItemCaseSensitive(res, "supervisor"));
        fputc('\n', stdout);
        ctl_print_workers(stdout, &st, cJSON_GetObjectItemCaseSensitive(res, "workers"));
    } else if (strcmp(cmd, "workers") == 0) {
        ctl_print_workers(stdout, &st, cJSON_GetObjectItemCaseSensitive(res, "workers"));
    } else if (strcmp(cmd, "worker") == 0) {
        ctl_print_worker(stdout, &st, cJSON_GetObjectItemCaseSensitive(res, "worker"));
    } else if (strcmp(cmd, "history") == 0) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(res, "history");
        if (o->format == FORMAT_NDJSON)
            ctl_print_history_ndjson(stdout, h);
        else if (o->format == FORMAT_CSV)
            ctl_print_history_csv(stdout, h);
        else
            ctl_print_history(stdout, &st, h);
    } else if (strcmp(cmd, "metrics") == 0) {
        fputs(ctl_str(res, "metrics"), stdout);
    } else if (strcmp(cmd, "ping") == 0) {
        printf("corrald answers: %s\n", ctl_str(res, "pong"));
    } else if (strcmp(cmd, "scale") == 0) {
        printf("scaling to %.0f workers\n", ctl_num(res, "workers"));
    } else if (strcmp(cmd, "set") == 0) {
        printf("%s = %s\n", ctl_str(res, "key"), ctl_str(res, "value"));
    } else if (strcmp(cmd, "events") == 0) {
        /* The stream that follows is the output. */
    } else if ((v = cJSON_GetObjectItemCaseSensitive(res, "signal"))) {
        printf("signal %.0f sent\n", v->valuedouble);
    } else {
        printf("ok\n");
    }
}

/* Prints refusal details; returns the exit code for res. */
static int check(const cJSON *res)
{
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")))
        return 0;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(res, "error");
    fprintf(stderr, "corralctl: %s: %s\n", ctl_str(e, "code"), ctl_str(e, "message"));
    return EXIT_REFUSED;
}

static int follow_events(struct ctl_conn *c, const struct opts *o)
{
    struct ctl_style st = ctl_style_for(stdout);
    for (;;) {
        char *line;
        long n = ctl_read_line(c, -1, &line);
        if (n < 0) {
            fprintf(stderr, "corralctl: corrald closed the event stream\n");
            return EXIT_CONNECT;
        }
        if (o->json) {
            printf("%s\n", line);
            continue;
        }
        cJSON *e = cJSON_ParseWithLengthOpts(line, (size_t)n, NULL, false);
        if (e)
            ctl_print_event(stdout, &st, e);
        cJSON_Delete(e);
    }
}

/* `stack`: asks with a "wait", which corrald holds until the worker
 * answered (or the wait passed); a --timeout past the protocol's bound on
 * a wait asks again for the same request. A reply comes within its wait
 * and the loop's turn: STACK_SLACK_MS more is allowed for it. A corrald
 * older than "wait" answers `pending` at once: it is asked again every
 * STACK_POLL_MS, as corralctl did before (waiting on the connection). */
#define STACK_SLACK_MS 1000
#define STACK_MAX_WAIT_MS 60000 /* the protocol's bound on a wait */
#define STACK_POLL_MS 20

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The worker wrote this text: a control byte (an escape sequence's start,
 * a bell, a CR) is shown as '?', as `why` does, so that a stack cannot
 * drive the operator's terminal. Lines and tabs stay. */
static void put_worker_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        fputc(ch == '\n' || ch == '\t' || (ch >= 0x20 && ch != 0x7f) ? ch : '?', f);
    }
}

static int fetch_stack(struct ctl_conn *c, const struct opts *o, cJSON *req)
{
    /* --timeout bounds the whole wait, the calls' time included. */
    int64_t deadline = mono_ms() + o->timeout_ms;
    cJSON *wait = cJSON_AddNumberToObject(req, "wait", 0);
    for (int64_t left; (left = deadline - mono_ms()) > 0;) {
        int64_t asked = left < STACK_MAX_WAIT_MS ? left : STACK_MAX_WAIT_MS, t0 = mono_ms();
        cJSON_SetNumberValue(wait, (double)asked);
        cJSON *res = NULL;
        char *raw = NULL;
        int r = ctl_call(c, req, (int)(left + STACK_SLACK_MS), &res, &raw);
        if (r < 0) {
            fprintf(stderr, "corralctl: no answer from corrald: %s\n", strerror(-r));
            return EXIT_CONNECT;
        }
        int code = check(res);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(res, "stack");
        const char *state = code ? "" : ctl_str(s, "state");
        if (strcmp(state, "unsupported") == 0) {
            fprintf(stderr, "corralctl: no stack: %s\n", ctl_str(s, "why"));
            code = EXIT_REFUSED;
        } else if (strcmp(state, "ready") == 0 && o->json) {
            printf("%s\n", raw);
        } else if (strcmp(state, "ready") == 0) {
            printf("stack of worker %.0f (", ctl_num(req, "worker"));
            put_worker_text(stdout, ctl_str(s, "source"));
            fputs("):\n", stdout);
            put_worker_text(stdout, ctl_str(s, "text"));
        } else if (!code && !cJSON_GetObjectItemCaseSensitive(req, "request")) {
            cJSON_AddNumberToObject(req, "request", ctl_num(s, "request"));
        }
        bool done = code || strcmp(state, "ready") == 0;
        cJSON_Delete(res);
        if (done)
            return code;
        if (mono_ms() - t0 < asked / 2) { /* not held: an older corrald */
            struct pollfd p = {.fd = c->fd, .events = POLLIN};
            left = deadline - mono_ms();
            poll(&p, 1, (int)(left < STACK_POLL_MS ? (left > 0 ? left : 0) : STACK_POLL_MS));
        }
    }
    fprintf(stderr, "corralctl: the worker did not answer within %d ms\n", o->timeout_ms);
    return EXIT_REFUSED;
}

static void why_show(const struct opts *o, const cJSON *pm)
{
    if (o->json) {
        char *s = cJSON_PrintUnformatted(pm);
        printf("%s\n", s ? s : "null");
        free(s);
        return;
    }
    struct ctl_why_opts wo = {.style = ctl_style_for(stdout),
                              .unicode = !o->ascii && ctl_locale_utf8(),
                              .width = ctl_width_for(stdout)};
    ctl_print_why(stdout, &wo, pm);
}

/* A saved document, whole (at most 256 MiB), NUL-terminated; NULL with
 * errno set. */
static char *slurp(const char *path, size_t *ret_len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return NULL;
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *b = cap < (256u << 20) ? realloc(buf, cap * 2 + 1) : NULL;
            if (!b) {
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            buf = b, cap *= 2;
        }
    }
    if (buf && ferror(f)) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    if (f != stdin)
        fclose(f);
    if (buf)
        buf[len] = '\0', *ret_len = len;
    return buf;
}

/* `why`: the newest death of the worker (else the pid) `arg` names, or the
 * newest of all; corrald filters (docs/control-protocol.md, `history`). */
static int run_why(const struct opts *o, const char *arg)
{
    long match = arg ? int_arg(arg) : 0;
    if (arg && match <= 0) {
        fprintf(stderr, "corralctl: why: '%s' is not a worker id or a pid\n", arg);
        return EXIT_USAGE;
    }
    char err[160] = "";
    if (o->file) {
        size_t len;
        char *text = slurp(o->file, &len);
        if (!text) {
            fprintf(stderr, "corralctl: --file %s: %s\n", o->file, strerror(errno));
            return EXIT_USAGE;
        }
        cJSON *pm = ctl_why_pick(text, len, match, err, sizeof(err));
        free(text);
        if (!pm) {
            fprintf(stderr, "corralctl: --file %s: %s\n", o->file, err);
            return EXIT_REFUSED;
        }
        why_show(o, pm);
        cJSON_Delete(pm);
        return 0;
    }
    struct ctl_conn c;
    int r = ctl_connect(&c, o->socket);
    if (r < 0) {
        fprintf(stderr, "corralctl: cannot connect to %s: %s\n", o->socket, strerror(-r));
        return EXIT_CONNECT;
    }
    int code = 0;
    cJSON *found = NULL;
    /* A worker id is at most 2^30 (the protocol's bound); a pid may be more. */
    static const char *const keys[] = {"worker", "pid"};
    for (int k = match ? 0 : 1; k < 2 && !found && !code; k++) {
        if (k == 0 && match > (1l << 30))
            continue;
        cJSON *req = cJSON_CreateObject(), *res = NULL;
        cJSON_AddStringToObject(req, "cmd", "history");
        cJSON_AddNumberToObject(req, "n", 1);
        if (match)
            cJSON_AddNumberToObject(req, keys[k], (double)match);
        char *raw = NULL;
        r = ctl_call(&c, req, o->timeout_ms, &res, &raw);
        cJSON_Delete(req);
        if (r < 0) {
            fprintf(stderr, "corralctl: no answer from corrald: %s\n", strerror(-r));
            code = EXIT_CONNECT;
        } else if (!(code = check(res))) {
            cJSON *h = cJSON_GetObjectItemCaseSensitive(res, "history");
            if (cJSON_GetArraySize(h) > 0)
                found = cJSON_DetachItemFromArray(h, 0);
        }
        cJSON_Delete(res);
    }
    ctl_close(&c);
    if (!code && !found) {
        if (match)
            fprintf(stderr, "corralctl: no death of worker or pid %ld on record\n", match);
        else
            fprintf(stderr, "corralctl: no death on record\n");
        code = EXIT_REFUSED;
    }
    if (found)
        why_show(o, found);
    cJSON_Delete(found);
    return code;
}

static int run(const struct opts *o, const char *cmd, cJSON *req)
{
    struct ctl_conn c;
    int r = ctl_connect(&c, o->socket);
    if (r < 0) {
        fprintf(stderr, "corralctl: cannot connect to %s: %s\n", o->socket, strerror(-r));
        return EXIT_CONNECT;
    }
    if (strcmp(cmd, "top") == 0 && !o->json) {
        struct ctl_style st = ctl_style_for(stdout);
        r = ctl_top(&c, &st, 1000);
        ctl_close(&c);
        return r;
    }
    if (strcmp(cmd, "stack") == 0) {
        r = fetch_stack(&c, o, req);
        ctl_close(&c);
        return r;
    }
    if (strcmp(cmd, "events") == 0)
        setvbuf(stdout, NULL, _IOLBF, 0); /* each event as it comes, even into a pipe */
    cJSON *res = NULL;
    char *raw = NULL;
    r = ctl_call(&c, req, o->timeout_ms, &res, &raw);
    if (r < 0) {
        fprintf(stderr, "corralctl: no answer from corrald: %s\n", strerror(-r));
        ctl_close(&c);
        return EXIT_CONNECT;
    }
    int code = check(res);
    if (o->json)
        printf("%s\n", raw);
    if (!code && !o->json)
        print_human(o, cmd, res);
    if (!code && strcmp(cmd, "events") == 0)
        code = follow_events(&c, o);
    cJSON_Delete(res);
    ctl_close(&c);
    return code;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},    {"socket", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'}, {"format", required_argument, NULL, 'f'},
        {"since", required_argument, NULL, 'S'}, {"ascii", no_argument, NULL, 'A'},
        {"file", required_argument, NULL, 'F'}, {NULL, 0, NULL, 0}};
    struct opts o = {.socket = NULL, .json = false, .timeout_ms = 10000};
    int ch;
    while ((ch = getopt_long(argc, argv, "js:t:hVf:", longopts, NULL)) != -1) {
        switch (ch) {
        case 'j': o.json = true; break;
        case 's': o.socket = optarg; break;
        case 't': {
            uint64_t ms;
            int r = cr_units_parse_ms(optarg, 1000, 86400000, &ms);
            if (r == 0 && ms < 1000)
                r = -ERANGE;
            if (r < 0) {
                char err[160];
                fprintf(stderr, "corralctl: %s\n",
                        cr_units_error(err, sizeof(err), "timeout", optarg, CR_UNITS_DURATION, r,
                                       1000, 86400000));
                return EXIT_USAGE;
            }
            o.timeout_ms = (int)ms;
            break;
        }
        case 'f':
            if (strcmp(optarg, "human") == 0)
                o.format = FORMAT_HUMAN;
            else if (strcmp(optarg, "ndjson") == 0)
                o.format = FORMAT_NDJSON;
            else if (strcmp(optarg, "csv") == 0)
                o.format = FORMAT_CSV;
            else {
                fprintf(stderr, "corralctl: --format: '%s' is not human, ndjson or csv\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'S': {
            char err[200];
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
            if (ctl_parse_since(optarg, now_ms, &o.since_ms, err, sizeof(err)) < 0) {
                fprintf(stderr, "corralctl: %s\n", err);
                return EXIT_USAGE;
            }
            o.since = optarg;
            break;
        }
        case 'A': o.ascii = true; break;
        case 'F': o.file = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("corralctl %s\n", CR_VERSION); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!o.socket)
        o.socket = ctl_default_socket();
    cJSON *req = build_request(argc - optind, argv + optind);
    if (!req)
        return EXIT_USAGE;
    if (check_opts(&o, argv[optind]) < 0) {
        cJSON_Delete(req);
        return EXIT_USAGE;
    }
    if (strcmp(argv[optind], "why") == 0) {
        cJSON_Delete(req);
        return run_why(&o, optind + 1 < argc ? argv[optind + 1] : NULL);
    }
    /* Filtered by corrald: a record is up to ~12 KiB of JSON. */
    if (o.since)
        cJSON_AddNumberToObject(req, "since_ms", (double)o.since_ms);
    int code = run(&o, argv[optind], req);
    cJSON_Delete(req);
    return code;
}
