/* cr_notify_rx: the datagram form of the notify protocol — the socket in
 * its private directory, its reading (batched while messages trickle in),
 * and the attribution of each datagram to the generation that sent it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

struct cr_reaper;
struct cr_gen_sink;

struct cr_notify_rx {
    uv_loop_t *loop;
    struct cr_reaper *reaper;       /* who a pid belongs to */
    const struct cr_gen_sink *sink; /* where messages go */
    bool by_cgroup;                 /* a worker's other processes may report (per-worker groups) */
    bool (*busy)(void *ctx);        /* spawns going on: read every message at once */
    void *busy_ctx;
    int fd;
    char addr[108]; /* NOTIFY_SOCKET for workers: <dir>/notify */
    char dir[108];  /* private (0700) directory of the socket */
    uv_poll_t poll;
    uv_timer_t batch;     /* the poll's pause while messages trickle in */
    uint64_t woke_at;     /* loop ms of the poll's last wake-up */
    unsigned quiet_ticks; /* ticks in a row that read nothing */
};

struct cr_notify_rx_opts {
    bool by_cgroup;
    bool chown; /* the workers run as another user: they own the socket, their group may
                 * search the directory */
    uid_t uid;
    gid_t gid;
    bool (*busy)(void *ctx);
    void *busy_ctx;
};

/* Creates the socket in a private 0700 directory (0710 with the workers'
 * group under --user, the socket theirs) and starts polling it; warns when
 * a parent directory keeps the workers' user from reaching it. -errno. */
int cr_notify_rx_open(struct cr_notify_rx *rx, uv_loop_t *loop, struct cr_reaper *reaper,
                      const struct cr_gen_sink *sink, const struct cr_notify_rx_opts *o);
/* Closes the handles (the end of the loop). */
void cr_notify_rx_stop(struct cr_notify_rx *rx);
/* Closes the socket and removes it and its directory. */
void cr_notify_rx_close(struct cr_notify_rx *rx);
