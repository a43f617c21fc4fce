/* cr_sd: corrald ↔ systemd. READY=1 once every worker is ready (or the
 * start timeout passed), STATUS= kept current, RELOADING=1/STOPPING=1
 * around reloads and shutdown, WATCHDOG=1 from the loop itself. Without
 * NOTIFY_SOCKET all of it is a no-op. An output: it subscribes to the
 * core's events and reads its const views. */
#pragma once

#include <uv.h>

struct cr_supervisor;
struct cr_sd;
struct cr_event;

/* Reads NOTIFY_SOCKET and WATCHDOG_USEC and starts the start-grace or
 * watchdog timer. -ENOMEM. */
int cr_sd_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_sd **ret);
/* Subscriber: table changes, reload progress, stop, end. */
void cr_sd_on_event(void *sd, const struct cr_event *ev);
/* Frees it once the loop has ended; returns NULL. */
struct cr_sd *cr_sd_free(struct cr_sd *sd);
