/* test_estimate.c: `zinc estimate` -- DeepSpeed's estimators against values
 * worked out by hand from deepspeed/runtime/zero/stage_1_and_2.py and
 * stage3.py (DeepSpeed 0.19.6), their printed tables line for line, the ZeRO
 * paper's Figure 1 and Table 1, the --model path and the flag errors. */
#include "testutil.h"
#include <limits.h>
#include "app/cli_estimate.h"

#define T0_3B 2851000000LL   /* bigscience/T0_3B as DeepSpeed's docs round it: 2851e6 */
#define T0_3B_LAYER 32000000LL

/* ------------------------------------------------------------------------ */
/* capture: run the subcommand in-process with stdout/stderr in memory */

typedef struct {
    int rc;
    ZnErr err;
    char *out, *note;
    size_t out_len, note_len;
} Run;

static Run run_args(int argc, char **argv) {
    Run r;
    memset(&r, 0, sizeof r);
    FILE *out = open_memstream(&r.out, &r.out_len);
    FILE *note = open_memstream(&r.note, &r.note_len);
    assert_non_null(out);
    assert_non_null(note);
    r.rc = zn_est_run(argc, argv, out, note, &r.err);
    fclose(out);
    fclose(note);
    return r;
}
/* RUN(r, "--flag", "value", ...): r = the run of those flags */
#define RUN(r, ...)                                                             \
    do {                                                                        \
        char *a_[] = {__VA_ARGS__};                                             \
        (r) = run_args((int)(sizeof a_ / sizeof a_[0]), a_);                    \
    } while (0)
static void run_free(Run *r) {
    free(r->out);
    free(r->note);
}

static void assert_est(ZnEst e, long long cpu, long long gpu) {
    assert_int_equal(e.cpu, cpu);
    assert_int_equal(e.gpu, gpu);
}

/* ------------------------------------------------------------------------ */
/* DeepSpeed's stage 2 estimator */

/* spec: Z-EST-001 */
static void test_zero2_values(void **state) {
    (void)state;
    /* 1 node x 1 GPU. Offload: GPU 2P; CPU P*max(4*1,16)*1.5 = 24P.
       No offload: GPU 2P + int(18P/1) = 20P; CPU P*4*1*1.5 = 6P. */
    assert_est(zn_est_zero2(T0_3B, 1, 1, 1, 1.5), 68424000000LL, 5702000000LL);
    assert_est(zn_est_zero2(T0_3B, 1, 1, 0, 1.5), 17106000000LL, 57020000000LL);
    /* 1 node x 8 GPUs (DeepSpeed's docs example): max(32,16) -> 48P;
       18P/8 = 6414750000 exactly; CPU no offload 4*8*1.5 = 48P */
    assert_est(zn_est_zero2(T0_3B, 8, 1, 1, 1.5), 136848000000LL, 5702000000LL);
    assert_est(zn_est_zero2(T0_3B, 8, 1, 0, 1.5), 136848000000LL, 12116750000LL);
    /* 4 nodes x 8 GPUs: 32 GPUs, max(128,16)*1.5 = 192P; 18P/32 = 1603687500;
       CPU no offload counts GPUs per node only: 48P */
    assert_est(zn_est_zero2(T0_3B, 8, 4, 1, 1.5), 547392000000LL, 5702000000LL);
    assert_est(zn_est_zero2(T0_3B, 8, 4, 0, 1.5), 136848000000LL, 7305687500LL);
    /* 2 GPUs: max(8,16) keeps the floor of 16 bytes a param: 16*1.5 = 24P */
    assert_est(zn_est_zero2(1000, 2, 1, 1, 1.5), 24000, 2000);
    /* int() truncation: 18*1/7 = 2.57 -> 2, so GPU = 2 + 2 */
    assert_est(zn_est_zero2(1, 7, 1, 0, 1.5), 42, 4);
    /* the factor scales the CPU column only */
    assert_est(zn_est_zero2(1000, 1, 1, 1, 1.0), 16000, 2000);
}

/* ------------------------------------------------------------------------ */
/* DeepSpeed's stage 3 estimator */

/* DeepSpeed's stage 3 estimates for T0_3B (its largest layer T0_3B_LAYER)
   with the factor 1.5, by the machine (GPUs per node, nodes), what is
   offloaded and zero_init: the CPU and GPU bytes worked out by hand */
static const struct {
    int gpn, nodes, cpu_offload, cpu_offload_params, zero_init;
    long long cpu, gpu;
} Z3[] = {
    /* 1 GPU: gpus_factor = 1/1 = 1.0; largest_layer_memory = 4L = 128e6.
     * params + optimizer offloaded: GPU 4L; CPU 18P*1.5 (zero_init) or
     * P*max(4, 18.0)*1.5 = the same 27P */
    {1, 1, 1, 1, 1, 76977000000LL, 128000000LL},
    {1, 1, 1, 1, 0, 76977000000LL, 128000000LL},
    /* optimizer only: GPU 4L + int(2P/1); CPU 16P*1.5 = 24P either way */
    {1, 1, 1, 0, 1, 68424000000LL, 5830000000LL},
    {1, 1, 1, 0, 0, 68424000000LL, 5830000000LL},
    /* no offload: GPU 4L + 18P; CPU 4L*1*1.5 (zero_init) or 4P*1.5 */
    {1, 1, 0, 0, 1, 192000000LL, 51446000000LL},
    {1, 1, 0, 0, 0, 17106000000LL, 51446000000LL},
    /* 4 nodes x 8 GPUs: gpus_factor 0.25, 32 GPUs. Full offload: CPU
     * 18P*0.25*1.5 = 6.75P; without zero_init max(4*8, 18*0.25) = 32 -> 48P */
    {8, 4, 1, 1, 1, 19244250000LL, 128000000LL},
    {8, 4, 1, 1, 0, 136848000000LL, 128000000LL},
    /* optimizer only: GPU 4L + int(2P/32) = 128e6 + 178187500 */
    {8, 4, 1, 0, 1, 17106000000LL, 306187500LL},
    {8, 4, 1, 0, 0, 136848000000LL, 306187500LL},
    /* no offload: GPU 4L + int(18P/32); CPU zero_init 4L*8*1.5 = 1536e6 */
    {8, 4, 0, 0, 1, 1536000000LL, 1731687500LL},
    {8, 4, 0, 0, 0, 136848000000LL, 1731687500LL},
    /* the stage 3 'offload params without the optimizer' combination is
     * still computed by the function (the table skips it): as full offload */
    {8, 4, 0, 1, 1, 1536000000LL, 1731687500LL},
    /* DeepSpeed's docs example (1 node, 8 GPUs): 71.69 / 127.45 / 63.72 /
     * 127.45 / 1.43 / 127.45 GB CPU and 0.12 / 0.78 / 6.09 GB GPU */
    {8, 1, 1, 1, 1, 76977000000LL, 128000000LL},
    {8, 1, 1, 1, 0, 136848000000LL, 128000000LL},
    {8, 1, 1, 0, 1, 68424000000LL, 840750000LL},
    {8, 1, 0, 0, 1, 1536000000LL, 6542750000LL},
};

/* the Z3 cases of the machine gpn x nodes (there are n) */
static void check_zero3(int gpn, int nodes, int n) {
    int seen = 0;
    for (size_t i = 0; i < sizeof Z3 / sizeof Z3[0]; i++) {
        if (Z3[i].gpn != gpn || Z3[i].nodes != nodes) continue;
        assert_est(zn_est_zero3(T0_3B, T0_3B_LAYER, gpn, nodes, Z3[i].cpu_offload, Z3[i].cpu_offload_params,
                                Z3[i].zero_init, 1.5),
                   Z3[i].cpu, Z3[i].gpu);
        seen++;
    }
    assert_int_equal(seen, n);
}

/* spec: Z-EST-002 */
static void test_zero3_values_1gpu(void **state) {
    (void)state;
    check_zero3(1, 1, 6);
}

/* spec: Z-EST-002 */
static void test_zero3_values_4x8(void **state) {
    (void)state;
    check_zero3(8, 4, 7);
}

/* spec: Z-EST-002 */
static void test_zero3_values_8x1(void **state) {
    (void)state;
    check_zero3(8, 1, 4);
}

/* spec: Z-EST-003 */
static void test_python_float_semantics(void **state) {
    (void)state;
    /* 1/3 is a float: P*16*(1/3)*1.5 for P = 7 is 55.99999999999999 in
       CPython, and int() makes it 55, one byte below the exact 56 */
    assert_int_equal(zn_est_zero3(7, 0, 1, 3, 1, 0, 1, 1.5).cpu, 55);
    assert_int_equal(zn_est_zero3(7, 0, 1, 6, 1, 0, 1, 1.5).cpu, 27);
    /* 18*(1/3) rounds to exactly 6.0: P*6*1.5 = 63 for P = 7 */
    assert_int_equal(zn_est_zero3(7, 0, 1, 3, 1, 1, 1, 1.5).cpu, 63);
    /* max(int, float): 4*1 < 18.0 picks the float; 4*8 = 32 > 18 picks the int */
    assert_int_equal(zn_est_zero3(10, 0, 1, 1, 1, 1, 0, 1.5).cpu, 270);
    assert_int_equal(zn_est_zero3(10, 0, 8, 1, 1, 1, 0, 1.5).cpu, 480);
    /* a factor that is not exact in binary: 1000*16*1.1 = 17600.000000000004 -> 17600 */
    assert_int_equal(zn_est_zero2(1000, 1, 1, 1, 1.1).cpu, 17600);
    /* the largest accepted count stays exact: 18*10^14 < 2^53 */
    ZnEst e = zn_est_zero2(ZN_EST_MAX_PARAMS, 1, 1, 0, 1.5);
    assert_int_equal(e.gpu, 2000000000000000LL);
    assert_int_equal(e.cpu, 600000000000000LL);
    /* past 2^63 bytes: clamped, never undefined */
    e = zn_est_zero2(ZN_EST_MAX_PARAMS, 1024, 1024, 1, 1.5);
    assert_int_equal(e.cpu, LLONG_MAX);
    /* outside the domain: -1, -1 */
    assert_est(zn_est_zero2(-1, 1, 1, 1, 1.5), -1, -1);
    assert_est(zn_est_zero2(ZN_EST_MAX_PARAMS + 1, 1, 1, 1, 1.5), -1, -1);
    assert_est(zn_est_zero2(10, 0, 1, 1, 1.5), -1, -1);
    assert_est(zn_est_zero2(10, 1024, 1025, 1, 1.5), -1, -1);
    assert_est(zn_est_zero3(10, 1, 1, 1, 1, 1, 1, NAN), -1, -1);
    assert_est(zn_est_zero3(10, 1, 1, 0, 1, 1, 1, 1.5), -1, -1);
}

/* ------------------------------------------------------------------------ */
/* the printed tables */

static char *print2(long long P, int g, int n, int rows) {
    FILE *f = tmpfile();
    assert_non_null(f);
    zn_est_print_zero2(f, P, g, n, 1.5, rows);
    return zt_slurp(f, NULL);
}
static char *print3(long long P, long long L, int g, int n, int rows) {
    FILE *f = tmpfile();
    assert_non_null(f);
    zn_est_print_zero3(f, P, L, g, n, 1.5, rows);
    return zt_slurp(f, NULL);
}

/* spec: Z-EST-004 */
static void test_table_text_zero2(void **state) {
    (void)state;
    /* what DeepSpeed 0.19.6 prints on Python >= 3.11 for
       estimate_zero2_model_states_mem_needs_all_cold(2851e6, 8, 1) */
    char *t = print2(T0_3B, 8, 1, ZN_EST_ROWS_ALL);
    assert_string_equal(t,
        "Estimated memory needed for params, optim states and gradients for a:\n"
        "HW: Setup with 1 node, 8 GPUs per node.\n"
        "SW: Model with 2851M total params.\n"
        "  per CPU  |  per GPU |   Options\n"
        "  127.45GB |   5.31GB | offload_optimizer=OffloadDeviceEnum.cpu\n"
        "  127.45GB |  11.28GB | offload_optimizer=none\n");
    free(t);
    /* singular words for one node / one GPU, plural for more */
    t = print2(T0_3B, 1, 1, ZN_EST_ROWS_ALL);
    assert_str_contains(t, "HW: Setup with 1 node, 1 GPU per node.\n");
    free(t);
    t = print2(T0_3B, 8, 4, ZN_EST_ROWS_ALL);
    assert_str_contains(t, "HW: Setup with 4 nodes, 8 GPUs per node.\n");
    /* 547392000000 / 2^30 = 509.7975 */
    assert_str_contains(t, "  509.80GB |   5.31GB | offload_optimizer=OffloadDeviceEnum.cpu\n");
    free(t);
    /* wider numbers widen the columns, as Python's {:7.2f} does */
    t = print2(ZN_EST_MAX_PARAMS, 16, 64, ZN_EST_ROWS_CPU);
    assert_str_contains(t, " 572204589.84GB | 186264.51GB | offload_optimizer=OffloadDeviceEnum.cpu\n");
    free(t);
}

/* spec: Z-EST-004 */
/* spec: Z-EST-005 */
static void test_table_text_zero3(void **state) {
    (void)state;
    char *t = print3(T0_3B, T0_3B_LAYER, 8, 1, ZN_EST_ROWS_ALL);
    assert_string_equal(t,
        "Estimated memory needed for params, optim states and gradients for a:\n"
        "HW: Setup with 1 node, 8 GPUs per node.\n"
        "SW: Model with 2851M total params, 32M largest layer params.\n"
        "  per CPU  |  per GPU |   Options\n"
        "   71.69GB |   0.12GB | offload_param=OffloadDeviceEnum.cpu, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1\n"
        "  127.45GB |   0.12GB | offload_param=OffloadDeviceEnum.cpu, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=0\n"
        "   63.72GB |   0.78GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1\n"
        "  127.45GB |   0.78GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=0\n"
        "    1.43GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=1\n"
        "  127.45GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=0\n");
    free(t);
    /* int(n/1e6) truncates: 999999 params is "0M" */
    t = print3(999999, 999999, 1, 1, ZN_EST_ROWS_ALL);
    assert_str_contains(t, "SW: Model with 0M total params, 0M largest layer params.\n");
    free(t);
}

/* The rows of a printed table (what follows the column header), then frees it. */
static void check_rows(char *t, const char *want) {
    const char *head = "  per CPU  |  per GPU |   Options\n";
    const char *rows = strstr(t, head);
    assert_non_null(rows);
    assert_string_equal(rows + strlen(head), want);
    free(t);
}

/* spec: Z-EST-005 */
static void test_table_rows_filter(void **state) {
    (void)state;
    check_rows(print3(T0_3B, T0_3B_LAYER, 8, 1, ZN_EST_ROWS_CPU),
        "   63.72GB |   0.78GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1\n"
        "  127.45GB |   0.78GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=0\n");
    check_rows(print3(T0_3B, T0_3B_LAYER, 8, 1, ZN_EST_ROWS_BOTH),
        "   71.69GB |   0.12GB | offload_param=OffloadDeviceEnum.cpu, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1\n"
        "  127.45GB |   0.12GB | offload_param=OffloadDeviceEnum.cpu, offload_optimizer=OffloadDeviceEnum.cpu, zero_init=0\n");
    check_rows(print3(T0_3B, T0_3B_LAYER, 8, 1, ZN_EST_ROWS_NONE),
        "    1.43GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=1\n"
        "  127.45GB |   6.09GB | offload_param=none, offload_optimizer=none, zero_init=0\n");
    check_rows(print2(T0_3B, 8, 1, ZN_EST_ROWS_NONE), "  127.45GB |  11.28GB | offload_optimizer=none\n");
    check_rows(print2(T0_3B, 8, 1, ZN_EST_ROWS_CPU),
               "  127.45GB |   5.31GB | offload_optimizer=OffloadDeviceEnum.cpu\n");
    /* stage 2 keeps params on the GPU: no row for --offload all */
    check_rows(print2(T0_3B, 8, 1, ZN_EST_ROWS_BOTH), "");
}

/* ------------------------------------------------------------------------ */
/* the ZeRO paper */

/* spec: Z-EST-006 */
static void test_paper_figure1(void **state) {
    (void)state;
    /* Psi = 7.5B, Nd = 64, K = 12: every value is exact in binary */
    const long long P = 7500000000LL;
    assert_true(zn_paper_bytes_per_device(P, 64, 0, 12) == 120e9);
    assert_true(zn_paper_bytes_per_device(P, 64, 1, 12) == 31.40625e9);   /* 4P + 12P/64 */
    assert_true(zn_paper_bytes_per_device(P, 64, 2, 12) == 16.640625e9);  /* 2P + 14P/64 */
    assert_true(zn_paper_bytes_per_device(P, 64, 3, 12) == 1.875e9);      /* 16P/64 */
    /* as Figure 1 prints them, one decimal */
    const char *fig1[4] = {"120.0", "31.4", "16.6", "1.9"};
    for (int s = 0; s < 4; s++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.1f", zn_paper_bytes_per_device(P, 64, s, 12) / 1e9);
        assert_string_equal(buf, fig1[s]);
    }
    /* outside the domain */
    assert_true(isnan(zn_paper_bytes_per_device(P, 0, 1, 12)));
    assert_true(isnan(zn_paper_bytes_per_device(P, 4, 4, 12)));
    assert_true(isnan(zn_paper_bytes_per_device(P, 4, 1, -1)));
}

/* spec: Z-EST-006 */
static void test_paper_table1(void **state) {
    (void)state;
    /* Table 1 of the paper, 7.5B column group, from the formulas (the paper
       rounds: 41.25 -> 41.3, 21.5625 -> 21.6, 0.46875 -> 0.47) */
    static const struct { int nd; double pos, posg, posgp; } t75[] = {
        {1, 120, 120, 120},
        {4, 52.5, 41.25, 30},
        {16, 35.625, 21.5625, 7.5},
        {64, 31.40625, 16.640625, 1.875},
        {256, 30.3515625, 15.41015625, 0.46875},
        {1024, 30.087890625, 15.1025390625, 0.1171875},
    };
    for (size_t i = 0; i < sizeof t75 / sizeof t75[0]; i++) {
        assert_true(zn_paper_bytes_per_device(7500000000LL, t75[i].nd, 1, 12) / 1e9 == t75[i].pos);
        assert_true(zn_paper_bytes_per_device(7500000000LL, t75[i].nd, 2, 12) / 1e9 == t75[i].posg);
        assert_true(zn_paper_bytes_per_device(7500000000LL, t75[i].nd, 3, 12) / 1e9 == t75[i].posgp);
    }
    /* spot values of the 128B and 1T groups (the paper truncates the large
       ones: 4187.5 -> 4187, 2218.75 -> 2218) */
    assert_true(zn_paper_bytes_per_device(128000000000LL, 4, 1, 12) / 1e9 == 896);
    assert_true(zn_paper_bytes_per_device(128000000000LL, 4, 2, 12) / 1e9 == 704);
    assert_true(zn_paper_bytes_per_device(128000000000LL, 16, 3, 12) / 1e9 == 128);
    assert_true(zn_paper_bytes_per_device(128000000000LL, 1024, 3, 12) / 1e9 == 2);
    assert_true(zn_paper_bytes_per_device(1000000000000LL, 1, 0, 12) / 1e9 == 16000);
    assert_true(zn_paper_bytes_per_device(1000000000000LL, 64, 1, 12) / 1e9 == 4187.5);
    assert_true(zn_paper_bytes_per_device(1000000000000LL, 64, 2, 12) / 1e9 == 2218.75);
    assert_true(zn_paper_bytes_per_device(1000000000000LL, 1024, 3, 12) / 1e9 == 15.625);
    /* K is a parameter: K = 8 (SGD with momentum) baseline is 12 bytes a param */
    assert_true(zn_paper_bytes_per_device(1000, 1, 0, 8) == 12000);
}

/* spec: Z-EST-007 */
static void test_paper_text(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    zn_est_print_paper(f, 7500000000LL, 64, 12);
    fclose(f);
    assert_string_equal(buf,
        "ZeRO paper (K=12, mixed-precision Adam): model states per device, P = 7500000000 params, Nd = 64, GB = 1e9 bytes\n"
        "  paper GB |     formula GB | stage   formula\n"
        "     120.0 |     120.000000 | baseline DP     (2+2+K)*P\n"
        "      31.4 |      31.406250 | Pos     stage 1 2P + 2P + K*P/Nd\n"
        "      16.6 |      16.640625 | Pos+g   stage 2 2P + (2+K)*P/Nd\n"
        "       1.9 |       1.875000 | Pos+g+p stage 3 (2+2+K)*P/Nd\n");
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* parameter counts */

/* spec: Z-EST-008 */
static void test_parse_count(void **state) {
    (void)state;
    static const struct { const char *s; long long v; } good[] = {
        {"7.5B", 7500000000LL}, {"350M", 350000000LL}, {"350m", 350000000LL},
        {"2851M", 2851000000LL}, {"2851e6", 2851000000LL}, {"7.5e9", 7500000000LL},
        {"1", 1}, {"007", 7}, {"1.5K", 1500}, {"0.5k", 500}, {".5K", 500}, {"5.", 5},
        {"1.000", 1}, {"1T", 1000000000000LL}, {"100T", 100000000000000LL},
        {"100000000000000", 100000000000000LL}, {"1.23456789b", 1234567890},
        {"6.7b", 6700000000LL}, {"0.000001T", 1000000},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        long long v = -1;
        ZnErr err = {0};
        if (zn_est_parse_count("--params", good[i].s, 1, &v, &err))
            fail_msg("'%s': %s", good[i].s, err.msg);
        assert_int_equal(v, good[i].v);
    }
    static const struct { const char *s, *msg; } bad[] = {
        {"", "expected a parameter count such as 350M, 7.5B or 2851e6, got ''"},
        {"x", "got 'x'"}, {"7.5X", "got '7.5X'"}, {"-5", "got '-5'"}, {"+5", "got '+5'"},
        {" 5", "got ' 5'"}, {"5 ", "got '5 '"}, {"5BB", "got '5BB'"}, {"1e", "got '1e'"},
        {"1e100", "got '1e100'"}, {"1.2.3", "got '1.2.3'"}, {".", "got '.'"}, {"B", "got 'B'"},
        {"0x10", "got '0x10'"}, {"nan", "got 'nan'"}, {"1e-3", "got '1e-3'"},
        {"1.5", "'1.5' is not a whole number of parameters"},
        {"1.2345K", "'1.2345K' is not a whole number of parameters"},
        {"101T", "'101T' is too large (at most 100T = 10^14)"},
        {"1e15", "'1e15' is too large"}, {"99999999999999999999", "too large"},
        {"0", "'0' is below 1"}, {"0.0B", "'0.0B' is below 1"},
        {"12345678901234567890123456789012345678901", "expected a parameter count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long v = -1;
        ZnErr err = {0};
        assert_int_equal(zn_est_parse_count("--params", bad[i].s, 1, &v, &err), ZN_E_USAGE);
        assert_int_equal(v, -1);
        assert_str_contains(err.msg, "--params: ");
        assert_str_contains(err.msg, bad[i].msg);
    }
    /* the largest layer may be 0 */
    long long v = -1;
    assert_int_equal(zn_est_parse_count("--largest-layer", "0", 0, &v, NULL), 0);
    assert_int_equal(v, 0);
}

/* ------------------------------------------------------------------------ */
/* the subcommand */

/* spec: Z-EST-009 */
/* spec: Z-EST-012 */
static void test_cli_default_tables(void **state) {
    (void)state;
    Run r;
    RUN(r, "--params", "7.5B", "--gpus-per-node", "8", "--nodes", "8");
    assert_int_equal(r.rc, 0);
    /* both DeepSpeed tables, then the paper's with Nd = 8 x 8 */
    char *z2 = strstr(r.out, "DeepSpeed estimate_zero2_model_states_mem_needs_all_cold (ZeRO stages 1 and 2):\n"
                             "Estimated memory needed for params, optim states and gradients for a:\n"
                             "HW: Setup with 8 nodes, 8 GPUs per node.\n"
                             "SW: Model with 7500M total params.\n");
    char *z3 = strstr(r.out, "DeepSpeed estimate_zero3_model_states_mem_needs_all_cold (ZeRO stage 3):\n");
    char *pp = strstr(r.out, "ZeRO paper (K=12, mixed-precision Adam): model states per device, "
                             "P = 7500000000 params, Nd = 64, GB = 1e9 bytes\n");
    assert_true(z2 == r.out);
    assert_true(z3 && z3 > z2);
    assert_true(pp && pp > z3);
    /* 7.5e9 * max(256,16) * 1.5 / 2^30 = 2682.21; GPU 2P = 13.97 */
    assert_str_contains(r.out, " 2682.21GB |  13.97GB | offload_optimizer=OffloadDeviceEnum.cpu\n");
    assert_str_contains(r.out, "      31.4 |      31.406250 | Pos     stage 1");
    /* no --largest-layer: stage 3 counts 0, and says so on the side */
    assert_str_contains(r.out, "SW: Model with 7500M total params, 0M largest layer params.\n");
    assert_str_contains(r.note, "--largest-layer not given");
    run_free(&r);

    /* --stage picks one table; stage 1 uses the stage 2 estimator */
    RUN(r, "--params", "350M", "--stage", "1");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "estimate_zero2"));
    assert_null(strstr(r.out, "estimate_zero3"));
    assert_non_null(strstr(r.out, "ZeRO paper"));
    assert_int_equal(r.note_len, 0);    /* no stage 3 table, no note */
    run_free(&r);
    RUN(r, "--params", "350M", "--largest-layer", "50M", "--stage", "3", "--offload", "all");
    assert_int_equal(r.rc, 0);
    assert_null(strstr(r.out, "estimate_zero2"));
    assert_str_contains(r.out, "SW: Model with 350M total params, 50M largest layer params.\n");
    assert_str_contains(r.out, "zero_init=0\n\nZeRO paper");
    assert_null(strstr(r.out, "offload_param=none"));
    assert_int_equal(r.note_len, 0);
    run_free(&r);
    /* --buffer-factor scales the CPU column: 10^6 * 16 * 1.0 bytes = 0.01 GB */
    RUN(r, "--params", "1000000", "--stage", "2", "--offload", "cpu", "--buffer-factor", "1");
    assert_int_equal(r.rc, 0);
    assert_str_contains(r.out, "    0.01GB |   0.00GB | offload_optimizer=OffloadDeviceEnum.cpu\n");
    run_free(&r);
    /* help */
    RUN(r, "--help");
    assert_int_equal(r.rc, 0);
    assert_str_contains(r.out, "usage: zinc estimate --params P");
    run_free(&r);
}

/* spec: Z-EST-010 */
static void test_cli_model(void **state) {
    (void)state;
    ZnEstOpts o;
    ZnErr err = {0};
    char *a1[] = {"--model", "mlp:784,128,10"};
    assert_int_equal(zn_est_parse_args(2, a1, &o, &err), 0);
    /* numel: 784*128 + 128 + 128*10 + 10; largest layer: layers.0, weight + bias */
    assert_int_equal(o.params, 101770);
    assert_int_equal(o.largest_layer, 100480);
    assert_int_equal(o.largest_layer_index, 0);
    assert_true(o.have_largest);
    /* a later layer can be the largest */
    char *a2[] = {"--model", "mlp:2,3,4096,2"};
    assert_int_equal(zn_est_parse_args(2, a2, &o, &err), 0);
    assert_int_equal(o.params, 2 * 3 + 3 + 3 * 4096 + 4096 + 4096 * 2 + 2);
    /* layers: 2*3+3 = 9, 3*4096+4096 = 16384, 4096*2+2 = 8194 */
    assert_int_equal(o.largest_layer, 16384);
    assert_int_equal(o.largest_layer_index, 1);

    Run r;
    RUN(r, "--model", "mlp:4096,16384,4096", "--gpus-per-node", "8", "--stage", "3");
    assert_int_equal(r.rc, 0);
    /* 2*4096*16384 + 16384 + 4096; layer 0 = 67108864 + 16384 */
    assert_str_contains(r.out, "Model mlp:4096,16384,4096: 134238208 params, largest layer layers.0 "
                               "with 67125248 params (its own parameters).\n");
    assert_str_contains(r.out, "SW: Model with 134M total params, 67M largest layer params.\n");
    /* no offload, zero_init: CPU 67125248*4*8*1.5 -> 3.00 GB; GPU
       4*67125248 + int(18*134238208/8) = 268500992 + 302035968 -> 0.53 GB */
    assert_str_contains(r.out, "    3.00GB |   0.53GB | offload_param=none, offload_optimizer=none, zero_init=1\n");
    assert_int_equal(r.note_len, 0);
    run_free(&r);
    /* GPT-2: the largest nn.Module is the token embedding (tied with lm_head) */
    RUN(r, "--model", "gpt2", "--gpus-per-node", "8", "--stage", "3");
    assert_int_equal(r.rc, 0);
    assert_str_contains(r.out, "Model gpt2: 124439808 params, largest layer transformer.wte with 38597376 params "
                               "(its own parameters).\n");
    run_free(&r);
}

/* spec: Z-EST-011 */
static void test_cli_bad_flags(void **state) {
    (void)state;
    static const struct { int argc; const char *argv[6]; const char *msg; } bad[] = {
        {0, {NULL}, "--params P or --model (mlp:D0,...,Dk, gpt2...) is required"},
        {1, {"--bogus"}, "unknown flag '--bogus' for 'zinc estimate'"},
        {1, {"7.5B"}, "unexpected argument '7.5B' for 'zinc estimate'"},
        {1, {"--params"}, "--params needs a value"},
        {2, {"--params", "lots"}, "--params: expected a parameter count"},
        {2, {"--params", "0"}, "--params: '0' is below 1"},
        {4, {"--params", "1B", "--gpus-per-node", "0"}, "--gpus-per-node: expected an integer in 1..1048576, got '0'"},
        {4, {"--params", "1B", "--gpus-per-node", "-1"}, "--gpus-per-node: expected an integer"},
        {4, {"--params", "1B", "--gpus-per-node", "8x"}, "got '8x'"},
        {4, {"--params", "1B", "--gpus-per-node", "99999999999"}, "got '99999999999'"},
        {4, {"--params", "1B", "--nodes", "0"}, "--nodes: expected an integer in 1..1048576"},
        {6, {"--params", "1B", "--nodes", "2048", "--gpus-per-node", "1024"},
         "--nodes x --gpus-per-node = 2097152 GPUs: at most 1048576"},
        {4, {"--params", "1B", "--stage", "0"}, "--stage: expected an integer in 1..3, got '0'"},
        {4, {"--params", "1B", "--stage", "4"}, "--stage: expected an integer in 1..3"},
        {4, {"--params", "1B", "--offload", "nvme"}, "--offload: expected none, cpu or all, got 'nvme'"},
        {4, {"--params", "1B", "--offload", "all"}, "--offload all also offloads parameters, which only stage 3"},
        {6, {"--params", "1B", "--offload", "all", "--stage", "2"}, "add --stage 3"},
        {4, {"--params", "1B", "--buffer-factor", "0"}, "--buffer-factor: expected a finite number > 0, got '0'"},
        {4, {"--params", "1B", "--buffer-factor", "-1.5"}, "--buffer-factor: expected a finite number > 0"},
        {4, {"--params", "1B", "--buffer-factor", "inf"}, "got 'inf'"},
        {4, {"--params", "1B", "--buffer-factor", "nan"}, "got 'nan'"},
        {4, {"--params", "1B", "--buffer-factor", "1.5x"}, "got '1.5x'"},
        {4, {"--params", "1B", "--largest-layer", "2B"}, "--largest-layer (2000000000) exceeds --params (1000000000)"},
        {4, {"--params", "1B", "--model", "mlp:4,2"}, "--model gives the parameter counts"},
        {4, {"--model", "mlp:4,2", "--largest-layer", "1"}, "--model gives the parameter counts"},
        {2, {"--model", "mlp:4,x"}, "model spec 'mlp:4,x': 'x' is not a positive integer"},
        {2, {"--model", "cnn:3"}, "unknown model 'cnn'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Run r = run_args(bad[i].argc, (char **)bad[i].argv);
        if (r.rc != ZN_E_USAGE) fail_msg("case %zu: rc %d", i, r.rc);
        assert_str_contains(r.err.msg, bad[i].msg);
        /* one message, nothing half-printed */
        assert_int_equal(r.out_len, 0);
        assert_int_equal(r.note_len, 0);
        run_free(&r);
    }
    /* the subcommand turns it into exit status 2 (its message goes to stderr) */
    char *argv[] = {"--bogus"};
    assert_int_equal(zn_cmd_estimate(1, argv), 2);
}

/* spec: Z-EST-013 */
static void test_cli_too_large(void **state) {
    (void)state;
    /* 10^14 params on 1024 nodes x 16 GPUs: stage 2 offload CPU would be
       10^14 * 4 * 16384 * 1.5 bytes, past 2^63: refused, not wrapped */
    Run r;
    RUN(r, "--params", "100T", "--gpus-per-node", "16", "--nodes", "1024");
    assert_int_equal(r.rc, ZN_E_USAGE);
    assert_str_contains(r.err.msg, "estimate too large: more than 2^63 bytes");
    assert_int_equal(r.out_len, 0);
    run_free(&r);
    /* the same count on 64 nodes fits */
    RUN(r, "--params", "100T", "--gpus-per-node", "16", "--nodes", "64");
    assert_int_equal(r.rc, 0);
    run_free(&r);
}

ZT_MAIN(
    cmocka_unit_test(test_zero2_values),
    cmocka_unit_test(test_zero3_values_1gpu),
    cmocka_unit_test(test_zero3_values_4x8),
    cmocka_unit_test(test_zero3_values_8x1),
    cmocka_unit_test(test_python_float_semantics),
    cmocka_unit_test(test_table_text_zero2),
    cmocka_unit_test(test_table_text_zero3),
    cmocka_unit_test(test_table_rows_filter),
    cmocka_unit_test(test_paper_figure1),
    cmocka_unit_test(test_paper_table1),
    cmocka_unit_test(test_paper_text),
    cmocka_unit_test(test_parse_count),
    cmocka_unit_test(test_cli_default_tables),
    cmocka_unit_test(test_cli_model),
    cmocka_unit_test(test_cli_bad_flags),
    cmocka_unit_test(test_cli_too_large))
