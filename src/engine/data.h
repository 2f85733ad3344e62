/* data.h: synthetic classification data. Sample i is a pure function of
 * (seed, i): x has D0 features uniform in [-1, 1); the label is the argmax of
 * a fixed random linear teacher T [C, D0] (keyed by the seed only) applied to
 * x. So the first loss is about ln(C), the task is learnable, and any rank
 * can produce any sample (spec Z-DATA-002). */
#ifndef ZN_DATA_H
#define ZN_DATA_H
#include <stdint.h>

struct ZnTokens;

typedef struct {
    int d_in, classes;
    uint64_t seed;
    float *teacher;   /* [classes, d_in]; NULL: a dry run's data, every sample zeros, label 0 */
    /* a language model's data (engine/data_text.h), not owned; NULL for
       the MLP's generated samples */
    const struct ZnTokens *tokens;
} ZnData;

int zn_data_init(ZnData *d, int d_in, int classes, uint64_t seed);  /* 0 or -1 (no memory) */
void zn_data_free(ZnData *d);
/* Samples [first, first + B): x [B, d_in], labels [B]. */
void zn_data_batch(const ZnData *d, long first, int B, float *x, int *labels);
#endif
