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
#define assert_str_contains(hay, needle)                                        \
    do {                                                                        \
        if (!strstr((hay), (needle)))                                           \
            fail_msg("expected '%s' to contain '%s'", (hay), (needle));         \
    } while (0)
#endif
