/* `corralctl top`: a live view redrawn every interval, quit with q. */
#pragma once

#include "client.h"
#include "render.h"

/* Runs until q, Ctrl-C, a signal or a lost connection. Restores the
 * terminal on every way out. Returns the exit code (0, or 3 when the
 * connection was lost). */
int ctl_top(struct ctl_conn *c, const struct ctl_style *st, int interval_ms);
