/* `corralctl why`: one screen about one death, from its post-mortem (a
 * `history` record): the category and its evidence, memory over the last
 * minute as sparklines, the request in flight and the stack when the
 * record has them, the last stderr lines, and what to do next for that
 * category. Pure formatting: JSON in, text out on a FILE. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "render.h"

struct ctl_why_opts {
    struct ctl_style style;
    bool unicode; /* ▁..█ sparklines and box rules; false: ASCII only */
    int width;    /* columns to fit: CTL_WHY_MIN_WIDTH or more */
};

#define CTL_WHY_MIN_WIDTH    60
#define CTL_WHY_STDERR_LINES 8  /* the stderr tail's last lines shown */
#define CTL_WHY_STACK_LINES  20 /* a stack's first lines shown */

/* The screen for pm. */
void ctl_print_why(FILE *f, const struct ctl_why_opts *o, const cJSON *pm);

/* The post-mortem to show from a saved document (--file): a record, an
 * array of records, a `history` response, a `died` event, or any of those
 * one per line (NDJSON, as `history --format ndjson` or an --on-death
 * program's stdin gives them). Of the records there, the newest (by end)
 * whose worker id is `match`, else whose pid is, else (match 0) the
 * newest of all. A new object (cJSON_Delete it), or NULL with err set. */
cJSON *ctl_why_pick(const char *text, size_t len, long match, char *err, size_t errlen);

/* Whether the locale (LC_CTYPE, from the environment) is UTF-8. */
bool ctl_locale_utf8(void);
/* The columns to fit: the terminal's width when f is one, else $COLUMNS,
 * else 80; never below CTL_WHY_MIN_WIDTH. */
int ctl_width_for(FILE *f);
