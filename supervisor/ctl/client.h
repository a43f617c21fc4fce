/* corralctl's connection to corrald's control socket: one blocking
 * AF_UNIX stream, newline-delimited JSON. */
#pragma once

#include <cjson/cJSON.h>
#include <stddef.h>

#define CTL_MAX_LINE (64u << 20) /* responses (status, metrics) can be large */

struct ctl_conn {
    int fd;
    char *buf;
    size_t len, cap;
    size_t taken; /* bytes of the line handed out last, dropped on the next read */
};

/* The default socket path, as corrald picks it: $RUNTIME_DIRECTORY/control.sock,
 * else /run/corral/control.sock if it exists, else ./corral.sock. Static. */
const char *ctl_default_socket(void);

/* Connects; -errno on failure. */
int ctl_connect(struct ctl_conn *c, const char *path);
void ctl_close(struct ctl_conn *c);
/* Sends one request object followed by a newline. */
int ctl_send(struct ctl_conn *c, const cJSON *req);
/* Reads one line into *ret (points into the connection's buffer, valid
 * until the next call). timeout_ms < 0 waits forever. Returns the length,
 * -ETIMEDOUT, -EPIPE at end of stream, or another -errno. */
long ctl_read_line(struct ctl_conn *c, int timeout_ms, char **ret);
/* Sends req and parses the one-line answer into *ret. */
int ctl_call(struct ctl_conn *c, const cJSON *req, int timeout_ms, cJSON **ret, char **ret_raw);
