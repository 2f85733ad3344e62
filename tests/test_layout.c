/* test_layout.c: the partitioning core against the DeepSpeed rules
 * (spec/draft-layout.md, Z-LAY-*). Property tests sweep random parameter
 * lists from a fixed-seed generator plus edge cases, world sizes 1..16,
 * stages 0..3, round robin on/off and several bucket sizes; every property is
 * recomputed here independently, element by element where that is cheap.
 * Hand examples pin the DeepSpeed numbers. */
#include "testutil.h"
#include "core/layout.h"

/* ------------------------------------------------------------ helpers */

static char g_ctx[256];                 /* which configuration a failure is in */
#define EXPECT(cond)                                                              \
    do {                                                                          \
        if (!(cond)) fail_msg("%s: %s (line %d)", g_ctx, #cond, __LINE__);        \
    } while (0)
#define EXPECT_EQ(a, b)                                                           \
    do {                                                                          \
        long x_ = (long)(a), y_ = (long)(b);                                      \
        if (x_ != y_)                                                             \
            fail_msg("%s: %s = %ld, expected %s = %ld (line %d)", g_ctx, #a, x_,  \
                     #b, y_, __LINE__);                                           \
    } while (0)

static uint64_t g_rng;
static uint64_t rng_next(void) {        /* splitmix64 */
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static long rng_below(long n) { return (long)(rng_next() % (uint64_t)n); }

static long lmin(long a, long b) { return a < b ? a : b; }
static long lmax(long a, long b) { return a > b ? a : b; }

#define MAXP 16
typedef struct {
    int n;
    ZnParamSpec p[MAXP];
} Model;

static void model_set(Model *m, int n, const long *numel) {
    memset(m, 0, sizeof *m);
    m->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(m->p[i].name, ZN_MAX_NAME, "p%d", i);
        m->p[i].ndim = 1;
        m->p[i].shape[0] = numel[i];
        m->p[i].numel = numel[i];
    }
}

/* The sweep: random models (1..12 params of numel 0..300, about one in six
 * zero) and the edge cases. */
#define NRANDOM 40
#define NEDGE 6
static void model_get(Model *m, int idx) {
    static const long big_world[] = {1, 2, 3, 4, 5};
    static const long single[] = {77};
    static const long one[] = {1};
    static const long zeros[] = {0, 0, 0};
    static const long ones[] = {1, 1, 1, 1, 1, 1, 1};
    static const long zero_last[] = {9, 4, 0, 0};
    switch (idx) {
    case 0: model_set(m, 5, big_world); return;   /* world larger than every param */
    case 1: model_set(m, 1, single); return;
    case 2: model_set(m, 1, one); return;
    case 3: model_set(m, 3, zeros); return;
    case 4: model_set(m, 7, ones); return;
    case 5: model_set(m, 4, zero_last); return;
    }
    g_rng = 0x5EED0000ull + (uint64_t)idx;
    long numel[MAXP];
    int n = 1 + (int)rng_below(12);
    for (int i = 0; i < n; i++) numel[i] = rng_below(6) == 0 ? 0 : rng_below(301);
    model_set(m, n, numel);
}

static const long k_bucket_sizes[] = {1, 50, 600, 100000};
#define NBS 4

typedef struct {
    const Model *m;
    int world, stage, rr;
    long rbs, sgs;
} Cfg;

static void build(ZnLayout *L, const Cfg *c) {
    ZnLayoutOpts o = {c->rr, c->sgs, c->rbs};
    ZnErr err = {0};
    snprintf(g_ctx, sizeof g_ctx, "nparams %d world %d stage %d rr %d rbs %ld sgs %ld",
             c->m->n, c->world, c->stage, c->rr, c->rbs, c->sgs);
    int rc = zn_layout_build(L, c->m->p, c->m->n, c->world, zt_plan(c->stage), &o, &err);
    if (rc) fail_msg("%s: build failed: %s", g_ctx, err.msg);
}

typedef void (*CheckFn)(const ZnLayout *L, const Cfg *c);

/* Runs check on every configuration of the sweep. */
static void sweep(CheckFn check, int with_buckets) {
    Model m;
    for (int mi = 0; mi < NEDGE + NRANDOM; mi++) {
        model_get(&m, mi);
        for (int w = 1; w <= 16; w++)
            for (int stage = 0; stage <= 3; stage++)
                for (int rr = 0; rr <= 1; rr++)
                    for (int bi = 0; bi < (with_buckets ? NBS : 1); bi++) {
                        Cfg c = {&m, w, stage, rr, k_bucket_sizes[bi], 300};
                        ZnLayout L;
                        build(&L, &c);
                        check(&L, &c);
                        zn_layout_free(&L);
                    }
    }
}

/* A test that runs one check over the sweep (with buckets: 1) */
#define SWEEP_TEST(name, check, buckets) \
    static void name(void **state) {     \
        (void)state;                     \
        sweep(check, buckets);           \
    }

/* Reference flat order: model order, or (stage 1/2, rr) params sorted by
 * (k mod W, k). */
static void ref_flat_order(const Cfg *c, int *order) {
    int k = 0;
    int rr = c->rr && (c->stage == 1 || c->stage == 2);
    for (int key = 0; key < (rr ? c->world : 1); key++)
        for (int p = 0; p < c->m->n; p++)
            if (!rr || p % c->world == key) order[k++] = p;
}

static long total_of(const Cfg *c) {
    long t = 0;
    for (int p = 0; p < c->m->n; p++) t += c->m->p[p].numel;
    return t;
}

/* ------------------------------------------------- (a) ownership, padding */

/* Every real element owned exactly once (stage 0: by every rank); owned
 * positions in each rank's partition are disjoint, sit where the flat
 * offsets (stage 1/2) or s3 offsets (stage 3) put them, and the positions
 * left over are exactly the padding the rules predict. */
static void check_ownership(const ZnLayout *L, const Cfg *c) {
    const Model *m = c->m;
    long total = total_of(c);
    EXPECT_EQ(L->total_numel, total);
    long part = c->stage == 0 ? total : L->part_numel;
    char *cov = calloc((size_t)part + 1, 1);
    for (int r = 0; r < c->world; r++) {
        memset(cov, 0, (size_t)part + 1);
        long real = 0;
        for (int p = 0; p < m->n; p++) {
            long lo, hi, off, N = m->p[p].numel;
            zn_layout_owned(L, p, r, &lo, &hi, &off);
            EXPECT(0 <= lo && lo <= hi && hi <= N);
            if (c->stage == 0) {
                EXPECT_EQ(lo, 0);
                EXPECT_EQ(hi, N);
                EXPECT_EQ(off, L->flat_offset[p]);
            } else if (c->stage == 3) {
                long pn = (N + c->world - 1) / c->world;
                EXPECT_EQ(lo, lmin(N, r * pn));
                EXPECT_EQ(hi, lmin(N, r * pn + pn));
                if (hi > lo) EXPECT_EQ(off, L->s3_off[p] + (lo - r * pn));
                EXPECT_EQ(off, L->s3_off[p]);   /* empty too: the slot's start */
            } else if (hi > lo) {
                long S = L->part_numel;
                EXPECT_EQ(off, L->flat_offset[p] + lo - r * S);
                /* owned = the whole intersection with the rank's range */
                EXPECT(lo == 0 || L->flat_offset[p] + lo == r * S);
                EXPECT(hi == N || L->flat_offset[p] + hi == (r + 1) * S);
            }
            for (long i = lo; i < hi; i++) {
                EXPECT(off + (i - lo) < part);
                EXPECT_EQ(cov[off + (i - lo)], 0);
                cov[off + (i - lo)] = 1;
            }
            real += hi - lo;
        }
        /* independent padding of rank r */
        long pad = 0;
        if (c->stage == 1 || c->stage == 2) {
            long S = L->part_numel;
            pad = S - lmax(0, lmin(S, total - r * S));
            for (long i = 0; i < S; i++)            /* padding only at the tail */
                EXPECT_EQ(cov[i], i < S - pad);
        } else if (c->stage == 3) {
            for (int p = 0; p < m->n; p++) {
                long N = m->p[p].numel, pn = (N + c->world - 1) / c->world;
                long mine = lmax(0, lmin(pn, N - r * pn));
                pad += pn - mine;
                for (long i = 0; i < pn; i++)       /* padding at each param's tail */
                    EXPECT_EQ(cov[L->s3_off[p] + i], i < mine);
            }
        }
        EXPECT_EQ(zn_layout_rank_padding(L, r), pad);
        EXPECT_EQ(real + pad, part);
    }
    free(cov);
    /* every real element has exactly one owner (stage 0: W owners) */
    for (int p = 0; p < m->n; p++) {
        long N = m->p[p].numel;
        int *owners = calloc((size_t)N + 1, sizeof(int));
        for (int r = 0; r < c->world; r++) {
            long lo, hi, off;
            zn_layout_owned(L, p, r, &lo, &hi, &off);
            for (long i = lo; i < hi; i++) owners[i]++;
        }
        for (long i = 0; i < N; i++) EXPECT_EQ(owners[i], c->stage == 0 ? c->world : 1);
        free(owners);
    }
}

/* spec: Z-LAY-002 Z-LAY-006 Z-LAY-007 Z-LAY-008 Z-LAY-009 Z-LAY-010 */
SWEEP_TEST(test_ownership_and_padding, check_ownership, 0)

/* ---------------------------------------- (c) flat buffer and partitions */

static void check_flat(const ZnLayout *L, const Cfg *c) {
    int order[MAXP];
    ref_flat_order(c, order);
    long off = 0, total = total_of(c), W = c->world;
    for (int k = 0; k < c->m->n; k++) {
        EXPECT_EQ(L->flat_order[k], order[k]);
        EXPECT_EQ(L->flat_offset[order[k]], off);
        off += c->m->p[order[k]].numel;
    }
    if (c->stage == 0) {
        EXPECT_EQ(L->aligned_numel, total);
        EXPECT_EQ(L->part_numel, total);
        EXPECT(L->s3_pn == NULL && L->nsubgroups == 0);
    } else if (c->stage == 3) {
        long sum = 0;
        for (int p = 0; p < c->m->n; p++) {
            long pn = (c->m->p[p].numel + W - 1) / W;
            EXPECT_EQ(L->s3_pn[p], pn);
            EXPECT_EQ(L->s3_off[p], sum);
            sum += pn;
        }
        EXPECT_EQ(L->s3_rank_numel, sum);
        EXPECT_EQ(L->part_numel, sum);
        EXPECT_EQ(L->aligned_numel, W * sum);
    } else {
        /* aligned: smallest multiple of 2W that holds total */
        EXPECT_EQ(L->aligned_numel % (2 * W), 0);
        EXPECT(L->aligned_numel >= total && L->aligned_numel - total < 2 * W);
        EXPECT_EQ(L->part_numel * W, L->aligned_numel);   /* W equal partitions */
        EXPECT_EQ(L->part_numel % 2, 0);                  /* S_p even */
        long sum = 0;
        for (int r = 0; r < W; r++)
            sum += L->part_numel - zn_layout_rank_padding(L, r);
        EXPECT_EQ(sum, total);
        EXPECT(L->s3_pn == NULL && L->nsubgroups == 0);
    }
    long mx = 0;
    for (int p = 0; p < c->m->n; p++) mx = lmax(mx, c->m->p[p].numel);
    EXPECT_EQ(zn_layout_max_param_numel(L), mx);
}

/* spec: Z-LAY-002 Z-LAY-003 Z-LAY-004 Z-LAY-005 Z-LAY-009 Z-LAY-010 Z-LAY-020 */
SWEEP_TEST(test_flat_buffer_and_partitions, check_flat, 0)

/* ------------------------------------------------------- (d) bucket plans */

/* Add order, the size rule, oversized singletons, maximality. */
static void check_bucket_rule(const ZnLayout *L, const Cfg *c) {
    const Model *m = c->m;
    int seen[MAXP] = {0}, prev = m->n;
    long prev_elems = -1;
    for (int b = 0; b < L->nbuckets; b++) {
        const ZnBucket *B = &L->buckets[b];
        EXPECT(B->nentries > 0);
        long elems = 0;
        for (int i = 0; i < B->nentries; i++) {
            int p = B->e[i].param;
            EXPECT(p < prev);                 /* backward order: model order reversed */
            prev = p;
            EXPECT(m->p[p].numel > 0);
            seen[p]++;
            elems += m->p[p].numel;
        }
        long first = m->p[B->e[0].param].numel;
        EXPECT_EQ(B->oversized, B->nentries == 1 && first > c->rbs);
        if (!B->oversized) EXPECT(elems <= c->rbs);
        /* greedy: the first param did not fit into the previous bucket */
        if (b > 0) EXPECT(prev_elems + first > c->rbs);
        prev_elems = elems;
    }
    for (int p = 0; p < m->n; p++) EXPECT_EQ(seen[p], m->p[p].numel > 0);
}

/* spec: Z-LAY-008 Z-LAY-013 Z-LAY-014 */
SWEEP_TEST(test_bucket_add_rule, check_bucket_rule, 1)

/* Stage 0-2: the bucket buffer element by element. pos[j] = flat position of
 * buffer element j. Checks entry sizes, tiling, flat order, flat range,
 * counts, and that the recv pieces of all ranks reproduce the reduce-scatter
 * slices and cover each rank's owned ranges (+ padding) exactly once. */
static void check_flat_buckets(const ZnLayout *L, const Cfg *c) {
    const Model *m = c->m;
    if (c->stage == 3) return;
    long total = total_of(c), W = c->world, S = L->part_numel;
    int carrier = -1;
    for (int k = 0; k < m->n; k++)
        if (m->p[L->flat_order[k]].numel > 0) carrier = L->flat_order[k];
    long pad_all = (c->stage == 0) ? 0 : L->aligned_numel - total;
    char *rank_cov = calloc((size_t)(W * S) + 1, 1);   /* stage 1/2: all buckets */
    for (int b = 0; b < L->nbuckets; b++) {
        const ZnBucket *B = &L->buckets[b];
        long sum = 0;
        for (int i = 0; i < B->nentries; i++) {
            int p = B->e[i].param;
            EXPECT_EQ(B->e[i].numel, m->p[p].numel + (p == carrier ? pad_all : 0));
            sum += B->e[i].numel;
        }
        EXPECT_EQ(B->numel, sum);
        long *pos = malloc(sizeof(long) * (size_t)(B->numel + 1));
        for (long j = 0; j < B->numel; j++) pos[j] = -1;
        for (int i = 0; i < B->nentries; i++) {
            const ZnBucketEntry *e = &B->e[i];
            EXPECT(e->buf_off >= 0 && e->buf_off + e->numel <= B->numel);
            for (long t = 0; t < e->numel; t++) {
                EXPECT_EQ(pos[e->buf_off + t], -1);          /* no overlap */
                pos[e->buf_off + t] = L->flat_offset[e->param] + t;
            }
        }
        for (long j = 0; j < B->numel; j++) {
            EXPECT(pos[j] >= 0);                             /* tiles [0, numel) */
            if (j > 0) EXPECT(pos[j] > pos[j - 1]);          /* flat order */
        }
        int contiguous = pos[B->numel - 1] - pos[0] + 1 == B->numel;
        if (!c->rr || c->stage == 0) EXPECT(contiguous);
        EXPECT_EQ(B->flat_lo, contiguous ? pos[0] : -1);
        EXPECT_EQ(B->flat_hi, contiguous ? pos[B->numel - 1] + 1 : -1);
        if (c->stage == 0) {
            EXPECT(B->counts == NULL);
            EXPECT_EQ(zn_layout_recv_pieces(L, b, 0, NULL, 0), 0);
            free(pos);
            continue;
        }
        long start = 0, csum = 0;
        for (int r = 0; r < W; r++) {
            long cnt = 0;
            for (long j = 0; j < B->numel; j++) cnt += pos[j] / S == r;
            EXPECT_EQ(B->counts[r], cnt);
            csum += B->counts[r];
            /* recv pieces: tile [0, counts[r]) in arrival order, map to the
               right partition positions */
            int np = zn_layout_recv_pieces(L, b, r, NULL, 0);
            ZnRecvPiece *pc = calloc((size_t)np + 1, sizeof *pc);
            EXPECT_EQ(zn_layout_recv_pieces(L, b, r, pc, np), np);
            long next = 0;
            char *bcov = calloc((size_t)S + 1, 1);
            for (int q = 0; q < np; q++) {
                EXPECT_EQ(pc[q].recv_off, next);
                EXPECT(pc[q].n > 0);
                for (long t = 0; t < pc[q].n; t++) {
                    long j = start + pc[q].recv_off + t, po = pc[q].part_off + t;
                    EXPECT(j < B->numel && po < S);
                    EXPECT_EQ(pos[j] - r * S, po);
                    EXPECT_EQ(rank_cov[r * S + po], 0);
                    rank_cov[r * S + po] = 1;
                    bcov[po] = 1;
                }
                next += pc[q].n;
            }
            EXPECT_EQ(next, B->counts[r]);
            /* expected: owned ranges of the bucket's params on r, + padding */
            char *want = calloc((size_t)S + 1, 1);
            for (int i = 0; i < B->nentries; i++) {
                long lo, hi, off;
                zn_layout_owned(L, B->e[i].param, r, &lo, &hi, &off);
                for (long t = 0; t < hi - lo; t++) want[off + t] = 1;
                if (B->e[i].param == carrier)
                    for (long t = S - zn_layout_rank_padding(L, r); t < S; t++) want[t] = 1;
            }
            EXPECT(memcmp(want, bcov, (size_t)S) == 0);
            free(want);
            free(bcov);
            free(pc);
            start += B->counts[r];
        }
        EXPECT_EQ(csum, B->numel);
        free(pos);
    }
    /* all buckets together: every partition position of every rank once */
    for (long i = 0; c->stage != 0 && i < W * S; i++) EXPECT_EQ(rank_cov[i], 1);
    free(rank_cov);
}

/* spec: Z-LAY-015 Z-LAY-016 Z-LAY-017 Z-LAY-018 */
SWEEP_TEST(test_bucket_buffers_stage012, check_flat_buckets, 1)

/* Stage 3: entry sizes, rank-major blocks, counts; chunk r of every entry
 * lands in rank r's block and the blocks tile the buffer. */
static void check_s3_buckets(const ZnLayout *L, const Cfg *c) {
    if (c->stage != 3) return;
    long W = c->world;
    for (int b = 0; b < L->nbuckets; b++) {
        const ZnBucket *B = &L->buckets[b];
        long block = 0;
        for (int i = 0; i < B->nentries; i++) {
            long pn = (c->m->p[B->e[i].param].numel + W - 1) / W;
            EXPECT_EQ(B->e[i].numel, pn * W);
            EXPECT_EQ(B->e[i].buf_off, block);
            block += pn;
        }
        EXPECT_EQ(B->block, block);
        EXPECT_EQ(B->numel, W * block);
        EXPECT_EQ(B->flat_lo, -1);
        EXPECT_EQ(B->flat_hi, -1);
        char *cov = calloc((size_t)B->numel + 1, 1);
        for (int r = 0; r < W; r++) {
            EXPECT_EQ(B->counts[r], block);
            EXPECT_EQ(zn_layout_recv_pieces(L, b, r, NULL, 0), 0);
            for (int i = 0; i < B->nentries; i++)
                for (long t = 0; t < L->s3_pn[B->e[i].param]; t++) {
                    long j = r * block + B->e[i].buf_off + t;
                    EXPECT(j < B->numel);
                    EXPECT_EQ(cov[j], 0);
                    cov[j] = 1;
                }
        }
        for (long j = 0; j < B->numel; j++) EXPECT_EQ(cov[j], 1);
        free(cov);
    }
}

/* spec: Z-LAY-019 */
SWEEP_TEST(test_bucket_buffers_stage3, check_s3_buckets, 1)

/* Sub-groups on the sweep: contiguous, cover all params, every closed group
 * reached sub_group_size (300) only at its last param. */
static void check_subgroups(const ZnLayout *L, const Cfg *c) {
    if (c->stage != 3) return;
    EXPECT_EQ(L->subgroup_first[0], 0);
    EXPECT_EQ(L->subgroup_first[L->nsubgroups], c->m->n);
    EXPECT_EQ(L->nsubgroups > 0, c->m->n > 0);
    if (L->s3_rank_numel <= c->sgs) EXPECT(L->nsubgroups <= 1);
    for (int g = 0; g < L->nsubgroups; g++) {
        int a = L->subgroup_first[g], z = L->subgroup_first[g + 1];
        EXPECT(a < z);
        long run = 0;
        for (int p = a; p < z; p++) {
            run += L->s3_pn[p];
            if (p < z - 1) EXPECT(run < c->sgs);
        }
        if (g < L->nsubgroups - 1) EXPECT(run >= c->sgs);
    }
}

/* spec: Z-LAY-011 */
SWEEP_TEST(test_subgroups_sweep, check_subgroups, 0)

/* ---------------------------------------------- (b) DeepSpeed examples */

static void test_deepspeed_examples(void **state) {
    /* spec: Z-LAY-005 Z-LAY-006 Z-LAY-007 Z-LAY-009 Z-LAY-010 */
    (void)state;
    ZnLayoutOpts o = {0, 0, 1000};
    ZnLayout L;
    ZnErr err = {0};
    Model m;
    strcpy(g_ctx, "deepspeed examples");
    /* stage 1/2, N=53, W=2: aligned 56, S_p 28, rank 1 pad 3 (stage_1_and_2.py);
       split as params 20 + 33 so the second straddles the partition boundary */
    long n53[] = {20, 33};
    model_set(&m, 2, n53);
    for (int stage = 1; stage <= 2; stage++) {
        assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(stage), &o, &err), 0);
        assert_int_equal(L.total_numel, 53);
        assert_int_equal(L.aligned_numel, 56);
        assert_int_equal(L.part_numel, 28);
        assert_int_equal(zn_layout_rank_padding(&L, 0), 0);
        assert_int_equal(zn_layout_rank_padding(&L, 1), 3);
        long lo, hi, off;
        zn_layout_owned(&L, 1, 0, &lo, &hi, &off);   /* straddler, first half */
        assert_int_equal(lo, 0);
        assert_int_equal(hi, 8);
        assert_int_equal(off, 20);
        zn_layout_owned(&L, 1, 1, &lo, &hi, &off);   /* first_offset = 28 - 20 */
        assert_int_equal(lo, 8);
        assert_int_equal(hi, 33);
        assert_int_equal(off, 0);
        zn_layout_owned(&L, 0, 1, &lo, &hi, &off);
        assert_int_equal(lo, hi);
        zn_layout_free(&L);
    }
    /* stage 3, a 3x5 param, W=2: pn 8, rank 1 holds 7 real + 1 pad
       (TestZero3ParamPartitioningBase) */
    ZnParamSpec p35 = {"w", 2, {3, 5}, 15};
    assert_int_equal(zn_layout_build(&L, &p35, 1, 2, zt_plan(3), &o, &err), 0);
    assert_int_equal(L.s3_pn[0], 8);
    assert_int_equal(L.s3_rank_numel, 8);
    long lo, hi, off;
    zn_layout_owned(&L, 0, 0, &lo, &hi, &off);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 8);
    zn_layout_owned(&L, 0, 1, &lo, &hi, &off);
    assert_int_equal(lo, 8);
    assert_int_equal(hi, 15);
    assert_int_equal(off, 0);
    assert_int_equal(zn_layout_rank_padding(&L, 0), 0);
    assert_int_equal(zn_layout_rank_padding(&L, 1), 1);
    zn_layout_free(&L);
    /* stage 3, a rank holding only padding: N=1, W=4 -> pn 1, ranks 1..3 pad */
    long n1[] = {1, 6};
    model_set(&m, 2, n1);
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 4, zt_plan(3), &o, &err), 0);
    assert_int_equal(L.s3_off[1], 1);
    assert_int_equal(L.s3_rank_numel, 3);
    zn_layout_owned(&L, 0, 2, &lo, &hi, &off);
    assert_int_equal(lo, hi);
    assert_int_equal(off, 0);                    /* its all-padding slot */
    zn_layout_owned(&L, 1, 2, &lo, &hi, &off);  /* pn 2: rank 2 holds [4,6) at 1 */
    assert_int_equal(lo, 4);
    assert_int_equal(hi, 6);
    assert_int_equal(off, 1);
    assert_int_equal(zn_layout_rank_padding(&L, 3), 3);  /* 1 + 2: all padding */
    zn_layout_free(&L);
}

/* A hand bucket plan: stage 2, W=2, params 10,20,30,5 (total 65, aligned 68,
 * S_p 34), reduce_bucket_size 40. Backward: 5 -> {3}; 30 fits (35) -> {3,2};
 * 20: 55 > 40 -> close; {1}; 10: 30 fits -> {1,0}. */
static void test_bucket_hand_example(void **state) {
    /* spec: Z-LAY-013 Z-LAY-014 Z-LAY-015 Z-LAY-016 Z-LAY-017 Z-LAY-018 */
    (void)state;
    long n[] = {10, 20, 30, 5};
    Model m;
    model_set(&m, 4, n);
    ZnLayoutOpts o = {0, 0, 40};
    ZnLayout L;
    ZnErr err = {0};
    strcpy(g_ctx, "hand bucket example");
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(2), &o, &err), 0);
    assert_int_equal(L.nbuckets, 2);
    ZnBucket *B = &L.buckets[0];
    assert_int_equal(B->nentries, 2);
    assert_int_equal(B->e[0].param, 3);
    assert_int_equal(B->e[0].numel, 5 + 3);          /* carries the flat padding */
    assert_int_equal(B->e[0].buf_off, 30);           /* buffer in flat order */
    assert_int_equal(B->e[1].param, 2);
    assert_int_equal(B->e[1].buf_off, 0);
    assert_int_equal(B->numel, 38);
    assert_int_equal(B->flat_lo, 30);
    assert_int_equal(B->flat_hi, 68);
    assert_int_equal(B->counts[0], 4);               /* flat 30..33 */
    assert_int_equal(B->counts[1], 34);
    ZnRecvPiece pc[4];
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 1, pc, 4), 1);
    assert_int_equal(pc[0].recv_off, 0);
    assert_int_equal(pc[0].part_off, 0);
    assert_int_equal(pc[0].n, 34);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 0, pc, 4), 1);
    assert_int_equal(pc[0].part_off, 30);
    assert_int_equal(pc[0].n, 4);
    B = &L.buckets[1];
    assert_int_equal(B->e[0].param, 1);
    assert_int_equal(B->e[0].buf_off, 10);
    assert_int_equal(B->e[1].param, 0);
    assert_int_equal(B->e[1].buf_off, 0);
    assert_int_equal(B->counts[0], 30);
    assert_int_equal(B->counts[1], 0);
    assert_int_equal(B->oversized, 0);
    zn_layout_free(&L);

    /* oversized: limit 15 -> {3}, {2} oversized, {1} oversized, {0} */
    o.reduce_bucket_size = 15;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(2), &o, &err), 0);
    assert_int_equal(L.nbuckets, 4);
    int want_over[] = {0, 1, 1, 0};
    for (int b = 0; b < 4; b++) {
        assert_int_equal(L.buckets[b].nentries, 1);
        assert_int_equal(L.buckets[b].e[0].param, 3 - b);
        assert_int_equal(L.buckets[b].oversized, want_over[b]);
    }
    zn_layout_free(&L);

    /* stage 3, W=2: pn 5,10,15,3; limit 40 as above; bucket 0 = {3,2}:
       block 3+15 = 18, buf_off 0 then 3, numel 36 */
    o.reduce_bucket_size = 40;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(3), &o, &err), 0);
    B = &L.buckets[0];
    assert_int_equal(B->block, 18);
    assert_int_equal(B->numel, 36);
    assert_int_equal(B->e[0].numel, 6);
    assert_int_equal(B->e[1].buf_off, 3);
    assert_int_equal(B->e[1].numel, 30);
    assert_int_equal(B->counts[1], 18);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 0, pc, 4), 0);
    zn_layout_free(&L);
}

/* recv pieces with a round-robin bucket: not contiguous in flat space, so
 * pieces are several; cap smaller than the count still returns the count. */
static void test_recv_pieces_round_robin(void **state) {
    /* spec: Z-LAY-003 Z-LAY-016 Z-LAY-018 */
    (void)state;
    long n[] = {4, 4, 4, 4};     /* W=2 rr: flat order 0,2,1,3; aligned 16, S_p 8 */
    Model m;
    model_set(&m, 4, n);
    ZnLayoutOpts o = {1, 0, 8};  /* buckets {3,2}, {1,0} */
    ZnLayout L;
    ZnErr err = {0};
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(1), &o, &err), 0);
    assert_int_equal(L.nbuckets, 2);
    /* bucket {3,2}: param 2 at flat 4..8 (rank 0), param 3 at flat 12..16 (rank 1) */
    ZnBucket *B = &L.buckets[0];
    assert_int_equal(B->flat_lo, -1);
    assert_int_equal(B->flat_hi, -1);
    assert_int_equal(B->e[0].param, 3);
    assert_int_equal(B->e[0].buf_off, 4);
    assert_int_equal(B->e[1].buf_off, 0);
    assert_int_equal(B->counts[0], 4);
    assert_int_equal(B->counts[1], 4);
    ZnRecvPiece pc[2];
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 0, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 4);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 1, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 4);
    zn_layout_free(&L);

    /* W=3, rr, 6 params of 2: flat order 0,3,1,4,2,5 at 0,2,4,6,8,10,
       aligned 12, S_p 4. Limit 6 -> bucket {5,4,3} at flat 10, 6, 2: one
       param per rank */
    long n6[] = {2, 2, 2, 2, 2, 2};
    model_set(&m, 6, n6);
    o.reduce_bucket_size = 6;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 3, zt_plan(2), &o, &err), 0);
    assert_int_equal(L.flat_offset[3], 2);
    assert_int_equal(L.flat_offset[4], 6);
    assert_int_equal(L.flat_offset[5], 10);
    B = &L.buckets[0];
    assert_int_equal(B->nentries, 3);
    assert_int_equal(B->counts[0], 2);
    assert_int_equal(B->counts[1], 2);
    assert_int_equal(B->counts[2], 2);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 2, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 2);
    zn_layout_free(&L);

    /* adjacent pieces merge: W=2, rr, 6 params of 2: flat order 0,2,4,1,3,5
       at 0,2,4,6,8,10, S_p 6. Limit 8 -> bucket {5,4,3,2}, not contiguous
       (p1 at [6,8) is missing); rank 0 gets p2 [2,4) + p4 [4,6), rank 1 gets
       p3 [8,10) + p5 [10,12): one piece each */
    o.reduce_bucket_size = 8;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(2), &o, &err), 0);
    B = &L.buckets[0];
    assert_int_equal(B->nentries, 4);
    assert_int_equal(B->flat_lo, -1);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 0, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 2);
    assert_int_equal(pc[0].n, 4);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 1, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 2);
    assert_int_equal(pc[0].n, 4);
    zn_layout_free(&L);

    /* padding rides with the last flat param under rr: W=2, 5 params of 2:
       flat order 0,2,4,1,3 at 0,2,4,6,8, total 10, aligned 12, S_p 6; p3 is
       last in flat order and carries 2 padding elements. Limit 4 -> buckets
       {4,3}, {2,1}, {0}; rank 1 receives p3 + padding as one piece [2,6) */
    long n5[] = {2, 2, 2, 2, 2};
    model_set(&m, 5, n5);
    o.reduce_bucket_size = 4;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(2), &o, &err), 0);
    assert_int_equal(L.nbuckets, 3);
    B = &L.buckets[0];
    assert_int_equal(B->e[1].param, 3);
    assert_int_equal(B->e[1].numel, 4);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 1, pc, 2), 1);
    assert_int_equal(pc[0].part_off, 2);
    assert_int_equal(pc[0].n, 4);
    zn_layout_free(&L);

    /* two separate pieces on one rank, and cap: W=3, rr, 9 params of 1:
       flat order 0,3,6,1,4,7,2,5,8 at 0..8, aligned 12, S_p 4. Limit 3 ->
       bucket {5,4,3} at flat 7, 4, 1: rank 0 gets p3 at 1; rank 1 gets p4 at
       0 and p5 at 3 (not adjacent) */
    long n9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    model_set(&m, 9, n9);
    o.reduce_bucket_size = 3;
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 3, zt_plan(2), &o, &err), 0);
    B = &L.buckets[1];
    assert_int_equal(B->e[0].param, 5);
    assert_int_equal(B->counts[0], 1);
    assert_int_equal(B->counts[1], 2);
    assert_int_equal(B->counts[2], 0);
    assert_int_equal(zn_layout_recv_pieces(&L, 1, 2, pc, 2), 0);
    assert_int_equal(zn_layout_recv_pieces(&L, 1, 1, NULL, 0), 2);  /* count only */
    ZnRecvPiece one = {-1, -1, -1};
    assert_int_equal(zn_layout_recv_pieces(&L, 1, 1, &one, 1), 2);  /* cap 1 */
    assert_int_equal(one.recv_off, 0);
    assert_int_equal(one.part_off, 0);
    assert_int_equal(one.n, 1);
    assert_int_equal(zn_layout_recv_pieces(&L, 1, 1, pc, 2), 2);
    assert_int_equal(pc[1].recv_off, 1);
    assert_int_equal(pc[1].part_off, 3);
    assert_int_equal(pc[1].n, 1);
    /* out of range arguments: 0 pieces */
    assert_int_equal(zn_layout_recv_pieces(&L, -1, 0, pc, 2), 0);
    assert_int_equal(zn_layout_recv_pieces(&L, L.nbuckets, 0, pc, 2), 0);
    assert_int_equal(zn_layout_recv_pieces(&L, 0, 3, pc, 2), 0);
    zn_layout_free(&L);
}

/* ---------------------------------------------------- (e) round robin */

static void test_round_robin_order(void **state) {
    /* spec: Z-LAY-003 Z-LAY-004 */
    (void)state;
    long n[] = {3, 1, 4, 1, 5, 9, 2};
    Model m;
    model_set(&m, 5, n);
    ZnLayoutOpts o = {1, 0, 100};
    ZnLayout L;
    ZnErr err = {0};
    /* W=2, 5 params -> 0,2,4,1,3 (DeepSpeed _round_robin_reorder) */
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 2, zt_plan(2), &o, &err), 0);
    int want[] = {0, 2, 4, 1, 3};
    for (int k = 0; k < 5; k++) assert_int_equal(L.flat_order[k], want[k]);
    long off_want[] = {0, 12, 3, 13, 7};     /* 3 | 4 | 5 | 1 | 1 */
    for (int p = 0; p < 5; p++) assert_int_equal(L.flat_offset[p], off_want[p]);
    zn_layout_free(&L);
    /* W=3, 7 params -> 0,3,6,1,4,2,5 */
    model_set(&m, 7, n);
    assert_int_equal(zn_layout_build(&L, m.p, m.n, 3, zt_plan(1), &o, &err), 0);
    int want3[] = {0, 3, 6, 1, 4, 2, 5};
    for (int k = 0; k < 7; k++) assert_int_equal(L.flat_order[k], want3[k]);
    zn_layout_free(&L);
    /* stage 0 and 3 ignore round robin: model order */
    for (int stage = 0; stage <= 3; stage += 3) {
        assert_int_equal(zn_layout_build(&L, m.p, m.n, 3, zt_plan(stage), &o, &err), 0);
        for (int k = 0; k < 7; k++) assert_int_equal(L.flat_order[k], k);
        zn_layout_free(&L);
    }
}

/* ---------------------------------------------------- (f) sub-groups */

static void subgroups_expect(int world, int n, const long *numel, long sgs, int ngroups,
                             const int *first) {
    Model m;
    model_set(&m, n, numel);
    ZnLayoutOpts o = {0, sgs, 1000};
    ZnLayout L;
    ZnErr err = {0};
    assert_int_equal(zn_layout_build(&L, m.p, m.n, world, zt_plan(3), &o, &err), 0);
    assert_int_equal(L.nsubgroups, ngroups);
    for (int g = 0; g <= ngroups; g++) assert_int_equal(L.subgroup_first[g], first[g]);
    zn_layout_free(&L);
}

static void test_subgroups_hand(void **state) {
    /* spec: Z-LAY-011 */
    (void)state;
    long a[] = {10, 20, 30};
    /* smaller than one param: every param closes its own sub-group */
    subgroups_expect(1, 3, a, 5, 3, (int[]){0, 1, 2, 3});
    /* larger than all, exactly equal to all, unlimited (0, negative) */
    subgroups_expect(1, 3, a, 100, 1, (int[]){0, 3});
    subgroups_expect(1, 3, a, 60, 1, (int[]){0, 3});
    subgroups_expect(1, 3, a, 0, 3, (int[]){0, 1, 2, 3});   /* DeepSpeed's 0: one param each */
    subgroups_expect(1, 3, a, -1, 1, (int[]){0, 3});
    /* exactly equal to one param: >= closes */
    long b[] = {10, 10, 10};
    subgroups_expect(1, 3, b, 10, 3, (int[]){0, 1, 2, 3});
    /* running sum reaching the size exactly, and a short last group */
    long c[] = {4, 6, 3, 7, 3};
    subgroups_expect(1, 5, c, 10, 3, (int[]){0, 2, 4, 5});
    /* whole Σpn equal to the size: one sub-group, even with a trailing pn 0
       param that the walk would have put in a second one */
    long z[] = {10, 0};
    subgroups_expect(1, 2, z, 10, 1, (int[]){0, 2});
    /* counted in partition numel: W=2, numel 15,5,9 -> pn 8,3,5; size 11 */
    long d[] = {15, 5, 9};
    subgroups_expect(2, 3, d, 11, 2, (int[]){0, 2, 3});
    /* zero-numel params (pn 0) join the open sub-group; after a close they
       open a new one, and the last param always closes (DeepSpeed) */
    long e[] = {10, 0, 10, 0};
    subgroups_expect(1, 4, e, 10, 3, (int[]){0, 1, 3, 4});
    /* no params: no sub-group */
    subgroups_expect(4, 0, NULL, 10, 0, (int[]){0});
}

/* ---------------------------------------------------- (g) errors, lifetime */

static void expect_usage(const ZnParamSpec *p, int n, int world, const ZnPlan *P,
                         const ZnLayoutOpts *o, const char *needle) {
    ZnLayout L;
    ZnErr err = {0};
    assert_int_equal(zn_layout_build(&L, p, n, world, P, o, &err), ZN_E_USAGE);
    assert_int_equal(err.code, ZN_E_USAGE);
    assert_str_contains(err.msg, needle);
    assert_null(L.params);                  /* nothing left allocated */
    assert_int_equal(L.nbuckets, 0);
    zn_layout_free(&L);
}

static void test_errors(void **state) {
    /* spec: Z-LAY-001 */
    (void)state;
    long n[] = {5, 0, 7};
    Model m;
    model_set(&m, 3, n);
    ZnLayoutOpts o = {0, 0, 100};
    expect_usage(m.p, 3, 0, zt_plan(1), &o, "world size 0");
    expect_usage(m.p, 3, -2, zt_plan(1), &o, "world size -2");
    expect_usage(m.p, 3, 2, NULL, &o, "no plan");
    expect_usage(m.p, -1, 2, zt_plan(1), &o, "nparams -1");
    expect_usage(NULL, 3, 2, zt_plan(1), &o, "no parameter list");
    ZnLayoutOpts bad = {0, 0, 0};
    expect_usage(m.p, 3, 2, zt_plan(2), &bad, "reduce_bucket_size 0");
    bad.reduce_bucket_size = -5;
    expect_usage(m.p, 3, 2, zt_plan(3), &bad, "reduce_bucket_size -5");
    m.p[2].numel = -1;
    expect_usage(m.p, 3, 2, zt_plan(0), &o, "'p2' has negative numel -1");
    /* a NULL error pointer is allowed */
    ZnLayout L;
    assert_int_equal(zn_layout_build(&L, m.p, 3, 0, zt_plan(1), &o, NULL), ZN_E_USAGE);
    zn_layout_free(&L);
}

static void test_empty_and_defaults(void **state) {
    /* spec: Z-LAY-001 Z-LAY-008 Z-LAY-012 Z-LAY-020 */
    (void)state;
    ZnLayout L;
    ZnErr err = {0};
    ZnLayoutOpts o = {1, 10, 100};
    for (int stage = 0; stage <= 3; stage++) {
        assert_int_equal(zn_layout_build(&L, NULL, 0, 4, zt_plan(stage), &o, &err), 0);
        assert_int_equal(L.nparams, 0);
        assert_int_equal(L.total_numel, 0);
        assert_int_equal(L.aligned_numel, 0);
        assert_int_equal(L.nbuckets, 0);
        assert_int_equal(zn_layout_rank_padding(&L, 3), 0);
        assert_int_equal(zn_layout_max_param_numel(&L), 0);
        zn_layout_free(&L);
    }
    /* all-zero params in stage 1: nothing to own, pad, or reduce */
    long z[] = {0, 0};
    Model m;
    model_set(&m, 2, z);
    assert_int_equal(zn_layout_build(&L, m.p, 2, 3, zt_plan(1), &o, &err), 0);
    assert_int_equal(L.part_numel, 0);
    assert_int_equal(L.nbuckets, 0);
    zn_layout_free(&L);
    /* NULL opts: DeepSpeed defaults (no round robin, 5e8 bucket, 1e9 sub-group) */
    long n[] = {100, 200, 300};
    model_set(&m, 3, n);
    assert_int_equal(zn_layout_build(&L, m.p, 3, 2, zt_plan(3), NULL, &err), 0);
    assert_int_equal(L.nbuckets, 1);
    assert_int_equal(L.nsubgroups, 1);
    assert_int_equal(zn_layout_max_param_numel(&L), 300);
    zn_layout_free(&L);
    /* free: safe on a zeroed struct, and twice */
    ZnLayout Z;
    memset(&Z, 0, sizeof Z);
    zn_layout_free(&Z);
    zn_layout_free(&Z);
    zn_layout_free(NULL);
    /* two layouts side by side do not interfere (no global state) */
    ZnLayout A, B2;
    assert_int_equal(zn_layout_build(&A, m.p, 3, 2, zt_plan(2), &o, &err), 0);
    assert_int_equal(zn_layout_build(&B2, m.p, 3, 4, zt_plan(2), &o, &err), 0);
    assert_int_equal(A.part_numel, 300);
    assert_int_equal(B2.part_numel, 150);   /* 600 = 75 * 2W */
    zn_layout_free(&A);
    zn_layout_free(&B2);
    /* the layout keeps its own copy of the params */
    assert_int_equal(zn_layout_build(&L, m.p, 3, 2, zt_plan(0), &o, &err), 0);
    m.p[0].numel = 999;
    assert_int_equal(L.params[0].numel, 100);
    zn_layout_free(&L);
    /* out-of-range queries answer "nothing" */
    model_set(&m, 3, n);
    assert_int_equal(zn_layout_build(&L, m.p, 3, 2, zt_plan(2), &o, &err), 0);
    long lo = 7, hi = 7, off = 7;
    zn_layout_owned(&L, 3, 0, &lo, &hi, &off);
    assert_true(lo == 0 && hi == 0 && off == 0);
    zn_layout_owned(&L, 0, 2, &lo, &hi, &off);
    assert_true(lo == hi);
    assert_int_equal(zn_layout_rank_padding(&L, -1), 0);
    zn_layout_free(&L);
}

ZT_MAIN(
    cmocka_unit_test(test_ownership_and_padding),
    cmocka_unit_test(test_flat_buffer_and_partitions),
    cmocka_unit_test(test_bucket_add_rule),
    cmocka_unit_test(test_bucket_buffers_stage012),
    cmocka_unit_test(test_bucket_buffers_stage3),
    cmocka_unit_test(test_subgroups_sweep),
    cmocka_unit_test(test_deepspeed_examples),
    cmocka_unit_test(test_bucket_hand_example),
    cmocka_unit_test(test_recv_pieces_round_robin),
    cmocka_unit_test(test_round_robin_order),
    cmocka_unit_test(test_subgroups_hand),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_empty_and_defaults))
