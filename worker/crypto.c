#include "crypto.h"

#include <dlfcn.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>

#ifndef CR_LIBCRYPTO_SONAME
#define CR_LIBCRYPTO_SONAME "libcrypto.so.3"
#endif

static struct {
    bool loaded;
    const char *error;
    __typeof__(OPENSSL_init_crypto) *init_crypto;
    __typeof__(OPENSSL_thread_stop) *thread_stop;
    __typeof__(PKCS5_PBKDF2_HMAC) *pbkdf2;
    __typeof__(EVP_sha512) *sha512;
} lib;

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p && !lib.error)
        lib.error = name;
    return p;
}

int cr_crypto_load(void)
{
    if (lib.loaded)
        return 0;
    lib.error = NULL;
    /* Never unloaded: pool threads may still hold its per-thread state. */
    void *h = dlopen(CR_LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        lib.error = CR_LIBCRYPTO_SONAME " not found";
        return -ELIBACC;
    }
    *(void **)&lib.init_crypto = sym(h, "OPENSSL_init_crypto");
    *(void **)&lib.thread_stop = sym(h, "OPENSSL_thread_stop");
    *(void **)&lib.pbkdf2 = sym(h, "PKCS5_PBKDF2_HMAC");
    *(void **)&lib.sha512 = sym(h, "EVP_sha512");
    if (lib.error)
        return -ELIBACC;
    /* The configuration is read here, once, not by the first pool jobs. */
    lib.init_crypto(OPENSSL_INIT_LOAD_CONFIG, NULL);
    lib.loaded = true;
    return 0;
}

const char *cr_crypto_error(void)
{
    return lib.error ? lib.error : "libcrypto not loaded";
}

int cr_crypto_pbkdf2_sha512(const char *pass, size_t pass_len, const unsigned char *salt,
                            size_t salt_len, int iter, unsigned char *out, size_t out_len)
{
    if (!lib.loaded)
        return 0;
    return lib.pbkdf2(pass, (int)pass_len, salt, (int)salt_len, iter, lib.sha512(), (int)out_len,
                      out);
}

void cr_crypto_thread_stop(void)
{
    if (lib.loaded)
        lib.thread_stop();
}
