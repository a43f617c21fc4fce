/* cr_decimal: whole numbers as decimal text. See decimal.h. */
#include "decimal.h"

size_t cr_decimal_u64(char buf[CR_DECIMAL_U64_SIZE], uint64_t v)
{
    char rev[CR_DECIMAL_U64_SIZE];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        buf[i] = rev[n - 1 - i];
    buf[n] = '\0';
    return n;
}
