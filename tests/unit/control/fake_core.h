/* A fake core for the control dispatcher's unit tests: struct cr_ctl_ops
 * over a struct fake that records what was asked and answers what the test
 * set, and the checks every response must pass. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control_cmd.h"
#include "history.h"

struct fake {
    int ret;           /* what the int operations return */
    bool fail_json;    /* the cJSON operations return NULL (out of memory) */
    char *status_text; /* a string member of the status answer */
    size_t nhistory;
    struct cr_postmortem hist[4]; /* newest first */
    int workers_max;              /* ids 1..workers_max exist */
    unsigned scaled;
    int restarted, killed, sig, reloads, stops, calls;
    char key[64], value[256];
    const char *stack_state;     /* the fake stack's "state", if any */
    uint32_t stack_request;      /* the last stack request looked for (0: asked) */
    struct cr_control_turn turn; /* what it said to do next */
};

extern const struct cr_ctl_ops fake_ops;

/* Two workers, three deaths on record (newest first: worker 2 at 3000 ms,
 * worker 1 at 2000, worker 2 at 1000; pids 103, 102, 101). */
struct fake fake(void);

/* One request (length given: NULs and odd bytes pass through), checked as
 * every response must be: one valid UTF-8 line that parses back as JSON.
 * f->turn holds what the dispatcher said to do next; ret_sub its
 * subscribe; the printed line goes to ret_line if asked (caller frees). */
cJSON *run_n(struct fake *f, const char *line, size_t len, bool *ret_sub, char **ret_line);
cJSON *run(struct fake *f, const char *line, bool *ret_sub);
void assert_ok(cJSON *res);
/* The error's code (noted as seen), after checking its shape. */
const char *error_code(const cJSON *res);
/* An error with this code, no subscription and nothing held. */
void expect_error_n(struct fake *f, const char *line, size_t len, const char *code);
void expect_error(struct fake *f, const char *line, const char *code);
double num(const cJSON *o, const char *k);
/* The error codes error_code() has seen so far. */
size_t fake_codes_seen(const char ***ret);
