/* layout.h: the partitioning core. Pure functions: given parameter sizes,
 * world size, the plan's cut and options it computes every offset zinc uses -- flat
 * buffer positions, padding, each rank's shard, stage-3 per-parameter
 * partitions, sub-groups and the gradient bucket plans. No memory other than
 * the layout's own tables, no I/O. Nothing else in zinc computes an offset.
 * Rules follow DeepSpeed 0.19.6 (spec/SPEC.md Z-LAY-*). */
#ifndef ZN_LAYOUT_H
#define ZN_LAYOUT_H
#include "core/err.h"
#include "core/plan.h"

#define ZN_MAX_NAME 96
#define ZN_MAX_DIMS 4

typedef struct {
    char name[ZN_MAX_NAME];
    int ndim;
    long shape[ZN_MAX_DIMS];
    long numel;                 /* product of shape */
} ZnParamSpec;

typedef struct {
    int round_robin_gradients;  /* stage 1/2: reorder params k -> bucket k mod W */
    long sub_group_size;        /* stage 3: greedy sub-groups by partition numel */
    long reduce_bucket_size;    /* elements per gradient bucket (stages 0-3) */
} ZnLayoutOpts;

/* One parameter's piece of a gradient bucket. */
typedef struct {
    int param;                  /* model-order index */
    long numel;                 /* stage 1/2: the param's numel (+ flat padding for the
                                   last param in flat order); stage 3: pn*W (padded) */
    long buf_off;               /* stage 0-2: offset of the param's gradient in the bucket buffer;
                                   stage 3: offset of the param's chunk inside each rank-major
                                   block (chunk r lives at r*block + buf_off) */
} ZnBucketEntry;

typedef struct {
    int nentries;
    ZnBucketEntry *e;           /* in the order gradients are added (backward order) */
    long numel;                 /* elements in the bucket buffer (stage 3: W*block) */
    long block;                 /* stage 3: per-rank block = sum of pn of entries */
    long flat_lo, flat_hi;      /* stage 0-2 when the bucket is one contiguous flat range
                                   (no round robin); else -1 */
    long *counts;               /* [W] reduce-scatter counts per destination rank
                                   (stage 0: unused) */
    int oversized;              /* 1: a single param larger than reduce_bucket_size
                                   (DeepSpeed reduces it from its own gradient, no copy) */
} ZnBucket;

/* One piece of a received bucket slice on rank r: copy n elements from
 * recv[recv_off] to the rank's gradient partition at part_off. */
typedef struct { long recv_off, part_off, n; } ZnRecvPiece;

typedef struct {
    int nparams;
    int world;                  /* the partitions: the world's size (hpZ and MiCS will cut over groups) */
    ZnShard shard;              /* the stage plan's cut (plan.h) */
    ZnParamSpec *params;        /* copy, model order */
    long total_numel;           /* sum of numel */

    /* stage 0/1/2: one flat buffer holding all params in flat order */
    int *flat_order;            /* [nparams] flat position k -> param index */
    long *flat_offset;          /* [nparams] param index -> start in the flat buffer */
    long *model_offset;         /* [nparams] start in model order, unpadded (the
                                   checkpoint's consolidated vectors) */
    long aligned_numel;         /* stage 1/2: total rounded up to a multiple of 2W;
                                   stage 0: total (no padding); stage 3: unused */
    long part_numel;            /* stage 1/2: S_p = aligned/W; stage 0: total */

    /* stage 3: each param partitioned on its own */
    long *s3_pn;                /* [nparams] ceil(numel/W) */
    long *s3_off;               /* [nparams] offset of the param's partition in the
                                   rank's flat partition (model order, per-param
                                   padding included) */
    long s3_rank_numel;         /* sum of pn: size of each rank's flat partition */
    int nsubgroups;
    int *subgroup_first;        /* [nsubgroups+1] param index ranges [first[i], first[i+1]) */

    /* gradient buckets in the order backward fills them (params added in
       reverse model order); reduce_bucket_size rule of DeepSpeed */
    int nbuckets;
    ZnBucket *buckets;
} ZnLayout;

/* The layout of the params over world ranks, cut as plan P says (P->shard:
 * the config's plan, ZnConfig.plan). */
int zn_layout_build(ZnLayout *L, const ZnParamSpec *params, int nparams, int world,
                    const ZnPlan *P, const ZnLayoutOpts *opts, ZnErr *err);
void zn_layout_free(ZnLayout *L);

/* Stage 1/2: rank r's padding (DeepSpeed groups_padding): elements of its
 * partition beyond the real params. Stage 0: 0. Stage 3: sum over params of
 * the padding rank r holds. */
long zn_layout_rank_padding(const ZnLayout *L, int rank);

/* The part of param p that rank r owns, as param-local element indices
 * [*lo, *hi) (empty: *lo == *hi), and where it sits in the rank's partition
 * (*part_off; stage 1/2: flat offset minus r*S_p, stage 3: s3_off[p] + (lo - r*pn)).
 * Stage 0: everything on every rank. */
void zn_layout_owned(const ZnLayout *L, int p, int r, long *lo, long *hi, long *part_off);

/* Stage 1/2 bucket b on rank r: the pieces of the received slice (in the
 * order they arrive) and where each goes in r's gradient partition. Writes at
 * most `cap` pieces, returns the number of pieces (can be called with cap 0
 * to count). */
int zn_layout_recv_pieces(const ZnLayout *L, int b, int r, ZnRecvPiece *out, int cap);

/* The rank that owns element j of param p (shard none: 0, though every
 * rank holds it). */
int zn_layout_owner(const ZnLayout *L, int p, long j);
/* The param with the largest numel (for the memory estimator and workspaces). */
long zn_layout_max_param_numel(const ZnLayout *L);
/* Elements of a rank's fp32 master partition under plan P: the whole padded
 * model where the optimizer state is held whole, else the rank's flat or
 * per-parameter partition (what the engine steps; --fault indexes it). */
long zn_layout_master_numel(const ZnLayout *L, const ZnPlan *P);

#endif
