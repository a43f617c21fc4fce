/* The option table of corrald's configuration: every option's name, type,
 * field, range, whether it may change at run time, its default (stated once,
 * here) and its help. Read by config.c, which parses, sets and prints
 * through it. Private to the config module. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum opt_type {
    OPT_UINT,    /* unsigned */
    OPT_U64,     /* uint64_t count */
    OPT_SIZE,    /* uint64_t bytes, K/M/G suffixes */
    OPT_SOFT,    /* bytes or N% of memory_max */
    OPT_MS,      /* uint64_t milliseconds; bare numbers are seconds */
    OPT_MS_MS,   /* uint64_t milliseconds; bare numbers are milliseconds */
    OPT_STR,     /* char * */
    OPT_PROG,    /* char *: a program's absolute path; "none" (or "") sets NULL */
    OPT_BOOL,    /* bool flag */
    OPT_BALANCE, /* enum cr_balance */
    OPT_LEVEL,   /* log level name */
    OPT_READY,   /* readiness mode: auto, notify, exec, delay:DURATION */
    OPT_WORKERS, /* a count, or "auto" (0: one per core) */
    OPT_ENV,     /* char ** list of KEY=VALUE; repeatable, appends */
    OPT_NAMES,   /* char ** list of variable names; repeatable, appends */
};

struct cr_opt {
    const char *name;
    char short_name;
    enum opt_type type;
    size_t offset;
    uint64_t min, max; /* numeric types: the inclusive range, in bytes, ms or units */
    bool live;         /* may be changed at run time with `set` */
    const char *arg;
    /* The default in the user's own syntax ("10", "auto", "127.0.0.1:8080"),
     * read by the same parser as a flag's value; NULL: the field stays zero,
     * nothing set. Stated here once: cr_config_init() fills the struct from
     * it, --help prints it, tests/unit/core/test_defaults.py checks README.md
     * and the man page against --help. */
    const char *def;
    /* What the default means where the value alone does not say it: one
     * resolved at run time ("one per core" for auto) or, without a def, what
     * happens when the option is not given ("corrald's own"). No ';' nor
     * ')': the docs quote it inside "(default ...)". */
    const char *note;
    const char *help;
};

/* Bounds that keep every later product and sum far from overflow. */
#define CR_MAX_SIZE        (1ull << 50)           /* 1 PiB */
#define CR_MAX_DURATION_MS (720ull * 3600 * 1000) /* 30 days */
#define SZ                 .min = 0, .max = CR_MAX_SIZE
#define DUR(lo)            .min = (lo), .max = CR_MAX_DURATION_MS

extern const struct cr_opt cr_options[];
extern const size_t cr_noptions;
