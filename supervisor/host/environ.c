/* Where corrald runs, and the defaults that follow: see environ.h. */
#include "environ.h"

#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

/* Which container engine, if any, from the marks engines leave: docker's
 * /.dockerenv, podman's /run/.containerenv, the container= variable
 * (podman, systemd-nspawn, LXC). NULL: none found. */
static const char *container_engine(void)
{
    const char *env = getenv("container");
    if (access("/.dockerenv", F_OK) == 0)
        return "docker";
    if (access("/run/.containerenv", F_OK) == 0)
        return "podman";
    return env && *env ? env : NULL;
}

/* The engines' default grace between SIGTERM and SIGKILL is 10 s (docker
 * stop, podman stop; Kubernetes' terminationGracePeriodSeconds is 30 s):
 * as PID 1 the default drain must end before that, or every stop ends in
 * the engine's SIGKILL with requests still in flight. */
#define CR_PID1_STOP_TIMEOUT_MS 8000

void cr_environ_apply(struct cr_config *cfg)
{
    const char *engine = container_engine();
    bool pid1 = getpid() == 1;
    if (!pid1 && !engine)
        return;
    cr_log(CR_LOG_NOTICE, "corrald runs %s%s%s", pid1 ? "as PID 1" : "", pid1 && engine ? " " : "",
           engine ? "in a container" : "");
    if (engine)
        cr_log(CR_LOG_INFO, "container engine: %s", engine);
    if (pid1 && !cr_config_given(cfg, "stop-timeout")) {
        cfg->stop_timeout_ms = CR_PID1_STOP_TIMEOUT_MS;
        cr_log(CR_LOG_NOTICE,
               "as PID 1 the default stop timeout is %u s, inside the engines' "
               "10 s grace; raise both together (--stop-timeout and docker/podman "
               "stop -t, or terminationGracePeriodSeconds)",
               CR_PID1_STOP_TIMEOUT_MS / 1000);
    }
}
