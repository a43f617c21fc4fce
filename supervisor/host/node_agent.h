/* The Node.js agent (agent/corral-node-agent.js): where corrald finds it and
 * when it preloads it into a node worker with --require. */
#pragma once

#include <stdbool.h>

struct cr_config;

/* Returns in *ret_arg a malloc'd "--require=<agent path>" to put right
 * after a node worker's program name, or NULL when none is wanted: the
 * program is not node (is_node false), or neither --node-agent nor
 * --node-heap asked for it, or — only when --node-heap implied it — the
 * agent is not installed. An explicit --node-agent always injects, so a
 * missing agent fails loudly in node's own words rather than silently.
 * 0 or -ENOMEM. */
int cr_node_agent_arg(const struct cr_config *c, bool is_node, char **ret_arg);
