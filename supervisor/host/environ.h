/* cr_environ: where corrald runs — as a container's PID 1, in which engine
 * — said once at start-up, and the defaults that follow from it. */
#pragma once

struct cr_config;

/* Logs the container engine and PID 1 (when either applies) and, as PID 1,
 * shortens the default stop timeout to fit inside the engines' 10 s grace
 * — only where --stop-timeout was not given (cr_config_given). */
void cr_environ_apply(struct cr_config *cfg);
