/* compare_diff.h: what `zinc compare` and `zinc compare --peer deepspeed`
 * share (spec Z-REP-001, Z-DSP-012): the largest differences of a step, the
 * bound a value must keep, and the line a step prints. */
#ifndef ZN_COMPARE_DIFF_H
#define ZN_COMPARE_DIFF_H
#include <math.h>
#include <stdio.h>

typedef struct { double abs, rel; } ZnDiff;

static inline void zn_diff_update(ZnDiff *d, double base, double test) {
    double a = fabs(test - base);
    if (!(a <= d->abs)) d->abs = a;   /* NaN propagates */
    double r = base != 0.0 ? a / fabs(base) : (a != 0.0 ? INFINITY : 0.0);
    if (!(r <= d->rel)) d->rel = r;
}

/* |test - base| > atol + rtol * |base| (NaN counts as beyond) */
static inline int zn_diff_beyond(double base, double test, double rtol, double atol) {
    return !(fabs(test - base) <= atol + rtol * fabs(base));
}

static inline void zn_diff_print_step(long step, double base_loss, double test_loss, const ZnDiff *dl, const ZnDiff *dg,
                                      const ZnDiff *dp) {
    printf("step=%ld loss=%.6f/%.6f | max abs diff: loss %.3e grad %.3e param %.3e | "
           "max rel diff: loss %.3e grad %.3e param %.3e\n",
           step, base_loss, test_loss, dl->abs, dg->abs, dp->abs, dl->rel, dg->rel, dp->rel);
}

#endif
