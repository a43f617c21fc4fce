/* The lifecycle table, checked as a whole: invariants that hold for every
 * cell (so a new state or event cannot quietly break them), a few cells
 * whose meaning is documented behaviour, and the restart arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lifecycle.h"

#define EACH_STATE(s) for (enum cr_wstate s = 0; s < _CR_WS_MAX; s++)
#define EACH_EVENT(e) for (enum cr_wevent e = 0; e < _CR_WE_MAX; e++)

static const char *S(enum cr_wstate s)
{
    return cr_wstate_to_string(s);
}

static const char *E(enum cr_wevent e)
{
    return cr_wevent_to_string(e);
}

/* Every state that owns a process has an exit cell: the reaper's EXIT
 * leads to `exited` and runs the reap action. A state without a process
 * has nothing to reap. */
static void test_process_states_have_an_exit(void **state)
{
    EACH_STATE(s) {
        const struct cr_transition *t = cr_lifecycle_step(s, CR_WE_EXIT);
        if (!cr_wstate_has_process(s)) {
            if (t)
                fail_msg("%s has no process but an exit cell", S(s));
            continue;
        }
        if (!t)
            fail_msg("%s owns a process but has no exit cell", S(s));
        if (t->next != CR_WS_EXITED || t->action != CR_WA_REAP)
            fail_msg("%s × exit → %s: %s, want exited: reap", S(s), S(t->next),
                     cr_waction_to_string(t->action));
    }
}

/* No cell leaves a process unowned: from a state that owns a process, only
 * the reaper (EXIT) or a failed fork (SPAWN_FAILED: none was made) leads
 * to a state without one. And no process appears unowned: entering a
 * process state from a process-less one is always the spawn action. */
static void test_no_cell_loses_or_invents_a_process(void **state)
{
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (!t)
            continue;
        bool before = cr_wstate_has_process(s), after = cr_wstate_has_process(t->next);
        if (before && !after && e != CR_WE_EXIT && e != CR_WE_SPAWN_FAILED)
            fail_msg("%s × %s → %s drops a live process", S(s), E(e), S(t->next));
        if (!before && after && t->action != CR_WA_SPAWN)
            fail_msg("%s × %s → %s makes a process without spawning", S(s), E(e), S(t->next));
        if (t->action == CR_WA_SPAWN && !cr_wstate_spawned(t->next))
            fail_msg("%s × %s spawns into %s, not a starting state", S(s), E(e), S(t->next));
        if ((e == CR_WE_SPAWN_FAILED) != (t->action == CR_WA_SPAWN_FAILED))
            fail_msg("%s × %s: a failed spawn and its action go together", S(s), E(e));
        if ((e == CR_WE_EXIT) != (t->action == CR_WA_REAP))
            fail_msg("%s × %s: only the reaper's event reaps", S(s), E(e));
    }
    /* A failed spawn can only be heard where spawning leads. */
    EACH_STATE(s) {
        if (!cr_wstate_spawned(s) && cr_lifecycle_step(s, CR_WE_SPAWN_FAILED))
            fail_msg("%s hears spawn-failed but spawning never leads there", S(s));
    }
}

static bool leaves(enum cr_wstate s)
{
    EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (t && t->next != s)
            return true;
    }
    return false;
}

/* Every non-terminal state has a deadline or an event that leaves it, and
 * a state's deadline column and its DEADLINE cell agree. Terminal states
 * hear nothing. */
static void test_nothing_gets_stuck(void **state)
{
    EACH_STATE(s) {
        const struct cr_transition *d = cr_lifecycle_step(s, CR_WE_DEADLINE);
        if (cr_wstate_terminal(s)) {
            EACH_EVENT(e) if (cr_lifecycle_step(s, e))
                fail_msg("terminal %s hears %s", S(s), E(e));
            continue;
        }
        if (!leaves(s) && !d)
            fail_msg("%s has neither a deadline nor an event that leaves it", S(s));
        if (!!d != !!cr_wstate_deadline(s))
            fail_msg("%s: deadline meaning '%s' but %s deadline cell", S(s),
                     cr_wstate_deadline(s) ? cr_wstate_deadline(s) : "(none)", d ? "a" : "no");
    }
}

/* `failed` is reachable only through the budget: every cell into it is
 * BUDGET_SPENT, and BUDGET_SPENT leads nowhere else. */
static void test_failed_only_through_the_budget(void **state)
{
    bool reached = false;
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (!t)
            continue;
        if (t->next == CR_WS_FAILED && s != CR_WS_FAILED && e != CR_WE_BUDGET_SPENT)
            fail_msg("%s × %s reaches failed without the budget", S(s), E(e));
        if (e == CR_WE_BUDGET_SPENT && t->next != CR_WS_FAILED)
            fail_msg("%s × budget-spent → %s, not failed", S(s), S(t->next));
        reached |= t->next == CR_WS_FAILED;
    }
    assert_true(reached);
}

/* Reachability: every state can be reached from a new worker, and from
 * every state a worker can still be retired (reach the terminal state). */
static void reach(enum cr_wstate from, bool seen[_CR_WS_MAX])
{
    if (seen[from])
        return;
    seen[from] = true;
    EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(from, e);
        if (t)
            reach(t->next, seen);
    }
}

static void test_reachable_and_retirable(void **state)
{
    bool seen[_CR_WS_MAX] = {0};
    reach(CR_WS_NEW, seen);
    EACH_STATE(s) if (!seen[s])
        fail_msg("%s cannot be reached from new", S(s));
    EACH_STATE(s) {
        bool from[_CR_WS_MAX] = {0};
        reach(s, from);
        if (!from[CR_WS_GONE])
            fail_msg("a worker in %s can never be retired", S(s));
    }
    /* Exactly one terminal state, and a new worker is calloc's zero. */
    unsigned terminal = 0;
    EACH_STATE(s) terminal += cr_wstate_terminal(s);
    assert_int_equal(terminal, 1);
    assert_true(cr_wstate_terminal(CR_WS_GONE));
    assert_int_equal(CR_WS_NEW, 0);
}

/* Spares: a spare state is entered only from new (start-spare) or from
 * another spare state, never from a serving one; it is left for serving
 * only by promote (→ ready, thawing), and otherwise only toward death. A
 * frozen spare cannot run a SIGTERM handler: its drain kills. */
static void test_spares(void **state)
{
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (!t)
            continue;
        if (cr_wstate_spare(t->next) && !cr_wstate_spare(s) &&
            !(s == CR_WS_NEW && e == CR_WE_START_SPARE))
            fail_msg("%s × %s enters spare state %s", S(s), E(e), S(t->next));
        if (cr_wstate_spare(s) && !cr_wstate_spare(t->next) && t->next != CR_WS_EXITED &&
            t->next != CR_WS_DRAINING && !(e == CR_WE_PROMOTE && t->next == CR_WS_READY) &&
            !(e == CR_WE_EXEC_FAILED && t->next == CR_WS_EXEC_FAILED))
            fail_msg("%s × %s leaves the spares for %s", S(s), E(e), S(t->next));
        if ((e == CR_WE_PROMOTE) != (t->action == CR_WA_PROMOTE) ||
            (e == CR_WE_PROMOTE && s != CR_WS_SPARE))
            fail_msg("%s × %s: only a frozen spare is promoted, by the promote action", S(s), E(e));
        if (e == CR_WE_FROZEN && s != CR_WS_FREEZING)
            fail_msg("%s hears frozen", S(s));
    }
    const struct cr_transition *d = cr_lifecycle_step(CR_WS_SPARE, CR_WE_DRAIN);
    assert_non_null(d);
    assert_int_equal(d->action, CR_WA_KILL_SPARE);
    assert_false(cr_wstate_spare(CR_WS_READY));
    assert_true(cr_wstate_spare(CR_WS_SPARE) && cr_wstate_has_process(CR_WS_SPARE));
}

/* Every state, event and action has a name; out-of-range values are safe. */
static void test_names(void **state)
{
    for (int r = 0; r < _CR_ROLE_MAX; r++)
        assert_string_not_equal(cr_role_to_string((enum cr_role)r), "?");
    for (int i = 0; i < _CR_INTENT_MAX; i++)
        assert_string_not_equal(cr_intent_to_string((enum cr_intent)i), "?");
    for (int r = 0; r < _CR_READINESS_MAX; r++)
        assert_string_not_equal(cr_readiness_to_string((enum cr_readiness)r), "?");
    assert_string_equal(cr_role_to_string(_CR_ROLE_MAX), "?");
    EACH_STATE(s) assert_string_not_equal(S(s), "?");
    EACH_EVENT(e) assert_string_not_equal(E(e), "?");
    for (int a = 0; a < _CR_WA_MAX; a++)
        assert_string_not_equal(cr_waction_to_string((enum cr_waction)a), "?");
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (t && ((unsigned)t->next >= _CR_WS_MAX || (unsigned)t->action >= _CR_WA_MAX))
            fail_msg("%s × %s: cell out of range", S(s), E(e));
    }
    assert_string_equal(cr_wstate_to_string(_CR_WS_MAX), "?");
    assert_null(cr_lifecycle_step(_CR_WS_MAX, CR_WE_READY));
    assert_null(cr_lifecycle_step(CR_WS_READY, _CR_WE_MAX));
    assert_false(cr_wstate_has_process(_CR_WS_MAX));
}

/* ---- behaviour the docs promise ------------------------------------------ */

static enum cr_wstate step(enum cr_wstate s, enum cr_wevent e, enum cr_waction want)
{
    const struct cr_transition *t = cr_lifecycle_step(s, e);
    if (!t)
        fail_msg("%s × %s has no cell", S(s), E(e));
    if (t->action != want)
        fail_msg("%s × %s: action %s, want %s", S(s), E(e), cr_waction_to_string(t->action),
                 cr_waction_to_string(want));
    return t->next;
}

/* One worker's life, walked through the table. */
static void test_a_life(void **state)
{
    enum cr_wstate s = CR_WS_NEW;
    s = step(s, CR_WE_START, CR_WA_QUEUE);
    assert_int_equal(s, CR_WS_PENDING);
    s = step(s, CR_WE_SPAWN_TURN, CR_WA_SPAWN);
    assert_int_equal(s, CR_WS_STARTING);
    s = step(s, CR_WE_READY, CR_WA_BECOME_READY);
    s = step(s, CR_WE_WATCHDOG, CR_WA_ARM_WATCHDOG);
    s = step(s, CR_WE_DEADLINE, CR_WA_FLAG_BLOCKED);
    assert_int_equal(s, CR_WS_BLOCKED);
    s = step(s, CR_WE_WATCHDOG, CR_WA_UNBLOCK);
    s = step(s, CR_WE_DEADLINE, CR_WA_FLAG_BLOCKED);
    s = step(s, CR_WE_DEADLINE, CR_WA_ASK_STACK);
    assert_int_equal(s, CR_WS_TRACING);
    s = step(s, CR_WE_WATCHDOG, CR_WA_UNBLOCK); /* it beat again while asked */
    assert_int_equal(s, CR_WS_READY);
    s = step(s, CR_WE_DEADLINE, CR_WA_FLAG_BLOCKED);
    s = step(s, CR_WE_DEADLINE, CR_WA_ASK_STACK);
    s = step(s, CR_WE_STACK, CR_WA_KILL_HANG); /* the stack came (or none will) */
    s = step(s, CR_WE_DEADLINE, CR_WA_KILL_HARD);
    assert_int_equal(s, CR_WS_KILLING);
    s = step(s, CR_WE_EXIT, CR_WA_REAP);
    s = step(s, CR_WE_RESTART, CR_WA_ARM_RESTART);
    assert_int_equal(s, CR_WS_BACKOFF);
    s = step(s, CR_WE_DEADLINE, CR_WA_QUEUE);
    s = step(s, CR_WE_SPAWN_TURN, CR_WA_SPAWN);
    s = step(s, CR_WE_SPAWN_FAILED, CR_WA_SPAWN_FAILED);
    assert_int_equal(s, CR_WS_EXITED);
    s = step(s, CR_WE_BUDGET_SPENT, CR_WA_MARK_FAILED);
    assert_int_equal(s, CR_WS_FAILED);
    s = step(s, CR_WE_DEADLINE, CR_WA_QUEUE);
    s = step(s, CR_WE_SPAWN_TURN, CR_WA_SPAWN);
    s = step(s, CR_WE_DEADLINE, CR_WA_STARTING_DEADLINE);
    s = step(s, CR_WE_START_TIMEOUT, CR_WA_KILL_START_TIMEOUT);
    assert_int_equal(s, CR_WS_STARTING);
    s = step(s, CR_WE_DRAIN, CR_WA_SEND_TERM);
    s = step(s, CR_WE_DEADLINE, CR_WA_KILL_STOP_TIMEOUT);
    assert_int_equal(s, CR_WS_DRAINING);
    s = step(s, CR_WE_EXIT, CR_WA_REAP);
    s = step(s, CR_WE_RETIRE, CR_WA_REMOVE);
    assert_int_equal(s, CR_WS_GONE);
}

static void ignored(enum cr_wstate s, enum cr_wevent e)
{
    if (cr_lifecycle_step(s, e))
        fail_msg("%s × %s should be ignored", S(s), E(e));
}

static void test_ignored_events(void **state)
{
    ignored(CR_WS_STARTING, CR_WE_WATCHDOG); /* heartbeats before READY=1 mean nothing yet */
    ignored(CR_WS_BLOCKED, CR_WE_READY);     /* READY=1 is no heartbeat */
    ignored(CR_WS_DRAINING, CR_WE_DRAIN);    /* draining twice sends nothing twice */
    ignored(CR_WS_DRAINING, CR_WE_WATCHDOG); /* a draining worker may stay silent */
    ignored(CR_WS_KILLING, CR_WE_WATCHDOG);  /* too late to come back */
    ignored(CR_WS_KILLING, CR_WE_DRAIN);
    /* A worker without a process is retired at once when drained. */
    assert_int_equal(step(CR_WS_BACKOFF, CR_WE_DRAIN, CR_WA_REMOVE), CR_WS_GONE);
    assert_int_equal(step(CR_WS_FAILED, CR_WE_DRAIN, CR_WA_REMOVE), CR_WS_GONE);
    /* A queued spawn is cancelled, not started, when drained (a stop
     * during a big scale-up), and only the pacer starts it. */
    assert_int_equal(step(CR_WS_PENDING, CR_WE_DRAIN, CR_WA_REMOVE), CR_WS_GONE);
    ignored(CR_WS_PENDING, CR_WE_DEADLINE);
    ignored(CR_WS_PENDING, CR_WE_START);
    /* The metrics list every state a worker can be seen in. */
    assert_true(cr_wstate_unseen(CR_WS_NEW));
    assert_false(cr_wstate_unseen(CR_WS_EXITED));
}

/* ---- roles: what follows a death ------------------------------------------ */

/* What follows a reap is its role's exit event, answered in `exited`: the
 * slot's worker goes to the restart policy (decide), which answers with a
 * decision that has a cell; every other role's action ends in retire, which
 * removes the worker. No role is left without a way out, and a death is the
 * slot's exactly for the roles that hold it. */
static void test_role_exit_events(void **state)
{
    for (int r = 0; r < _CR_ROLE_MAX; r++) {
        enum cr_wevent e = cr_role_exit_event((enum cr_role)r);
        const struct cr_transition *t = cr_lifecycle_step(CR_WS_EXITED, e);
        if (!t)
            fail_msg("role %s: exit event %s has no cell in exited",
                     cr_role_to_string((enum cr_role)r), E(e));
        if (e != CR_WE_RETIRE && (t->next != CR_WS_EXITED))
            fail_msg("role %s: %s leaves exited before its action answered",
                     cr_role_to_string((enum cr_role)r), E(e));
    }
    assert_int_equal(cr_role_exit_event(CR_ROLE_HOLDER), CR_WE_DIED);
    assert_int_equal(step(CR_WS_EXITED, CR_WE_DIED, CR_WA_DECIDE), CR_WS_EXITED);
    assert_int_equal(step(CR_WS_EXITED, CR_WE_REPLACED_DIED, CR_WA_PASS_SLOT), CR_WS_EXITED);
    assert_int_equal(step(CR_WS_EXITED, CR_WE_REPLACEMENT_DIED, CR_WA_REPLACEMENT_FAILED),
                     CR_WS_EXITED);
    assert_int_equal(step(CR_WS_EXITED, CR_WE_SPARE_DIED, CR_WA_SPARE_FAILED), CR_WS_EXITED);
    assert_int_equal(cr_role_exit_event(CR_ROLE_RETIRING), CR_WE_RETIRE);
    assert_int_equal(cr_role_exit_event(CR_ROLE_HANDED_OVER), CR_WE_RETIRE);
    assert_int_equal(step(CR_WS_EXITED, CR_WE_RETIRE, CR_WA_REMOVE), CR_WS_GONE);
    /* Whose death is the slot's. */
    assert_true(cr_role_holds_slot(CR_ROLE_HOLDER));
    assert_true(cr_role_holds_slot(CR_ROLE_REPLACED));
    assert_true(cr_role_holds_slot(CR_ROLE_HANDED_OVER));
    assert_false(cr_role_holds_slot(CR_ROLE_REPLACEMENT));
    assert_false(cr_role_holds_slot(CR_ROLE_SPARE));
    assert_false(cr_role_holds_slot(CR_ROLE_RETIRING));
    assert_false(cr_role_holds_slot(_CR_ROLE_MAX));
    /* The exit events are heard in exited only. */
    EACH_STATE(s) {
        if (s == CR_WS_EXITED)
            continue;
        for (int r = 0; r < _CR_ROLE_MAX; r++) {
            enum cr_wevent e = cr_role_exit_event((enum cr_role)r);
            if (e != CR_WE_RETIRE && cr_lifecycle_step(s, e))
                fail_msg("%s hears %s", S(s), E(e));
        }
    }
}

/* "May this worker be recycled now": a state with a RECYCLE cell, the
 * slot's worker, nothing queued. The pump's two turns are heard only where
 * they apply: a replacement for a serving worker, a restart in place for
 * one not ready yet. */
static void test_recyclable(void **state)
{
    EACH_STATE(s) {
        bool serving = s == CR_WS_READY || s == CR_WS_BLOCKED || s == CR_WS_TRACING;
        bool want = serving || s == CR_WS_STARTING;
        for (int r = 0; r < _CR_ROLE_MAX; r++)
            for (int i = 0; i < _CR_INTENT_MAX; i++) {
                bool got = cr_lifecycle_recyclable(s, (enum cr_role)r, (enum cr_intent)i);
                if (got != (want && r == CR_ROLE_HOLDER && i == CR_INTENT_NONE))
                    fail_msg("%s / %s / %s: recyclable %d", S(s),
                             cr_role_to_string((enum cr_role)r),
                             cr_intent_to_string((enum cr_intent)i), got);
            }
        const struct cr_transition *q = cr_lifecycle_step(s, CR_WE_RECYCLE);
        if (q && (q->next != s || q->action != CR_WA_QUEUE_RECYCLE))
            fail_msg("%s × recycle must stay and queue", S(s));
        const struct cr_transition *rt = cr_lifecycle_step(s, CR_WE_REPLACE_TURN);
        if (!rt != !serving || (rt && (rt->next != s || rt->action != CR_WA_START_REPLACEMENT)))
            fail_msg("%s × replace-turn", S(s));
        const struct cr_transition *ip = cr_lifecycle_step(s, CR_WE_RESTART_IN_PLACE);
        if (!ip != (s != CR_WS_STARTING))
            fail_msg("%s × restart-in-place", S(s));
    }
    /* A restart in place is a planned drain of a worker that never served. */
    const struct cr_transition *ip = cr_lifecycle_step(CR_WS_STARTING, CR_WE_RESTART_IN_PLACE);
    assert_int_equal(ip->action, CR_WA_RESTART_IN_PLACE);
    assert_int_equal(step(CR_WS_STARTING, CR_WE_DRAIN, CR_WA_SEND_TERM), CR_WS_DRAINING);
}

/* A program that never ran: heard only where a spawn leads, into the one
 * state for it, which only its reap (or its SIGKILL deadline) leaves; it
 * is not sampled, and a drain adds nothing. */
static void test_exec_failed(void **state)
{
    EACH_STATE(s) {
        const struct cr_transition *t = cr_lifecycle_step(s, CR_WE_EXEC_FAILED);
        if (!t != !cr_wstate_spawned(s))
            fail_msg("%s × exec-failed: %s", S(s), t ? "a cell" : "no cell");
        if (t && (t->next != CR_WS_EXEC_FAILED || t->action != CR_WA_NOTE_EXEC_FAILED))
            fail_msg("%s × exec-failed → %s", S(s), S(t->next));
    }
    EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(CR_WS_EXEC_FAILED, e);
        if (e == CR_WE_EXIT)
            assert_true(t && t->action == CR_WA_REAP);
        else if (e == CR_WE_DEADLINE)
            assert_true(t && t->next == CR_WS_EXEC_FAILED &&
                        t->action == CR_WA_KILL_UNEXECUTED);
        else if (t)
            fail_msg("exec-failed × %s has a cell", E(e));
    }
    /* The exec's success is heard where it can matter, and leads nowhere
     * by itself: under --ready exec the action answers assume-ready. */
    EACH_STATE(s) {
        const struct cr_transition *t = cr_lifecycle_step(s, CR_WE_EXEC_OK);
        if (!t != !cr_wstate_spawned(s))
            fail_msg("%s × exec-ok: %s", S(s), t ? "a cell" : "no cell");
        if (t && (t->next != s || t->action != CR_WA_EXEC_OK))
            fail_msg("%s × exec-ok must stay and ask the mode", S(s));
    }
    assert_false(cr_wstate_sampled(CR_WS_EXEC_FAILED));
    assert_true(cr_wstate_sampled(CR_WS_READY) && cr_wstate_sampled(CR_WS_STARTING));
    EACH_STATE(s) if (cr_wstate_sampled(s) && (!cr_wstate_has_process(s) || cr_wstate_spare(s)))
        fail_msg("%s is sampled", S(s));
}

/* The accepting states, where corrald keeps a copy of a reuseport
 * worker's socket: sampled states only, and a state a drain leads out of
 * (a SIGTERM means no more connections: the copy must go with it). */
static void test_accepting_states(void **state)
{
    (void)state;
    assert_true(cr_wstate_accepts(CR_WS_STARTING) && cr_wstate_accepts(CR_WS_READY) &&
                cr_wstate_accepts(CR_WS_BLOCKED));
    assert_false(cr_wstate_accepts(_CR_WS_MAX));
    EACH_STATE(s) {
        if (!cr_wstate_accepts(s))
            continue;
        if (!cr_wstate_sampled(s))
            fail_msg("%s accepts but is not sampled", S(s));
        const struct cr_transition *t = cr_lifecycle_step(s, CR_WE_DRAIN);
        if (!t || cr_wstate_accepts(t->next))
            fail_msg("%s × drain must lead out of the accepting states", S(s));
        t = cr_lifecycle_step(s, CR_WE_EXIT);
        if (!t || cr_wstate_accepts(t->next))
            fail_msg("%s × exit must lead out of the accepting states", S(s));
    }
    EACH_STATE(s) if (cr_wstate_accepts(s) && cr_wstate_spare(s)) fail_msg("%s", S(s));
    /* The copy is dropped when a worker leaves the accepting states and
     * never taken again for the same process: no cell may lead back into
     * them but a new process's (a spawn) or a promotion (a spare, which
     * never held a copy). A worker that beats again in `tracing` goes
     * back to ready: tracing must accept, or its queue goes unread for
     * the rest of its life. */
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (t && !cr_wstate_accepts(s) && cr_wstate_accepts(t->next) &&
            t->action != CR_WA_SPAWN && t->action != CR_WA_PROMOTE)
            fail_msg("%s × %s leads back into the accepting state %s", S(s), E(e), S(t->next));
    }
}

/* ---- restart arithmetic --------------------------------------------------- */

static const struct cr_restart_policy P = {
    .backoff_initial_ms = 100, .backoff_max_ms = 1000, .backoff_reset_ms = 30000,
    .budget = 3, .window_ms = 10000, .failed_retry_ms = 60000, .min_uptime_ms = 1000};

/* A death at now after `uptime` ms, never ready (or planned). */
static struct cr_restart_decision die(struct cr_restart_state *st, uint64_t now, uint64_t uptime,
                                      bool planned)
{
    return cr_restart_decide(&P, st, now,
                             &(struct cr_life){.uptime_ms = uptime, .planned = planned});
}

/* A death at now of a worker that had been ready for `served` ms. */
static struct cr_restart_decision die_served(struct cr_restart_state *st, uint64_t now,
                                             uint64_t served)
{
    return cr_restart_decide(&P, st, now,
                             &(struct cr_life){.uptime_ms = served + 50, .ready = true,
                                               .served_ms = served});
}

/* The kernel's exit notice: only a serving worker (ready, blocked, traced
 * or being killed for a hang) is handed over, it stays where it is until a
 * spare took its slot, and `dying` ends only by its reap (or its deadline,
 * which kills it again); it hears nothing else, the drain included. */
static void test_exit_notice_cells(void **state)
{
    EACH_STATE(s) {
        const struct cr_transition *t = cr_lifecycle_step(s, CR_WE_EXIT_NOTICE);
        bool serving = s == CR_WS_READY || s == CR_WS_BLOCKED || s == CR_WS_TRACING ||
                       s == CR_WS_KILLING;
        if (!t != !serving)
            fail_msg("%s × exit-notice: %s", S(s), t ? "has a cell" : "has no cell");
        if (t && (t->next != s || t->action != CR_WA_HAND_OVER))
            fail_msg("%s × exit-notice must stay and hand over", S(s));
        t = cr_lifecycle_step(s, CR_WE_HANDED_OVER);
        if (!t != !serving || (t && (t->next != CR_WS_DYING || t->action != CR_WA_AWAIT_REAP)))
            fail_msg("%s × handed-over", S(s));
    }
    EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(CR_WS_DYING, e);
        if (e == CR_WE_EXIT)
            assert_true(t && t->next == CR_WS_EXITED && t->action == CR_WA_REAP);
        else if (e == CR_WE_DEADLINE)
            assert_true(t && t->next == CR_WS_DYING && t->action == CR_WA_KILL_DYING);
        else if (t)
            fail_msg("dying × %s has a cell", E(e));
    }
    assert_true(cr_wstate_has_process(CR_WS_DYING));
    assert_false(cr_wstate_spare(CR_WS_DYING));
    assert_non_null(cr_wstate_deadline(CR_WS_DYING));
}

static void test_backoff_arithmetic(void **state)
{
    assert_int_equal(cr_backoff_delay(&P, 1), 0); /* a lone death: at once */
    assert_int_equal(cr_backoff_delay(&P, 2), 100);
    assert_int_equal(cr_backoff_delay(&P, 3), 200);
    assert_int_equal(cr_backoff_delay(&P, 4), 400);
    assert_int_equal(cr_backoff_delay(&P, 5), 800);
    assert_int_equal(cr_backoff_delay(&P, 6), 1000); /* capped */
    assert_int_equal(cr_backoff_delay(&P, 60), 1000); /* no overflow */
}

static void test_restart_policy(void **state)
{
    struct cr_restart_state st = {0};
    /* Planned deaths: immediate, not counted. */
    struct cr_restart_decision d = die(&st, 1000, 10, true);
    assert_int_equal(d.event, CR_WE_RESTART);
    assert_int_equal(d.delay_ms, 0);
    assert_int_equal(st.consecutive, 0);

    d = die(&st, 1000, 10, false);
    assert_int_equal(d.delay_ms, 0);
    d = die(&st, 2000, 10, false);
    assert_int_equal(d.delay_ms, 100);
    d = die(&st, 3000, 10, false);
    assert_int_equal(d.delay_ms, 200);
    assert_false(d.crash_loop);
    /* The 4th death within 10 s exceeds a budget of 3. */
    d = die(&st, 4000, 10, false);
    assert_int_equal(d.event, CR_WE_BUDGET_SPENT);
    assert_true(d.crash_loop);
    assert_int_equal(d.delay_ms, CR_FAILED_RETRY_INITIAL_MS); /* failed: retried soon */

    /* Much later, after a stable run: backoff starts over, window is clear. */
    d = die(&st, 200000, 40000, false);
    assert_int_equal(d.event, CR_WE_RESTART);
    assert_int_equal(d.delay_ms, 0);
}

static void test_window_ages_out(void **state)
{
    struct cr_restart_state st = {0};
    for (int i = 0; i < 3; i++)
        die(&st, 1000 + (uint64_t)i, 10, false);
    /* 11 s later the three old deaths are outside the 10 s window. */
    struct cr_restart_decision d = die(&st, 12500, 10, false);
    assert_int_equal(d.event, CR_WE_RESTART);
    assert_false(d.crash_loop);
    assert_int_equal(d.delay_ms, 400); /* but the backoff keeps doubling: not stable */
}

/* Each decision is an event the table answers from `exited`. */
static void test_decisions_have_cells(void **state)
{
    struct cr_restart_state st = {0};
    for (int i = 0; i < 8; i++) {
        struct cr_restart_decision d = i % 4 == 3 ? die_served(&st, 1000 + (uint64_t)i, 5000)
                                                  : die(&st, 1000 + (uint64_t)i, 10, false);
        if (!cr_lifecycle_step(CR_WS_EXITED, d.event))
            fail_msg("decision %s has no cell in exited", E(d.event));
    }
}

/* ---- readiness modes ------------------------------------------------------ */

/* A starting worker's deadline asks its action which it is: the start
 * timeout (announced) or readiness its mode assumes. Both answers, and the
 * first message of an auto worker, are cells of `starting` only. */
static void test_readiness_cells(void **state)
{
    assert_int_equal(step(CR_WS_STARTING, CR_WE_DEADLINE, CR_WA_STARTING_DEADLINE),
                     CR_WS_STARTING);
    assert_int_equal(step(CR_WS_STARTING, CR_WE_START_TIMEOUT, CR_WA_KILL_START_TIMEOUT),
                     CR_WS_STARTING);
    assert_int_equal(step(CR_WS_STARTING, CR_WE_ASSUME_READY, CR_WA_ASSUME_READY), CR_WS_READY);
    assert_int_equal(step(CR_WS_STARTING, CR_WE_SPOKE, CR_WA_ANNOUNCE), CR_WS_STARTING);
    assert_int_equal(step(CR_WS_STARTING, CR_WE_READY, CR_WA_BECOME_READY), CR_WS_READY);
    /* READY=1 after readiness was assumed marks it announced, nothing more. */
    assert_int_equal(step(CR_WS_READY, CR_WE_READY, CR_WA_LATE_READY), CR_WS_READY);
    /* A spare starts like a worker: the same cells, leading to freezing. */
    assert_int_equal(step(CR_WS_SPARE_STARTING, CR_WE_ASSUME_READY, CR_WA_FREEZE), CR_WS_FREEZING);
    assert_int_equal(step(CR_WS_SPARE_STARTING, CR_WE_READY, CR_WA_FREEZE), CR_WS_FREEZING);
    EACH_STATE(s) {
        if (cr_wstate_spawned(s))
            continue;
        if (cr_lifecycle_step(s, CR_WE_SPOKE) || cr_lifecycle_step(s, CR_WE_START_TIMEOUT) ||
            cr_lifecycle_step(s, CR_WE_ASSUME_READY))
            fail_msg("%s hears a starting-only event", S(s));
    }
}

/* A worker becomes ready only by READY=1 or by its readiness mode: every
 * cell into `ready` from elsewhere is one of those two, or a blocked (or
 * traced) worker's heartbeat. And only the start timeout kills a starting worker. */
static void test_ready_only_by_announcement_or_mode(void **state)
{
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (!t || t->next != CR_WS_READY || s == CR_WS_READY)
            continue;
        /* A spare was ready (READY=1 or its mode) before it was frozen. */
        bool ok = (s == CR_WS_STARTING && (e == CR_WE_READY || e == CR_WE_ASSUME_READY)) ||
                  ((s == CR_WS_BLOCKED || s == CR_WS_TRACING) && e == CR_WE_WATCHDOG) ||
                  (s == CR_WS_SPARE && e == CR_WE_PROMOTE);
        if (!ok)
            fail_msg("%s × %s makes a worker ready", S(s), E(e));
    }
    EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(CR_WS_STARTING, e);
        if (t && t->action == CR_WA_KILL_START_TIMEOUT && e != CR_WE_START_TIMEOUT)
            fail_msg("starting × %s kills for a start timeout", E(e));
    }
}

/* ---- crash-loop policy ------------------------------------------------------ */

/* A worker that served at least min_uptime is replaced at once and never
 * counted: a kill every 500 ms of a worker ready for 2 s never spends the
 * budget, and never backs off. */
/* A hang kill always asks for the stack first, and only the stack's
 * arrival or its budget ends the asking: both kill the same way, so a
 * worker that cannot answer is killed as before, only later by nothing. */
static void test_trace_before_hang_kill(void **state)
{
    EACH_STATE(s) EACH_EVENT(e) {
        const struct cr_transition *t = cr_lifecycle_step(s, e);
        if (t && t->action == CR_WA_KILL_HANG && s != CR_WS_TRACING)
            fail_msg("%s × %s kills for a hang without asking for the stack", S(s), E(e));
        if (t && t->action == CR_WA_ASK_STACK &&
            (s != CR_WS_BLOCKED || e != CR_WE_DEADLINE || t->next != CR_WS_TRACING))
            fail_msg("%s × %s asks for a stack", S(s), E(e));
        if (t && e == CR_WE_STACK && (s != CR_WS_TRACING || t->action != CR_WA_KILL_HANG))
            fail_msg("%s hears the stack", S(s));
    }
    const struct cr_transition *t = cr_lifecycle_step(CR_WS_TRACING, CR_WE_DEADLINE);
    assert_non_null(t);
    assert_int_equal(t->next, CR_WS_KILLING);
    assert_int_equal(t->action, CR_WA_KILL_HANG);
    t = cr_lifecycle_step(CR_WS_TRACING, CR_WE_STACK);
    assert_non_null(t);
    assert_int_equal(t->next, CR_WS_KILLING);
}

static void test_served_deaths_are_not_counted(void **state)
{
    struct cr_restart_state st = {0};
    for (int i = 0; i < 40; i++) {
        struct cr_restart_decision d = die_served(&st, 1000 + 500 * (uint64_t)i, 2000);
        assert_int_equal(d.event, CR_WE_REPLACE);
        assert_int_equal(d.delay_ms, 0);
        assert_false(d.crash_loop);
    }
    assert_int_equal(st.ring.len, 0);
    /* An OOM right at min_uptime is bad luck too; 1 ms before, it counts. */
    assert_int_equal(die_served(&st, 30000, 1000).event, CR_WE_REPLACE);
    assert_int_equal(die_served(&st, 30001, 999).event, CR_WE_RESTART);
    assert_int_equal(st.ring.len, 1);
}

/* Deaths before ready, or soon after it, are a crash loop: a program that
 * exits at once still reaches failed. */
static void test_quick_deaths_reach_failed(void **state)
{
    struct cr_restart_state st = {0};
    struct cr_restart_decision d = {0};
    for (int i = 0; i < 4; i++)
        d = (i % 2 ? die_served(&st, 1000 + (uint64_t)i * 100, 10)
                   : die(&st, 1000 + (uint64_t)i * 100, 5, false));
    assert_int_equal(d.event, CR_WE_BUDGET_SPENT);
    assert_true(d.crash_loop);
    /* A served life afterwards starts everything over. */
    d = die_served(&st, 5000, 5000);
    assert_int_equal(d.event, CR_WE_REPLACE);
    assert_int_equal(st.consecutive, 0);
    assert_int_equal(st.failed_streak, 0);
}

/* `failed` retries with its own backoff: 2 s, doubling to failed_retry_ms. */
static void test_failed_retry_backs_off(void **state)
{
    assert_int_equal(cr_failed_retry_delay(&P, 1), 2000);
    assert_int_equal(cr_failed_retry_delay(&P, 2), 4000);
    assert_int_equal(cr_failed_retry_delay(&P, 5), 32000);
    assert_int_equal(cr_failed_retry_delay(&P, 6), 60000);
    assert_int_equal(cr_failed_retry_delay(&P, 1000), 60000);
    struct cr_restart_policy small = P;
    small.failed_retry_ms = 500; /* a cap below the first step wins */
    assert_int_equal(cr_failed_retry_delay(&small, 1), 500);

    struct cr_restart_state st = {0};
    struct cr_restart_decision d = cr_restart_fail(&P, &st, false); /* exec failure */
    assert_int_equal(d.event, CR_WE_BUDGET_SPENT);
    assert_false(d.crash_loop);
    assert_int_equal(d.delay_ms, 2000);
    assert_int_equal(cr_restart_fail(&P, &st, false).delay_ms, 4000);
    /* Crash-loop retries keep doubling while each retry dies quickly. */
    struct cr_restart_state cl = {0};
    uint64_t t = 1000, last = 0;
    for (int i = 0; i < 4; i++)
        d = die(&cl, t += 10, 5, false);
    assert_int_equal(d.delay_ms, 2000);
    for (int i = 0; i < 2; i++) { /* while the deaths stay within the window */
        last = d.delay_ms;
        d = die(&cl, t += last, 5, false);
        assert_int_equal(d.event, CR_WE_BUDGET_SPENT);
        assert_int_equal(d.delay_ms, last * 2);
    }
    /* Once they aged out, a quick death backs off as a crash; the streak
     * stays, so the next budget spent waits longer still. */
    d = die(&cl, t += d.delay_ms, 5, false);
    assert_int_equal(d.event, CR_WE_RESTART);
    assert_int_equal(cl.failed_streak, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_process_states_have_an_exit),
        cmocka_unit_test(test_no_cell_loses_or_invents_a_process),
        cmocka_unit_test(test_nothing_gets_stuck),
        cmocka_unit_test(test_failed_only_through_the_budget),
        cmocka_unit_test(test_reachable_and_retirable),
        cmocka_unit_test(test_spares),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_a_life),
        cmocka_unit_test(test_ignored_events),
        cmocka_unit_test(test_exit_notice_cells),
        cmocka_unit_test(test_role_exit_events),
        cmocka_unit_test(test_recyclable),
        cmocka_unit_test(test_exec_failed),
        cmocka_unit_test(test_backoff_arithmetic),
        cmocka_unit_test(test_restart_policy),
        cmocka_unit_test(test_window_ages_out),
        cmocka_unit_test(test_decisions_have_cells),
        cmocka_unit_test(test_readiness_cells),
        cmocka_unit_test(test_accepting_states),
        cmocka_unit_test(test_ready_only_by_announcement_or_mode),
        cmocka_unit_test(test_trace_before_hang_kill),
        cmocka_unit_test(test_served_deaths_are_not_counted),
        cmocka_unit_test(test_quick_deaths_reach_failed),
        cmocka_unit_test(test_failed_retry_backs_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
