/* corrald: configuration in, supervisor out. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cr_config.h"
#include "log.h"
#include "supervisor.h"

static int load_file(struct cr_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
        return -errno;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap > (1u << 20)) { /* a config file has no business being this big */
                snprintf(err, errlen, "--config %s: larger than 1 MiB", path);
                free(text);
                fclose(f);
                return -EFBIG;
            }
            cap = cap ? cap * 2 : 8192;
            char *n = realloc(text, cap);
            if (!n) {
                free(text);
                fclose(f);
                return -ENOMEM;
            }
            text = n;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    text[len] = '\0';
    int r = cr_config_parse_json(cfg, text, err, errlen);
    free(text);
    return r;
}

int main(int argc, char **argv)
{
    static struct cr_supervisor sup;
    char err[512] = "";
    char action = 0;

    cr_config_init(&sup.cfg);
    const char *file = cr_config_find_file(argc, argv);
    int r = file ? load_file(&sup.cfg, file, err, sizeof(err)) : 0;
    if (r >= 0)
        r = cr_config_parse_args(&sup.cfg, argc, argv, &action, err, sizeof(err));
    if (r == 1) {
        if (action == 'h')
            cr_config_usage(stdout, "corrald");
        else
            printf("corrald %s\n", CR_VERSION);
        cr_config_done(&sup.cfg);
        return 0;
    }
    if (r >= 0)
        r = cr_config_finish(&sup.cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "corrald: %s\nTry 'corrald --help'.\n", err[0] ? err : strerror(-r));
        cr_config_done(&sup.cfg);
        return 2;
    }

    cr_log_init(sup.cfg.log_level);
    /* A worker's closed pipe must be an error return, not our death. */
    signal(SIGPIPE, SIG_IGN);

    uv_loop_t *loop = uv_default_loop();
    r = cr_supervisor_start(&sup, loop);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "start-up failed: %s", strerror(-r));
        /* Kill whatever was started before the failure; nothing may outlive us. */
        cr_supervisor_stop(&sup);
        uv_run(loop, UV_RUN_DEFAULT);
        cr_supervisor_done(&sup);
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int code = sup.exit_code;
    cr_supervisor_done(&sup);
    uv_loop_close(loop);
    cr_log(CR_LOG_INFO, "corrald exits %d", code);
    return code;
}
