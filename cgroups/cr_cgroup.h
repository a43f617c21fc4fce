/* cr_cgroup: cgroup v1 and v2 memory control behind one small API.
 *
 * This module is the only code in corral that includes <libcgroup.h>.
 * Every fallible function returns >= 0 on success or -errno on failure
 * (libcgroup's positive ECG* codes are translated here, once). Library code
 * never logs: callers log once.
 *
 * Paths called "rel" are relative to the root of the hierarchy that holds the
 * memory controller, start with "/" and never end with "/" (the root is "/").
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum cr_cgroup_layout {
    CR_CGROUP_NONE, /* no memory controller reachable */
    CR_CGROUP_V1,   /* memory controller on a v1 hierarchy (legacy or hybrid) */
    CR_CGROUP_V2,   /* memory controller on the unified hierarchy */
    _CR_CGROUP_LAYOUT_MAX,
};

const char *cr_cgroup_layout_to_string(enum cr_cgroup_layout l);

#define CR_CGROUP_UNLIMITED UINT64_MAX

/* memory.stat, the fields corral reports. Missing fields read as 0. */
struct cr_cgroup_stat {
    uint64_t anon;
    uint64_t file;
    uint64_t kernel; /* v2 "kernel" (or kernel_stack+slab+pagetables), v1 kernel usage if known */
    uint64_t slab;
    uint64_t sock;
    uint64_t shmem;
};

/* OOM-related counters. v2: memory.events (hierarchical) or .local;
 * v1: memory.oom_control (oom_kill, under_oom) and memory.failcnt +
 * memory.memsw.failcnt (stored in .max so that "the limit was hit" reads
 * the same on both). v1 has no "oom", "low", "high" or "oom_group_kill":
 * they read 0.
 *
 * Which counters move where -- the death classifier's evidence.
 *
 * v1, measured on Linux 6.18 (tests/unit/cgroups/test_cgroup_kernel.c,
 * no swap, leaf w limited 64M, parent P unlimited or limited):
 *   own limit (w at 64M, 100M touched):   w.oom_kill +1, w.max (failcnt) +N>0;
 *                                          P.oom_kill +0, P.max +0;
 *                                          eventfd: w fires, P silent.
 *   ancestor limit (P at 64M, w at 512M): w.oom_kill +1, w.max +0;
 *                                          P.oom_kill +0 (v1 counts oom_kill
 *                                          only in the victim's own group),
 *                                          P.max +N>0;
 *                                          eventfd: P, w and w's siblings
 *                                          fire (every group under the one
 *                                          in OOM), P's parent silent.
 *   So: victim group's oom_kill moved and its own max moved -> own limit;
 *   oom_kill moved but own max did not -> an ancestor's limit (the ancestor
 *   whose max moved is the one). Caveat: failcnt is only tracked by the
 *   memory counter since 6.15, never by memsw; that is why set_max leaves
 *   memsw unlimited when the host has no swap (see set_max).
 *
 * v2, from Documentation/admin-guide/cgroup-v2.rst, and measured by
 * test_cgroup_kernel in the VM test's Debian 12 guest (kernel 6.1): own
 * limit: oom_kill +1 oom +1 max +35; ancestor limit: leaf oom_kill +1 oom +0
 * max +0, ancestor oom +1 max +35.
 * "max" and "oom" are raised on the group whose limit was hit, "oom_kill"
 * on the victim's group; memory.events propagates all of them to every
 * ancestor, memory.events.local does not. So read the leaf with local=true:
 *   own limit:      leaf.local oom_kill +1 and leaf.local oom (or max) +1;
 *   ancestor limit: leaf.local oom_kill +1, leaf.local oom +0 and max +0;
 *                   the ancestor's .local oom/max moved.
 *   (oom_group_kill moves when memory.oom.group killed the whole group.)
 * A kill by the global OOM killer moves only oom_kill (and /proc/vmstat
 * oom_kill), with no "oom"/"max" anywhere. */
struct cr_cgroup_events {
    uint64_t low;
    uint64_t high;
    uint64_t max;
    uint64_t oom;
    uint64_t oom_kill;
    uint64_t oom_group_kill;
    bool under_oom; /* v1 only */
};

/* Pure parsers over a file's text (NUL-terminated). Unknown keys are ignored.
 * Return 0, or -EINVAL on text that is not of the file's form. */
int cr_cgroup_parse_stat(const char *text, enum cr_cgroup_layout l, struct cr_cgroup_stat *ret);
int cr_cgroup_parse_events(const char *text, struct cr_cgroup_events *ret); /* v2 memory.events */
int cr_cgroup_parse_oom_control(const char *text,
                                struct cr_cgroup_events *ret); /* v1 memory.oom_control */
/* "max" → CR_CGROUP_UNLIMITED; a v1 limit of ~2^63 rounded to pages also reads as unlimited. */
int cr_cgroup_parse_u64(const char *text, uint64_t *ret);
/* /proc/<pid>/cgroup: find the memory controller's path (v1 line with
 * "memory" in its controller list, or the v2 "0::" line when l is V2). */
int cr_cgroup_parse_proc_cgroup(const char *text, enum cr_cgroup_layout l, char **ret_rel);
/* v2 cgroup.controllers text → the request for cgroup.subtree_control
 * ("+memory +pids +cpu", those of the three that are listed). -ENODEV when
 * memory is not listed, -ENOBUFS when ret is too small. */
int cr_cgroup_parse_controllers(const char *text, char *ret, size_t size);
/* Pressure stall information (PSI) of a group's memory: the share of
 * time (percent, over the last 10 s and 60 s) some of its tasks ("some")
 * or all of them ("full") were stalled waiting for memory — reclaim,
 * refaults, memory.high's throttling — and the totals in µs. */
struct cr_cgroup_pressure {
    double some_avg10, some_avg60;
    double full_avg10, full_avg60;
    uint64_t some_total_us, full_total_us;
};
/* v2 memory.pressure (also /proc/pressure/memory): two lines, "some
 * avg10=… avg60=… avg300=… total=…" and "full …". */
int cr_cgroup_parse_pressure(const char *text, struct cr_cgroup_pressure *ret);
/* CPU quotas as whole CPUs, rounded up (0.5 CPU → 1, 1.5 → 2); 0 = no
 * quota. v2 cpu.max ("max 100000", "150000 100000"); v1 the texts of
 * cpu.cfs_quota_us (-1 = none) and cpu.cfs_period_us. */
int cr_cgroup_parse_cpu_max(const char *text, unsigned *ret_cpus);
int cr_cgroup_parse_cfs(const char *quota_text, const char *period_text, unsigned *ret_cpus);
/* Pure: the parent of a rel path ("/a/b" → "/a", "/a" → "/"); caller frees. */
char *cr_cgroup_parent(const char *rel);

/* The system's layout. Detects where the memory controller lives (v1 mount
 * with "memory", else cgroup2 with "memory" in cgroup.controllers at its
 * root). ret_mount: the mount point holding the memory controller (caller
 * frees; NULL with CR_CGROUP_NONE). No memory controller is not an error:
 * returns 0 with CR_CGROUP_NONE; every other function then fails -ENODEV.
 * The first call initializes libcgroup (once per process). */
int cr_cgroup_detect(enum cr_cgroup_layout *ret, char **ret_mount);

/* The smallest CPU quota over the calling process's group in the cpu
 * controller's hierarchy (v1 or v2, wherever it is mounted) and its
 * ancestors: *ret_cpus 0 when none is set or there is no cpu controller
 * (not an error). ret_rel (may be NULL): the group that sets it (caller
 * frees; NULL with no quota). */
int cr_cgroup_cpu_quota(unsigned *ret_cpus, char **ret_rel);

/* The memory-controller cgroup of pid (0 = self), as a rel path. */
int cr_cgroup_of_pid(pid_t pid, char **ret_rel);

/* One cgroup. Opaque; freed with cr_cgroup_free (NULL-safe; returns NULL). */
struct cr_cgroup;

/* Opens a handle on rel. create=true creates it (and missing parents, via
 * libcgroup); an existing group is fine. -ENOENT when it does not exist and
 * create is false; -EINVAL for a rel with empty, "." or ".." parts. */
int cr_cgroup_open(const char *rel, bool create, struct cr_cgroup **ret);
struct cr_cgroup *cr_cgroup_free(struct cr_cgroup *cg);
const char *cr_cgroup_rel(const struct cr_cgroup *cg);
const char *cr_cgroup_fs_path(const struct cr_cgroup *cg); /* absolute path in /sys/fs/cgroup… */
enum cr_cgroup_layout cr_cgroup_layout(const struct cr_cgroup *cg);

/* Limits. bytes == CR_CGROUP_UNLIMITED clears the limit; v1 rounds bytes
 * down to a page. set_max also limits swap, so that a limit means a limit:
 * v2 memory.swap.max=0 where present; v1 memory.memsw.limit_in_bytes =
 * bytes when the host has swap (written BEFORE limit_in_bytes when the
 * limit goes up and AFTER it when it goes down, since the kernel rejects
 * memsw < limit with EINVAL), else memsw is set back to unlimited: with no
 * swap it adds nothing, and a memsw limit would keep failcnt at 0 on OOM.
 * set_high is v2 only: -EOPNOTSUPP on v1. */
int cr_cgroup_set_max(struct cr_cgroup *cg, uint64_t bytes);
int cr_cgroup_set_high(struct cr_cgroup *cg, uint64_t bytes);
int cr_cgroup_get_max(struct cr_cgroup *cg, uint64_t *ret);
/* v2 memory.oom.group: true when an OOM kill in this group kills every
 * process in it. -EOPNOTSUPP on v1 (no such knob), -ENOENT before 4.19. */
int cr_cgroup_get_oom_group(struct cr_cgroup *cg, bool *ret);

/* Readings. peak: v2 memory.peak where the kernel has it, v1
 * memory.max_usage_in_bytes; -ENOENT when the kernel has none. */
int cr_cgroup_read_usage(struct cr_cgroup *cg, uint64_t *ret_usage);
int cr_cgroup_read_peak(struct cr_cgroup *cg, uint64_t *ret_peak);
/* The usage again, through the descriptor an earlier cr_cgroup_read_usage()
 * (or cr_cgroup_ready_ahead()) left open: one pread, no path walk, no
 * open; -EAGAIN when none is open yet. For a reader that must not change
 * the group nor wait on the hierarchy's locks (a view for an answer). */
int cr_cgroup_peek_usage(const struct cr_cgroup *cg, uint64_t *ret_usage);
int cr_cgroup_read_stat(struct cr_cgroup *cg, struct cr_cgroup_stat *ret);
/* v2 memory.pressure: -EOPNOTSUPP on v1, -ENOENT where the kernel keeps
 * no PSI (psi=0 on its command line, or built without it). */
int cr_cgroup_read_pressure(struct cr_cgroup *cg, struct cr_cgroup_pressure *ret);
/* A user.* extended attribute of the group's directory (cgroup2 keeps
 * them since Linux 5.7; systemd-oomd writes user.oomd_kill, the processes
 * it killed there, and reads user.oomd_omit, "leave this group alone").
 * get: its value read as a decimal integer; -ENODATA when unset,
 * -EOPNOTSUPP where the file system keeps none. set: writes value. */
int cr_cgroup_get_xattr_u64(const struct cr_cgroup *cg, const char *name, uint64_t *ret);
int cr_cgroup_set_xattr(const struct cr_cgroup *cg, const char *name, const char *value);
/* local=true reads v2 memory.events.local (events of this group alone);
 * on v1 both read memory.oom_control + memory.failcnt. */
int cr_cgroup_read_events(struct cr_cgroup *cg, bool local, struct cr_cgroup_events *ret);

/* Moves pid (all its threads) into the group: writes cgroup.procs (on v1
 * libcgroup's cgroup_attach_task_pid writes "tasks", one thread only). For
 * a worker, call it between fork and exec while the child waits on a pipe. */
int cr_cgroup_attach(struct cr_cgroup *cg, pid_t pid);

/* Removes the (empty) group, retrying briefly (up to ~timeout_ms, 5 ms
 * steps) while rmdir says EBUSY (right after the last task exits the kernel
 * may still drain it). The one call here that may block: keep timeout_ms
 * small in corrald, or use 0 (one try) and retry from a timer. A group with
 * live tasks or child groups stays and gives -EBUSY; tasks are never moved.
 * A group already gone counts as removed. The handle stays valid (free it). */
int cr_cgroup_remove(struct cr_cgroup *cg, unsigned timeout_ms);

/* Removes every child group of parent_rel whose name starts with prefix
 * (e.g. "w"), killing nothing: a group that still has tasks is left and
 * counted. ret_removed/ret_left may be NULL. */
int cr_cgroup_reclaim_stale(const char *parent_rel, const char *prefix, unsigned *ret_removed,
                            unsigned *ret_left);

/* The processes of a group (cgroup.procs). read_procs: *ret is malloc'd
 * (caller frees). parse_procs is the pure parser: -EINVAL on text that is
 * not one positive pid a line, -ENOBUFS past cap. */
int cr_cgroup_parse_procs(const char *text, pid_t *pids, size_t cap, size_t *ret_n);
int cr_cgroup_read_procs(struct cr_cgroup *cg, pid_t **ret, size_t *ret_n);
int cr_cgroup_count_procs(struct cr_cgroup *cg, size_t *ret_n);

/* Sends sig to every process in the group (not its child groups), so that
 * nothing a worker started outlives it. SIGKILL on v2 with cgroup.kill
 * (5.14+) is one write, race-free against forks. Otherwise rounds of
 * reading cgroup.procs and signalling each process through a pidfd after
 * checking it is still a member (no recycled pid is ever hit), until a round
 * finds nobody new: a child forked before its parent died shows up in the
 * next round. Does not wait for the processes to die: the group empties
 * as the kernel tears them down (cr_cgroup_remove retries while busy).
 * ret_signalled (may be NULL): how many processes were signalled. The root
 * group is refused (-EPERM). */
int cr_cgroup_kill(struct cr_cgroup *cg, int sig, unsigned *ret_signalled);

/* SIGKILLs the processes of every child group of parent_rel whose name
 * starts with prefix: what a corrald killed with SIGKILL left behind, before
 * cr_cgroup_reclaim_stale() removes the groups. Blocks, in 5 ms steps, up
 * to timeout_ms in all for the killed groups to empty (start-up only).
 * ret_killed (may be NULL): how many processes were killed. */
int cr_cgroup_kill_stale(const char *parent_rel, const char *prefix, unsigned timeout_ms,
                         unsigned *ret_killed);

/* An fd that becomes readable (POLLIN) when an OOM event happens in the
 * group: v1 an eventfd registered through cgroup.event_control on
 * memory.oom_control (fires when this group or any ancestor enters OOM,
 * and once more when the group is removed); v2 an inotify fd watching
 * memory.events for IN_MODIFY (fires on any change of any counter in it,
 * including ones propagated from descendants). Readiness is a hint, not a
 * verdict: the caller owns the fd (CLOEXEC, non-blocking), polls it, and
 * on readiness calls cr_cgroup_oom_fd_drain() then re-reads the counters. */
int cr_cgroup_oom_fd(struct cr_cgroup *cg, int *ret_fd);
void cr_cgroup_oom_fd_drain(int fd);

/* An fd of the group's cgroup.procs open for writing: what a child writes
 * "0" into to move itself in before exec. The caller owns it. */
int cr_cgroup_procs_fd(struct cr_cgroup *cg);

/* Does now, for a group made ahead of its use (e.g. on a thread off the
 * event loop), the path walks the group's first use would do: opens the
 * cgroup.procs fd and the OOM fd that the next cr_cgroup_procs_fd() and
 * cr_cgroup_oom_fd() hand over, and the usage file's descriptor. A step
 * that fails is left to the later call, which reports it. */
void cr_cgroup_ready_ahead(struct cr_cgroup *cg);

/* From now on the group's control files stay open once read, and reads
 * are preads: for the few long-lived groups read again and again (the
 * groups enclosing the workers). Costs one descriptor per file read. */
void cr_cgroup_keep_open(struct cr_cgroup *cg);

/* v2 delegation (Delegate=yes): moves every process of the group `rel` into
 * the leaf rel/leaf_name (created), then enables the listed controllers
 * ("+memory +pids +cpu": the ones available are enabled, memory must be) in
 * rel's cgroup.subtree_control. -EOPNOTSUPP on v1. */
int cr_cgroup_delegate_setup(const char *rel, const char *leaf_name, char **ret_leaf_rel);

/* v2: enables controllers in rel's cgroup.subtree_control (memory required). */
int cr_cgroup_enable_subtree(const char *rel);

/* Opens a read-only handle on rel below an explicit mount directory (a
 * fixture tree in tests, or a mount other than the system's) without
 * initializing libcgroup; readers (get_max, read_*) work on it, writers
 * should not be used. -EINVAL for a bad layout or rel, -ENOENT/-ENOTDIR
 * when the directory is missing. */
int cr_cgroup_open_at(const char *mount, enum cr_cgroup_layout l, const char *rel,
                      struct cr_cgroup **ret);

/* The groups whose limits and counters enclose a process in rel, nearest
 * first: rel itself when include_self, then each parent, and the root of
 * the hierarchy only when it has a finite limit (the root of a cgroup
 * namespace is a container's own group: docker/podman with a private
 * cgroup namespace put the container's limit there; the host's root never
 * has one). Groups that cannot be opened are skipped. mount NULL: the
 * system's memory mount and layout (l is then ignored). Returns the count
 * (>= 0) and an array the caller frees with cr_cgroup_free_list, or
 * -errno. */
int cr_cgroup_enclosing(const char *mount, enum cr_cgroup_layout l, const char *rel,
                        bool include_self, struct cr_cgroup ***ret, size_t *ret_n);
void cr_cgroup_free_list(struct cr_cgroup **v, size_t n);

/* 0 when the memory mount is writable, -EROFS when it is mounted read-only
 * (a container's default), other -errno on failure. */
int cr_cgroup_mount_writable(void);

/* 0 when rel exists below the memory mount, else -errno (-ENOENT: the path
 * /proc/self/cgroup names is not visible, e.g. a container sharing the
 * host's cgroup namespace on v1, whose mount shows only its own group). */
int cr_cgroup_rel_visible(const char *rel);

/* ---- freezing (cr_cgroup_freeze.c) ----------------------------------------
 * A frozen group's processes get no CPU and handle no signal until thawed;
 * they resume where they stopped. v2: cgroup.freeze of the worker's own
 * memory group (done when cgroup.events says "frozen 1"). v1: a group of the
 * separate freezer hierarchy (freezer.state THAWED/FREEZING/FROZEN) that the
 * caller creates and attaches the process to, alongside its memory group.
 * On v1 a SIGKILL stays pending on a frozen task until it is thawed. */
enum cr_freezer_kind {
    CR_FREEZER_NONE, /* neither: callers fall back to SIGSTOP/SIGCONT */
    CR_FREEZER_V1,   /* the v1 freezer hierarchy is mounted */
    CR_FREEZER_V2,   /* the memory controller is on v2: cgroup.freeze */
    _CR_FREEZER_KIND_MAX,
};
enum cr_freeze_state { CR_FREEZE_THAWED, CR_FREEZE_FREEZING, CR_FREEZE_FROZEN };

const char *cr_freezer_kind_to_string(enum cr_freezer_kind k);
/* Which freezer serves groups of this system's memory layout. */
int cr_freezer_detect(enum cr_freezer_kind *ret);
/* The freezer path of the calling process (/proc/self/cgroup's line with
 * "freezer" among its controllers; caller frees); parse is the pure part.
 * -ENOENT: no such line. */
int cr_freezer_own_rel(char **ret_rel);
int cr_freezer_parse_proc_cgroup(const char *text, char **ret_rel);
/* Pure: freezer.state (v1) or cgroup.events (v2) text → state. */
int cr_freezer_parse_state(enum cr_freezer_kind k, const char *text, enum cr_freeze_state *ret);

struct cr_freezer;
/* v2: a handle on the memory group cg (rel unused; -EOPNOTSUPP before 5.2).
 * v1: the group rel of the freezer hierarchy, created (with missing
 * parents) when create. -ENODEV with no freezer. Free with cr_freezer_free. */
int cr_freezer_open(const struct cr_cgroup *cg, const char *rel, bool create,
                    struct cr_freezer **ret);
struct cr_freezer *cr_freezer_free(struct cr_freezer *f);
enum cr_freezer_kind cr_freezer_kind(const struct cr_freezer *f);
const char *cr_freezer_rel(const struct cr_freezer *f);
/* v1: moves pid's thread group in (call between fork and exec); v2: 0. */
int cr_freezer_attach(struct cr_freezer *f, pid_t pid);
/* Asks for frozen or thawed; freezing completes asynchronously: poll
 * cr_freezer_state until CR_FREEZE_FROZEN. Thawing takes effect at once. */
int cr_freezer_set(struct cr_freezer *f, bool frozen);
int cr_freezer_state(struct cr_freezer *f, enum cr_freeze_state *ret);
/* v1: rmdir the (empty) group once (-EBUSY with tasks); v2: 0 (the memory
 * group is removed by its owner). */
int cr_freezer_remove(struct cr_freezer *f);
/* v1: under parent_rel, every group named <prefix><pid> whose pid no longer
 * exists (a supervisor that died without cleaning up) is thawed, its
 * processes and those of its child groups SIGKILLed, and removed (a group
 * still emptying after 1 s is left and counted; this blocks, for start-up).
 * Groups of live owners are untouched. */
int cr_freezer_reclaim_v1(const char *parent_rel, const char *prefix, unsigned *ret_killed,
                          unsigned *ret_left);
