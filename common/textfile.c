/* textfile: see textfile.h. */
#include "textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

ssize_t cr_pread_text(int fd, char *buf, size_t size)
{
    ssize_t n;
    if (size < 2)
        return -1;
    while ((n = pread(fd, buf, size - 1, 0)) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return n;
}

ssize_t cr_read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = cr_pread_text(fd, buf, size);
    close(fd);
    return n;
}

const char *cr_proc_stat(pid_t pid, char *buf, size_t size)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (cr_read_text(path, buf, size) < 0)
        return NULL;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) {
        errno = EINVAL;
        return NULL;
    }
    return p + 2;
}
