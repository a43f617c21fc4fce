/* cr_config: one table (config_options.c) describes every option, its type,
 * its default, its help text and whether it may change at run time; flags,
 * the JSON file and the control socket's `set` all go through it. */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "history.h"
#include "lifecycle.h"
#include "config_options.h"
#include "units.h"



static const char *const balance_names[_CR_BALANCE_MAX] = {
    [CR_BALANCE_SHARED] = "shared",
    [CR_BALANCE_REUSEPORT] = "reuseport",
};

static const char *const level_names[] = {"debug", "info", "notice", "warning", "err"};

const char *cr_balance_to_string(enum cr_balance b)
{
    return b < _CR_BALANCE_MAX ? balance_names[b] : "?";
}

static const char *const ready_names[_CR_READY_MAX] = {
    [CR_READY_AUTO] = "auto",
    [CR_READY_NOTIFY] = "notify",
    [CR_READY_EXEC] = "exec",
    [CR_READY_DELAY] = "delay",
};

const char *cr_ready_to_string(enum cr_ready_mode m, uint64_t delay_ms, char *buf, size_t len)
{
    if (m == CR_READY_DELAY)
        snprintf(buf, len, "delay:%llums", (unsigned long long)delay_ms);
    else
        snprintf(buf, len, "%s", m < _CR_READY_MAX ? ready_names[m] : "?");
    return buf;
}

static void free_argv(struct cr_config *cfg)
{
    for (size_t i = 0; cfg->argv && cfg->argv[i]; i++)
        free(cfg->argv[i]);
    free(cfg->argv);
    cfg->argv = NULL;
    cfg->argc = 0;
}

static bool is_list(const struct cr_opt *o)
{
    return o->type == OPT_ENV || o->type == OPT_NAMES;
}

/* An option held as a char * of its own. */
static bool is_string(const struct cr_opt *o)
{
    return o->type == OPT_STR || o->type == OPT_LEVEL || o->type == OPT_PROG;
}

static void free_list(char ***p)
{
    for (size_t i = 0; *p && (*p)[i]; i++)
        free((*p)[i]);
    free(*p);
    *p = NULL;
}

void cr_config_done(struct cr_config *cfg)
{
    for (size_t i = 0; i < cr_noptions; i++)
        if (is_string(&cr_options[i])) {
            char **p = (char **)((char *)cfg + cr_options[i].offset);
            free(*p);
            *p = NULL;
        } else if (is_list(&cr_options[i])) {
            free_list((char ***)((char *)cfg + cr_options[i].offset));
        }
    free_argv(cfg);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

int cr_parse_uint(const char *s, uint64_t max, uint64_t *ret)
{
    return cr_units_parse_uint(s, 0, max ? max : UINT64_MAX, ret);
}

int cr_parse_size(const char *s, uint64_t *ret)
{
    return cr_units_parse_size(s, CR_MAX_SIZE, ret);
}

int cr_parse_duration_ms(const char *s, uint64_t *ret)
{
    return cr_units_parse_ms(s, 1000, CR_MAX_DURATION_MS, ret);
}

static enum cr_units_kind kind_of(const struct cr_opt *o)
{
    switch (o->type) {
    case OPT_SIZE:
    case OPT_SOFT:
        return CR_UNITS_SIZE;
    case OPT_MS:
    case OPT_MS_MS:
        return CR_UNITS_DURATION;
    default:
        return CR_UNITS_NUMBER;
    }
}

static bool numeric(const struct cr_opt *o)
{
    return o->type == OPT_UINT || o->type == OPT_WORKERS || o->type == OPT_U64 ||
           kind_of(o) != CR_UNITS_NUMBER;
}

/* Parses a numeric option's value within its range; the message is the
 * grammar's own, the same as the worker's. */
static int parse_number(const struct cr_opt *o, const char *value, uint64_t *ret, char *err,
                        size_t errlen)
{
    uint64_t v;
    int r;
    switch (kind_of(o)) {
    case CR_UNITS_SIZE:
        r = cr_units_parse_size(value, o->max, &v);
        break;
    case CR_UNITS_DURATION:
        r = cr_units_parse_ms(value, o->type == OPT_MS_MS ? 1 : 1000, o->max, &v);
        break;
    default:
        r = cr_units_parse_uint(value, 0, o->max, &v);
        break;
    }
    if (r == 0 && v < o->min)
        r = -ERANGE;
    if (r < 0) {
        cr_units_error(err, err ? errlen : 0, o->name, value, kind_of(o), r, o->min, o->max);
        return -EINVAL;
    }
    *ret = v;
    return 0;
}

static const struct cr_opt *find_opt(const char *name, size_t len)
{
    for (size_t i = 0; i < cr_noptions; i++)
        if (strlen(cr_options[i].name) == len && strncmp(cr_options[i].name, name, len) == 0)
            return &cr_options[i];
    return NULL;
}

static int set_ready(struct cr_config *cfg, const char *value, char *err, size_t errlen)
{
    for (int i = 0; i < _CR_READY_MAX; i++)
        if (i != CR_READY_DELAY && strcmp(value, ready_names[i]) == 0) {
            cfg->ready = (enum cr_ready_mode)i;
            cfg->ready_delay_ms = 0;
            return 0;
        }
    uint64_t ms;
    if (strncmp(value, "delay:", 6) == 0 &&
        cr_units_parse_ms(value + 6, 1000, CR_MAX_DURATION_MS, &ms) == 0) {
        cfg->ready = CR_READY_DELAY;
        cfg->ready_delay_ms = ms;
        return 0;
    }
    return fail(err, errlen, "--ready: '%s' is not notify, exec, delay:DURATION (delay:2s) or auto",
                value);
}

/* --workers: a count 1..4096, or auto (0: one per core). */
static int set_workers(struct cr_config *cfg, const struct cr_opt *o, const char *value, char *err,
                       size_t errlen)
{
    uint64_t v;
    if (strcmp(value, "auto") == 0) {
        cfg->workers = 0;
        cfg->workers_min = cfg->workers_max = 0;
        return 0;
    }
    const char *dots = strstr(value, "..");
    if (dots) { /* MIN..MAX: corrald decides within */
        char lo[24];
        uint64_t a, b;
        size_t n = (size_t)(dots - value);
        if (n == 0 || n >= sizeof(lo))
            return fail(err, errlen, "--workers: '%s' is not MIN..MAX", value);
        memcpy(lo, value, n);
        lo[n] = '\0';
        if (cr_units_parse_uint(lo, o->min, o->max, &a) < 0 ||
            cr_units_parse_uint(dots + 2, o->min, o->max, &b) < 0 || a > b)
            return fail(err, errlen,
                        "--workers: '%s' is not MIN..MAX with 1 <= MIN <= MAX <= %llu", value,
                        (unsigned long long)o->max);
        /* The count already asked for stays, within the new bounds; a
         * start begins at MIN. */
        unsigned now = cfg->workers;
        cfg->workers_min = (unsigned)a;
        cfg->workers_max = (unsigned)b;
        cfg->workers = now < a ? (unsigned)a : now > b ? (unsigned)b : now;
        return 0;
    }
    int r = parse_number(o, value, &v, err, errlen);
    if (r < 0) {
        if (value[0] && strspn(value, "0123456789") == strlen(value))
            fail(err, errlen, "--workers: %s is out of range 1..%llu (auto: one per core)", value,
                 (unsigned long long)o->max);
        return r;
    }
    cfg->workers = (unsigned)v;
    cfg->workers_min = cfg->workers_max = 0;
    return 0;
}

/* A portable environment variable name: [A-Za-z_][A-Za-z0-9_]*. */
static size_t name_len(const char *s)
{
    size_t n = 0;
    while ((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= 'a' && s[n] <= 'z') || s[n] == '_' ||
           (n > 0 && s[n] >= '0' && s[n] <= '9'))
        n++;
    return n;
}

#define CR_CONFIG_MAX_LIST 1024

static int list_append(void *field, const struct cr_opt *o, const char *value, char *err,
                       size_t errlen)
{
    char ***list = field;
    size_t n = name_len(value), count = 0;
    if (o->type == OPT_ENV ? (n == 0 || value[n] != '=') : (n == 0 || value[n] != '\0'))
        return fail(err, errlen, "--%s: '%s' is not %s", o->name, value,
                    o->type == OPT_ENV ? "KEY=VALUE with a name of letters, digits and _"
                                       : "a variable name of letters, digits and _");
    while (*list && (*list)[count])
        count++;
    if (count >= CR_CONFIG_MAX_LIST)
        return fail(err, errlen, "--%s: more than %d values", o->name, CR_CONFIG_MAX_LIST);
    char *copy = strdup(value);
    char **nl = copy ? realloc(*list, (count + 2) * sizeof(char *)) : NULL;
    if (!nl) {
        free(copy);
        return -ENOMEM;
    }
    nl[count] = copy;
    nl[count + 1] = NULL;
    *list = nl;
    return 0;
}

static int set_value(struct cr_config *cfg, const struct cr_opt *o, const char *value, char *err,
                     size_t errlen)
{
    void *field = (char *)cfg + o->offset;
    uint64_t v;
    int r;

    switch (o->type) {
    case OPT_UINT:
    case OPT_U64:
    case OPT_SIZE:
    case OPT_MS:
    case OPT_MS_MS:
        if ((r = parse_number(o, value, &v, err, errlen)) < 0)
            return r;
        if (o->type == OPT_UINT)
            *(unsigned *)field = (unsigned)v;
        else
            *(uint64_t *)field = v;
        return 0;
    case OPT_SOFT: {
        size_t n = strlen(value);
        if (n > 1 && value[n - 1] == '%') {
            char buf[32];
            if (n >= sizeof(buf))
                return fail(err, errlen, "--%s: '%s' is too long", o->name, value);
            memcpy(buf, value, n - 1);
            buf[n - 1] = '\0';
            if (cr_units_parse_uint(buf, 1, 100, &v) < 0)
                return fail(err, errlen, "--%s: '%s' is not a percentage from 1%% to 100%%",
                            o->name, value);
            cfg->memory_soft_pct = (unsigned)v;
            cfg->memory_soft = 0;
            return 0;
        }
        if ((r = parse_number(o, value, &v, err, errlen)) < 0)
            return r;
        cfg->memory_soft = v;
        cfg->memory_soft_pct = 0;
        return 0;
    }
    case OPT_PROG:
        /* Run by execve, no shell and no PATH search: a path that means
         * one file whatever corrald's working directory. */
        if (!value[0] || strcmp(value, "none") == 0) {
            free(*(char **)field);
            *(char **)field = NULL;
            return 0;
        }
        if (value[0] != '/')
            return fail(err, errlen, "--%s: '%s' is not an absolute path (or none)", o->name,
                        value);
        /* fall through */
    case OPT_STR:
    case OPT_LEVEL: {
        if (o->type == OPT_LEVEL) {
            size_t i, n = sizeof(level_names) / sizeof(level_names[0]);
            for (i = 0; i < n; i++)
                if (strcmp(value, level_names[i]) == 0)
                    break;
            if (i == n)
                return fail(err, errlen,
                            "--%s: '%s' is not one of debug, info, notice, "
                            "warning, err",
                            o->name, value);
        }
        char *copy = strdup(value);
        if (!copy)
            return -ENOMEM;
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case OPT_BOOL:
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0 || strcmp(value, "yes") == 0)
            *(bool *)field = true;
        else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0 || strcmp(value, "no") == 0)
            *(bool *)field = false;
        else
            return fail(err, errlen, "--%s: '%s' is not true or false", o->name, value);
        return 0;
    case OPT_READY:
        return set_ready(cfg, value, err, errlen);
    case OPT_WORKERS:
        return set_workers(cfg, o, value, err, errlen);
    case OPT_BALANCE:
        for (int i = 0; i < _CR_BALANCE_MAX; i++)
            if (strcmp(value, balance_names[i]) == 0) {
                cfg->balance = (enum cr_balance)i;
                return 0;
            }
        return fail(err, errlen, "--%s: '%s' is not shared or reuseport", o->name, value);
    case OPT_ENV:
    case OPT_NAMES:
        return list_append(field, o, value, err, errlen);
    }
    return -EINVAL;
}

static void mark_given(struct cr_config *cfg, const struct cr_opt *o)
{
    size_t i = (size_t)(o - cr_options);
    cfg->given[i / 64] |= 1ull << (i % 64);
}

/* A value given by the user (a flag, the file, `set`), not a default. */
static int set_given(struct cr_config *cfg, const struct cr_opt *o, const char *value, char *err,
                     size_t errlen)
{
    int r = set_value(cfg, o, value, err, errlen);
    if (r >= 0)
        mark_given(cfg, o);
    return r;
}

bool cr_config_given(const struct cr_config *cfg, const char *name)
{
    const struct cr_opt *o = name ? find_opt(name, strlen(name)) : NULL;
    if (!o)
        return false;
    size_t i = (size_t)(o - cr_options);
    return cfg->given[i / 64] >> (i % 64) & 1;
}

/* A default the parser refuses is a bug in the table, and every test that
 * starts corrald or makes a config finds it: abort rather than run with a
 * zero where the table promised a value. */
void cr_config_init(struct cr_config *cfg)
{
    *cfg = (struct cr_config){0};
    for (size_t i = 0; i < cr_noptions; i++)
        if (cr_options[i].def && set_value(cfg, &cr_options[i], cr_options[i].def, NULL, 0) == -EINVAL)
            abort();
}

const char *cr_config_find_file(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) && i + 1 < argc)
            return argv[i + 1];
        if (strncmp(argv[i], "--config=", 9) == 0)
            return argv[i] + 9;
    }
    return NULL;
}

static int set_argv(struct cr_config *cfg, int argc, char **argv)
{
    free_argv(cfg);
    cfg->argv = calloc((size_t)argc + 1, sizeof(char *));
    if (!cfg->argv)
        return -ENOMEM;
    for (int i = 0; i < argc; i++)
        if (!(cfg->argv[i] = strdup(argv[i])))
            return -ENOMEM;
    cfg->argc = (size_t)argc;
    return 0;
}

int cr_config_parse_args(struct cr_config *cfg, int argc, char **argv, char *ret_action, char *err,
                         size_t errlen)
{
    *ret_action = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const struct cr_opt *o = NULL;
        const char *value = NULL;

        if (strcmp(a, "--") == 0)
            return set_argv(cfg, argc - i - 1, argv + i + 1);
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *ret_action = 'h';
            return 1;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            *ret_action = 'v';
            return 1;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            o = find_opt(a + 2, len);
            if (!o)
                return fail(err, errlen, "unknown option '%.*s'", (int)len + 2, a);
            if (eq)
                value = eq + 1;
        } else if (a[0] == '-' && a[1] && !a[2]) {
            for (size_t k = 0; k < cr_noptions; k++)
                if (cr_options[k].short_name == a[1])
                    o = &cr_options[k];
            if (!o)
                return fail(err, errlen, "unknown option '%s'", a);
        } else {
            return fail(err, errlen, "unexpected argument '%s' (put the worker command after --)",
                        a);
        }
        if (o->type == OPT_BOOL && !value) {
            value = "true";
        } else if (!value) {
            if (i + 1 >= argc)
                return fail(err, errlen, "--%s needs a value (%s)", o->name, o->arg);
            value = argv[++i];
        }
        int r = set_given(cfg, o, value, err, errlen);
        if (r < 0)
            return r;
    }
    return 0;
}

/* A JSON value as the text a flag would carry. */
static int json_value_text(const cJSON *item, char *buf, size_t len)
{
    if (cJSON_IsString(item))
        return snprintf(buf, len, "%s", item->valuestring) < (int)len ? 0 : -E2BIG;
    if (cJSON_IsBool(item))
        return snprintf(buf, len, "%s", cJSON_IsTrue(item) ? "true" : "false"), 0;
    if (cJSON_IsNumber(item)) {
        double d = item->valuedouble;
        if (d < 0 || d != floor(d) || d > 1e18)
            return -EINVAL;
        return snprintf(buf, len, "%.0f", d), 0;
    }
    return -EINVAL;
}

static int json_command(struct cr_config *cfg, const cJSON *item, char *err, size_t errlen)
{
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) < 1)
        return fail(err, errlen, "config key 'command': expected a non-empty array of strings");
    int n = cJSON_GetArraySize(item);
    char **v = calloc((size_t)n + 1, sizeof(char *));
    if (!v)
        return -ENOMEM;
    int r = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(item, i);
        if (!cJSON_IsString(s)) {
            r = fail(err, errlen, "config key 'command': element %d is not a string", i);
            break;
        }
        v[i] = s->valuestring;
    }
    if (r == 0)
        r = set_argv(cfg, n, v);
    free(v);
    return r;
}

int cr_config_parse_json(struct cr_config *cfg, const char *text, char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, true);
    if (!root)
        return fail(err, errlen, "config: invalid JSON near offset %ld",
                    end ? (long)(end - text) : 0L);
    int r = 0;
    if (!cJSON_IsObject(root)) {
        r = fail(err, errlen, "config: the top level must be an object");
        goto out;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        const struct cr_opt *lo = find_opt(item->string, strlen(item->string));
        if (strcmp(item->string, "command") == 0) {
            r = json_command(cfg, item, err, errlen);
        } else if (lo && is_list(lo) && cJSON_IsArray(item)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, item)
            {
                r = cJSON_IsString(e)
                        ? set_value(cfg, lo, e->valuestring, err, errlen)
                        : fail(err, errlen, "config key '%s': expected strings", item->string);
                if (r < 0)
                    break;
            }
            if (r >= 0) /* an empty array too: the file says "none" */
                mark_given(cfg, lo);
        } else {
            const struct cr_opt *o = find_opt(item->string, strlen(item->string));
            char buf[4096];
            if (!o || strcmp(o->name, "config") == 0)
                r = fail(err, errlen, "config: unknown key '%s'", item->string);
            else if (json_value_text(item, buf, sizeof(buf)) < 0)
                r = fail(err, errlen, "config key '%s': unsupported value type", item->string);
            else
                r = set_given(cfg, o, buf, err, errlen);
        }
        if (r < 0)
            break;
    }
out:
    cJSON_Delete(root);
    return r;
}

int cr_config_set(struct cr_config *cfg, const char *key, const char *value, bool live_only,
                  char *err, size_t errlen)
{
    const struct cr_opt *o = find_opt(key, strlen(key));
    if (!o)
        return fail(err, errlen, "unknown key '%s'", key);
    if (live_only && !o->live)
        return fail(err, errlen, "'%s' cannot be changed at run time", key);
    /* Strings take part in no cross-field rule: set them in place. */
    if (is_string(o))
        return set_given(cfg, o, value, err, errlen);
    /* Everything else is validated as a whole on a copy before it counts;
     * the copy shares cfg's strings, which set_value leaves alone here. */
    struct cr_config tmp = *cfg;
    int r = set_given(&tmp, o, value, err, errlen);
    if (r >= 0)
        r = cr_config_finish(&tmp, err, errlen);
    if (r < 0)
        return r;
    *cfg = tmp;
    return 0;
}

/* An instance names a cgroup directory: no '.', so it can never be a
 * control file (memory.*, cgroup.*) nor climb out of the parent. */
static bool instance_valid(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == n;
}

/* HOST:PORT ([V6]:PORT), port 0..65535 (0: any free port); one line that
 * names the option and the range, before anything is opened. */
static int check_listen(const char *hostport, char *err, size_t errlen)
{
    const char *colon = hostport ? strrchr(hostport, ':') : NULL;
    if (!hostport)
        return 0;
    if (!colon || colon == hostport || !colon[1])
        return fail(err, errlen, "--listen: '%s' is not HOST:PORT (127.0.0.1:8080, [::1]:8080)",
                    hostport);
    if (hostport[0] == '[' && colon[-1] != ']')
        return fail(err, errlen, "--listen: '%s' is not [IPV6]:PORT", hostport);
    uint64_t port;
    int r = cr_units_parse_uint(colon + 1, 0, UINT64_MAX, &port);
    if (r < 0)
        return fail(err, errlen, "--listen: port '%s' is not a number", colon + 1);
    if (port > 65535)
        return fail(err, errlen, "--listen: port %s is out of range 1..65535 (0: any free port)",
                    colon + 1);
    return 0;
}

int cr_config_finish(struct cr_config *cfg, char *err, size_t errlen)
{
    int r = check_listen(cfg->listen, err, errlen);
    if (r < 0)
        return r;
    if (cfg->memory_soft_pct) {
        if (!cfg->memory_max)
            return fail(err, errlen, "--memory-soft %u%% needs --memory-max", cfg->memory_soft_pct);
        cfg->memory_soft = cfg->memory_max / 100 * cfg->memory_soft_pct;
    }
    if (cfg->memory_max && cfg->memory_max < (4u << 20))
        return fail(err, errlen, "--memory-max %llu is below the 4M minimum",
                    (unsigned long long)cfg->memory_max);
    if (cfg->memory_soft && cfg->memory_max && cfg->memory_soft >= cfg->memory_max)
        return fail(err, errlen, "--memory-soft must be below --memory-max");
    if (cfg->memory_high && cfg->memory_max && cfg->memory_high >= cfg->memory_max)
        return fail(err, errlen, "--memory-high must be below --memory-max");
    if (cfg->hang_timeout_ms && cfg->watchdog_ms && cfg->hang_timeout_ms < cfg->watchdog_ms)
        return fail(err, errlen, "--hang-timeout must not be shorter than --watchdog");
    /* With reuseport the kernel hashes connections onto every socket of
     * the group, a frozen spare's too, where they would wait unanswered. */
    if (cfg->spares && cfg->balance == CR_BALANCE_REUSEPORT)
        return fail(err, errlen,
                    "--spares needs --balance shared: with reuseport a frozen "
                    "spare's own socket would be handed connections it cannot accept");
    if (cfg->backoff_max_ms < cfg->backoff_initial_ms)
        return fail(err, errlen, "--backoff-max must be at least --backoff-initial");
    /* A generation's directory and node's file names below it fit in the
     * post-mortem's paths (generation/diag.h). */
    if (cfg->diag_dir && (!cfg->diag_dir[0] || strlen(cfg->diag_dir) > CR_CONFIG_DIAG_DIR_MAX))
        return fail(err, errlen, "--diag-dir: give a path of 1 to %d bytes, or none",
                    CR_CONFIG_DIAG_DIR_MAX);
    /* A snapshot lowers the heap to leave room for itself: never without
     * a directory for it. */
    if (cfg->heap_snapshot && cfg->diag_dir && strcmp(cfg->diag_dir, "none") == 0)
        return fail(err, errlen, "--heap-snapshot needs a --diag-dir to write to, not none");
    if (cfg->instance && !instance_valid(cfg->instance))
        return fail(err, errlen, "--instance '%s': use 1 to 64 letters, digits, '-' or '_'",
                    cfg->instance);
    return 0;
}

uint64_t cr_config_heap_limit(const struct cr_config *cfg)
{
    if (!cfg->memory_max)
        return 0;
    return cfg->memory_max - cfg->memory_max / 100 * cfg->heap_headroom_pct;
}

/* The default as --help states it, one way for every option: the value in
 * the user's syntax, "value = note" when the value is resolved at run time,
 * the note alone, else "off" (a flag) or "none" (nothing set). */
static const char *default_text(const struct cr_opt *o, char *buf, size_t len)
{
    if (o->def && o->note)
        snprintf(buf, len, "%s = %s", o->def, o->note);
    else if (o->def || o->note)
        snprintf(buf, len, "%s", o->def ? o->def : o->note);
    else
        snprintf(buf, len, "%s", o->type == OPT_BOOL ? "off" : "none");
    return buf;
}

void cr_config_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [OPTION]... [-- PROGRAM [ARG]...]\n"
            "Supervise N pre-forked workers that serve one listening socket.\n"
            "PROGRAM defaults to the reference worker, corral-worker.\n\n",
            prog);
    for (size_t i = 0; i < cr_noptions; i++) {
        char left[64];
        const struct cr_opt *o = &cr_options[i];
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
        char range[80] = "";
        if (numeric(o)) {
            char r[64];
            snprintf(range, sizeof(range), " (range %s)",
                     cr_units_range(r, sizeof(r), kind_of(o), o->min, o->max));
        }
        char def[128];
        fprintf(f, "  %-34s %s (default: %s)%s%s\n", left, o->help,
                default_text(o, def, sizeof(def)), range, o->live ? " [live]" : "");
    }
    fprintf(f, "  %-34s %s\n  %-34s %s\n\n", "-h, --help", "show this help", "-V, --version",
            "show the version");
    fprintf(f, "Every long option is also a key of the JSON config file (\"workers\": 4,\n"
               "\"memory-max\": \"256M\"), plus \"command\": [\"program\", \"arg\", ...].\n"
               "[live] options may be changed at run time with `corralctl set KEY VALUE`.\n"
               "Numbers are whole: sizes take K, M, G or T (1024-based); durations take ms, s,\n"
               "m or h, and a bare number is seconds (MS options: milliseconds).\n");
}

void cr_config_to_json(const struct cr_config *cfg, cJSON *obj)
{
    for (size_t i = 0; i < cr_noptions; i++) {
        const struct cr_opt *o = &cr_options[i];
        const void *field = (const char *)cfg + o->offset;
        switch (o->type) {
        case OPT_UINT:
            cJSON_AddNumberToObject(obj, o->name, *(const unsigned *)field);
            break;
        case OPT_U64:
        case OPT_SIZE:
        case OPT_SOFT:
        case OPT_MS:
        case OPT_MS_MS:
            cJSON_AddNumberToObject(obj, o->name, (double)*(const uint64_t *)field);
            break;
        case OPT_STR:
        case OPT_LEVEL:
        case OPT_PROG:
            if (*(char *const *)field)
                cJSON_AddStringToObject(obj, o->name, *(char *const *)field);
            else
                cJSON_AddNullToObject(obj, o->name);
            break;
        case OPT_BOOL:
            cJSON_AddBoolToObject(obj, o->name, *(const bool *)field);
            break;
        case OPT_BALANCE:
            cJSON_AddStringToObject(obj, o->name, cr_balance_to_string(cfg->balance));
            break;
        case OPT_READY: {
            char buf[48];
            cJSON_AddStringToObject(
                obj, o->name,
                cr_ready_to_string(cfg->ready, cfg->ready_delay_ms, buf, sizeof(buf)));
            break;
        }
        case OPT_WORKERS:
            if (cfg->workers_max) { /* MIN..MAX: a string */
                char range[32];
                snprintf(range, sizeof(range), "%u..%u", cfg->workers_min, cfg->workers_max);
                cJSON_AddStringToObject(obj, o->name, range);
            } else {
                cJSON_AddNumberToObject(obj, o->name, *(const unsigned *)field);
            }
            break;
        case OPT_ENV:
        case OPT_NAMES: {
            char *const *l = *(char **const *)field;
            cJSON *a = cJSON_AddArrayToObject(obj, o->name);
            for (size_t k = 0; a && l && l[k]; k++) {
                /* Values may be secrets: show the names only. */
                size_t nl = o->type == OPT_ENV ? (size_t)(strchr(l[k], '=') - l[k]) : strlen(l[k]);
                char name[256];
                snprintf(name, sizeof(name), "%.*s", (int)nl, l[k]);
                cJSON_AddItemToArray(a, cJSON_CreateString(name));
            }
            break;
        }
        }
    }
}
