/* The control protocol's request handling: one request line in
 * (cr_control_handle: JSON parse, the one-value-per-line rule, command
 * lookup, argument validation, the id echo), one response out, which
 * must print as a JSON object with a boolean "ok".
 *
 * The handler runs against the real supervisor core, in a state where no
 * command can fork or signal anything: stopping, with one worker slot and
 * no process, cgroups off, the loop never run. Every command's parsing
 * and the read-only views (status, workers, worker, history, metrics)
 * run for real; scale/restart/reload answer "shutting-down", kill
 * answers "no-process".
 *
 * FOR THE LEAD: the dispatcher's acting paths (scale, restart, reload,
 * kill, set on a running supervisor) need the operations interface and
 * fake core that the "control" helper is adding to control_cmd.c. Once it
 * is merged, point this harness's handler at that fake core (not stopping)
 * so those paths are fuzzed too. The line framing in control.c (process,
 * a static function on libuv streams) is not reached here either. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "control_cmd.h"
#include "history.h"
#include "internal.h"
#include "log.h"

#define CHECK(x) ((x) ? (void)0 : abort())

static struct cr_supervisor sup;

static void setup(void)
{
    static uv_loop_t loop;
    uv_loop_init(&loop);
    sup.loop = &loop;
    sup.notify_fd = -1;
    sup.listener.fd = -1;
    cr_config_init(&sup.cfg);
    sup.cfg.no_cgroups = true;
    char err[256];
    CHECK(cr_config_finish(&sup.cfg, err, sizeof(err)) == 0);
    uv_timer_init(&loop, &sup.sample_timer);
    uv_timer_init(&loop, &sup.sd_timer);
    uv_timer_init(&loop, &sup.cg_trash_timer);
    uv_timer_init(&loop, &sup.finish_timer);
    sup.sample_timer.data = sup.sd_timer.data = sup.cg_trash_timer.data = &sup;
    sup.finish_timer.data = &sup;
    CHECK(cr_history_new(8, &sup.history) == 0);
    /* One death on record, so `history` renders a post-mortem. */
    struct cr_postmortem pm = {.worker_id = 1, .pid = 4242, .generation = 1, .exit_code = -1,
                               .signal = 9, .category = CR_DEATH_OOM_OWN_LIMIT};
    cr_postmortem_set_stderr(&pm, "out of memory\n\xff\xfe", 16);
    CHECK(cr_history_push(sup.history, &pm) == 0);
    sup.target = 1;
    CHECK(cr_worker_new(&sup, 1) != NULL);
    sup.stopping = true;
    cr_log_set_level("err");
}

static void check_response(cJSON *res)
{
    CHECK(cJSON_IsObject(res));
    const cJSON *ok = cJSON_GetObjectItemCaseSensitive(res, "ok");
    CHECK(cJSON_IsBool(ok));
    if (cJSON_IsFalse(ok)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(res, "error");
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "code")));
        CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "message")));
    }
    /* What goes on the wire: one line that parses back. */
    char *s = cJSON_PrintUnformatted(res);
    CHECK(s != NULL && strchr(s, '\n') == NULL);
    cJSON *back = cJSON_Parse(s);
    CHECK(cJSON_IsObject(back));
    cJSON_Delete(back);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sup.loop)
        setup();
    if (size > CR_CONTROL_MAX_LINE)
        return 0; /* the transport refuses longer lines before parsing */
    bool sub = true;
    cJSON *res = cr_control_handle(&cr_control_core_ops, &sup, (const char *)data, size, &sub);
    check_response(res);
    if (sub)
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(res, "ok")));
    cJSON_Delete(res);
    CHECK(sup.stopping && sup.workers && !sup.workers->next && !sup.workers->pid);
    cr_log_set_level("err"); /* `set log-level debug` would flood the run */
    return 0;
}
