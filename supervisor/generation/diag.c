/* The directories of node workers' reports and heap snapshots (diag.h). */
#include "diag.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "gen.h"
#include "history.h"
#include "log.h"
#include "pathperm.h"

/* The name of the report corrald asks node for (--report-filename). */
#define REPORT_NAME "report.json"
/* A report's header comes first; its trigger is within 300 bytes of it. */
#define REPORT_HEAD 4096

struct kept {
    int id; /* the slot */
    char dir[CR_DIAG_PATH_MAX];
};

struct cr_diag {
    char root[CR_DIAG_PATH_MAX]; /* <diag-dir>/<instance>; "" = reports off */
    bool made;                   /* root exists (and was emptied) */
    bool failed;                 /* ... could not be made: said once */
    int root_err;                /* no root could be named (-errno): said once */
    bool chown;
    uid_t uid;
    gid_t gid;
    struct kept *kept; /* a slot's kept directory: at most one per slot id */
    size_t nkept;
};

/* The first directory of a colon-separated list (systemd's
 * STATE_DIRECTORY / RUNTIME_DIRECTORY may name several). */
static int first_dir(const char *list, char *buf, size_t size)
{
    size_t n = strcspn(list, ":");
    if (!n || n >= size)
        return -EINVAL;
    memcpy(buf, list, n);
    buf[n] = '\0';
    return 0;
}

static int resolve_root(const struct cr_config *c, char *buf, size_t size)
{
    char base[PATH_MAX];
    const char *e;
    /* Node runs with corrald's directory, yet an absolute path says where
     * the files are in every log line and post-mortem. */
    if (c->diag_dir && c->diag_dir[0] == '/')
        return snprintf(buf, size, "%s", c->diag_dir) < (int)size ? 0 : -ENAMETOOLONG;
    if (c->diag_dir) {
        if (!getcwd(base, sizeof(base)))
            return -errno;
        return snprintf(buf, size, "%s/%s", base, c->diag_dir) < (int)size ? 0 : -ENAMETOOLONG;
    }
    if (((e = getenv("STATE_DIRECTORY")) && *e) || ((e = getenv("RUNTIME_DIRECTORY")) && *e)) {
        if (first_dir(e, base, sizeof(base)) < 0)
            return -ENAMETOOLONG;
        return snprintf(buf, size, "%s/diag", base) < (int)size ? 0 : -ENAMETOOLONG;
    }
    if (!getcwd(base, sizeof(base)))
        return -errno;
    return snprintf(buf, size, "%s/corral-diag", base) < (int)size ? 0 : -ENAMETOOLONG;
}

int cr_diag_new(struct cr_diag **ret, const struct cr_config *c, const char *instance, bool chown,
                uid_t uid, gid_t gid)
{
    *ret = NULL;
    struct cr_diag *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->chown = chown;
    d->uid = uid;
    d->gid = gid;
    if (c->diag_dir && strcmp(c->diag_dir, "none") == 0) {
        *ret = d;
        return 0;
    }
    char root[CR_DIAG_PATH_MAX];
    /* Room for "/<instance>" and "/w4096-4294967295" below it. */
    size_t room = sizeof(d->root) - 1 - 18;
    int r = resolve_root(c, root, sizeof(root));
    if (r == 0 && strlen(root) + 1 + strlen(instance ? instance : "corral") > room)
        r = -ENAMETOOLONG;
    if (r < 0) {
        /* Reports are evidence, not a reason to serve nothing: said at the
         * first node worker's spawn (cr_diag_prepare), if one comes. */
        d->root_err = r;
        *ret = d;
        return 0;
    }
    snprintf(d->root, sizeof(d->root), "%s/%s", root, instance ? instance : "corral");
    *ret = d;
    return 0;
}

struct cr_diag *cr_diag_free(struct cr_diag *d)
{
    if (d) {
        free(d->kept);
        free(d);
    }
    return NULL;
}

/* Removes what dfd holds, depth levels down at most, never following a
 * symbolic link (a worker under --user owns its directory and what is in
 * it). Anything deeper stays, and so does its directory. */
static void empty_dir(int dfd, int depth)
{
    DIR *dir = fdopendir(dfd);
    if (!dir) {
        close(dfd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(dirfd(dir), e->d_name, 0) == 0 || (errno != EISDIR && errno != EPERM))
            continue;
        /* A directory of the workers' user (0700): taken back first, or a
         * corrald without CAP_DAC_OVERRIDE could not open it. */
        struct stat st;
        if (depth > 0 && fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode) && st.st_uid != geteuid())
            (void)!fchownat(dirfd(dir), e->d_name, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW);
        int sub = depth > 0 ? openat(dirfd(dir), e->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                            : -1;
        if (sub >= 0) {
            empty_dir(sub, depth - 1);
            unlinkat(dirfd(dir), e->d_name, AT_REMOVEDIR);
        }
    }
    closedir(dir);
}

/* Takes a dead worker's directory back (chown to corrald): a corrald
 * without CAP_DAC_OVERRIDE (the hardened unit) could neither list nor
 * empty a 0700 directory of the workers' user. */
static void take_back(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid != geteuid())
        (void)!chown(path, geteuid(), getegid());
}

static void remove_tree(const char *path)
{
    take_back(path);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        empty_dir(fd, 2);
    rmdir(path);
}

/* A directory at path, made with mode (whatever the umask) when missing. */
static int make_dir(const char *path, mode_t mode)
{
    bool made = mkdir(path, mode) == 0;
    if (!made && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(path, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return -ENOTDIR;
    if (made && chmod(path, mode) < 0)
        return -errno;
    return 0;
}

/* Whether name is one corrald gives a generation's directory: w<ID>-<GEN>
 * or s<GEN>. */
static bool ours(const char *name)
{
    unsigned a, b;
    char end;
    return sscanf(name, "w%u-%u%c", &a, &b, &end) == 2 || sscanf(name, "s%u%c", &a, &end) == 1;
}

/* What a previous run left in the instance's directory: its generations'
 * directories, and nothing else (a --diag-dir and --instance that name a
 * directory of something else lose nothing but such names). */
static int clear_root(const char *root)
{
    DIR *dir = opendir(root);
    if (!dir)
        return -errno;
    struct dirent *e;
    char path[CR_DIAG_PATH_MAX + NAME_MAX + 2];
    while ((e = readdir(dir)))
        if (ours(e->d_name) &&
            snprintf(path, sizeof(path), "%s/%s", root, e->d_name) < (int)sizeof(path))
            remove_tree(path);
    closedir(dir);
    return 0;
}

/* <diag-dir> (as given, made when missing) and <instance> below it, both
 * searchable by the workers' user; the instance's directory emptied. */
static int make_root(struct cr_diag *d)
{
    char parent[CR_DIAG_PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", d->root);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent)
        *slash = '\0';
    mode_t mode = d->chown ? 0711 : 0700;
    int r = 0;
    /* The parents of <diag-dir> must exist (a typo is not made into a tree). */
    if ((r = make_dir(parent, mode)) < 0 || (r = make_dir(d->root, mode)) < 0)
        return r;
    if ((r = clear_root(d->root)) < 0)
        return r;
    /* A directory above that the workers cannot search: node would write
     * nothing, and say so only on its own stderr. */
    char below[CR_DIAG_PATH_MAX + 2], bad[PATH_MAX];
    struct stat st;
    snprintf(below, sizeof(below), "%s/x", d->root);
    if (d->chown && !cr_path_reachable(below, d->uid, d->gid, bad, sizeof(bad), &st))
        cr_log(CR_LOG_WARNING,
               "workers (uid %u gid %u) cannot reach %s: %s is mode %04o, owner %u:%u; node's "
               "fatal-error reports and heap snapshots will not be written",
               (unsigned)d->uid, (unsigned)d->gid, d->root, bad, (unsigned)(st.st_mode & 07777),
               (unsigned)st.st_uid, (unsigned)st.st_gid);
    return 0;
}

const char *cr_diag_prepare(struct cr_diag *d, struct cr_gen *g)
{
    g->diag_dir[0] = '\0';
    if (d && d->root_err) {
        cr_log(CR_LOG_WARNING,
               "no directory for node's fatal-error reports (%s): node workers run without "
               "them; give --diag-dir",
               d->root_err == -ENAMETOOLONG ? "its path would be too long"
                                            : strerror(-d->root_err));
        d->root_err = 0;
    }
    if (!d || !d->root[0] || d->failed)
        return NULL;
    int r = 0;
    if (!d->made && (r = make_root(d)) < 0) {
        d->failed = true;
        cr_log(CR_LOG_WARNING, "cannot make %s for node's reports (%s): workers run without them",
               d->root, strerror(-r));
        return NULL;
    }
    d->made = true;
    char path[CR_DIAG_PATH_MAX];
    int n = g->id == CR_SPARE_ID
                ? snprintf(path, sizeof(path), "%s/s%u", d->root, g->generation)
                : snprintf(path, sizeof(path), "%s/w%d-%u", d->root, g->id, g->generation);
    if (n < 0 || n >= (int)sizeof(path))
        return NULL;   /* cannot be: cr_diag_new() left room for the name */
    remove_tree(path); /* not expected: a name is not reused within a run */
    if (mkdir(path, 0700) < 0 || (d->chown && chown(path, d->uid, d->gid) < 0)) {
        r = -errno;
        rmdir(path);
        cr_log(CR_LOG_WARNING, "worker %d: cannot make %s (%s): it runs without node's reports",
               g->id, path, strerror(-r));
        return NULL;
    }
    memcpy(g->diag_dir, path, sizeof(path));
    return g->diag_dir;
}

/* Opens a file of a dead worker's directory to read it: as it is, else
 * once taken back (a corrald without CAP_DAC_OVERRIDE cannot read the
 * 0600 file of another user). Never a link, a FIFO or a device. */
static int open_file(int dfd, const char *name, uid_t owner, struct stat *st)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    /* Taken back only when it is a file of its own (one link: never a
     * hard link the worker made to another user's file) that the workers'
     * user owns. */
    if (fd < 0 && errno == EACCES && fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(st->st_mode) && st->st_nlink == 1 && st->st_uid == owner &&
        fchownat(dfd, name, geteuid(), getegid(), AT_SYMLINK_NOFOLLOW) == 0)
        fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether the report's header names a fatal error: node writes
 * "trigger": "OOMError" at a heap-limit abort and "FatalError" at V8's
 * other fatal errors (an app's own process.report.writeReport() says
 * "API", and goes to the same file name). */
static bool fatal_report(int dfd, uid_t owner)
{
    struct stat st;
    int fd = open_file(dfd, REPORT_NAME, owner, &st);
    if (fd < 0)
        return false;
    char head[REPORT_HEAD + 1];
    ssize_t n = pread(fd, head, REPORT_HEAD, 0);
    close(fd);
    if (n <= 0)
        return false;
    head[n] = '\0';
    const char *t = strstr(head, "\"trigger\"");
    if (!t)
        return false;
    t += strlen("\"trigger\"");
    t += strspn(t, " \t:");
    return strncmp(t, "\"OOMError\"", 10) == 0 || strncmp(t, "\"FatalError\"", 12) == 0;
}

/* A whole heap snapshot is one JSON object: its last byte that is not
 * white space closes it. */
static bool snapshot_whole(int dfd, const char *name, uid_t owner)
{
    struct stat st;
    int fd = open_file(dfd, name, owner, &st);
    if (fd < 0)
        return false;
    char tail[16];
    off_t at = st.st_size > (off_t)sizeof(tail) ? st.st_size - (off_t)sizeof(tail) : 0;
    ssize_t n = st.st_size > 0 ? pread(fd, tail, sizeof(tail), at) : 0;
    close(fd);
    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' ' || tail[n - 1] == '\r'))
        n--;
    return n > 0 && tail[n - 1] == '}';
}

static bool is_snapshot(const char *name)
{
    size_t n = strlen(name), s = strlen(".heapsnapshot");
    return strncmp(name, "Heap.", 5) == 0 && n > s && strcmp(name + n - s, ".heapsnapshot") == 0;
}

void cr_diag_collect(struct cr_diag *d, const struct cr_gen *g, struct cr_postmortem *pm)
{
    struct cr_postmortem_reports *r = &pm->reports;
    *r = (struct cr_postmortem_reports){0};
    if (!d || !g->diag_dir[0])
        return;
    r->known = true;
    take_back(g->diag_dir);
    int dfd = open(g->diag_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    if (fatal_report(dfd, d->uid))
        snprintf(r->fatal_error_report, sizeof(r->fatal_error_report), "%s/%s", g->diag_dir,
                 REPORT_NAME);
    /* --heapsnapshot-near-heap-limit=1: one per process; the newest name
     * (they hold the time) should there be more. */
    char best[NAME_MAX + 1] = "";
    int fd = dup(dfd);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir && fd >= 0)
        close(fd);
    struct dirent *e;
    while (dir && (e = readdir(dir)))
        if (is_snapshot(e->d_name) && strcmp(e->d_name, best) > 0)
            snprintf(best, sizeof(best), "%s", e->d_name);
    if (dir)
        closedir(dir);
    if (best[0] && snprintf(r->heap_snapshot, sizeof(r->heap_snapshot), "%s/%s", g->diag_dir,
                            best) < (int)sizeof(r->heap_snapshot))
        r->snapshot_whole = snapshot_whole(dfd, best, d->uid);
    else
        r->heap_snapshot[0] = '\0';
    close(dfd);
}

/* Whether the post-mortem found evidence of the death in the directory
 * (cr_diag_collect read it at the reap, just before): V8's report of a
 * fatal error or a heap snapshot. Anything else there (an app's own
 * process.report.writeReport(), a CPU profile under node's
 * --diagnostic-dir) does not keep it: the slot keeps one directory, and
 * that must be the last death's evidence. */
static bool holds_evidence(const struct cr_postmortem *pm)
{
    return pm && (pm->reports.fatal_error_report[0] || pm->reports.heap_snapshot[0]);
}

void cr_diag_release(struct cr_diag *d, struct cr_gen *g, const struct cr_postmortem *pm)
{
    if (!d || !g->diag_dir[0])
        return;
    take_back(g->diag_dir);
    if (!holds_evidence(pm)) {
        remove_tree(g->diag_dir);
        g->diag_dir[0] = '\0';
        return;
    }
    struct kept *k = NULL;
    for (size_t i = 0; i < d->nkept && !k; i++)
        if (d->kept[i].id == g->id)
            k = &d->kept[i];
    if (k) {
        cr_log(CR_LOG_INFO, "worker %d: deleting %s, an older death's reports (one kept per slot)",
               g->id, k->dir);
        remove_tree(k->dir);
    } else {
        struct kept *n = realloc(d->kept, (d->nkept + 1) * sizeof(*n));
        if (!n) { /* no memory to remember it: not kept, so never leaked */
            remove_tree(g->diag_dir);
            g->diag_dir[0] = '\0';
            return;
        }
        d->kept = n;
        k = &d->kept[d->nkept++];
        k->id = g->id;
    }
    memcpy(k->dir, g->diag_dir, sizeof(k->dir));
    g->diag_dir[0] = '\0';
}
