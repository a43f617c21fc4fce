#include "fixture_sup.h"

#include <stdlib.h>

#include "history.h"
#include "internal.h"
#include "log.h"
#include "supervisor.h"

#define CHECK(x) ((x) ? (void)0 : abort())

struct cr_supervisor *fuzz_sup_stopping(void)
{
    static uv_loop_t loop;
    static struct cr_supervisor sup;
    CHECK(uv_loop_init(&loop) == 0);
    sup.loop = &loop;
    sup.notify_fd = -1;
    sup.listener.fd = -1;
    cr_config_init(&sup.cfg);
    sup.cfg.no_cgroups = true;
    char err[256];
    CHECK(cr_config_finish(&sup.cfg, err, sizeof(err)) == 0);
    uv_timer_init(&loop, &sup.cg_trash_timer);
    uv_timer_init(&loop, &sup.finish_timer);
    sup.cg_trash_timer.data = sup.finish_timer.data = &sup;
    CHECK(cr_history_new(8, &sup.history) == 0);
    /* One death on record, so `history` renders a post-mortem. */
    struct cr_postmortem pm = {.worker_id = 1,
                               .pid = 4242,
                               .generation = 1,
                               .exit_code = -1,
                               .signal = 9,
                               .category = CR_DEATH_OOM_OWN_LIMIT};
    cr_postmortem_set_stderr(&pm, "out of memory\n\xff\xfe", 16);
    CHECK(cr_history_push(sup.history, &pm) == 0);
    sup.target = 1;
    CHECK(cr_worker_new(&sup, 1) != NULL);
    sup.stopping = true;
    cr_log_set_level("err");
    return &sup;
}

void fuzz_sup_check(struct cr_supervisor *sup)
{
    CHECK(sup->stopping && sup->workers && !sup->workers->next && !sup->workers->pid);
    cr_log_set_level("err");
}
