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

#define AGENT_NAME "corral-node-agent.js"

/* $CORRAL_NODE_AGENT, else the build tree's copy (../agent/ next to
 * supervisor/, as for corral-worker), else the installed one. */
static char *agent_path(void)
{
    const char *env = getenv("CORRAL_NODE_AGENT");
    if (env && *env)
        return strdup(env);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *cand = NULL;
            char *real = NULL;
            if (asprintf(&cand, "%s/../agent/" AGENT_NAME, self) >= 0) {
                real = realpath(cand, NULL);
                free(cand); /* undefined, not NULL, when asprintf fails */
            }
            if (real && access(real, R_OK) == 0)
                return real;
            free(real);
        }
    }
    return strdup(CR_DATADIR "/corral/" AGENT_NAME);
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
