/* Shared between the cr_cgroup*.c files only; not part of the public API. */
#pragma once

#include <stddef.h>

#include "cr_cgroup.h"

/* A control file kept open (cr_cgroup_keep_open, or the usage file of any
 * group: cr_cgroup_read_kept): name is a string
 * literal; fd is -1 until first read, CR_CGROUP_ABSENT for a v1 file this
 * kernel does not have (on v1 it never appears later). */
#define CR_CGROUP_KEPT 8
#define CR_CGROUP_ABSENT (-2)
struct cr_cgroup_kept {
    const char *name;
    int fd;
};

struct cr_cgroup {
    char *rel;  /* "/" or "/a/b" */
    char *path; /* mount point + rel */
    enum cr_cgroup_layout layout;
    /* Made by cr_cgroup_ready_ahead(), handed over once; -1. */
    int procs_fd, oom_fd;
    bool keep_open;
    struct cr_cgroup_kept kept[CR_CGROUP_KEPT];
};

/* A new handle's fields before its paths are set: no descriptor open. */
void cr_cgroup_init(struct cr_cgroup *cg, enum cr_cgroup_layout layout);

/* Reads one control file of cg, through a kept descriptor when the group
 * keeps its files open (see cr_cgroup_keep_open), else by path. Same
 * contract as cr_cgroup_read_file. read_kept keeps this one file open
 * whatever the group does (the usage file, read every sample period). */
int cr_cgroup_read(struct cr_cgroup *cg, const char *name, char *buf, size_t size);
int cr_cgroup_read_kept(struct cr_cgroup *cg, const char *name, char *buf, size_t size);
/* Reads name through its kept descriptor only: -EAGAIN when none is open
 * yet (nothing is opened, nothing forgotten: the group is not changed). */
int cr_cgroup_peek_kept(const struct cr_cgroup *cg, const char *name, char *buf, size_t size);
int cr_cgroup_read_u64(struct cr_cgroup *cg, const char *name, uint64_t *ret);

/* Initializes libcgroup once and caches the layout and mount point. Returns
 * 0 or -errno (-ENODEV when no memory controller is reachable). */
int cr_cgroup_sys(enum cr_cgroup_layout *ret_layout, const char **ret_mount);

/* libcgroup's positive ECG* code (or 0) as 0 / -errno. */
int cr_cgroup_errno(int ecg);

/* Builds "<mount><rel>" (rel "/" gives the mount itself). */
int cr_cgroup_path_of(const char *rel, char **ret_path);

/* Whole-file reads and writes of small control files by direct I/O.
 * read_file: reads at most size-1 bytes, NUL-terminates. */
int cr_cgroup_read_file(const char *dir, const char *name, char *buf, size_t size);
int cr_cgroup_write_file(const char *dir, const char *name, const char *text);
int cr_cgroup_read_u64_file(const char *dir, const char *name, uint64_t *ret);
bool cr_cgroup_has_file(const char *dir, const char *name);

/* Writes one memory-controller value through libcgroup. */
int cr_cgroup_set_value(const struct cr_cgroup *cg, const char *name, const char *value);

/* Calls fn with the rel path of every child group of parent_rel whose name
 * starts with prefix; stops at fn's first negative return, which it
 * returns. */
int cr_cgroup_each_child(const char *parent_rel, const char *prefix,
                         int (*fn)(const char *rel, void *userdata), void *userdata);
