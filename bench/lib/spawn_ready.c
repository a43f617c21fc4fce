/* spawn_ready N WORKER [ARGS...]: starts WORKER N+1 times the way corrald
 * does (fork, listening socket on fd 3 with LISTEN_FDS=1 and
 * LISTEN_PID=<child>, NOTIFY_SOCKET) and prints, one line per start after a
 * first warm-up, the milliseconds from just before fork() to the READY=1
 * datagram. Each worker is stopped (SIGTERM, reaped by pid) before the
 * next. C rather than Python: a Python fork+exec alone costs ~2-4 ms here,
 * more than the thing measured. Used by bench/startup. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int ready_in(const char *buf, ssize_t n)
{
    for (const char *p = buf; p < buf + n;) {
        const char *e = memchr(p, '\n', (size_t)(buf + n - p));
        size_t len = e ? (size_t)(e - p) : (size_t)(buf + n - p);
        if (len == 7 && memcmp(p, "READY=1", 7) == 0)
            return 1;
        p += len + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int n = atoi(argv[1]);
    if (n < 1 || n > 1000)
        return 2;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (l < 0 || bind(l, (void *)&sin, sizeof(sin)) < 0 || listen(l, 128) < 0)
        return perror("listen"), 1;
    char dir[] = "/tmp/corral-spawn-XXXXXX";
    if (!mkdtemp(dir))
        return perror("mkdtemp"), 1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/notify", dir);
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, (void *)&a, sizeof(a)) < 0)
        return perror("notify socket"), 1;
    setenv("NOTIFY_SOCKET", a.sun_path, 1);
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_FDNAMES", "http", 1);
    int rc = 0;
    for (int i = 0; i <= n && rc == 0; i++) {
        double t0 = now_ms();
        pid_t pid = fork();
        if (pid == 0) {
            char p[32];
            snprintf(p, sizeof(p), "%d", (int)getpid());
            setenv("LISTEN_PID", p, 1);
            if (dup2(l, 3) < 0)
                _exit(127);
            execv(argv[2], argv + 2);
            _exit(127);
        }
        if (pid < 0)
            return perror("fork"), 1;
        char buf[4096];
        for (;;) {
            struct pollfd pf = {.fd = s, .events = POLLIN};
            if (poll(&pf, 1, 10000) <= 0) {
                fprintf(stderr, "no READY=1 within 10 s\n");
                rc = 1;
                break;
            }
            ssize_t k = recv(s, buf, sizeof(buf), 0);
            if (k > 0 && ready_in(buf, k))
                break;
        }
        double t1 = now_ms();
        if (i > 0 && rc == 0)
            printf("%.3f\n", t1 - t0);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        while (recv(s, buf, sizeof(buf), MSG_DONTWAIT) > 0)
            ;
    }
    unlink(a.sun_path);
    rmdir(dir);
    return rc;
}
