/* cr_freeze: how corrald freezes and thaws a warm spare — the cgroup
 * freezer where there is one (v2 cgroup.freeze of the spare's own group;
 * v1 a group of the freezer hierarchy under <corrald's freezer
 * group>/corral-<pid>), else SIGSTOP/SIGCONT. Below the core: the core's
 * actions call it; it never changes a state. */
#pragma once

#include <stdbool.h>

#include "cr_cgroup.h"

struct cr_gen;

struct cr_freezing {
    enum cr_freezer_kind kind; /* NONE: SIGSTOP */
    char *base;                /* v1: <own freezer group>/corral-<pid>, made and removed here */
};

/* Start-up: picks the freezer (cgroups: per-worker groups are made) and,
 * on v1, reclaims what a dead corrald left and makes corrald's own parent
 * group (only when spares are asked for). */
void cr_freeze_setup(struct cr_freezing *f, bool cgroups, unsigned spares);
/* Exit: remove corrald's own v1 parent group. */
void cr_freeze_teardown(struct cr_freezing *f);
/* "cgroup.freeze", "v1-freezer" or "SIGSTOP". */
const char *cr_freeze_method(const struct cr_freezing *f);
/* Before a spare's fork: its v1 freezer group (the parent adds the child
 * to it before it can be ready) or its v2 handle. 0 or -errno. */
int cr_freeze_prepare(struct cr_gen *g);
/* Ask for frozen (true) or thawed. 0 or -errno. */
int cr_freeze_set(struct cr_gen *g, bool frozen);
/* 1 when frozen, 0 while not yet, -errno when it cannot be read. */
int cr_freeze_done(struct cr_gen *g);
/* After the reap: remove the v1 group (nothing on v2: the group is g's own). */
void cr_freeze_release(struct cr_gen *g);
