/* textfile: a small text file (a /proc or cgroup file) read whole, from
 * offset 0, NUL-terminated — the one read corrald's samplers make. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* pread(fd, ..., 0) into buf (at most size - 1 bytes, then a NUL), again
 * after EINTR. The length, or -1 when nothing was read (error or empty). */
ssize_t cr_pread_text(int fd, char *buf, size_t size);
/* Opens path, reads it as cr_pread_text does, closes it. */
ssize_t cr_read_text(const char *path, char *buf, size_t size);
/* /proc/<pid>/stat read into buf, from its third field on (the state): the
 * second, the command name, may hold spaces and parentheses and ends at
 * the last ')'. NULL when it cannot be read (errno set by the open). */
const char *cr_proc_stat(pid_t pid, char *buf, size_t size);
