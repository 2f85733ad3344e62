/* data.c: synthetic classification data (spec Z-DATA-001..Z-DATA-004).
 * Teacher T[c][j] = 2*uniform(key_T, c*d_in + j) - 1; sample i has
 * x[j] = 2*uniform(key_X, i*d_in + j) - 1 and label argmax_c sum_j T[c][j] x[j].
 * Counter-based, so sample i is the same bits whoever computes it and
 * whatever batch it falls in. */
#include "engine/data.h"
#include <string.h>
#include "core/alloc.h"
#include "core/rng.h"
#include <stdlib.h>

/* Distinct constants keep the teacher and input streams apart for one seed
 * (two keys from one seed that differ only in these constants). */
#define ZN_DATA_TEACHER 0x7465616368657231ull /* "teacher1" */
#define ZN_DATA_INPUTS  0x696e707574733031ull /* "inputs01" */

static uint64_t teacher_key(uint64_t seed) { return zn_mix64(seed ^ ZN_DATA_TEACHER); }
static uint64_t input_key(uint64_t seed) { return zn_mix64(seed ^ ZN_DATA_INPUTS); }

int zn_data_init(ZnData *d, int d_in, int classes, uint64_t seed) {
    d->d_in = d_in;
    d->classes = classes;
    d->seed = seed;
    d->teacher = NULL;
    d->tokens = NULL;
    /* no features or no classes: nothing sensible to generate */
    if (d_in < 1 || classes < 1) return -1;
    size_t n = (size_t)d_in * (size_t)classes;
    d->teacher = zn_malloc(ZN_HOST_ENGINE, n * sizeof(float));
    if (!d->teacher) return -1;
    uint64_t key = teacher_key(seed);
    for (size_t i = 0; i < n; i++)
        d->teacher[i] = 2.0f * zn_rng_uniform(key, (uint64_t)i) - 1.0f;
    return 0;
}

void zn_data_free(ZnData *d) {
    free(d->teacher);
    d->teacher = NULL;  /* a second free is harmless */
}

void zn_data_batch(const ZnData *d, long first, int B, float *x, int *labels) {
    if (!d->teacher) {   /* a dry run's data: its meta kernels read no sample */
        memset(x, 0, (size_t)B * (size_t)d->d_in * sizeof(float));
        memset(labels, 0, (size_t)B * sizeof(int));
        return;
    }
    uint64_t key = input_key(d->seed);
    const uint64_t din = (uint64_t)d->d_in;
    for (long r = 0; r < B; r++) {
        /* 64-bit counter: sample index times d_in cannot overflow for any
           index a run can reach */
        uint64_t base = (uint64_t)(first + r) * din;
        float *xr = x + r * (long)din;
        for (uint64_t j = 0; j < din; j++) xr[j] = 2.0f * zn_rng_uniform(key, base + j) - 1.0f;
        /* label: the teacher's best class; scores summed over j in order in
           float, strict > so a tie goes to the lowest class */
        int best = 0;
        float best_score = 0.0f;
        for (int c = 0; c < d->classes; c++) {
            const float *t = d->teacher + (long)c * (long)din;
            float s = 0.0f;
            for (uint64_t j = 0; j < din; j++) s += t[j] * xr[j];
            if (c == 0 || s > best_score) { best = c; best_score = s; }
        }
        labels[r] = best;
    }
}
