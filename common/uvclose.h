/* Closing a libuv handle at the end of the loop, once: a handle never
 * initialised (zeroed: UV_UNKNOWN_HANDLE) or already closing is left alone. */
#pragma once

#include <uv.h>

static inline void cr_uv_close(uv_handle_t *h)
{
    if (h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h))
        uv_close(h, NULL);
}
