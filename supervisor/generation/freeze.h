/* cr_freeze: how corrald freezes and thaws a warm spare — the cgroup
 * freezer where there is one (v2 cgroup.freeze of the spare's own group;
 * v1 a group of the freezer hierarchy under <corrald's freezer
 * group>/corral-<pid>), else SIGSTOP/SIGCONT. Below the core: the core's
 * actions call it; it never changes a state. */
#pragma once

#include <stdbool.h>

struct cr_supervisor;
struct cr_worker;

/* Start-up: picks the freezer and, on v1, reclaims what a dead corrald left
 * and makes corrald's own parent group (only when spares are asked for). */
void cr_freeze_setup(struct cr_supervisor *sup);
/* Before a spare's fork: its v1 freezer group (the attach callback puts the
 * child in it before exec) or its v2 handle. 0 or -errno. */
int cr_freeze_prepare(struct cr_worker *w);
/* Ask for frozen (true) or thawed. 0 or -errno. */
int cr_freeze_set(struct cr_worker *w, bool frozen);
/* 1 when frozen, 0 while not yet, -errno when it cannot be read. */
int cr_freeze_done(struct cr_worker *w);
/* After the reap: remove the v1 group (or queue nothing: v2 shares cg). */
void cr_freeze_release(struct cr_worker *w);
/* Exit: remove corrald's own v1 parent group. */
void cr_freeze_teardown(struct cr_supervisor *sup);
const char *cr_freeze_method(const struct cr_supervisor *sup);
