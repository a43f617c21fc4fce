/* cr_config: corrald's configuration — defaults, command-line flags and the
 * optional JSON file, all described by one table so that a flag and its
 * config-file key can never drift apart.
 *
 * Pure: parsing neither logs nor exits. Errors come back as -EINVAL with a
 * message naming the offending flag/key and value in `err`.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum cr_balance {
    CR_BALANCE_SHARED,    /* one listening socket, one accept queue for all */
    CR_BALANCE_REUSEPORT, /* one SO_REUSEPORT socket per worker */
    _CR_BALANCE_MAX,
};

/* When a worker counts as ready (--ready); docs/worker-protocol.md. */
enum cr_ready_mode {
    CR_READY_AUTO,   /* notify if it speaks the protocol, else ready after a silent grace */
    CR_READY_NOTIFY, /* READY=1, under the start timeout */
    CR_READY_EXEC,   /* once exec succeeded */
    CR_READY_DELAY,  /* after ready_delay_ms alive */
    _CR_READY_MAX,
};

/* auto: a worker silent this long after exec is taken as ready. One second:
 * long enough for a worker that speaks the protocol to say its first word
 * (the reference worker and the Node agent do within milliseconds), short
 * enough that a plain app serves soon; connections made meanwhile wait in
 * the shared accept queue. */
#define CR_READY_AUTO_GRACE_MS 1000

/* --diag-dir's longest path: with a 64-byte instance and a generation's
 * name below it, node's files fit in a post-mortem's 384-byte paths. */
#define CR_CONFIG_DIAG_DIR_MAX 200

struct cr_config {
    unsigned workers;          /* 0 = uv_available_parallelism(); with a range: the target now */
    unsigned workers_min;      /* --workers MIN..MAX: corrald decides N within (scaler.c); */
    unsigned workers_max;      /*   both 0: N is fixed */
    uint64_t scale_wait_ms;    /* the accept queue's wait that calls for a worker (autoscale.h) */
    uint64_t scale_cooldown_ms; /* low use this long before workers go */
    unsigned memory_pressure_pct; /* recycle at this PSI some avg10 (v2); 0 = off */
    char *listen;              /* HOST:PORT */
    enum cr_balance balance;
    uint64_t saturated_after_ms; /* the accept queue waited this long: saturated; 0 = off */
    char *control;             /* control socket path; NULL = default */
    char *control_group;       /* group allowed on the control socket */
    char *control_allow_uids;  /* extra uids, comma separated */
    unsigned control_max_clients;
    uint64_t control_idle_ms;   /* a control client silent this long is closed */
    char *metrics_listen;      /* HOST:PORT of the Prometheus listener, or NULL */

    uint64_t start_timeout_ms; /* applies where readiness is announced */
    enum cr_ready_mode ready;
    uint64_t ready_delay_ms;   /* CR_READY_DELAY */
    uint64_t min_uptime_ms;    /* a death this long after ready is not a crash loop */
    uint64_t stop_timeout_ms;
    uint64_t stop_delay_ms;    /* lame duck: serve this long after SIGTERM, /readyz failing */
    unsigned ready_min;        /* /readyz: workers ready; 0 = every worker asked for */
    char *termination_log;     /* NULL = /dev/termination-log where it exists; "none" = off */
    char *on_death;            /* run after each death (ondeath.h); NULL = none */
    uint64_t on_death_timeout_ms; /* ... SIGKILLed (with its process group) after this */
    unsigned on_death_parallel;   /* ... at most this many at once */
    uint64_t watchdog_ms;      /* silence after which a worker is "blocked"; 0 = off */
    uint64_t hang_timeout_ms;  /* silence after which it is killed; 0 = never */
    uint64_t stack_timeout_ms; /* the wait for a hung worker's stack before its kill; 0 = none */
    bool no_worker_page;       /* no worker page (common/wpage.h) for the workers */
    uint64_t backoff_initial_ms;
    uint64_t backoff_max_ms;
    uint64_t backoff_reset_ms; /* a worker up this long resets its backoff */
    unsigned crash_budget;     /* more than this many deaths ... */
    uint64_t crash_window_ms;  /* ... within this window → failed */
    uint64_t failed_retry_ms;  /* a failed worker is retried this slowly */
    unsigned threadpool;       /* UV_THREADPOOL_SIZE for workers; 0 = unset */

    uint64_t memory_max;       /* per-worker hard limit, bytes; 0 = none */
    uint64_t memory_high;      /* v2 memory.high; 0 = none */
    uint64_t memory_soft;      /* bytes; 0 = none (see memory_soft_pct) */
    unsigned memory_soft_pct;  /* % of memory_max when given as N% */
    unsigned soft_samples;
    unsigned heap_headroom_pct;
    bool node_heap;
    bool node_agent;           /* preload the Node.js agent (node_agent.h) */
    char *diag_dir;            /* node's reports and snapshots (diag.h); NULL = default, "none" = off */
    bool heap_snapshot;        /* node: a heap snapshot near the heap limit, its limit lowered to fit */
    char *cgroup_parent;
    char *instance;            /* owns <parent>/workers/<instance>; NULL = from the control path */
    bool no_cgroups;
    uint64_t sample_interval_ms;
    bool pss;                  /* sample PSS (smaps_rollup) instead of RSS (statm) */
    unsigned sample_ring;
    unsigned history;
    uint64_t max_requests;
    uint64_t max_requests_jitter;
    uint64_t max_lifetime_ms;
    unsigned recycle_parallel;
    unsigned spares;           /* warm spares kept started, ready and frozen */
    bool no_exit_notice;       /* spares wait for the reap, not the kernel's exit notice */
    unsigned spawn_parallel;   /* workers between fork and READY=1 at once; 0 = 2 × cores, ≥ 4 */
    unsigned priority_boost;   /* corrald's nice levels above its workers (priority.h); 0 = none */

    char *user;                /* workers run as this user (name or uid); NULL = corrald's */
    char *group;               /* ... and group; NULL = the user's primary group */
    char **env;                /* KEY=VALUE set for workers (NULL-terminated list) */
    char **pass_env;           /* when set: only these keys of corrald's environment pass */

    char *log_level;           /* debug, info, notice, warning, err */
    char *config_file;

    char **argv;               /* worker program and its arguments (NULL-terminated) */
    size_t argc;

    uint64_t given[2];         /* options set explicitly, a bit per option: cr_config_given() */
};

/* Fills cfg with the defaults. Call cr_config_done() to free. */
void cr_config_init(struct cr_config *cfg);
void cr_config_done(struct cr_config *cfg);

/* Parses argv (argv[0] is the program). Returns 0, 1 when --help or
 * --version was asked (ret_action says which: 'h' or 'v'), or -EINVAL with
 * `err` filled. Flags override whatever the config file set: the caller
 * loads the file named by --config first (cr_config_find_file). */
int cr_config_parse_args(struct cr_config *cfg, int argc, char **argv, char *ret_action,
                         char *err, size_t errlen);

/* Returns the value of --config/-c in argv, or NULL. */
const char *cr_config_find_file(int argc, char **argv);

/* Applies a JSON object (the config file's text). Unknown keys and bad
 * values are refused. */
int cr_config_parse_json(struct cr_config *cfg, const char *text, char *err, size_t errlen);

/* Sets one key to a textual value, as the control socket's `set` does.
 * Only keys marked live may be set at run time (live_only=true). */
int cr_config_set(struct cr_config *cfg, const char *key, const char *value, bool live_only,
                  char *err, size_t errlen);

/* Checks cross-field rules (e.g. soft below hard) and resolves derived
 * values (memory_soft from a percentage). */
int cr_config_finish(struct cr_config *cfg, char *err, size_t errlen);

/* Pure value parsers, exposed for tests and for the control socket. */
int cr_parse_size(const char *s, uint64_t *ret);           /* 64M, 1G, 4096, 1.5G */
int cr_parse_duration_ms(const char *s, uint64_t *ret);     /* 10 (s), 500ms, 2s, 1m, 1h */
int cr_parse_uint(const char *s, uint64_t max, uint64_t *ret);

/* The heap limit handed to workers: memory_max minus the headroom. 0 when
 * there is no memory_max. */
uint64_t cr_config_heap_limit(const struct cr_config *cfg);

/* Whether the option named `name` (its long name, "stop-timeout") was set
 * explicitly: by a flag, in the config file or by `set` (cr_config_set),
 * even to its default's value. False for a default and for a name that is
 * no option. The parsers record it; a field written directly is not. */
bool cr_config_given(const struct cr_config *cfg, const char *name);

/* Writes --help to f. */
void cr_config_usage(FILE *f, const char *prog);

const char *cr_balance_to_string(enum cr_balance b);
/* "auto", "notify", "exec" or "delay:<ms>ms" into buf. */
const char *cr_ready_to_string(enum cr_ready_mode m, uint64_t delay_ms, char *buf, size_t len);

/* Adds the config as a JSON object's members (for `status`). */
struct cJSON;
void cr_config_to_json(const struct cr_config *cfg, struct cJSON *obj);
