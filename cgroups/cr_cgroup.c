/* cr_cgroup: layout detection, handles, limits, readings, attach.
 *
 * libcgroup does the parts it does right on both v1 and v2 (init, mount
 * points, the current v1 path, creating groups, writing values, removing
 * groups); control files are read by direct I/O because the pure parsers
 * want whole-file text, and libcgroup 2.0.2 only offers line-wise reads
 * through a fixed caller buffer (cgroup_read_value_next). */
#include <errno.h>
#include <fcntl.h>
#include <libcgroup.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cr_cgroup_internal.h"

/* libcgroup keeps process-global state of its own; mirroring its once-only
 * init here is the one piece of module state. */
static struct {
    bool done;
    int rc;
    enum cr_cgroup_layout layout;
    char *mount;
} sys;

int cr_cgroup_errno(int ecg)
{
    switch (ecg) {
    case 0:
        return 0;
    case ECGOTHER: {
        int e = cgroup_get_last_errno();
        return e > 0 ? -e : -EIO;
    }
    case ECGROUPNOTEXIST:
    case ECGROUPVALUENOTEXIST:
        return -ENOENT;
    case ECGROUPNOTCOMPILED:
    case ECGROUPNOTMOUNTED:
    case ECGROUPSUBSYSNOTMOUNTED:
        return -ENODEV;
    case ECGROUPNOTOWNER:
    case ECGROUPNOTALLOWED:
        return -EPERM;
    case ECGINVAL:
    case ECGROUPPARSEFAIL:
    case ECGCONFIGPARSEFAIL:
    case ECGROUPNOTINITIALIZED:
        return -EINVAL;
    case ECGCONTROLLEREXISTS:
    case ECGVALUEEXISTS:
        return -EEXIST;
    case ECGMAXVALUESEXCEEDED:
        return -E2BIG;
    case ECGNONEMPTY:
        return -EBUSY;
    case ECGROUPUNSUPP:
        return -EOPNOTSUPP;
    case ECGEOF:
        return -ENODATA;
    default:
        /* Some paths hand back a plain errno; everything else is I/O. */
        return ecg > 0 && ecg < 4096 ? -ecg : -EIO;
    }
}

static int sys_init(void)
{
    char *mnt = NULL;
    struct statfs fs;
    int r = cr_cgroup_errno(cgroup_init());
    if (r == -ENODEV)
        return 0; /* nothing mounted: layout NONE */
    if (r < 0)
        return r;
    r = cr_cgroup_errno(cgroup_get_subsys_mount_point("memory", &mnt));
    if (r == -ENODEV || r == -ENOENT || (r == 0 && !mnt))
        return 0;
    if (r < 0)
        return r;
    if (statfs(mnt, &fs) < 0) {
        r = -errno;
        free(mnt);
        return r;
    }
    sys.layout = fs.f_type == CGROUP2_SUPER_MAGIC ? CR_CGROUP_V2 : CR_CGROUP_V1;
    sys.mount = mnt;
    return 0;
}

int cr_cgroup_sys(enum cr_cgroup_layout *ret_layout, const char **ret_mount)
{
    if (!sys.done) {
        sys.rc = sys_init();
        sys.done = true;
    }
    if (sys.rc < 0)
        return sys.rc;
    if (ret_layout)
        *ret_layout = sys.layout;
    if (ret_mount)
        *ret_mount = sys.mount;
    return sys.layout == CR_CGROUP_NONE ? -ENODEV : 0;
}

int cr_cgroup_detect(enum cr_cgroup_layout *ret, char **ret_mount)
{
    enum cr_cgroup_layout l = CR_CGROUP_NONE;
    const char *mnt = NULL;
    int r = cr_cgroup_sys(&l, &mnt);
    if (r < 0 && r != -ENODEV)
        return r;
    if (ret_mount) {
        char *m = NULL;
        if (mnt && !(m = strdup(mnt)))
            return -ENOMEM;
        *ret_mount = m;
    }
    if (ret)
        *ret = l;
    return 0;
}

/* A rel path is "/" or "/x[/y...]" without empty, "." or ".." parts. */
static bool rel_valid(const char *rel)
{
    if (!rel || rel[0] != '/')
        return false;
    if (rel[1] == '\0')
        return true;
    for (const char *p = rel + 1;;) {
        size_t n = strcspn(p, "/");
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (p[n] == '\0')
            return true;
        p += n + 1;
    }
}

int cr_cgroup_path_of(const char *rel, char **ret_path)
{
    const char *mnt;
    int r = cr_cgroup_sys(NULL, &mnt);
    if (r < 0)
        return r;
    if (!rel_valid(rel))
        return -EINVAL;
    if (asprintf(ret_path, "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel) < 0)
        return -ENOMEM;
    return 0;
}

int cr_cgroup_read_file(const char *dir, const char *name, char *buf, size_t size)
{
    char path[4096];
    size_t len = 0;
    int r = 0;
    if (size < 2 || snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    while (len < size - 1) {
        ssize_t n = read(fd, buf + len, size - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    if (r == 0 && len == size - 1)
        r = -EFBIG; /* no control file corral reads is this long */
    close(fd);
    buf[len] = '\0';
    return r;
}

void cr_cgroup_keep_open(struct cr_cgroup *cg)
{
    if (cg)
        cg->keep_open = true;
}

/* The kept descriptor of name, opened on first use: -errno when the file
 * cannot be opened, -ENOSPC when every slot is taken (read by path). A
 * missing file is remembered on v1 only, where a group's files are fixed
 * by the hierarchy (memsw.* by the kernel's swap accounting); on v2 a
 * memory file appears when the parent enables the controller. */
static int kept_fd(struct cr_cgroup *cg, const char *name)
{
    char path[4096];
    size_t i = 0;
    while (i < CR_CGROUP_KEPT && cg->kept[i].name && strcmp(cg->kept[i].name, name) != 0)
        i++;
    if (i == CR_CGROUP_KEPT)
        return -ENOSPC;
    struct cr_cgroup_kept *k = &cg->kept[i];
    if (k->name && k->fd != -1)
        return k->fd == CR_CGROUP_ABSENT ? -ENOENT : k->fd;
    if (snprintf(path, sizeof path, "%s/%s", cg->path, name) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && (errno != ENOENT || cg->layout != CR_CGROUP_V1))
        return -errno; /* not remembered: it may change */
    k->name = name;
    k->fd = fd < 0 ? CR_CGROUP_ABSENT : fd;
    return fd < 0 ? -ENOENT : fd;
}

static void forget_fd(struct cr_cgroup *cg, int fd)
{
    for (size_t i = 0; i < CR_CGROUP_KEPT; i++)
        if (cg->kept[i].name && cg->kept[i].fd == fd)
            cg->kept[i].fd = -1;
    close(fd);
}

/* Kept open: a pread from offset 0, no path walk. A path walk in cgroupfs
 * takes the hierarchy's kernfs lock, which every mkdir of a group holds
 * for writing while it populates the new directory: at `scale 1000` the
 * loop waited up to 6 ms for it (docs/reliability.md, "Loop latency"). A
 * read that fails (the group was removed and made again under the same
 * name) opens the file afresh once. */
int cr_cgroup_read_kept(struct cr_cgroup *cg, const char *name, char *buf, size_t size)
{
    if (size < 2)
        return -ENAMETOOLONG; /* as cr_cgroup_read_file */
    int r = -EIO;
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = kept_fd(cg, name);
        if (fd == -ENOSPC)
            return cr_cgroup_read_file(cg->path, name, buf, size);
        if (fd < 0)
            return fd;
        ssize_t n;
        while ((n = pread(fd, buf, size - 1, 0)) < 0 && errno == EINTR)
            ;
        if (n >= 0) {
            buf[n] = '\0';
            return (size_t)n == size - 1 ? -EFBIG : 0; /* no control file corral reads is this long */
        }
        r = -errno;
        forget_fd(cg, fd);
    }
    return r;
}

int cr_cgroup_peek_kept(const struct cr_cgroup *cg, const char *name, char *buf, size_t size)
{
    if (size < 2)
        return -ENAMETOOLONG;
    int fd = -1;
    for (size_t i = 0; i < CR_CGROUP_KEPT && cg->kept[i].name; i++)
        if (strcmp(cg->kept[i].name, name) == 0)
            fd = cg->kept[i].fd;
    if (fd < 0)
        return fd == CR_CGROUP_ABSENT ? -ENOENT : -EAGAIN;
    ssize_t n;
    while ((n = pread(fd, buf, size - 1, 0)) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (size_t)n == size - 1 ? -EFBIG : 0;
}

int cr_cgroup_read(struct cr_cgroup *cg, const char *name, char *buf, size_t size)
{
    return cg->keep_open ? cr_cgroup_read_kept(cg, name, buf, size)
                         : cr_cgroup_read_file(cg->path, name, buf, size);
}

int cr_cgroup_read_u64(struct cr_cgroup *cg, const char *name, uint64_t *ret)
{
    char buf[64];
    int r = cr_cgroup_read(cg, name, buf, sizeof buf);
    return r < 0 ? r : cr_cgroup_parse_u64(buf, ret);
}

int cr_cgroup_write_file(const char *dir, const char *name, const char *text)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int r = n < 0 ? -errno : (size_t)n == len ? 0 : -EIO;
    close(fd);
    return r;
}

int cr_cgroup_read_u64_file(const char *dir, const char *name, uint64_t *ret)
{
    char buf[64];
    int r = cr_cgroup_read_file(dir, name, buf, sizeof buf);
    return r < 0 ? r : cr_cgroup_parse_u64(buf, ret);
}

bool cr_cgroup_has_file(const char *dir, const char *name)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return false;
    return access(path, F_OK) == 0;
}

int cr_cgroup_set_value(const struct cr_cgroup *cg, const char *name, const char *value)
{
    struct cgroup *lcg = cgroup_new_cgroup(cg->rel);
    struct cgroup_controller *ctl;
    int r = -ENOMEM;
    if (!lcg)
        return -ENOMEM;
    ctl = cgroup_add_controller(lcg, "memory");
    if (ctl) {
        r = cr_cgroup_errno(cgroup_add_value_string(ctl, name, value));
        if (r == 0)
            r = cr_cgroup_errno(cgroup_modify_cgroup(lcg));
    }
    cgroup_free(&lcg);
    return r;
}

int cr_cgroup_of_pid(pid_t pid, char **ret_rel)
{
    enum cr_cgroup_layout l;
    char file[64], text[4096];
    int r = cr_cgroup_sys(&l, NULL);
    if (r < 0)
        return r;
    if (pid == 0)
        pid = getpid();
    if (l == CR_CGROUP_V1) {
        char *p = NULL;
        r = cr_cgroup_errno(cgroup_get_current_controller_path(pid, "memory", &p));
        if (r < 0)
            return r;
        *ret_rel = p;
        return 0;
    }
    /* libcgroup 2.0.2's cgroup_get_current_controller_path() matches
     * /proc/<pid>/cgroup lines by controller name, and the v2 "0::" line
     * names none: parse it ourselves. */
    snprintf(file, sizeof file, "%d/cgroup", (int)pid);
    r = cr_cgroup_read_file("/proc", file, text, sizeof text);
    if (r < 0)
        return r;
    return cr_cgroup_parse_proc_cgroup(text, l, ret_rel);
}

static int is_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int create_group(const char *rel)
{
    /* A group under an existing parent is one mkdir(2). libcgroup's
     * cgroup_create_cgroup() also mkdirs every level of the path and chowns
     * every control file of the new group: about 40 system calls, measured
     * at up to 50 ms under load (docs/reliability.md, "Loop latency"), and
     * corrald makes a group for every worker it spawns. The parent's files
     * already belong to the right owner, and so do the kernel's new ones. */
    char *path = NULL;
    int r = cr_cgroup_path_of(rel, &path);
    if (r < 0)
        return r;
    r = mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -errno;
    free(path);
    if (r != -ENOENT)
        return r;
    /* A missing parent: libcgroup makes the whole path. */
    struct cgroup *lcg = cgroup_new_cgroup(rel);
    r = -ENOMEM;
    if (!lcg)
        return -ENOMEM;
    /* Creates missing parents too (libcgroup mkdir -p's the path). */
    if (cgroup_add_controller(lcg, "memory"))
        r = cr_cgroup_errno(cgroup_create_cgroup(lcg, 0));
    cgroup_free(&lcg);
    return r;
}

int cr_cgroup_open(const char *rel, bool create, struct cr_cgroup **ret)
{
    struct cr_cgroup *cg;
    enum cr_cgroup_layout l;
    int r = cr_cgroup_sys(&l, NULL);
    if (r < 0)
        return r;
    if (!ret)
        return -EINVAL;
    cg = calloc(1, sizeof *cg);
    if (!cg)
        return -ENOMEM;
    cr_cgroup_init(cg, l);
    r = cr_cgroup_path_of(rel, &cg->path);
    if (r == 0 && !(cg->rel = strdup(rel)))
        r = -ENOMEM;
    if (r == 0) {
        r = is_dir(cg->path);
        if (r == -ENOENT && create && (r = create_group(rel)) == 0)
            r = is_dir(cg->path);
    }
    if (r < 0) {
        cr_cgroup_free(cg);
        return r;
    }
    *ret = cg;
    return 0;
}

void cr_cgroup_init(struct cr_cgroup *cg, enum cr_cgroup_layout layout)
{
    cg->layout = layout;
    cg->procs_fd = cg->oom_fd = -1;
}

struct cr_cgroup *cr_cgroup_free(struct cr_cgroup *cg)
{
    if (cg) {
        if (cg->procs_fd >= 0)
            close(cg->procs_fd);
        if (cg->oom_fd >= 0)
            close(cg->oom_fd);
        for (size_t i = 0; i < CR_CGROUP_KEPT && cg->kept[i].name; i++)
            if (cg->kept[i].fd >= 0)
                close(cg->kept[i].fd);
        free(cg->rel);
        free(cg->path);
        free(cg);
    }
    return NULL;
}

const char *cr_cgroup_rel(const struct cr_cgroup *cg)
{
    return cg->rel;
}

const char *cr_cgroup_fs_path(const struct cr_cgroup *cg)
{
    return cg->path;
}

enum cr_cgroup_layout cr_cgroup_layout(const struct cr_cgroup *cg)
{
    return cg->layout;
}

int cr_cgroup_attach(struct cr_cgroup *cg, pid_t pid)
{
    char buf[32];
    if (!cg || pid <= 0)
        return -EINVAL;
    /* Not cgroup_attach_task_pid(): libcgroup 2.0.2 writes the v1 "tasks"
     * file, which moves one thread only; cgroup.procs moves the whole
     * thread group on both v1 and v2. */
    snprintf(buf, sizeof buf, "%d", (int)pid);
    return cr_cgroup_write_file(cg->path, "cgroup.procs", buf);
}
