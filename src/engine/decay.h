/* decay.h: which parameters get weight decay (spec Z-OPT-020), as users set
 * parameter groups with the Hugging Face Trainer: biases and LayerNorm
 * parameters get none. A rank's optimizer partition is cut into ranges of
 * one rule, so the step runs Adam once per range. */
#ifndef ZN_DECAY_H
#define ZN_DECAY_H
#include "core/config.h"
#include "core/layout.h"
#include "engine/model.h"

typedef struct ZnDecayRange { long lo, hi; int decay; } ZnDecayRange;

/* 1 if param p gets weight decay: its name contains none of the config's
 * zinc.weight_decay_exclude substrings; not given, the model's default
 * (GPT-2: "bias" and "ln_", the Trainer's rule; the MLP: every param). */
int zn_decay_param(const ZnModel *m, const ZnConfig *cfg, int p);
/* The ranges of rank r's partition of part_n elements (padding decays, as
 * its neighbours; it stays zero either way), in order, adjacent ranges of
 * one rule merged. *out is malloc'ed (free it); NULL + ZN_E_NOMEM. */
int zn_decay_ranges(const ZnModel *m, const ZnConfig *cfg, const ZnLayout *L, int r, long part_n,
                    ZnDecayRange **out, int *n, ZnErr *err);
#endif
