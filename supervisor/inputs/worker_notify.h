/* What a worker's notify message changes: its report (sticky
 * metrics), READY=1 and WATCHDOG=1 as lifecycle events, X_FATAL, and the
 * request cap. An input: it calls down into the core. */
#pragma once

struct cr_worker;
struct cr_notify_msg;

void cr_worker_notify(struct cr_worker *w, const struct cr_notify_msg *m);
