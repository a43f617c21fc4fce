/* Reading corrald's configuration from the host: the JSON file named by
 * --config, and the control socket's directory. See config_file.h. */
#include "config_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"

/* The directory of the control socket must exist: say so by the option's
 * name, not by errno text about a lock file. */
int cr_config_file_check_control(const struct cr_config *cfg, char *err, size_t errlen)
{
    if (!cfg->control || !strchr(cfg->control, '/'))
        return 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", cfg->control);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    if (stat(dir, &st) < 0) {
        snprintf(err, errlen, "--control: directory %.400s does not exist", dir);
        return -ENOENT;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--control: %.400s is not a directory", dir);
        return -ENOTDIR;
    }
    return 0;
}

int cr_config_file_load(struct cr_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "--config %s: %s", path, strerror(e));
        return -e;
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
