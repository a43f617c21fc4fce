/* cr_diag: the directories where node workers leave evidence of a death —
 * V8's fatal-error report (--report-on-fatalerror) and, with
 * --heap-snapshot, a heap snapshot taken near the heap limit — one per
 * generation, made before its spawn and read for its post-mortem.
 *
 * Layout: <diag-dir>/<instance>/<name>, name as the generation's cgroup's
 * (w<ID>-<GEN>, s<GEN> for a spare). <diag-dir> is --diag-dir, else
 * $STATE_DIRECTORY/diag, else $RUNTIME_DIRECTORY/diag, else ./corral-diag
 * (made absolute); "none" turns the reports off. corrald makes each
 * directory 0700, owned by the workers' user under --user (node must
 * write there; it writes nothing into a directory that does not exist),
 * and the two above it 0711 (searched, not listed, by the workers).
 *
 * Bounded: a generation's directory is removed at its death unless it
 * holds evidence of it (the common case: it is empty); when it does it is
 * kept, and the slot's previously kept one is deleted: at most one
 * directory of evidence per slot, plus those of the generations alive.
 * The instance's directory is emptied when the first one is made (what a
 * previous run left belongs to post-mortems that run held in memory).
 *
 * One writer: this module (the directories, and g->diag_dir). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* A generation's directory's path, NUL included (a file in it fits in
 * CR_POSTMORTEM_PATH_MAX: node's names are at most 52 bytes). */
#define CR_DIAG_PATH_MAX 320

struct cr_config;
struct cr_gen;
struct cr_postmortem;
struct cr_diag;

/* The diagnostics of one corrald: nothing is made until the first
 * cr_diag_prepare(). chown: the workers run as uid/gid (--user).
 * -ENOMEM, or -EINVAL for a --diag-dir too long to hold the paths. */
int cr_diag_new(struct cr_diag **ret, const struct cr_config *c, const char *instance, bool chown,
                uid_t uid, gid_t gid);
/* NULL-safe; returns NULL. The directories stay. */
struct cr_diag *cr_diag_free(struct cr_diag *d);

/* Makes g's directory (g->id and g->generation set) and returns its path
 * (g->diag_dir), or NULL when reports are off (--diag-dir none) or it
 * could not be made (logged once per reason): node then runs without
 * them. */
const char *cr_diag_prepare(struct cr_diag *d, struct cr_gen *g);

/* What node left in g's directory, into the post-mortem: V8's fatal-error
 * report (a report.json whose header names a fatal trigger) and a heap
 * snapshot (whole, or cut short by the death). Reads at most a few KiB. */
void cr_diag_collect(struct cr_diag *d, const struct cr_gen *g, struct cr_postmortem *pm);

/* g's directory is done with. pm: the post-mortem of its death, whose
 * reports cr_diag_collect() filled from this directory; the directory is
 * kept when they name evidence, a fatal-error report or a heap snapshot
 * (the slot's previously kept one is deleted), and not read again. NULL
 * (no death was read: a spawn that made no process, a worker removed
 * after its reap) or no evidence: removed. g->diag_dir is emptied. */
void cr_diag_release(struct cr_diag *d, struct cr_gen *g, const struct cr_postmortem *pm);
