/* A real corrald supervisor in which no control command can fork or
 * signal anything, for the control harnesses: stopping, one worker slot
 * without a process, one death on record, cgroups off, its loop not run
 * (the socket harness runs it). */
#pragma once

#include "supervisor.h"

struct cr_supervisor *fuzz_sup_stopping(void);
/* The control dispatcher's context on it (cr_control_core_ops). */
struct cr_control_core *fuzz_sup_core(void);
/* Aborts unless the supervisor is still in that state (and quiets the log
 * again: `set log-level debug` would flood the run). */
void fuzz_sup_check(struct cr_supervisor *sup);
