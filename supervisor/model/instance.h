/* cr_instance: the default instance name, derived from the control
 * socket's absolute path.
 *
 * The name only has to be short, stable across restarts and different for
 * different control paths in practice: it is a name, not a security
 * boundary. Two paths that happen to share a name meet on the instance's
 * flock (cgsetup.c) and the second corrald is refused; `--instance NAME`
 * picks another. So a 64-bit FNV-1a (Fowler/Noll/Vo) does, and corrald
 * needs no cryptographic library for it.
 *
 * A leaf module: no I/O, no dependency on the rest of corrald.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* 12 hex digits and the NUL. */
#define CR_INSTANCE_DEFAULT_SIZE 13

/* FNV-1a, 64 bits, of len bytes. Exposed for its published test vectors. */
uint64_t cr_instance_fnv1a64(const void *data, size_t len);

/* The default instance name of the control socket at abs_path (absolute,
 * its directory resolved): 12 lowercase hex digits, the FNV-1a of the path
 * xor-folded to 48 bits (the FNV authors' way to a shorter hash). */
void cr_instance_default_name(const char *abs_path, char ret[static CR_INSTANCE_DEFAULT_SIZE]);
