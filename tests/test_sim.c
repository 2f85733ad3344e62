/* test_sim.c: the simulator's collectives (sim/), the ring byte model and
 * the reduction tree (src/comm/comm.c).
 *
 * Rank functions run on their own threads, where cmocka's assertions (a
 * longjmp) must not be used: they return an error with a message instead,
 * and the main thread asserts on zn_sim_run's result. Every rank builds its
 * inputs from a pure function of (seed, rank, element), so any rank can
 * compute the reference result of any collective by itself. Tests that could
 * hang if failure propagation broke arm alarm(). */
#include "testutil.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "comm/world.h"
#include "core/half.h"

#define MAXW 16
/* generous: helgrind and DRD run these 50-100x slower */
#define HANG_LIMIT_S 300

/* ------------------------------------------------------------ inputs */

static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rbits(uint64_t seed, int rank, long i) {
    return mix64(seed ^ mix64((uint64_t)rank * 0x100000001b3ull ^ mix64((uint64_t)i)));
}

/* A nonzero float with a full mantissa and an exponent in [-6, 6], so sums
 * round and their order matters; never NaN or inf. */
static float rand_f32(uint64_t u) {
    float m = (float)((u >> 40) | 1) * 0x1p-24f;
    int e = (int)((u >> 8) % 13) - 6;
    float v = ldexpf(m, e);
    return (u & 1) ? -v : v;
}

static double rand_f64(uint64_t u) {
    double m = (double)((u >> 11) | 1) * 0x1p-53;
    int e = (int)(u % 13) - 6;
    double v = ldexp(m, e);
    return (u & 0x400) ? -v : v;
}

/* Element i of rank's input in dtype dt, written as its bits to out. */
static void gen_elem(ZnDtype dt, uint64_t seed, int rank, long i, void *out) {
    uint64_t u = rbits(seed, rank, i);
    switch (dt) {
    case ZN_F32: { float f = rand_f32(u); memcpy(out, &f, 4); break; }
    case ZN_F64: { double d = rand_f64(u); memcpy(out, &d, 8); break; }
    case ZN_F16: { uint16_t h = zn_f32_to_f16(rand_f32(u)); memcpy(out, &h, 2); break; }
    case ZN_BF16: { uint16_t h = zn_f32_to_bf16(rand_f32(u)); memcpy(out, &h, 2); break; }
    case ZN_U64: memcpy(out, &u, 8); break;
    case ZN_U8: { uint8_t b = (uint8_t)u; memcpy(out, &b, 1); break; }
    default: break;
    }
}

static void fill(ZnDtype dt, void *buf, long n, uint64_t seed, int rank, long first) {
    size_t es = zn_dtype_size(dt);
    for (long j = 0; j < n; j++) gen_elem(dt, seed, rank, first + j, (char *)buf + j * es);
}

/* -------------------------------------------------- reference reductions */

/* Split point of the tree: the highest set bit of n-1, i.e. the largest
 * power of two below n (computed differently from src/ on purpose). */
static int ref_split(int n) {
    int h = 1;
    for (int b = n - 1; b > 1; b >>= 1) h <<= 1;
    return h;
}

static float ref_round(ZnDtype dt, float v) {
    if (dt == ZN_F16) return zn_f16_to_f32(zn_f32_to_f16(v));
    if (dt == ZN_BF16) return zn_bf16_to_f32(zn_f32_to_bf16(v));
    return v;
}

static float ref_tree_f32(const float *x, int n, ZnDtype dt, ZnRedOp op) {
    if (n == 1) return x[0];
    int h = ref_split(n);
    float a = ref_tree_f32(x, h, dt, op), b = ref_tree_f32(x + h, n - h, dt, op);
    if (op == ZN_MAX) return isnan(a) ? a : isnan(b) ? b : b > a ? b : a; /* Z-SIM-012 */
    return ref_round(dt, a + b);
}

static double ref_tree_f64(const double *x, int n, ZnRedOp op) {
    if (n == 1) return x[0];
    int h = ref_split(n);
    double a = ref_tree_f64(x, h, op), b = ref_tree_f64(x + h, n - h, op);
    if (op == ZN_MAX) return isnan(a) ? a : isnan(b) ? b : b > a ? b : a;
    return a + b;
}

static float to_f32(ZnDtype dt, const void *p) {
    uint16_t h;
    float f;
    if (dt == ZN_F32) { memcpy(&f, p, 4); return f; }
    memcpy(&h, p, 2);
    return dt == ZN_F16 ? zn_f16_to_f32(h) : zn_bf16_to_f32(h);
}

static void from_f32(ZnDtype dt, float f, void *p) {
    uint16_t h;
    if (dt == ZN_F32) { memcpy(p, &f, 4); return; }
    h = dt == ZN_F16 ? zn_f32_to_f16(f) : zn_f32_to_bf16(f);
    memcpy(p, &h, 2);
}

/* The expected reduction of element i over all ranks' inputs. */
static void ref_reduce(ZnDtype dt, ZnRedOp op, int world, uint64_t seed, long i, void *out) {
    char e[8];
    if (dt == ZN_F64) {
        double x[MAXW];
        for (int q = 0; q < world; q++) { gen_elem(dt, seed, q, i, e); memcpy(&x[q], e, 8); }
        double r = ref_tree_f64(x, world, op);
        memcpy(out, &r, 8);
        return;
    }
    float x[MAXW];
    for (int q = 0; q < world; q++) { gen_elem(dt, seed, q, i, e); x[q] = to_f32(dt, e); }
    from_f32(dt, ref_tree_f32(x, world, dt, op), out);
}

/* ----------------------------------------------------- harness helpers */

static const ZnDtype RED_DTYPES[] = {ZN_F32, ZN_F64, ZN_F16, ZN_BF16};
static const ZnDtype ALL_DTYPES[] = {ZN_F32, ZN_F64, ZN_F16, ZN_BF16, ZN_U64, ZN_U8};

/* What a rank function saw, one slot per rank (each rank writes its own). */
typedef struct {
    int rc[MAXW];
    char msg[MAXW][1024];
    uint64_t digest[MAXW];
    long expect_sent[MAXW][ZN_OP_N], expect_recv[MAXW][ZN_OP_N];
    int arg_i;        /* per-test parameter */
    int world;
} Ctx;

static int bad_elem(ZnErr *err, const char *what, ZnDtype dt, int rank, long i, const void *got,
                    const void *want) {
    uint64_t g = 0, w = 0;
    memcpy(&g, got, zn_dtype_size(dt));
    memcpy(&w, want, zn_dtype_size(dt));
    return zn_err(err, ZN_E_INTERNAL, "%s %s: rank %d element %ld is 0x%llx, want 0x%llx", what,
                  zn_dtype_name(dt), rank, i, (unsigned long long)g, (unsigned long long)w);
}

/* Runs fn on a fresh world; fails the test with the run's message. */
static void run_ok(int world, ZnRankFn fn, void *arg) {
    ZnErr err = {0};
    if (zt_sim_run(world, fn, arg, 0, &err)) fail_msg("world %d: %s", world, err.msg);
}

/* Runs fn on cx->world ranks (a hang kills the test); returns the run's
   result, its message in *err. */
static int run_ctx(Ctx *cx, ZnRankFn fn, ZnErr *err) {
    memset(err, 0, sizeof *err);
    return zt_sim_run(cx->world, fn, cx, HANG_LIMIT_S, err);
}

/* Every rank but `except` (-1: none) had its own call fail with ZN_E_COMM
   and the message want. */
static void ranks_failed(const Ctx *cx, int except, const char *want) {
    for (int r = 0; r < cx->world; r++) {
        if (r == except) continue;
        assert_int_equal(cx->rc[r], ZN_E_COMM);
        assert_string_equal(cx->msg[r], want);
    }
}

/* Bytes the ring model of comm.h assigns, recomputed here from its text. */
static void model_bytes(ZnCollOp op, int rank, int world, const long *counts, long n, int root,
                        ZnDtype dt, long *sent, long *recv) {
    long es = (long)zn_dtype_size(dt), s = 0, r = 0;
    if (op == ZN_OP_ALL_REDUCE) {
        long mine = n / world + (rank < n % world);
        s = r = 2 * (n - mine);
    } else if (op == ZN_OP_REDUCE_SCATTER || op == ZN_OP_ALL_GATHER) {
        for (int q = 0; q < world; q++)
            if (q != rank) s += counts[q];
        r = s;
    } else if (op == ZN_OP_BROADCAST) {
        r = rank == root ? 0 : n;
        s = (rank + 1) % world == root ? 0 : n;
    }
    *sent = s * es;
    *recv = r * es;
}

static void expect_bytes(Ctx *cx, int rank, ZnCollOp op, const long *counts, long n, int root, ZnDtype dt) {
    long s, r;
    model_bytes(op, rank, cx->world, counts, n, root, dt, &s, &r);
    cx->expect_sent[rank][op] += s;
    cx->expect_recv[rank][op] += r;
}

static int check_stats(Ctx *cx, ZnComm *c, ZnErr *err) {
    for (int op = 0; op < ZN_OP_N; op++)
        if (c->stats.bytes_sent[op] != cx->expect_sent[c->world.rank][op] ||
            c->stats.bytes_recv[op] != cx->expect_recv[c->world.rank][op])
            return zn_err(err, ZN_E_INTERNAL, "rank %d op %d: stats sent/recv %ld/%ld, model %ld/%ld",
                          c->world.rank, op, c->stats.bytes_sent[op], c->stats.bytes_recv[op],
                          cx->expect_sent[c->world.rank][op], cx->expect_recv[c->world.rank][op]);
    return 0;
}

/* Runs fn on worlds of 1 to 9 ranks, each with a fresh Ctx whose arg_i is
   arg_i. */
static void run_worlds_1_to_9(ZnRankFn fn, int arg_i) {
    for (int w = 1; w <= 9; w++) {
        Ctx cx = {.world = w, .arg_i = arg_i};
        run_ok(w, fn, &cx);
    }
}

/* Where this rank's piece starts in the concatenation of counts; *total
   gets the concatenation's length. */
static long piece_offset(const ZnComm *c, const long *counts, long *total) {
    long off = 0;
    *total = 0;
    for (int q = 0; q < c->world.size; q++) {
        if (q == c->world.rank) off = *total;
        *total += counts[q];
    }
    return off;
}

/* mallocs a send buffer of ns elements and a receive buffer of nr (each one
   byte more, so that 0 elements is not a NULL); frees both on failure */
static int alloc_pair(long ns, long nr, size_t es, char **send, char **recv, ZnErr *err) {
    *send = malloc((size_t)ns * es + 1);
    *recv = malloc((size_t)nr * es + 1);
    if (*send && *recv) return 0;
    free(*send);
    free(*recv);
    return zn_err(err, ZN_E_NOMEM, "test: oom");
}

/* --------------------------------------- collectives vs the references */

static const long AR_COUNTS[] = {0, 1, 7, 1001, 4099};

static int do_all_reduce(Ctx *cx, ZnComm *c, ZnDtype dt, ZnRedOp op, long n, uint64_t seed, ZnErr *err) {
    size_t es = zn_dtype_size(dt);
    char *buf = malloc((size_t)n * es + 1), want[8];
    if (!buf) return zn_err(err, ZN_E_NOMEM, "test: out of memory");
    fill(dt, buf, n, seed, c->world.rank, 0);
    int rc = c->all_reduce(c, buf, n, dt, op, "ar", err);
    for (long i = 0; !rc && i < n; i++) {
        ref_reduce(dt, op, c->world.size, seed, i, want);
        if (memcmp(buf + i * es, want, es)) rc = bad_elem(err, "all_reduce", dt, c->world.rank, i, buf + i * es, want);
    }
    free(buf);
    expect_bytes(cx, c->world.rank, ZN_OP_ALL_REDUCE, NULL, n, 0, dt);
    return rc;
}

static int rank_all_reduce(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)rank;
    Ctx *cx = arg;
    uint64_t seed = 1;
    for (size_t d = 0; d < 4; d++)
        for (int op = ZN_SUM; op <= ZN_MAX; op++)
            for (size_t k = 0; k < sizeof AR_COUNTS / sizeof *AR_COUNTS; k++) {
                int rc = do_all_reduce(cx, c, RED_DTYPES[d], (ZnRedOp)op, AR_COUNTS[k], seed++, err);
                if (rc) return rc;
            }
    return check_stats(cx, c, err);
}

/* spec: Z-SIM-002 Z-SIM-003 Z-SIM-004 Z-SIM-010 Z-SIM-011 Z-SIM-012 */
static void test_all_reduce_matches_tree(void **state) {
    (void)state;
    run_worlds_1_to_9(rank_all_reduce, 0);
}

/* Uneven counts with zeros; the last shape crosses the reduction tile. */
static void rs_counts(int world, int shape, long *counts) {
    for (int q = 0; q < world; q++) {
        if (shape == 0) counts[q] = (q * 7 + 3) % 5;         /* 3,0,2,4,1,... */
        else if (shape == 1) counts[q] = q == world - 1 ? 1 : 0; /* all zero but one */
        else counts[q] = q % 3 == 1 ? 0 : 2500 + 3 * q;
    }
}

static int do_reduce_scatter(Ctx *cx, ZnComm *c, ZnDtype dt, ZnRedOp op, const long *counts,
                             int inplace, uint64_t seed, ZnErr *err) {
    size_t es = zn_dtype_size(dt);
    long total, off = piece_offset(c, counts, &total), n = counts[c->world.rank];
    char *send, *recv, want[8];
    if (alloc_pair(total, n, es, &send, &recv, err)) return ZN_E_NOMEM;
    fill(dt, send, total, seed, c->world.rank, 0);
    char *out = inplace ? send + off * es : recv;
    int rc = c->reduce_scatter(c, send, out, counts, dt, op, "rs", err);
    for (long i = 0; !rc && i < n; i++) {
        ref_reduce(dt, op, c->world.size, seed, off + i, want);
        if (memcmp(out + i * es, want, es)) rc = bad_elem(err, "reduce_scatter", dt, c->world.rank, off + i, out + i * es, want);
    }
    free(send);
    free(recv);
    expect_bytes(cx, c->world.rank, ZN_OP_REDUCE_SCATTER, counts, 0, 0, dt);
    return rc;
}

/* one uneven collective (do_reduce_scatter, do_all_gather) */
typedef int (*UnevenFn)(Ctx *cx, ZnComm *c, ZnDtype dt, ZnRedOp op, const long *counts, int inplace,
                        uint64_t seed, ZnErr *err);

/* Runs f over the three rs_counts shapes, nd dtypes, the ops SUM.. (nops of
   them) and in place or not, a fresh seed each, then checks the byte stats. */
static int uneven_loop(Ctx *cx, ZnComm *c, UnevenFn f, const ZnDtype *dts, size_t nd, int nops, uint64_t seed,
                       ZnErr *err) {
    long counts[MAXW];
    for (int shape = 0; shape < 3; shape++) {
        rs_counts(c->world.size, shape, counts);
        for (size_t d = 0; d < nd; d++)
            for (int op = ZN_SUM; op < ZN_SUM + nops; op++)
                for (int inplace = 0; inplace <= 1; inplace++) {
                    int rc = f(cx, c, dts[d], (ZnRedOp)op, counts, inplace, seed++, err);
                    if (rc) return rc;
                }
    }
    return check_stats(cx, c, err);
}


/* (op is not used: all_gather does not reduce) */
static int do_all_gather(Ctx *cx, ZnComm *c, ZnDtype dt, ZnRedOp op, const long *counts, int inplace,
                         uint64_t seed, ZnErr *err) {
    (void)op;
    size_t es = zn_dtype_size(dt);
    long total, off = piece_offset(c, counts, &total), n = counts[c->world.rank];
    char *send, *recv, want[8];
    if (alloc_pair(n, total, es, &send, &recv, err)) return ZN_E_NOMEM;
    /* rank q's piece holds elements off_q.. of its own stream; garbage elsewhere */
    fill(dt, recv, total, seed ^ 0xdead, c->world.rank, 0);
    char *in = inplace ? recv + off * es : send;
    fill(dt, in, n, seed, c->world.rank, off);
    int rc = c->all_gather(c, in, recv, counts, dt, "ag", err);
    long qoff = 0;
    for (int q = 0; !rc && q < c->world.size; q++) {
        for (long i = qoff; !rc && i < qoff + counts[q]; i++) {
            gen_elem(dt, seed, q, i, want);
            if (memcmp(recv + i * es, want, es)) rc = bad_elem(err, "all_gather", dt, c->world.rank, i, recv + i * es, want);
        }
        qoff += counts[q];
    }
    free(send);
    free(recv);
    expect_bytes(cx, c->world.rank, ZN_OP_ALL_GATHER, counts, 0, 0, dt);
    return rc;
}

/* The rank function of the uneven tests: Ctx's arg_i 0 runs reduce_scatter
   (the reducing dtypes, both ops), 1 all_gather (every dtype). */
static int rank_uneven(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)rank;
    Ctx *cx = arg;
    if (cx->arg_i == 0) return uneven_loop(cx, c, do_reduce_scatter, RED_DTYPES, 4, 2, 100, err);
    return uneven_loop(cx, c, do_all_gather, ALL_DTYPES, 6, 1, 200, err);
}

/* spec: Z-SIM-002 Z-SIM-003 Z-SIM-004 Z-SIM-010 Z-SIM-011 */
static void test_reduce_scatter_uneven_matches_tree(void **state) {
    (void)state;
    run_worlds_1_to_9(rank_uneven, 0);
}

/* spec: Z-SIM-004 Z-SIM-010 Z-SIM-011 */
static void test_all_gather_uneven(void **state) {
    (void)state;
    run_worlds_1_to_9(rank_uneven, 1);
}

static int rank_broadcast(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Ctx *cx = arg;
    static const long ns[] = {0, 1, 1001};
    uint64_t seed = 300;
    char want[8];
    for (int root = 0; root < c->world.size; root++)
        for (size_t d = 0; d < 6; d++)
            for (size_t k = 0; k < 3; k++, seed++) {
                ZnDtype dt = ALL_DTYPES[d];
                size_t es = zn_dtype_size(dt);
                long n = ns[k];
                char *buf = malloc((size_t)n * es + 1);
                if (!buf) return zn_err(err, ZN_E_NOMEM, "test: oom");
                fill(dt, buf, n, seed, rank, 0); /* only the root's survives */
                int rc = c->broadcast(c, buf, n, dt, root, "bc", err);
                for (long i = 0; !rc && i < n; i++) {
                    gen_elem(dt, seed, root, i, want);
                    if (memcmp(buf + i * es, want, es)) rc = bad_elem(err, "broadcast", dt, rank, i, buf + i * es, want);
                }
                free(buf);
                if (rc) return rc;
                expect_bytes(cx, rank, ZN_OP_BROADCAST, NULL, n, root, dt);
            }
    int rc = c->barrier(c, "end", err);
    return rc ? rc : check_stats(cx, c, err);
}

/* spec: Z-SIM-004 Z-SIM-010 */
static void test_broadcast_from_each_root(void **state) {
    (void)state;
    run_worlds_1_to_9(rank_broadcast, 0);
}

/* ------------------------------------------------ the tree order itself */

/* Rank r contributes x[r] (as dtype dt). */
typedef struct {
    ZnDtype dt;
    double x[MAXW];
    char out[MAXW][8];
} OrderCase;

static int rank_order(int rank, ZnComm *c, void *arg, ZnErr *err) {
    OrderCase *oc = arg;
    char v[8];
    if (oc->dt == ZN_F64) memcpy(v, &oc->x[rank], 8);
    else from_f32(oc->dt, (float)oc->x[rank], v);
    int rc = c->all_reduce(c, v, 1, oc->dt, ZN_SUM, "order", err);
    memcpy(oc->out[rank], v, 8);
    return rc;
}

static double order_result(int world, ZnDtype dt, const double *x) {
    OrderCase oc = {.dt = dt};
    memcpy(oc.x, x, sizeof oc.x);
    run_ok(world, rank_order, &oc);
    double r;
    if (dt == ZN_F64) memcpy(&r, oc.out[0], 8);
    else r = to_f32(dt, oc.out[0]);
    for (int q = 1; q < world; q++) assert_memory_equal(oc.out[q], oc.out[0], zn_dtype_size(dt));
    return r;
}

/* Asserts the all_reduce of x on worlds 3, 4, 5 and 6 gives w3..w6 (a NaN:
   that world is not checked). */
static void check_orders(ZnDtype dt, const double *x, double w3, double w4, double w5, double w6) {
    const double want[4] = {w3, w4, w5, w6};
    for (int w = 3; w <= 6; w++) {
        if (isnan(want[w - 3])) continue;
        double got = order_result(w, dt, x);
        if (!(got == want[w - 3])) fail_msg("%s world %d: %.17g, want %.17g", zn_dtype_name(dt), w, got, want[w - 3]);
    }
}

/* spec: Z-SIM-002 Z-SIM-003 */
static void test_tree_order_exact_values(void **state) {
    (void)state;
    /* fp32, [2^24, 1, 1, ...]: 2^24 + 1 is a tie that rounds back to 2^24, so
       left-to-right gives 2^24 and every other order differs:
       W=3 ((a+b)+c)               = 2^24       (a+(b+c) would be 2^24+2)
       W=4 (a+b)+(c+d)             = 2^24+2     (left-to-right: 2^24)
       W=5 ((a+b)+(c+d))+e         = 2^24+4     (2^24+2+1 is a tie -> even 2^24+4)
       W=6 ((a+b)+(c+d))+(e+f)     = 2^24+4 */
    double a[MAXW] = {16777216.0, 1, 1, 1, 1, 1};
    check_orders(ZN_F32, a, 16777216.0, 16777218.0, 16777220.0, 16777220.0);
    /* fp32, [1e8, 1, -1e8, 1, 1e8, 1]: ulp(1e8) = 8
       W=3 (1e8+1)+(-1e8) = 0; W=4 adds (-1e8+1) = -1e8 -> 0 (left-to-right: 1);
       W=5 0 + 1e8 = 1e8; W=6 0 + (1e8+1) = 1e8 */
    double b[MAXW] = {1e8, 1, -1e8, 1, 1e8, 1};
    check_orders(ZN_F32, b, 0.0, 0.0, 1e8, 1e8);
    /* fp64, [2^53, 1, 1, ...]: the same shape one precision up */
    double d[MAXW] = {9007199254740992.0, 1, 1, 1, 1, 1};
    check_orders(ZN_F64, d, 9007199254740992.0, NAN, 9007199254740996.0, 9007199254740996.0);
    /* the shared helpers follow the same tree */
    float af[6] = {16777216.0f, 1, 1, 1, 1, 1};
    assert_true(zn_tree_sum_f32(af, 3) == 16777216.0f);
    assert_true(zn_tree_sum_f32(af, 5) == 16777220.0f);
    assert_true(zn_tree_sum_f32(af, 6) == 16777220.0f);
    assert_true(zn_tree_sum_f64(d, 5) == 9007199254740996.0);
    assert_true(zn_tree_sum_f64(d, 6) == 9007199254740996.0);
    assert_true(zn_tree_sum_f32(af, 0) == 0.0f);
}

/* spec: Z-SIM-003 */
static void test_16bit_partials_rounded_every_add(void **state) {
    (void)state;
    /* fp16 [2048, 1, 1, ...], ulp(2048) = 2. W=3: 2048+1 is a tie, rounded
       to 2048 before adding the next 1, giving 2048; accumulating in fp32 and
       rounding once would give 2050. W=5: (2048 + 2) + 1 = 2051, a tie -> 2052. */
    double h[MAXW] = {2048, 1, 1, 1, 1, 1};
    check_orders(ZN_F16, h, 2048.0, 2050.0, 2052.0, 2052.0);
    /* bf16 [256, 1, 1, ...], ulp(256) = 2: the same pattern */
    double g[MAXW] = {256, 1, 1, 1, 1, 1};
    check_orders(ZN_BF16, g, 256.0, 258.0, 260.0, 260.0);
    /* fp16 overflow of a partial is inf, and stays inf */
    double o[MAXW] = {60000, 60000, 1, 1};
    assert_true(isinf(order_result(4, ZN_F16, o)));
}

/* Every 16-bit pattern on rank 0 against a permutation of them on rank 1
 * (and rank 2 for W=3): subnormal, overflowing, infinite and NaN partial sums
 * all go through the simulator's kernels and must match half.h. */
static int rank_all_patterns(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    uint16_t *buf = malloc(65536 * sizeof *buf);
    if (!buf) return zn_err(err, ZN_E_NOMEM, "oom");
    int rc = 0;
    for (int d = 0; d < 2 && !rc; d++)
        for (int op = ZN_SUM; op <= ZN_MAX && !rc; op++) {
            ZnDtype dt = d ? ZN_BF16 : ZN_F16;
            for (uint32_t i = 0; i < 65536; i++) buf[i] = (uint16_t)(i * (2u * (uint32_t)rank + 1) + 977u * (uint32_t)rank);
            rc = c->all_reduce(c, buf, 65536, dt, (ZnRedOp)op, "patterns", err);
            for (uint32_t i = 0; !rc && i < 65536; i++) {
                float x[MAXW];
                for (int q = 0; q < c->world.size; q++)
                    x[q] = to_f32(dt, &(uint16_t){(uint16_t)(i * (2u * (uint32_t)q + 1) + 977u * (uint32_t)q)});
                uint16_t want;
                from_f32(dt, ref_tree_f32(x, c->world.size, dt, (ZnRedOp)op), &want);
                /* a NaN sum is a NaN; which operand's payload survives is up to
                   the compiler (it may swap the operands of a + b) */
                int both_nan = isnan(to_f32(dt, &buf[i])) && isnan(to_f32(dt, &want));
                if (buf[i] != want && !both_nan)
                    rc = bad_elem(err, "all_reduce patterns", dt, rank, (long)i, &buf[i], &want);
            }
        }
    free(buf);
    return rc;
}

/* spec: Z-SIM-003 Z-SIM-012 Z-HALF-003 Z-HALF-004 Z-HALF-005 */
static void test_16bit_special_values_through_reduction(void **state) {
    (void)state;
    run_ok(2, rank_all_patterns, NULL);
    run_ok(3, rank_all_patterns, NULL);
}

/* Rank r contributes v[r] to a max; checks NaN and inf survive. */
typedef struct { float v[MAXW]; float out[MAXW]; } MaxCase;

static int rank_max(int rank, ZnComm *c, void *arg, ZnErr *err) {
    MaxCase *mc = arg;
    float v = mc->v[rank];
    int rc = c->all_reduce(c, &v, 1, ZN_F32, ZN_MAX, "max", err);
    mc->out[rank] = v;
    return rc;
}

/* spec: Z-SIM-012 */
static void test_max_keeps_nan_and_inf(void **state) {
    (void)state;
    for (int pos = 0; pos < 5; pos++) {
        MaxCase mc = {.v = {1, -2, 3, 0.5f, -7}};
        mc.v[pos] = NAN;
        run_ok(5, rank_max, &mc);
        for (int r = 0; r < 5; r++) assert_true(isnan(mc.out[r]));
        MaxCase mi = {.v = {1, -2, 3, 0.5f, -7}};
        mi.v[pos] = INFINITY;
        run_ok(5, rank_max, &mi);
        for (int r = 0; r < 5; r++) assert_true(isinf(mi.out[r]) && mi.out[r] > 0);
    }
}

/* ------------------------------------------------------- determinism */

/* A mixed sequence whose results are folded into a digest per rank. Each
 * rank sleeps a different, varying time before some calls so the threads
 * arrive in a different order on every call and every run. */
static uint64_t fold(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static int rank_mixed(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Ctx *cx = arg;
    uint64_t h = 0xcbf29ce484222325ull;
    long counts[MAXW];
    rs_counts(c->world.size, 2, counts);
    long total = 0, off = 0;
    for (int q = 0; q < c->world.size; q++) {
        if (q == rank) off = total;
        total += counts[q];
    }
    float *a = malloc((size_t)total * sizeof(float));
    uint16_t *b = malloc((size_t)total * sizeof(uint16_t));
    if (!a || !b) { free(a); free(b); return zn_err(err, ZN_E_NOMEM, "oom"); }
    int rc = 0;
    for (int it = 0; it < 6 && !rc; it++) {
        if ((rank + it + cx->arg_i) % 3 == 0) {
            struct timespec ts = {0, 200000L * ((rank * 7 + it + cx->arg_i) % 4)};
            nanosleep(&ts, NULL);
        }
        fill(ZN_F32, a, total, it, rank, 0);
        fill(ZN_BF16, b, total, it + 50, rank, 0);
        rc = c->all_reduce(c, a, total, ZN_F32, ZN_SUM, "a", err);
        if (!rc) rc = c->reduce_scatter(c, b, b + off, counts, ZN_BF16, ZN_SUM, "b", err);
        if (!rc) h = fold(fold(h, a, (size_t)total * 4), b + off, (size_t)counts[rank] * 2);
    }
    free(a);
    free(b);
    cx->digest[rank] = h;
    return rc;
}

/* spec: Z-SIM-007 Z-SIM-001 */
static void test_same_bits_every_run(void **state) {
    (void)state;
    Ctx first = {.world = 5, .arg_i = 0};
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(5);
    assert_int_equal(zn_sim_run(w, rank_mixed, &first, &err), 0);
    for (int rep = 1; rep <= 3; rep++) {
        Ctx again = {.world = 5, .arg_i = rep}; /* different arrival orders */
        assert_int_equal(zn_sim_run(w, rank_mixed, &again, &err), 0);
        assert_memory_equal(again.digest, first.digest, sizeof first.digest);
    }
    zn_sim_world_free(w);
}

/* ------------------------------------------------------ memory ops */

/* A memops that does what the default does (memcpy, the host tree, a
 * private host buffer) and counts, per rank, how often each hook ran; a
 * rank listed in fail_rank has its copies fail. */
typedef struct {
    long ready[MAXW], copy[MAXW], reduce[MAXW], scratch[MAXW];
    void *tiles[MAXW], *buf[MAXW];
    size_t cap[MAXW];
    int fail_rank;
} CountOps;

static int co_ready(void *ctx, int rank, ZnErr *err) {
    (void)err;
    ((CountOps *)ctx)->ready[rank]++;
    return 0;
}
static int co_copy(void *ctx, int rank, void *dst, const void *src, size_t n, ZnErr *err) {
    CountOps *o = ctx;
    o->copy[rank]++;
    if (rank == o->fail_rank) return zn_err(err, ZN_E_INTERNAL, "copy refused on rank %d", rank);
    memcpy(dst, src, n);
    return 0;
}
static int co_reduce(void *ctx, int rank, const void *const *sends, int world, ZnDtype dt, ZnRedOp red,
                     long off, long len, void *out, ZnErr *err) {
    (void)err;
    CountOps *o = ctx;
    o->reduce[rank]++;
    zn_tree_reduce_host(sends, world, dt, red, off, len, out, o->tiles[rank]);
    return 0;
}
static int co_scratch(void *ctx, int rank, size_t n, const void *like, void **out, ZnErr *err) {
    CountOps *o = ctx;
    (void)like;
    o->scratch[rank]++;
    if (n > o->cap[rank]) {
        void *p = realloc(o->buf[rank], n);
        if (!p) return zn_err(err, ZN_E_NOMEM, "oom");
        o->buf[rank] = p;
        o->cap[rank] = n;
    }
    *out = o->buf[rank];
    return 0;
}

/* spec: Z-CUDA-006 Z-SIM-007 */
static void test_memops_hooks_same_bits(void **state) {
    (void)state;
    const int W = 5;
    Ctx ref = {.world = W, .arg_i = 0}, hooked = {.world = W, .arg_i = 1};
    run_ok(W, rank_mixed, &ref);
    CountOps co = {.fail_rank = -1};
    for (int r = 0; r < W; r++) assert_non_null(co.tiles[r] = malloc(zn_tree_tiles_bytes(W)));
    ZnSimMemOps ops = {co_ready, co_copy, co_reduce, co_scratch, &co};
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(W);
    zn_sim_world_set_memops(w, &ops);
    assert_int_equal(zn_sim_run(w, rank_mixed, &hooked, &err), 0);
    assert_memory_equal(hooked.digest, ref.digest, sizeof ref.digest);
    for (int r = 0; r < W; r++) {
        /* 6 rounds of an all_reduce and an in-place reduce_scatter; ranks
           with r % 3 == 1 receive no elements of the reduce_scatter */
        assert_int_equal(co.ready[r], 12);
        assert_int_equal(co.reduce[r], r % 3 == 1 ? 6 : 12);
        assert_int_equal(co.scratch[r], r % 3 == 1 ? 6 : 12);
        assert_true(co.copy[r] >= 6 * W);
    }
    /* a failing copy ends the run with that rank's error, no hang */
    alarm(HANG_LIMIT_S);
    co.fail_rank = 2;
    assert_int_not_equal(zn_sim_run(w, rank_mixed, &hooked, &err), 0);
    assert_str_contains(err.msg, "copy refused on rank 2");
    alarm(0);
    /* NULL restores the host default */
    zn_sim_world_set_memops(w, NULL);
    assert_int_equal(zn_sim_run(w, rank_mixed, &hooked, &err), 0);
    assert_memory_equal(hooked.digest, ref.digest, sizeof ref.digest);
    zn_sim_world_free(w);
    for (int r = 0; r < W; r++) {
        free(co.tiles[r]);
        free(co.buf[r]);
    }
}

/* ------------------------------------------------------------- stats */

/* spec: Z-SIM-004 */
static void test_ring_bytes_hand_values(void **state) {
    (void)state;
    long s, r;
    /* all_reduce of 10 fp32 over 4 ranks: pieces 3,3,2,2 */
    zn_comm_ring_bytes(ZN_OP_ALL_REDUCE, 0, 4, NULL, 10, 0, ZN_F32, &s, &r);
    assert_int_equal(s, 2 * 7 * 4);
    assert_int_equal(r, 2 * 7 * 4);
    zn_comm_ring_bytes(ZN_OP_ALL_REDUCE, 3, 4, NULL, 10, 0, ZN_F32, &s, &r);
    assert_int_equal(s, 2 * 8 * 4);
    /* reduce_scatter / all_gather with all counts = c: (W-1) * c * size */
    long c64[4] = {64, 64, 64, 64};
    for (int rank = 0; rank < 4; rank++) {
        zn_comm_ring_bytes(ZN_OP_REDUCE_SCATTER, rank, 4, c64, 0, 0, ZN_F32, &s, &r);
        assert_int_equal(s, 3 * 64 * 4);
        assert_int_equal(r, 3 * 64 * 4);
        zn_comm_ring_bytes(ZN_OP_ALL_GATHER, rank, 4, c64, 0, 0, ZN_BF16, &s, &r);
        assert_int_equal(s, 3 * 64 * 2);
    }
    long un[3] = {5, 0, 2};
    zn_comm_ring_bytes(ZN_OP_ALL_GATHER, 1, 3, un, 0, 0, ZN_F64, &s, &r);
    assert_int_equal(s, 7 * 8);
    zn_comm_ring_bytes(ZN_OP_REDUCE_SCATTER, 0, 3, un, 0, 0, ZN_F16, &s, &r);
    assert_int_equal(r, 2 * 2);
    /* broadcast of 100 u8 from root 2 in a chain 2 -> 3 -> 0 -> 1 */
    zn_comm_ring_bytes(ZN_OP_BROADCAST, 2, 4, NULL, 100, 2, ZN_U8, &s, &r);
    assert_int_equal(s, 100);
    assert_int_equal(r, 0);
    zn_comm_ring_bytes(ZN_OP_BROADCAST, 1, 4, NULL, 100, 2, ZN_U8, &s, &r);
    assert_int_equal(s, 0);
    assert_int_equal(r, 100);
    zn_comm_ring_bytes(ZN_OP_BROADCAST, 3, 4, NULL, 100, 2, ZN_U8, &s, &r);
    assert_int_equal(s, 100);
    assert_int_equal(r, 100);
    zn_comm_ring_bytes(ZN_OP_BARRIER, 1, 4, NULL, 100, 0, ZN_F32, &s, &r);
    assert_int_equal(s + r, 0);
    /* one rank moves nothing */
    zn_comm_ring_bytes(ZN_OP_ALL_REDUCE, 0, 1, NULL, 10, 0, ZN_F32, &s, &r);
    assert_int_equal(s + r, 0);
    zn_comm_ring_bytes(ZN_OP_BROADCAST, 0, 1, NULL, 10, 0, ZN_F32, &s, &r);
    assert_int_equal(s + r, 0);
    /* summed over ranks, all_reduce moves 2 n (N-1) elements: ZeRO's 2Ψ(N-1)/N per rank */
    long tot = 0;
    for (int rank = 0; rank < 8; rank++) {
        zn_comm_ring_bytes(ZN_OP_ALL_REDUCE, rank, 8, NULL, 1000, 0, ZN_F32, &s, &r);
        tot += s;
    }
    assert_int_equal(tot, 2L * 1000 * 7 * 4);
}

static int rank_tagged(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    float x[8] = {0};
    long counts[MAXW];
    for (int q = 0; q < c->world.size; q++) counts[q] = 2;
    char tag[32];
    int rc = 0;
    for (int i = 0; i < 30 && !rc; i++) { /* 30 distinct tags: more than fit */
        snprintf(tag, sizeof tag, "tag%02d", i);
        rc = c->all_reduce(c, x, 8, ZN_F32, ZN_SUM, tag, err);
    }
    for (int i = 0; i < 3 && !rc; i++) rc = c->reduce_scatter(c, x, x + 2 * rank, counts, ZN_F32, ZN_SUM, "tag00", err);
    if (!rc) rc = c->barrier(c, NULL, err);
    return rc;
}

/* spec: Z-SIM-005 */
static void test_stats_per_op_and_tag(void **state) {
    (void)state;
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(4);
    assert_int_equal(zn_sim_run(w, rank_tagged, NULL, &err), 0);
    for (int r = 0; r < 4; r++) {
        ZnComm *c = zn_sim_comm(w, r);
        const ZnCommStats *s = &c->stats;
        assert_int_equal(s->calls[ZN_OP_ALL_REDUCE], 30);
        assert_int_equal(s->calls[ZN_OP_REDUCE_SCATTER], 3);
        assert_int_equal(s->calls[ZN_OP_BARRIER], 1);
        assert_int_equal(s->bytes_sent[ZN_OP_ALL_REDUCE], 30 * 2 * 6 * 4); /* 8 over 4: pieces of 2 */
        assert_int_equal(s->bytes_sent[ZN_OP_REDUCE_SCATTER], 3 * 3 * 2 * 4);
        assert_int_equal(s->ntags, ZN_COMM_MAX_TAGS);
        long calls, sent, recv, sum_calls = 0, sum_sent = 0;
        zn_comm_tag_totals(s, "tag00", &calls, &sent, &recv);
        assert_int_equal(calls, 4);
        assert_int_equal(sent, 2 * 6 * 4 + 3 * 3 * 2 * 4);
        /* 23 named tags fit (tag00..tag22); the last slot is "other" */
        zn_comm_tag_totals(s, "tag22", &calls, NULL, NULL);
        assert_int_equal(calls, 1);
        zn_comm_tag_totals(s, "tag23", &calls, NULL, NULL);
        assert_int_equal(calls, 0);
        zn_comm_tag_totals(s, "other", &calls, NULL, NULL);
        assert_int_equal(calls, 7 + 1); /* tag23..tag29 and the untagged barrier */
        for (int i = 0; i < s->ntags; i++) {
            sum_calls += s->tags[i].calls;
            sum_sent += s->tags[i].bytes_sent;
        }
        assert_int_equal(sum_calls, 34);
        assert_int_equal(sum_sent, s->bytes_sent[ZN_OP_ALL_REDUCE] + s->bytes_sent[ZN_OP_REDUCE_SCATTER]);
        zn_comm_tag_totals(s, "never", &calls, &sent, &recv);
        assert_int_equal(calls + sent + recv, 0);
    }
    /* stats persist across runs until reset */
    assert_int_equal(zn_sim_run(w, rank_tagged, NULL, &err), 0);
    assert_int_equal(zn_sim_comm(w, 0)->stats.calls[ZN_OP_ALL_REDUCE], 60);
    zn_comm_stats_reset(&zn_sim_comm(w, 0)->stats);
    assert_int_equal(zn_sim_comm(w, 0)->stats.calls[ZN_OP_ALL_REDUCE], 0);
    assert_int_equal(zn_sim_comm(w, 0)->stats.ntags, 0);
    zn_sim_world_free(w);
}

/* ---------------------------------------------------- sequence check */

/* arg_i selects the disagreement; each rank records what it got back. */
static int rank_mismatch(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Ctx *cx = arg;
    float buf[4096] = {0}, piece[1100] = {0};
    long counts[MAXW], odd[MAXW];
    for (int q = 0; q < c->world.size; q++) counts[q] = odd[q] = 4096 / c->world.size;
    odd[0] += 1;
    odd[1] -= 1;
    int rc = c->barrier(c, "start", err);
    if (!rc) {
        switch (cx->arg_i) {
        case 0: /* different ops */
            if (rank == 1) rc = c->reduce_scatter(c, buf, piece, counts, ZN_F32, ZN_SUM, "grad_reduce", err);
            else rc = c->all_gather(c, piece, buf, counts, ZN_F32, "param_gather", err);
            break;
        case 1: /* different counts, same total */
            rc = c->all_gather(c, piece, buf, rank == 2 ? odd : counts, ZN_F32, "param_gather", err);
            break;
        case 2: /* different all_reduce lengths */
            rc = c->all_reduce(c, buf, rank == 2 ? 10 : 12, ZN_F32, ZN_SUM, "norm", err);
            break;
        case 3: /* different broadcast roots */
            rc = c->broadcast(c, buf, 5, ZN_F32, rank == 1 ? 1 : 0, "bcast", err);
            break;
        default: /* different tags */
            rc = c->barrier(c, rank == 2 ? "b" : "a", err);
            break;
        }
    }
    cx->rc[rank] = rc;
    snprintf(cx->msg[rank], sizeof cx->msg[rank], "%s", rc ? err->msg : "");
    /* the world is broken now: a later call fails at once, without a hang */
    if (rc && c->barrier(c, "after", err) == 0) return zn_err(err, ZN_E_INTERNAL, "call after mismatch succeeded");
    return rc;
}

static void mismatch_case(int kind, int world, const char *want) {
    alarm(HANG_LIMIT_S);
    Ctx cx = {.world = world, .arg_i = kind};
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(world);
    int rc = zn_sim_run(w, rank_mismatch, &cx, &err);
    assert_int_equal(rc, ZN_E_COMM);
    char prefixed[1100];
    snprintf(prefixed, sizeof prefixed, "rank 0: %s", want);
    assert_string_equal(err.msg, prefixed);
    ranks_failed(&cx, -1, want);
    /* the same world runs again after the failure */
    Ctx ok = {.world = world};
    assert_int_equal(zn_sim_run(w, rank_broadcast, &ok, &err), 0);
    zn_sim_world_free(w);
    alarm(0);
}

/* spec: Z-SIM-006 Z-SIM-009 */
static void test_sequence_mismatch_detected(void **state) {
    (void)state;
    mismatch_case(0, 4,
                  "collective mismatch at call #2: rank 0 all_gather fp32 n=4096 'param_gather' "
                  "vs rank 1 reduce_scatter fp32 n=4096 'grad_reduce'");
    mismatch_case(1, 4,
                  "collective mismatch at call #2: rank 0 all_gather fp32 n=4096 counts=[1024,1024,1024,1024] "
                  "'param_gather' vs rank 2 all_gather fp32 n=4096 counts=[1025,1023,1024,1024] 'param_gather'");
    mismatch_case(2, 3,
                  "collective mismatch at call #2: rank 0 all_reduce fp32 n=12 'norm' "
                  "vs rank 2 all_reduce fp32 n=10 'norm'");
    mismatch_case(3, 3,
                  "collective mismatch at call #2: rank 0 broadcast fp32 n=5 root=0 'bcast' "
                  "vs rank 1 broadcast fp32 n=5 root=1 'bcast'");
    mismatch_case(4, 3, "collective mismatch at call #2: rank 0 barrier 'a' vs rank 2 barrier 'b'");
}

/* ---------------------------------------------------- failure propagation */

/* arg_i: 0 = rank 2 fails before anyone enters (others find it on entry);
 *        1 = rank 2 fails while the others already wait in the collective. */
static int rank_fail(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Ctx *cx = arg;
    float x[3] = {1, 2, 3};
    int rc = c->all_reduce(c, x, 3, ZN_F32, ZN_SUM, "warmup", err);
    if (rc) return rc;
    if (rank == 2) {
        if (cx->arg_i == 1) {
            struct timespec ts = {0, 50 * 1000000L};
            nanosleep(&ts, NULL);
        }
        return zn_err(err, ZN_E_NUMERIC, "loss scale at its minimum");
    }
    if (cx->arg_i == 0) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    rc = c->all_reduce(c, x, 3, ZN_F32, ZN_SUM, "grads", err);
    cx->rc[rank] = rc;
    snprintf(cx->msg[rank], sizeof cx->msg[rank], "%s", rc ? err->msg : "");
    /* a later call fails too, immediately */
    if (rc && c->barrier(c, "later", err) == 0) return zn_err(err, ZN_E_INTERNAL, "later call succeeded");
    return rc;
}

/* spec: Z-SIM-008 */
static void test_failing_rank_propagates(void **state) {
    (void)state;
    for (int kind = 0; kind <= 1; kind++) {
        Ctx cx = {.world = 4, .arg_i = kind};
        ZnErr err;
        assert_int_equal(run_ctx(&cx, rank_fail, &err), ZN_E_NUMERIC); /* the first-hand error, not the echoes */
        assert_string_equal(err.msg, "rank 2: loss scale at its minimum");
        ranks_failed(&cx, 2, "rank 2 failed: loss scale at its minimum");
    }
}

/* Ranks 1 and 3 fail first-hand; the result names the lowest. */
static int rank_two_fail(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    if (rank == 3) return zn_err(err, ZN_E_IO, "disk full");
    if (rank == 1) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        return zn_err(err, ZN_E_CORRUPT, "bad checkpoint");
    }
    return c->barrier(c, "x", err);
}

/* A rank that fails without a message still gets one. */
static int rank_fail_silent(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    if (rank == 1) return 42;
    return c->barrier(c, "x", err);
}

/* spec: Z-SIM-008 */
static void test_lowest_first_hand_failure_reported(void **state) {
    (void)state;
    alarm(HANG_LIMIT_S);
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(4);
    assert_int_equal(zn_sim_run(w, rank_two_fail, NULL, &err), ZN_E_CORRUPT);
    assert_string_equal(err.msg, "rank 1: bad checkpoint");
    assert_int_equal(zn_sim_run(w, rank_fail_silent, NULL, &err), 42);
    assert_string_equal(err.msg, "rank 1: returned error 42 without a message");
    zn_sim_world_free(w);
    alarm(0);
}

/* Rank 1 returns 0 after two collectives; the others call a third. arg_i = 1:
 * the others swallow the error and return 0 as well. Rank 2 comes late, so
 * it finds rank 0 finished too: rank 0 joined the call, so it is not blamed. */
static int rank_early_exit(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Ctx *cx = arg;
    float x = 1;
    int rc = c->all_reduce(c, &x, 1, ZN_F32, ZN_SUM, "grads", err);
    if (!rc) rc = c->barrier(c, "step", err);
    if (rc || rank == 1) return rc;
    if (rank == 2) { /* let rank 0 meet the error and return first */
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    rc = c->all_reduce(c, &x, 1, ZN_F32, ZN_SUM, "loss", err);
    cx->rc[rank] = rc;
    snprintf(cx->msg[rank], sizeof cx->msg[rank], "%s", rc ? err->msg : "");
    return cx->arg_i == 1 ? 0 : rc;
}

/* spec: Z-SIM-009 */
static void test_rank_exiting_early_is_reported(void **state) {
    (void)state;
    for (int swallow = 0; swallow <= 1; swallow++) {
        Ctx cx = {.world = 3, .arg_i = swallow};
        ZnErr err;
        const char *want = "rank 1 exited before joining all_reduce 'loss' (call #3)";
        assert_int_equal(run_ctx(&cx, rank_early_exit, &err), ZN_E_COMM);
        ranks_failed(&cx, 1, want);
        assert_str_contains(err.msg, want);
        assert_true(strncmp(err.msg, "rank 0: ", 8) == 0 || strncmp(err.msg, "rank 2: ", 8) == 0);
    }
}

/* ------------------------------------------------------- stress, world 1 */

/* 2000 back-to-back collectives of small integer-valued data (exact in any
 * order), checked as they go. */
static int rank_stress(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    int W = c->world.size;
    long counts[MAXW];
    for (int q = 0; q < W; q++) counts[q] = 1 + (q & 1);
    float buf[64];
    for (int it = 0; it < 2000; it++) {
        int rc = 0, op = it % 5;
        long n = 1 + it % 7;
        for (int i = 0; i < 64; i++) buf[i] = (float)(rank + i + it % 3);
        if (op == 0) {
            rc = c->all_reduce(c, buf, n, ZN_F32, ZN_SUM, "s", err);
            for (long i = 0; !rc && i < n; i++)
                if (buf[i] != (float)(W * (W - 1) / 2 + W * (i + it % 3)))
                    rc = zn_err(err, ZN_E_INTERNAL, "it %d all_reduce elem %ld = %g", it, i, buf[i]);
        } else if (op == 1) {
            rc = c->reduce_scatter(c, buf, buf + 32, counts, ZN_F32, ZN_MAX, "s", err);
            long off = 0;
            for (int q = 0; q < rank; q++) off += counts[q];
            for (long i = 0; !rc && i < counts[rank]; i++)
                if (buf[32 + i] != (float)(W - 1 + off + i + it % 3))
                    rc = zn_err(err, ZN_E_INTERNAL, "it %d reduce_scatter elem %ld", it, i);
        } else if (op == 2) {
            long off = 0;
            for (int q = 0; q < rank; q++) off += counts[q];
            rc = c->all_gather(c, buf + off, buf, counts, ZN_F32, "s", err);
            long qoff = 0;
            for (int q = 0; !rc && q < W; q++)
                for (long i = 0; !rc && i < counts[q]; i++, qoff++)
                    if (buf[qoff] != (float)(q + qoff + it % 3))
                        rc = zn_err(err, ZN_E_INTERNAL, "it %d all_gather elem %ld", it, qoff);
        } else if (op == 3) {
            int root = it % W;
            rc = c->broadcast(c, buf, n, ZN_F32, root, "s", err);
            for (long i = 0; !rc && i < n; i++)
                if (buf[i] != (float)(root + i + it % 3)) rc = zn_err(err, ZN_E_INTERNAL, "it %d broadcast", it);
        } else {
            rc = c->barrier(c, "s", err);
        }
        if (rc) return rc;
    }
    return 0;
}

/* spec: Z-SIM-007 Z-SIM-010 Z-SIM-011 */
static void test_many_back_to_back_collectives(void **state) {
    (void)state;
    alarm(HANG_LIMIT_S);
    run_ok(4, rank_stress, NULL);
    run_ok(3, rank_stress, NULL);
    alarm(0);
}

static int rank_world1(int rank, ZnComm *c, void *arg, ZnErr *err) {
    pthread_t *caller = arg;
    if (rank != 0 || c->world.size != 1) return zn_err(err, ZN_E_INTERNAL, "bad rank/world");
    if (!pthread_equal(pthread_self(), *caller)) return zn_err(err, ZN_E_INTERNAL, "not the calling thread");
    return 0;
}

/* spec: Z-SIM-001 Z-SIM-011 */
static void test_world1_shortcuts(void **state) {
    (void)state;
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(1);
    pthread_t self = pthread_self();
    assert_int_equal(zn_sim_run(w, rank_world1, &self, &err), 0);
    /* a world of one can also be driven straight from the caller */
    ZnComm *c = zn_sim_comm(w, 0);
    float x[5] = {1.5f, -2, 3, 4, 5}, y[5] = {0};
    long counts[1] = {5};
    assert_int_equal(c->all_reduce(c, x, 5, ZN_F32, ZN_SUM, "t", &err), 0);
    assert_true(x[0] == 1.5f && x[1] == -2);
    assert_int_equal(c->reduce_scatter(c, x, y, counts, ZN_F32, ZN_SUM, "t", &err), 0);
    assert_memory_equal(x, y, sizeof x);
    memset(y, 0, sizeof y);
    assert_int_equal(c->all_gather(c, x, y, counts, ZN_F32, "t", &err), 0);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(c->reduce_scatter(c, x, x, counts, ZN_F32, ZN_SUM, "t", &err), 0); /* in place */
    assert_int_equal(c->broadcast(c, x, 5, ZN_F32, 0, "t", &err), 0);
    assert_int_equal(c->barrier(c, "t", &err), 0);
    assert_int_equal(c->stats.calls[ZN_OP_REDUCE_SCATTER], 2);
    assert_int_equal(c->stats.bytes_sent[ZN_OP_ALL_REDUCE] + c->stats.bytes_recv[ZN_OP_BROADCAST], 0);
    assert_int_equal(c->broadcast(c, x, 5, ZN_F32, 1, "t", &err), ZN_E_USAGE);
    zn_sim_world_free(w);
}

/* ------------------------------------------------ validation and misuse */

/* spec: Z-SIM-001 Z-SIM-013 */
static void test_world_new_validates(void **state) {
    (void)state;
    ZnErr err = {0};
    assert_null(zn_sim_world_new(0, &err));
    assert_int_equal(err.code, ZN_E_USAGE);
    assert_str_contains(err.msg, "out of range");
    assert_null(zn_sim_world_new(-3, &err));
    assert_null(zn_sim_world_new(4097, &err));
    assert_null(zn_sim_world_new(0, NULL)); /* a NULL err is allowed */
    ZnSimWorld *w = zt_sim_world(4096);
    assert_null(zn_sim_comm(w, 4096));
    assert_null(zn_sim_comm(w, -1));
    assert_int_equal(zn_sim_comm(w, 4095)->world.rank, 4095);
    assert_int_equal(zn_sim_comm(w, 4095)->world.size, 4096);
    assert_int_equal(zn_sim_comm(w, 4095)->world.per_node, 4096);   /* one node */
    zn_sim_world_free(w);
    zn_sim_world_free(NULL);
    assert_int_equal(zn_sim_run(NULL, rank_world1, NULL, &err), ZN_E_USAGE);
}

/* Every rank makes the same bad call; each must get ZN_E_USAGE locally. */
static int rank_bad_args(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    uint64_t u[8] = {0};
    float f[8] = {0};
    long counts[2] = {2, 2}, neg[2] = {2, -1};
    struct { int rc; const char *needle; } r[8];
    int k = 0;
    r[k].rc = c->all_reduce(c, u, 8, ZN_U64, ZN_SUM, "u", err), r[k++].needle = "cannot be reduced";
    r[k].rc = c->reduce_scatter(c, u, u, counts, ZN_U8, ZN_SUM, "u", err), r[k++].needle = "cannot be reduced";
    r[k].rc = c->all_reduce(c, f, 8, ZN_F32, (ZnRedOp)7, "u", err), r[k++].needle = "unknown reduction";
    r[k].rc = c->broadcast(c, f, 8, ZN_F32, 2, "u", err), r[k++].needle = "root 2";
    r[k].rc = c->all_gather(c, f, f, neg, ZN_F32, "u", err), r[k++].needle = "negative";
    r[k].rc = c->all_gather(c, f + 1, f, counts, ZN_F32, "u", err), r[k++].needle = "overlap";
    r[k].rc = c->all_reduce(c, NULL, 3, ZN_F32, ZN_SUM, "u", err), r[k++].needle = "NULL";
    r[k].rc = c->all_gather(c, f, f, NULL, ZN_F32, "u", err), r[k++].needle = "counts is NULL";
    (void)r[0].needle;
    for (int i = 0; i < k; i++)
        if (r[i].rc != ZN_E_USAGE) return zn_err(err, ZN_E_INTERNAL, "rank %d case %d: rc %d", rank, i, r[i].rc);
    /* the world still works afterwards: bad calls never posted */
    return c->all_gather(c, f + 2 * rank, f, counts, ZN_F32, "ok", err);
}

/* spec: Z-SIM-013 Z-SIM-010 */
static void test_bad_arguments_rejected(void **state) {
    (void)state;
    alarm(HANG_LIMIT_S);
    run_ok(2, rank_bad_args, NULL);
    /* a collective outside zn_sim_run cannot rendezvous: error, no hang */
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(2);
    ZnComm *c = zn_sim_comm(w, 0);
    assert_int_equal(c->barrier(c, "lonely", &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "outside zn_sim_run");
    zn_sim_world_free(w);
    alarm(0);
}

static int rank_nested(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)c;
    if (rank == 0) return zn_sim_run(arg, rank_world1, NULL, err);
    return 0;
}

/* spec: Z-SIM-001 */
static void test_nested_run_refused(void **state) {
    (void)state;
    ZnErr err = {0};
    ZnSimWorld *w = zt_sim_world(2);
    assert_int_equal(zn_sim_run(w, rank_nested, w, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "already running");
    zn_sim_world_free(w);
}

ZT_MAIN(
    cmocka_unit_test(test_all_reduce_matches_tree),
    cmocka_unit_test(test_reduce_scatter_uneven_matches_tree),
    cmocka_unit_test(test_all_gather_uneven),
    cmocka_unit_test(test_broadcast_from_each_root),
    cmocka_unit_test(test_tree_order_exact_values),
    cmocka_unit_test(test_16bit_partials_rounded_every_add),
    cmocka_unit_test(test_16bit_special_values_through_reduction),
    cmocka_unit_test(test_max_keeps_nan_and_inf),
    cmocka_unit_test(test_same_bits_every_run),
    cmocka_unit_test(test_memops_hooks_same_bits),
    cmocka_unit_test(test_ring_bytes_hand_values),
    cmocka_unit_test(test_stats_per_op_and_tag),
    cmocka_unit_test(test_sequence_mismatch_detected),
    cmocka_unit_test(test_failing_rank_propagates),
    cmocka_unit_test(test_lowest_first_hand_failure_reported),
    cmocka_unit_test(test_rank_exiting_early_is_reported),
    cmocka_unit_test(test_many_back_to_back_collectives),
    cmocka_unit_test(test_world1_shortcuts),
    cmocka_unit_test(test_world_new_validates),
    cmocka_unit_test(test_bad_arguments_rejected),
    cmocka_unit_test(test_nested_run_refused))
