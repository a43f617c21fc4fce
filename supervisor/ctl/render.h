/* corralctl's human output: tables and lines a person reads at a glance.
 * Pure formatting: JSON in, text out on a FILE. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct ctl_style {
    bool color;
};

/* Colour only on a TTY, and never when NO_COLOR is set (no-color.org). */
struct ctl_style ctl_style_for(FILE *f);

/* "6.1M", "512K", "1.2G": binary units, three significant characters. */
void ctl_fmt_bytes(double bytes, char *buf, size_t len);
/* "950ms", "12s", "3m04s", "2h01m", "3d04h". */
void ctl_fmt_ms(double ms, char *buf, size_t len);
/* Microseconds as "850us", "4.4ms", "2.01s". */
void ctl_fmt_us(double us, char *buf, size_t len);
/* A bar of `width` cells for used/limit (colour by fill when enabled). */
void ctl_bar(FILE *f, const struct ctl_style *st, double used, double limit, int width);
/* A sparkline of n values scaled to [0, max]. */
void ctl_sparkline(FILE *f, const double *v, size_t n, double max);

void ctl_print_supervisor(FILE *f, const struct ctl_style *st, const cJSON *sup);
void ctl_print_workers(FILE *f, const struct ctl_style *st, const cJSON *workers);
void ctl_print_worker(FILE *f, const struct ctl_style *st, const cJSON *worker);
void ctl_print_history(FILE *f, const struct ctl_style *st, const cJSON *history);
/* For scripts: one record per line, compact JSON as corrald sent it. */
void ctl_print_history_ndjson(FILE *f, const cJSON *history);
/* For scripts: CSV (RFC 4180: CRLF line ends; a field with a comma, a
 * quote, CR or LF quoted, its quotes doubled), a header line and one row
 * per record: CTL_HISTORY_CSV_HEADER; time is the end, ISO 8601 in UTC;
 * a figure corrald did not know is an empty field. */
#define CTL_HISTORY_CSV_HEADER                                                                   \
    "time,worker,pid,generation,category,shell_status,uptime_ms,rss_bytes,cg_usage_bytes,"      \
    "heap_used_bytes,heap_limit_bytes,reason"
void ctl_print_history_csv(FILE *f, const cJSON *history);
void ctl_print_event(FILE *f, const struct ctl_style *st, const cJSON *event);

/* Small accessors (0 / "" when absent or of another type). */
double ctl_num(const cJSON *o, const char *k);
/* True when o[k] is a number: null or absent means corrald did not measure it. */
bool ctl_known(const cJSON *o, const char *k);
/* o[k] formatted by fmt, or "-" when it is unknown (never a made-up 0). */
void ctl_fmt_known(const cJSON *o, const char *k, void (*fmt)(double, char *, size_t), char *buf,
                   size_t len);
/* A figure older than this when corrald answered is marked "~" (corrald
 * reads memory again for each answer; one it could not read in time, or
 * cheaply, shows its last sample and that sample's age). */
#define CTL_STALE_MS 1000.0
/* True when o[age_key] (a figure's age in ms) is CTL_STALE_MS or more. */
bool ctl_stale(const cJSON *o, const char *age_key);
void ctl_fmt_ratio(double r, char *buf, size_t len);
const char *ctl_str(const cJSON *o, const char *k);
const char *ctl_state_color(const struct ctl_style *st, const char *state);
extern const char *const ctl_reset;
