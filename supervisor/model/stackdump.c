/* A runtime's stack dump in a stderr tail (stackdump.h). */
#include "stackdump.h"

#include <string.h>

static bool starts(const char *p, const char *end, const char *prefix)
{
    size_t n = strlen(prefix);
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl : end;
}

bool cr_stackdump_find(const char *buf, size_t len, size_t *ret_off, size_t *ret_len,
                       const char **ret_source)
{
    const char *end = buf + len, *dump = NULL;
    /* The last "Fatal Python error:" line: a worker restarted in place
     * keeps nothing of its predecessor's output, but one process may have
     * dumped before (faulthandler.dump_traceback). */
    for (const char *p = buf; p < end; p = line_end(p, end) + 1)
        if (starts(p, end, "Fatal Python error: "))
            dump = p;
    if (!dump)
        return false;
    const char *first = NULL, *last = NULL;
    for (const char *p = line_end(dump, end) + 1; p < end; p = line_end(p, end) + 1) {
        const char *e = line_end(p, end);
        if (starts(p, e, "Thread 0x") || starts(p, e, "Current thread 0x")) {
            if (!first)
                first = p;
            last = e;
        } else if (first && starts(p, e, "  ")) {
            last = e; /* a frame ("  File …") or a "  <no Python frame>" */
        } else if (first && p != e) {
            break; /* "Extension modules: …", or whatever the process printed next */
        }
    }
    if (!first)
        return false;
    *ret_off = (size_t)(first - buf);
    *ret_len = (size_t)(last - first);
    *ret_source = "faulthandler";
    return true;
}
