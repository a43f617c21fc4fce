#include "instance.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define FNV64_OFFSET_BASIS UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME        UINT64_C(0x100000001b3)

uint64_t cr_instance_fnv1a64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = FNV64_OFFSET_BASIS;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FNV64_PRIME; /* wraps modulo 2^64, as FNV defines it */
    }
    return h;
}

void cr_instance_default_name(const char *abs_path, char ret[static CR_INSTANCE_DEFAULT_SIZE])
{
    uint64_t h = cr_instance_fnv1a64(abs_path, strlen(abs_path));
    uint64_t folded = (h >> 48) ^ (h & UINT64_C(0xffffffffffff));
    snprintf(ret, CR_INSTANCE_DEFAULT_SIZE, "%012" PRIx64, folded);
}
