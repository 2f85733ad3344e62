/* quant.c: block quantization of whole arrays (spec Z-QNT-001..007): the
 * int8 codes of ZeRO++'s qwZ and the packed int4 codes of its qgZ. Each
 * function walks the groups in order and calls quant.h's per-group and
 * per-element functions, the text a CUDA kernel would run per thread.
 * Sources: DeepSpeed runtime/zero/partition_parameters.py CUDAQuantizer,
 * csrc/quantization/quantize.cu, csrc/quantization/dequantize.cu. */
#include "core/quant.h"

/* One group's multipliers and scale for codes with half = 128 or 8. */
typedef struct {
    float pre, inv, scale;
} QGroup;

static QGroup group_params(const float *x, long len, float half) {
    float A = zn_q_absmax(x, len);
    QGroup g = {zn_q_pre(A), zn_q_inv(A, half), zn_q_scale(A, half)};
    return g;
}

/* int4 codes go in order: the even element starts its byte (so an odd n's
   last high nibble is 0), the odd one fills the top */
static void q4_put(uint8_t *q, long i, int code) {
    uint8_t nib = zn_q4_nibble(code);
    if (i % 2 == 0) q[i / 2] = nib;
    else q[i / 2] = (uint8_t)(q[i / 2] | (nib << 4));
}

/* The codes of x[n], group by group in order: bits 8 writes int8 codes to
 * q, bits 4 packed int4 codes; each group's scale goes to scales[g]. */
static void quant_groups(int bits, const float *x, long n, long max_group, void *q, float *scales) {
    const int qmax = bits == 8 ? 127 : 7;   /* the group's half is qmax + 1 */
    long ng = zn_quant_ngroups(n, max_group);
    for (long g = 0; g < ng; g++) {
        long a = zn_quant_group_start(n, ng, g), b = zn_quant_group_start(n, ng, g + 1);
        QGroup p = group_params(x + a, b - a, (float)(qmax + 1));
        scales[g] = p.scale;
        for (long i = a; i < b; i++) {
            int code = zn_q_code(x[i], p.pre, p.inv, qmax);
            if (bits == 8) ((int8_t *)q)[i] = (int8_t)code;
            else q4_put(q, i, code);
        }
    }
}

/* out[i] = code i of q (bits 8 or 4, as quant_groups wrote it) times its
 * group's scale, rounded to dt */
static void dequant_groups(int bits, const void *q, const float *scales, long n, long max_group, ZnDtype dt,
                           float *out) {
    long ng = zn_quant_ngroups(n, max_group);
    for (long g = 0; g < ng; g++) {
        long a = zn_quant_group_start(n, ng, g), b = zn_quant_group_start(n, ng, g + 1);
        for (long i = a; i < b; i++) {
            int code = bits == 8 ? ((const int8_t *)q)[i] : zn_q4_get(q, i);
            out[i] = zn_q_round(zn_q_decode(code, scales[g]), dt);
        }
    }
}

void zn_quant8(const float *x, long n, long max_group, int8_t *q, float *scales) {
    quant_groups(8, x, n, max_group, q, scales);
}

void zn_dequant8(const int8_t *q, const float *scales, long n, long max_group, ZnDtype dt, float *out) {
    dequant_groups(8, q, scales, n, max_group, dt, out);
}

void zn_quant4(const float *x, long n, long max_group, uint8_t *q, float *scales) {
    quant_groups(4, x, n, max_group, q, scales);
}

void zn_dequant4(const uint8_t *q, const float *scales, long n, long max_group, ZnDtype dt, float *out) {
    dequant_groups(4, q, scales, n, max_group, dt, out);
}
