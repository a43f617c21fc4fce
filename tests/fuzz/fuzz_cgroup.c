/* The cgroup control-file parsers, each fed the same text: memory.stat
 * (v1 and v2), memory.events, memory.oom_control, a single value,
 * /proc/<pid>/cgroup (v1 and v2), cgroup.controllers, and the parent of
 * a relative path. The kernel writes these files, but a parser that reads
 * a container's or a foreign mount's files must not trust them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cr_cgroup.h"

#define CHECK(x) ((x) ? (void)0 : abort())

static void proc_cgroup(const char *text, enum cr_cgroup_layout l)
{
    char *rel = NULL;
    int r = cr_cgroup_parse_proc_cgroup(text, l, &rel);
    CHECK(r == 0 ? rel != NULL && rel[0] == '/' : rel == NULL);
    if (!rel)
        return;
    /* Walk up to the root: every parent is shorter and ends at "/". */
    char *p = rel;
    for (unsigned depth = 0; p && strcmp(p, "/") != 0; depth++) {
        char *up = cr_cgroup_parent(p);
        CHECK(up && strlen(up) < strlen(p) && up[0] == '/');
        free(p);
        p = up;
        CHECK(depth < 1u << 20);
    }
    free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The parsers take NUL-terminated text, as read_file gives them. */
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    struct cr_cgroup_stat st;
    (void)cr_cgroup_parse_stat(text, CR_CGROUP_V1, &st);
    (void)cr_cgroup_parse_stat(text, CR_CGROUP_V2, &st);
    (void)cr_cgroup_parse_stat(text, CR_CGROUP_NONE, &st);
    struct cr_cgroup_events ev;
    (void)cr_cgroup_parse_events(text, &ev);
    (void)cr_cgroup_parse_oom_control(text, &ev);
    uint64_t v;
    (void)cr_cgroup_parse_u64(text, &v);
    proc_cgroup(text, CR_CGROUP_V1);
    proc_cgroup(text, CR_CGROUP_V2);

    char req[64], tiny[4];
    int r = cr_cgroup_parse_controllers(text, req, sizeof(req));
    if (r >= 0)
        CHECK(memchr(req, '\0', sizeof(req)) != NULL && strstr(req, "+memory") != NULL);
    r = cr_cgroup_parse_controllers(text, tiny, sizeof(tiny));
    CHECK(r < 0 || memchr(tiny, '\0', sizeof(tiny)) != NULL);

    /* The input itself as a relative path. */
    char *parent = cr_cgroup_parent(text);
    CHECK(text[0] == '/' ? parent != NULL : parent == NULL);
    free(parent);
    free(text);
    return 0;
}
