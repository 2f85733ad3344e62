/* decay.c: weight-decay groups (decay.h, spec Z-OPT-020). */
#include "engine/decay.h"
#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

static const char *const GPT2_NO_DECAY[] = {"bias", "ln_"};

int zn_decay_param(const ZnModel *m, const ZnConfig *cfg, int p) {
    const char *name = m->params[p].name;
    if (cfg->n_wd_exclude >= 0) {
        for (int i = 0; i < cfg->n_wd_exclude; i++)
            if (strstr(name, cfg->wd_exclude[i])) return 0;
        return 1;
    }
    if (m->kind != ZN_MODEL_GPT2) return 1;
    for (size_t i = 0; i < sizeof GPT2_NO_DECAY / sizeof *GPT2_NO_DECAY; i++)
        if (strstr(name, GPT2_NO_DECAY[i])) return 0;
    return 1;
}

static int by_lo(const void *a, const void *b) {
    long x = ((const ZnDecayRange *)a)->lo, y = ((const ZnDecayRange *)b)->lo;
    return x < y ? -1 : x > y;
}

int zn_decay_ranges(const ZnModel *m, const ZnConfig *cfg, const ZnLayout *L, int r, long part_n,
                    ZnDecayRange **out, int *n, ZnErr *err) {
    ZnDecayRange *own = zn_calloc(ZN_HOST_ENGINE, (size_t)L->nparams + 1, sizeof *own);
    ZnDecayRange *res = zn_calloc(ZN_HOST_ENGINE, 2 * (size_t)L->nparams + 2, sizeof *res);
    if (!own || !res) {
        free(own);
        free(res);
        return zn_nomem(err);
    }
    int k = 0;
    for (int p = 0; p < L->nparams; p++) {   /* the piece of each param this rank holds */
        long lo, hi, off;
        zn_layout_owned(L, p, r, &lo, &hi, &off);
        if (hi > lo) own[k++] = (ZnDecayRange){off, off + (hi - lo), zn_decay_param(m, cfg, p)};
    }
    qsort(own, (size_t)k, sizeof *own, by_lo);
    int nr = 0;
    long at = 0;
    for (int i = 0; i <= k; i++) {
        /* the gap before the next piece (padding) joins the previous range's rule */
        long lo = i < k ? own[i].lo : part_n;
        if (lo > at) {
            int d = nr ? res[nr - 1].decay : (i < k ? own[i].decay : 1);
            res[nr++] = (ZnDecayRange){at, lo, d};
        }
        if (i == k) break;
        res[nr++] = own[i];
        at = own[i].hi;
    }
    int m2 = 0;   /* merge neighbours of one rule */
    for (int i = 0; i < nr; i++) {
        if (m2 && res[m2 - 1].decay == res[i].decay && res[m2 - 1].hi == res[i].lo) res[m2 - 1].hi = res[i].hi;
        else res[m2++] = res[i];
    }
    free(own);
    *out = res;
    *n = m2;
    return 0;
}
