/* corrald's config file: the JSON object applied over the defaults, then
 * the cross-field checks, then the config rendered back as JSON (what
 * `status` shows). Errors must come back as -EINVAL with a message. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define CHECK(x) ((x) ? (void)0 : abort())

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    struct cr_config cfg;
    cr_config_init(&cfg);
    char err[256] = "";
    int r = cr_config_parse_json(&cfg, text, err, sizeof(err));
    CHECK(r == 0 || (r == -EINVAL && err[0]) || r == -ENOMEM);
    CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    if (r == 0) {
        err[0] = '\0';
        r = cr_config_finish(&cfg, err, sizeof(err));
        CHECK(r == 0 || (r < 0 && err[0]));
    }
    /* Whatever was applied must render as valid JSON. */
    cJSON *o = cJSON_CreateObject();
    cr_config_to_json(&cfg, o);
    char *s = cJSON_PrintUnformatted(o);
    CHECK(s != NULL);
    cJSON *back = cJSON_Parse(s);
    CHECK(back != NULL);
    cJSON_Delete(back);
    free(s);
    cJSON_Delete(o);
    (void)cr_config_heap_limit(&cfg);
    cr_config_done(&cfg);
    free(text);
    return 0;
}
