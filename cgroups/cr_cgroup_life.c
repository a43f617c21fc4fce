/* cr_cgroup: removing groups, reclaiming stale ones, OOM watch fds and v2
 * delegation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cr_cgroup_internal.h"

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* rmdir(2) directly, not cgroup_delete_cgroup_ext(): with
 * CGFLAG_DELETE_EMPTY_ONLY, libcgroup 2.0.2 returns 0 when rmdir fails
 * with EBUSY (measured with strace on a group holding a live task), so a
 * busy group would read as removed; without the flag it migrates live
 * tasks to the parent, which corral must never do. A group that is already
 * gone counts as removed. */
static int remove_once(const char *rel)
{
    char *path = NULL;
    int r = cr_cgroup_path_of(rel, &path);
    if (r < 0)
        return r;
    if (rmdir(path) < 0 && errno != ENOENT)
        r = errno == ENOTEMPTY ? -EBUSY : -errno;
    free(path);
    return r;
}

/* May block (as cr_cgroup_kill_stale may, and nothing else here): for up to
 * timeout_ms, in 5 ms steps, while rmdir says EBUSY. Right after its last task was reaped a
 * v1 memory group can still be busy (the kernel drains charges and offlines
 * the css asynchronously). timeout_ms 0 tries once. */
int cr_cgroup_remove(struct cr_cgroup *cg, unsigned timeout_ms)
{
    if (!cg)
        return -EINVAL;
    if (strcmp(cg->rel, "/") == 0)
        return -EPERM;
    uint64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int r = remove_once(cg->rel);
        if (r != -EBUSY || now_ms() >= deadline)
            return r;
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
    }
}

int cr_cgroup_each_child(const char *parent_rel, const char *prefix,
                         int (*fn)(const char *rel, void *userdata), void *userdata)
{
    char *dir_path = NULL;
    struct dirent *de;
    if (!prefix || !*prefix)
        return -EINVAL;
    int r = cr_cgroup_path_of(parent_rel, &dir_path);
    if (r < 0)
        return r;
    DIR *d = opendir(dir_path);
    free(dir_path);
    if (!d)
        return -errno;
    while (r >= 0 && (de = readdir(d))) {
        char *rel;
        if (de->d_type != DT_DIR || strncmp(de->d_name, prefix, strlen(prefix)) != 0)
            continue;
        /* rel is undefined when asprintf fails: freed only on success. */
        if (asprintf(&rel, "%s/%s", strcmp(parent_rel, "/") == 0 ? "" : parent_rel, de->d_name) <
            0) {
            r = -ENOMEM;
            continue;
        }
        r = fn(rel, userdata);
        free(rel);
    }
    closedir(d);
    return r < 0 ? r : 0;
}

struct reclaim {
    unsigned removed, left;
};

static int reclaim_one(const char *rel, void *userdata)
{
    struct reclaim *c = userdata;
    if (remove_once(rel) == 0)
        c->removed++;
    else
        c->left++;
    return 0;
}

int cr_cgroup_reclaim_stale(const char *parent_rel, const char *prefix, unsigned *ret_removed,
                            unsigned *ret_left)
{
    struct reclaim c = {0};
    int r = cr_cgroup_each_child(parent_rel, prefix, reclaim_one, &c);
    if (r < 0)
        return r;
    if (ret_removed)
        *ret_removed = c.removed;
    if (ret_left)
        *ret_left = c.left;
    return 0;
}

/* v1: the kernel signals the eventfd when the group (or an ancestor whose
 * limit its tasks share) enters OOM, and also once when the group is
 * removed; see the measured semantics in cr_cgroup.h. The oom_control fd
 * only names the file to watch and may be closed after registration.
 * libcgroup 2.0.2 has no API for cgroup.event_control. */
static int oom_fd_v1(struct cr_cgroup *cg, int *ret_fd)
{
    char line[64];
    char path[4096];
    int r, efd, ofd;
    if (snprintf(path, sizeof path, "%s/memory.oom_control", cg->path) >= (int)sizeof path)
        return -ENAMETOOLONG;
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0)
        return -errno;
    ofd = open(path, O_RDONLY | O_CLOEXEC);
    if (ofd < 0) {
        r = -errno;
        close(efd);
        return r;
    }
    snprintf(line, sizeof line, "%d %d", efd, ofd);
    r = cr_cgroup_write_file(cg->path, "cgroup.event_control", line);
    close(ofd);
    if (r < 0) {
        close(efd);
        return r;
    }
    *ret_fd = efd;
    return 0;
}

/* v2: memory.events raises a file-modified notification on every change
 * (cgroup_file_notify), so any counter moving wakes the watcher. */
static int oom_fd_v2(struct cr_cgroup *cg, int *ret_fd)
{
    char path[4096];
    int r, fd;
    if (snprintf(path, sizeof path, "%s/memory.events", cg->path) >= (int)sizeof path)
        return -ENAMETOOLONG;
    fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (inotify_add_watch(fd, path, IN_MODIFY) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

int cr_cgroup_oom_fd(struct cr_cgroup *cg, int *ret_fd)
{
    if (!cg || !ret_fd)
        return -EINVAL;
    if (cg->oom_fd >= 0) { /* made ahead */
        *ret_fd = cg->oom_fd;
        cg->oom_fd = -1;
        return 0;
    }
    return cg->layout == CR_CGROUP_V1 ? oom_fd_v1(cg, ret_fd) : oom_fd_v2(cg, ret_fd);
}

int cr_cgroup_procs_fd(struct cr_cgroup *cg)
{
    char path[4096];
    if (!cg)
        return -EINVAL;
    if (cg->procs_fd >= 0) { /* made ahead */
        int fd = cg->procs_fd;
        cg->procs_fd = -1;
        return fd;
    }
    if (snprintf(path, sizeof path, "%s/cgroup.procs", cg->path) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

void cr_cgroup_ready_ahead(struct cr_cgroup *cg)
{
    uint64_t usage;
    if (!cg)
        return;
    if (cg->procs_fd < 0) {
        int fd = cr_cgroup_procs_fd(cg);
        cg->procs_fd = fd >= 0 ? fd : -1;
    }
    if (cg->oom_fd < 0 && cr_cgroup_oom_fd(cg, &cg->oom_fd) < 0)
        cg->oom_fd = -1;
    (void)cr_cgroup_read_usage(cg, &usage); /* opens the kept usage fd */
}

void cr_cgroup_oom_fd_drain(int fd)
{
    /* Big enough for an eventfd counter or a batch of inotify events. */
    char buf[4096] __attribute__((aligned(8)));
    while (read(fd, buf, sizeof buf) > 0)
        ;
}

int cr_cgroup_parse_controllers(const char *text, char *ret, size_t size)
{
    static const char *const wanted[] = {"memory", "pids", "cpu"};
    size_t len = 0;
    bool memory = false;
    if (!text || !ret || size == 0)
        return -EINVAL;
    ret[0] = '\0';
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        size_t n = strlen(wanted[i]);
        bool found = false;
        for (const char *p = text; *p && !found;) {
            size_t w = strcspn(p, " \n");
            found = w == n && memcmp(p, wanted[i], n) == 0;
            p += w + strspn(p + w, " \n");
        }
        if (!found)
            continue;
        memory |= i == 0;
        int k = snprintf(ret + len, size - len, "%s+%s", len ? " " : "", wanted[i]);
        if (k < 0 || (size_t)k >= size - len)
            return -ENOBUFS;
        len += (size_t)k;
    }
    return memory ? 0 : -ENODEV;
}

int cr_cgroup_enable_subtree(const char *rel)
{
    char text[1024], req[64], *path = NULL;
    enum cr_cgroup_layout l;
    int r = cr_cgroup_sys(&l, NULL);
    if (r < 0)
        return r;
    if (l != CR_CGROUP_V2)
        return -EOPNOTSUPP;
    r = cr_cgroup_path_of(rel, &path);
    if (r < 0)
        return r;
    r = cr_cgroup_read_file(path, "cgroup.controllers", text, sizeof text);
    if (r == 0)
        r = cr_cgroup_parse_controllers(text, req, sizeof req);
    /* Direct write: libcgroup 2.0.2 only touches cgroup.subtree_control as
     * a side effect of creating groups, never on request. */
    if (r == 0)
        r = cr_cgroup_write_file(path, "cgroup.subtree_control", req);
    free(path);
    return r;
}

/* Moves every pid listed in from/cgroup.procs to to/cgroup.procs. Returns
 * how many it moved (0 = from was empty), or -errno. Pids that vanished in
 * between (ESRCH) are skipped. */
static int move_procs(const char *from, const char *to)
{
    char text[16384];
    int moved = 0;
    int r = cr_cgroup_read_file(from, "cgroup.procs", text, sizeof text);
    if (r < 0)
        return r;
    for (char *save = NULL, *tok = strtok_r(text, "\n", &save); tok;
         tok = strtok_r(NULL, "\n", &save)) {
        r = cr_cgroup_write_file(to, "cgroup.procs", tok);
        if (r < 0 && r != -ESRCH)
            return r;
        moved++;
    }
    return moved;
}

/* The leaf is made with mkdir, not cgroup_create_cgroup(): on v2,
 * libcgroup 2.0.2 writes "+memory" into the cgroup.subtree_control of the
 * groups on the path while creating (seen with strace on this host's
 * unified hierarchy), and rel still holds processes until they are moved,
 * so the no-internal-process rule would fail that write. */
int cr_cgroup_delegate_setup(const char *rel, const char *leaf_name, char **ret_leaf_rel)
{
    char *path = NULL, *leaf_rel = NULL, *leaf_path = NULL;
    enum cr_cgroup_layout l;
    int r = cr_cgroup_sys(&l, NULL);
    if (r < 0)
        return r;
    if (l != CR_CGROUP_V2)
        return -EOPNOTSUPP;
    if (!leaf_name || !*leaf_name || strchr(leaf_name, '/'))
        return -EINVAL;
    if (asprintf(&leaf_rel, "%s/%s", strcmp(rel, "/") == 0 ? "" : rel, leaf_name) < 0)
        return -ENOMEM;
    r = cr_cgroup_path_of(rel, &path);
    if (r == 0)
        r = cr_cgroup_path_of(leaf_rel, &leaf_path);
    if (r == 0 && mkdir(leaf_path, 0755) < 0 && errno != EEXIST)
        r = -errno;
    /* Processes may fork while we move them: repeat until rel is empty,
     * bounded so a fork storm cannot keep us here. */
    for (int round = 0; r >= 0 && round < 16; round++) {
        r = move_procs(path, leaf_path);
        if (r == 0)
            break;
    }
    if (r > 0)
        r = -EBUSY;
    if (r == 0)
        r = cr_cgroup_enable_subtree(rel);
    if (r == 0 && ret_leaf_rel) {
        *ret_leaf_rel = leaf_rel;
        leaf_rel = NULL;
    }
    free(path);
    free(leaf_path);
    free(leaf_rel);
    return r;
}
