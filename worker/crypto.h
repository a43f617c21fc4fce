/* libcrypto, loaded on first use.
 *
 * Linking libcrypto made the dynamic loader map and relocate 4.7 MB at
 * every start (~2.3 ms of a ~5 ms spawn -> READY here) for /hash and
 * /hashsync only. The worker dlopen()s it at the first hash request, on the
 * loop thread, loads OpenSSL's configuration there once, and calls it
 * through pointers resolved by name (prototypes from the OpenSSL headers,
 * so a mismatch is a compile error). */
#pragma once

#include <stddef.h>

/* Loads libcrypto and its configuration; idempotent. Call on the loop
 * thread before any other function here. Returns 0, or -ELIBACC when the
 * library or a symbol is missing (the reason in cr_crypto_error()). */
int cr_crypto_load(void);
const char *cr_crypto_error(void);

/* pbkdf2-hmac-sha512 of pass/salt into out. Returns 1 on success, 0 on
 * failure (OpenSSL's convention). Any thread, after cr_crypto_load(). */
int cr_crypto_pbkdf2_sha512(const char *pass, size_t pass_len, const unsigned char *salt,
                            size_t salt_len, int iter, unsigned char *out, size_t out_len);

/* Drops the calling thread's OpenSSL state (pool threads are never joined). */
void cr_crypto_thread_stop(void);
