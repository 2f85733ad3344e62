/* model_run.h: what a ZnModelRun holds, shared by the model files (not by
 * the engine, which sees only model.h's functions). One struct for every
 * model kind: the MLP uses the first group of buffers, GPT-2 the second. */
#ifndef ZN_MODEL_RUN_H
#define ZN_MODEL_RUN_H
#include "engine/model.h"

/* What a model kind does (model_mlp.c, model_gpt2.c): its initial weights
 * and its half of model.h's run functions; model.c hands every call to the
 * model's kind. */
typedef struct {
    void (*init_param)(const ZnModel *m, int p, uint64_t seed, long lo, long hi, float *out);
    int (*run_init)(ZnModelRun *R, ZnErr *err);   /* at zn_run_new; NULL: nothing of its own */
    void (*run_free)(ZnModelRun *R);              /* at zn_run_free; NULL: nothing of its own */
    int (*begin)(ZnModelRun *R, const ZnData *data, long first, ZnErr *err);
    void (*forward)(ZnModelRun *R, int mod, float *const *W);
    float (*loss)(ZnModelRun *R, float grad_scale);
    void (*backward)(ZnModelRun *R, int mod, float *const *W, float *const *dW);
    void (*end)(ZnModelRun *R);
    const float *(*logits)(const ZnModelRun *R);   /* [rows, V] of the last forward, on the device */
} ZnModelOps;

extern const ZnModelOps zn_mlp_ops, zn_gpt2_ops;

struct ZnModelRun {
    const ZnModel *m;
    const ZnModelOps *ops;   /* m's kind */
    ZnDevice *d;
    const ZnKernels *k;
    ZnDtype dt;
    int B;
    int recompute;         /* activation checkpointing: blocks recomputed in backward */
    /* host staging of one micro-batch, allocated once */
    float *host_x;
    int *host_in, *host_tgt;
    /* the targets on the device */
    int *labels;

    /* MLP: acts[0] = input, acts[l+1] = output of layer l (ReLU output,
       logits last); dbuf: the two gradient buffers backward alternates;
       ycur: the gradient flowing into the next layer's backward */
    float *acts[ZN_MAX_LAYERS + 1];
    float *dbuf[2], *yscratch, *dcur;

    /* GPT-2 (model_gpt2.c) */
    struct ZnGpt2Acts *g;

    /* on the host backend: the run's blocks, kept between micro-steps
       (zn_run_release, model.c) */
    struct ZnRunBlock *pool;
    int npool, pool_cap;
};

/* A tensor of the model dtype (16-bit ones are fp32 grid values charged at
 * their 16-bit size, Z-PREC-001) and an fp32 one. */
float *zn_run_talloc(ZnModelRun *R, long n, ZnMemCat cat, ZnErr *err);
float *zn_run_falloc(ZnModelRun *R, long n, ZnMemCat cat, ZnErr *err);
void zn_run_round(ZnModelRun *R, float *x, long n);
/* Gives back a block of zn_run_talloc/falloc (NULL: nothing), as
 * zn_dev_free does; on the host its memory is kept for the next request of
 * the same size. */
void zn_run_release(ZnModelRun *R, void *p);

#endif
