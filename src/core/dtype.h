/* dtype.h: element types of buffers and collectives. 16-bit floats are stored
 * as uint16_t bit patterns; conversions round to nearest even. */
#ifndef ZN_DTYPE_H
#define ZN_DTYPE_H
#include <stddef.h>
#include <stdint.h>

typedef enum { ZN_F32 = 0, ZN_F16, ZN_BF16, ZN_F64, ZN_U64, ZN_U8, ZN_DTYPE_N } ZnDtype;

static inline size_t zn_dtype_size(ZnDtype t) {
    switch (t) {
    case ZN_F32: return 4;
    case ZN_F16: case ZN_BF16: return 2;
    case ZN_F64: case ZN_U64: return 8;
    case ZN_U8: return 1;
    default: return 0;
    }
}
static inline const char *zn_dtype_name(ZnDtype t) {
    static const char *n[] = {"fp32", "fp16", "bf16", "fp64", "u64", "u8"};
    return (unsigned)t < ZN_DTYPE_N ? n[t] : "?";
}
#endif
