/* What a reaped generation died of: reads the rest of its output, gathers
 * the evidence (wait status, corrald's own kill ledger, OOM counters, heap
 * report, stderr tail, uptime), classifies it (death.c) and fills a
 * post-mortem. Below the core: it records nothing and decides nothing. */
#pragma once

#include <stdint.h>

struct cr_gen;
struct cr_postmortem;

/* The post-mortem of g's process, reaped at loop time now_ms (caller
 * frees); NULL when out of memory. */
struct cr_postmortem *cr_worker_postmortem(struct cr_gen *g, uint64_t now_ms);
