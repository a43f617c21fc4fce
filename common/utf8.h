/* cr_utf8: UTF-8 validation (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), shared by the control protocol's lexical check
 * and output scrub and by the post-mortem's stderr tail. Pure. */
#pragma once

#include <stddef.h>

/* Bytes in the valid UTF-8 sequence at s[0..n) (1 to 4; a NUL byte is a
 * valid one-byte sequence), or 0 when s[0..n) does not start with one
 * (n == 0 included). */
size_t cr_utf8_seq(const unsigned char *s, size_t n);

/* Length of the valid UTF-8 prefix of s[0..n). */
size_t cr_utf8_valid_prefix(const char *s, size_t n);
