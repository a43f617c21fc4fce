#include "fixture_sup.h"

#include <stdlib.h>

#include "control.h"
#include "gen.h"
#include "history.h"
#include "internal.h"
#include "log.h"
#include "operations.h"
#include "supervisor.h"

#define CHECK(x) ((x) ? (void)0 : abort())

/* Nothing is ever spawned: the sink hears nothing. */
static void no_gen(struct cr_gen *g)
{
    abort();
}
static void no_msg(struct cr_gen *g, const struct cr_notify_msg *m)
{
    abort();
}
static void no_why(struct cr_gen *g, const char *why)
{
    abort();
}
static const struct cr_gen_sink sink = {.exited = no_gen, .exec_ok = no_gen,
                                        .exec_failed = no_gen, .message = no_msg,
                                        .recycle = no_why, .exit_notice = no_gen};

static const char *exit_notice(const void *ctx)
{
    return "off";
}

static struct cr_supervisor sup;
static struct cr_control_core core = {.sup = &sup, .exit_notice = exit_notice};

struct cr_supervisor *fuzz_sup_stopping(void)
{
    static uv_loop_t loop;
    CHECK(uv_loop_init(&loop) == 0);
    cr_config_init(&sup.cfg);
    sup.cfg.no_cgroups = true;
    char err[256];
    CHECK(cr_config_finish(&sup.cfg, err, sizeof(err)) == 0);
    cr_supervisor_init(&sup, &loop, &sink);
    CHECK(cr_history_new(8, &sup.deaths.history) == 0);
    /* One death on record, so `history` renders a post-mortem. */
    struct cr_postmortem pm = {.worker_id = 1,
                               .pid = 4242,
                               .generation = 1,
                               .exit_code = -1,
                               .signal = 9,
                               .category = CR_DEATH_OOM_OWN_LIMIT};
    cr_postmortem_set_stderr(&pm, "out of memory\n\xff\xfe", 16);
    CHECK(cr_history_push(sup.deaths.history, &pm) == 0);
    sup.target = 1;
    CHECK(cr_worker_new(&sup, 1) != NULL);
    sup.phase = CR_PHASE_STOPPING;
    cr_log_set_level("err");
    return &sup;
}

struct cr_control_core *fuzz_sup_core(void)
{
    return &core;
}

void fuzz_sup_check(struct cr_supervisor *s)
{
    CHECK(s->phase == CR_PHASE_STOPPING && s->workers && !s->workers->next &&
          !s->workers->g.pid);
    cr_log_set_level("err");
}
