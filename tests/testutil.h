/* testutil.h: what every unit test includes. cmocka needs these headers in
 * this order. Each test names the spec clause it checks in a comment
 * "spec: Z-XXX-NNN" (zinc spec coverage reads them). */
#ifndef ZN_TESTUTIL_H
#define ZN_TESTUTIL_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <cmocka.h>

/* bitwise float compare: equal bits, not just equal values */
static inline int zt_same_bits(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x == y;
}
/* Everything in f (a tmpfile written by the code under test, or a file
 * opened for reading) as a malloc'd string with a NUL after it; closes f.
 * *len gets the size unless len is NULL. Tests that read back what was
 * written share it. (A tmpfile rather than open_memstream: GCC's
 * -Wdangling-pointer mistakes a memstream's buffer returned from a helper
 * for a pointer to the helper's local.) */
static inline char *zt_slurp(FILE *f, size_t *len) {
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    rewind(f);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return s;
}
#define assert_str_contains(hay, needle)                                        \
    do {                                                                        \
        if (!strstr((hay), (needle)))                                           \
            fail_msg("expected '%s' to contain '%s'", (hay), (needle));         \
    } while (0)
#endif
