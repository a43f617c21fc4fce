/* Finding and injecting the Node.js agent. */
#include "node_agent.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cr_config.h"
#include "spawnproc.h"

#define AGENT_NAME "corral-node-agent.js"

/* $CORRAL_NODE_AGENT, else the build tree's copy (../agent/ next to
 * supervisor/, as for corral-worker), else the installed one. */
static char *agent_path(void)
{
    char *p = cr_spawn_find_file("CORRAL_NODE_AGENT", "../agent/" AGENT_NAME, R_OK,
                                 CR_DATADIR "/corral/" AGENT_NAME);
    /* A canonical path on node's command line (no "supervisor/../"). */
    char *real = p ? realpath(p, NULL) : NULL;
    if (real) {
        free(p);
        return real;
    }
    return p;
}

int cr_node_agent_arg(const struct cr_config *c, bool is_node, char **ret_arg)
{
    *ret_arg = NULL;
    if (!is_node || !(c->node_agent || c->node_heap))
        return 0;
    char *path = agent_path();
    if (!path)
        return -ENOMEM;
    if (!c->node_agent && access(path, R_OK) != 0) {
        free(path);
        return 0;
    }
    char *arg = NULL;
    int r = asprintf(&arg, "--require=%s", path);
    free(path);
    if (r < 0)
        return -ENOMEM;
    *ret_arg = arg;
    return 0;
}
