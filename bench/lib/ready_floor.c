/* The floor under a worker's spawn -> READY: a C program linked with
 * libsystemd (as every corral C worker must be) that takes its socket and
 * says READY=1, doing nothing else. Built and timed by the startup suite. */
#include <systemd/sd-daemon.h>

int main(void)
{
    if (sd_listen_fds(1) != 1)
        return 1;
    sd_notify(0, "READY=1");
    return 0;
}
