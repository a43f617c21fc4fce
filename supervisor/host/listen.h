/* cr_listen: the listening sockets — from systemd (socket activation) or
 * bound by corrald itself. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_listener {
    int fd;              /* CLOEXEC; -1 when none */
    char addr[80];       /* "127.0.0.1:8080" as bound (port resolved) */
    char name[64];       /* LISTEN_FDNAMES name, "corral" when bound here */
    bool from_systemd;
};

/* Takes the first stream socket systemd passed (sd_listen_fds_with_names).
 * 0 = none passed, 1 = got one, -errno on error. Unsets LISTEN_* . */
int cr_listen_from_systemd(struct cr_listener *ret);

/* Binds host:port (numeric host, or a name resolved once at start-up).
 * reuseport sets SO_REUSEPORT; do_listen=false only reserves the address
 * (the reuseport primary). */
int cr_listen_bind(const char *hostport, bool reuseport, bool do_listen, struct cr_listener *ret);

/* Host and port split ("[::1]:80" and "127.0.0.1:80"). Pure. */
int cr_listen_split(const char *hostport, char *host, size_t hostlen, char *port, size_t portlen);

/* A bound socket's address as "127.0.0.1:8080" or "[::1]:80" (port
 * resolved), else "fd N". */
void cr_listen_describe(int fd, char *buf, size_t len);

/* The accept queue of a listening TCP socket: one getsockopt(TCP_INFO),
 * whose tcpi_unacked is, for a socket in LISTEN, the connections completed
 * and not yet accepted, and tcpi_sacked the backlog (the kernel answers
 * both from the socket itself: no walk of anything). 1 with *length and
 * *max set; 0 for a socket that is not a listening TCP socket (a Unix
 * socket from systemd; the bound, not listening, reuseport primary);
 * -errno. */
int cr_listen_queue(int fd, uint32_t *length, uint32_t *max);

void cr_listen_close(struct cr_listener *l);
