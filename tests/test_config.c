/* test_config.c: the DeepSpeed JSON config as zinc reads it (spec Z-CFG-*). */
#include "testutil.h"
#include "core/config.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#define SRC "ds.json"
/* most configs need the batch triad; one micro batch per rank is enough */
#define MB "\"train_micro_batch_size_per_gpu\": 1"

/* ---- helpers ------------------------------------------------------------ */

static ZnConfigArgs no_args(void) {
    ZnConfigArgs a;
    zn_config_args_init(&a);
    return a;
}

/* sets the batch flags: --world-size, --micro-batch, --grad-accum */
static void args_batch(ZnConfigArgs *a, int world, long micro, long accum) {
    a->world_size = world;
    a->micro_batch = micro;
    a->grad_accum = accum;
}

/* sets the optimizer flags: --lr, --weight-decay, --beta1, --beta2, --eps */
static void args_adam(ZnConfigArgs *a, double lr, double wd, double b1, double b2, double eps) {
    a->lr = lr;
    a->weight_decay = wd;
    a->beta1 = b1;
    a->beta2 = b2;
    a->eps = eps;
}

static int parse(const char *json, const ZnConfigArgs *a, ZnConfig *c, ZnErr *e) {
    memset(e, 0, sizeof *e);
    return zn_config_parse(json, json ? strlen(json) : 0, SRC, a, c, e);
}

/* parses and fails the test with the message if that does not work */
static ZnConfig ok_with(const char *json, const ZnConfigArgs *a) {
    ZnConfig c;
    ZnErr e;
    memset(&c, 0, sizeof c);
    int rc = parse(json, a, &c, &e);
    if (rc != ZN_OK) fail_msg("expected %s to parse, got %d: %s", json, rc, e.msg);
    return c;
}

static ZnConfig ok(const char *json) {
    ZnConfigArgs a = no_args();
    return ok_with(json, &a);
}

/* parses with args a (NULL: none) expecting ZN_E_USAGE and a message that
   is `msg` (whole) or contains it */
static void err_match(const char *json, const ZnConfigArgs *a, const char *msg, int whole) {
    ZnConfigArgs dflt = no_args();
    ZnConfig c;
    ZnErr e;
    int rc = parse(json, a ? a : &dflt, &c, &e);
    if (rc != ZN_E_USAGE) fail_msg("expected %s to fail, got %d (%s)", json, rc, e.msg);
    if (whole) assert_string_equal(e.msg, msg);
    else assert_str_contains(e.msg, msg);
}
static void err_is(const char *json, const ZnConfigArgs *a, const char *msg) { err_match(json, a, msg, 1); }
static void err_has(const char *json, const ZnConfigArgs *a, const char *part) { err_match(json, a, part, 0); }

/* A config that must fail with no args, and its whole message. A run of
 * rejections in a test is a table of these, written in place and checked in
 * order: err_table({json, msg}, ...). The cases differ, the check does not. */
typedef struct { const char *json, *msg; } ErrCase;
static void err_case(const ErrCase *t) { err_is(t->json, NULL, t->msg); }
#define err_table(...) ZT_CASES(ErrCase, err_case, __VA_ARGS__)

/* stderr capture, for warnings */
typedef struct { int saved; FILE *tmp; } Capture;

static void cap_begin(Capture *cp) {
    fflush(stderr);
    cp->tmp = tmpfile();
    assert_non_null(cp->tmp);
    cp->saved = dup(2);
    assert_true(cp->saved >= 0);
    assert_true(dup2(fileno(cp->tmp), 2) >= 0);
}

static void cap_end(Capture *cp, char *buf, size_t n) {
    fflush(stderr);
    dup2(cp->saved, 2);
    close(cp->saved);
    rewind(cp->tmp);
    size_t k = fread(buf, 1, n - 1, cp->tmp);
    buf[k] = 0;
    fclose(cp->tmp);
}

/* parses expecting success and returns what went to stderr */
static ZnConfig ok_warn(const char *json, const ZnConfigArgs *a, char *out, size_t n) {
    ZnConfigArgs dflt = no_args();
    Capture cp;
    ZnConfig c;
    ZnErr e;
    cap_begin(&cp);
    int rc = parse(json, a ? a : &dflt, &c, &e);
    cap_end(&cp, out, n);
    if (rc != ZN_OK) fail_msg("expected %s to parse, got %d: %s", json, rc, e.msg);
    return c;
}

/* parses expecting success and exactly `warning` on stderr ("": nothing) */
static ZnConfig warns(const char *json, const ZnConfigArgs *a, const char *warning) {
    char w[4096];
    ZnConfig c = ok_warn(json, a, w, sizeof w);
    assert_string_equal(w, warning);
    return c;
}

/* parses expecting success and a warning on stderr that contains `part` */
static ZnConfig warns_of(const char *json, const ZnConfigArgs *a, const char *part) {
    char w[4096];
    ZnConfig c = ok_warn(json, a, w, sizeof w);
    assert_str_contains(w, part);
    return c;
}

/* ---- the fields of zero_optimization, fp16, bf16 and aio ------------------ */

/* A field of ZnConfig: its path, where it is, its type ('i' int, 'l' long,
 * 'd' double), its default (test_defaults_every_field), and the value its
 * section's every-key test writes (test_zero_every_key_read, test_fp16_keys,
 * test_bf16_keys_and_old_name, test_aio_section). One list, so that the
 * tests of the defaults and of the keys read cover the same fields. */
typedef struct {
    const char *path;
    size_t off;
    char type;
    long dflt, set;   /* a double field's values are whole numbers here */
} Field;
#define FIELD(f, dflt, set) \
    {#f, offsetof(ZnConfig, f), _Generic(((ZnConfig *)0)->f, int: 'i', long: 'l', double: 'd'), dflt, set}
static const Field FIELDS[] = {
    FIELD(zero.stage, 0, 2),
    FIELD(zero.contiguous_gradients, 1, 0),
    FIELD(zero.reduce_scatter, 1, 0),
    FIELD(zero.reduce_bucket_size, 500000000L, 1000),
    FIELD(zero.use_multi_rank_bucket_allreduce, 1, 0),
    FIELD(zero.allgather_partitions, 1, 0),
    FIELD(zero.allgather_bucket_size, 500000000L, 2000),
    FIELD(zero.overlap_comm, -1, 1),
    FIELD(zero.load_from_fp32_weights, 1, 0),
    FIELD(zero.elastic_checkpoint, 0, 1),
    FIELD(zero.sub_group_size, 1000000000L, 3000),
    FIELD(zero.prefetch_bucket_size, 50000000L, 4000),   /* allgather_sequential only matters at stage 3 */
    FIELD(zero.param_persistence_threshold, 100000L, 5000),
    FIELD(zero.model_persistence_threshold, LONG_MAX, 6000),
    FIELD(zero.max_live_parameters, 1000000000L, 7000),
    FIELD(zero.max_reuse_distance, 1000000000L, 8000),
    FIELD(zero.gather_16bit_weights_on_model_save, 0, 1),
    FIELD(zero.module_granularity_threshold, 0, -9),
    FIELD(zero.use_all_reduce_for_fetch_params, 0, 1),
    FIELD(zero.allgather_sequential, 0, 1),
    FIELD(zero.ignore_unused_parameters, 1, 0),
    FIELD(zero.round_robin_gradients, 0, 1),
    FIELD(zero.zero_hpz_partition_size, 1, 2),
    FIELD(zero.zero_quantized_weights, 0, 1),
    FIELD(zero.zero_quantized_gradients, 0, 1),
    FIELD(zero.zero_quantized_nontrainable_weights, 0, 1),
    FIELD(zero.mics_shard_size, -1, 4),
    FIELD(zero.mics_hierarchical_params_gather, 0, 1),
    FIELD(zero.memory_efficient_linear, 1, 0),
    FIELD(zero.pipeline_loading_checkpoint, 0, 1),
    FIELD(zero.override_module_apply, 1, 0),
    FIELD(zero.log_trace_cache_warnings, 0, 1),
    FIELD(zero.offload_param.present, 0, 0),
    FIELD(zero.offload_optimizer.present, 0, 0),
    FIELD(fp16.enabled, 0, 1),
    FIELD(fp16.auto_cast, 0, 1),
    FIELD(fp16.loss_scale, 0, 0),
    FIELD(fp16.initial_scale_power, 16, 8),
    FIELD(fp16.loss_scale_window, 1000, 2),
    FIELD(fp16.hysteresis, 2, 1),
    FIELD(fp16.consecutive_hysteresis, 0, 1),
    FIELD(fp16.min_loss_scale, 1, 2),
    FIELD(fp16.fp16_master_weights_and_grads, 0, 1),
    FIELD(bf16.enabled, 0, 1),
    FIELD(bf16.immediate_grad_update, 0, 1),
    FIELD(bf16.check_grad_overflow, 1, 0),
    FIELD(bf16.bf16_master_weights_and_grads, 0, 1),
    FIELD(bf16.bf16_optimizer_states, 0, 1),
    FIELD(aio.block_size, 1048576, 262144),
    FIELD(aio.queue_depth, 8, 32),
    FIELD(aio.intra_op_parallelism, 1, 4),
    FIELD(aio.single_submit, 0, 1),
    FIELD(aio.overlap_events, 1, 0),
};

/* Every field of FIELDS whose path starts with `section` ("zero.", "fp16.",
 * "bf16.", "aio.", "" for all) holds its default (set 0) or its written value
 * (set 1). */
static void check_fields(const ZnConfig *c, const char *section, int set) {
    for (size_t i = 0; i < ZT_LEN(FIELDS); i++) {
        const Field *f = &FIELDS[i];
        if (strncmp(f->path, section, strlen(section)) != 0) continue;
        const char *at = (const char *)c + f->off;
        long want = set ? f->set : f->dflt;
        if (f->type == 'i') {
            int v;
            memcpy(&v, at, sizeof v);
            if (v != want) fail_msg("%s: %d, expected %ld", f->path, v, want);
        } else if (f->type == 'l') {
            long v;
            memcpy(&v, at, sizeof v);
            if (v != want) fail_msg("%s: %ld, expected %ld", f->path, v, want);
        } else {
            double v;
            memcpy(&v, at, sizeof v);
            if (v != (double)want) fail_msg("%s: %g, expected %ld", f->path, v, want);
        }
    }
}

/* Parses json, which writes every key of a section: each field of the
 * section as FIELDS writes it, and the model dtype that follows. */
static ZnConfig every_key(const char *json, const char *section, int dtype) {
    ZnConfig c = ok(json);
    check_fields(&c, section, 1);
    assert_int_equal(c.model_dtype, dtype);
    return c;
}

/* ---- defaults ----------------------------------------------------------- */

/* spec: Z-CFG-008 */
ZT_TEST(test_defaults_every_field) {
    ZnConfig c;
    memset(&c, 0xab, sizeof c);
    zn_config_defaults(&c);
    assert_int_equal(c.train_batch_size, -1);
    assert_int_equal(c.micro_batch, -1);
    assert_int_equal(c.grad_accum, -1);
    assert_int_equal(c.optimizer_present, 0);
    assert_int_equal(c.opt_type, ZN_OPT_ADAM);
    assert_int_equal(c.adamw, 1);
    assert_int_equal(c.torch_adam, 0);
    assert_int_equal(c.bias_correction, 1);
    assert_true(c.lr == 1e-3 && c.beta1 == 0.9 && c.beta2 == 0.999 && c.eps == 1e-8 && c.weight_decay == 0);

    /* zero_optimization, fp16, bf16 and aio: FIELDS */
    check_fields(&c, "", 0);
    const ZnZeroConfig *z = &c.zero;
    for (int i = 0; i < 2; i++) {
        const ZnOffloadConfig *o = i ? &z->offload_optimizer : &z->offload_param;
        assert_int_equal(o->device, ZN_OFFLOAD_NONE);
        assert_int_equal(o->pin_memory, 1);
        assert_string_equal(o->nvme_path, "");
        assert_int_equal(o->buffer_count, i ? 4 : 5);
        assert_int_equal(o->fast_init, 0);
        assert_true(o->ratio == 1.0);
        assert_int_equal(o->present, 0);
    }
    assert_true(z->offload_param.buffer_size == 1e8 && z->offload_param.max_in_cpu == 1e9);

    const ZnSchedConfig *s = &c.sched;
    assert_int_equal(s->type, ZN_SCHED_NONE);
    assert_true(s->warmup_min_lr == 0 && isnan(s->warmup_max_lr));
    assert_int_equal(s->warmup_num_steps, 1000);
    assert_int_equal(s->warmup_type_linear, 0);
    assert_int_equal(s->total_num_steps, -1);
    assert_true(s->warmup_min_ratio == 0 && s->cos_min_ratio == 1e-4);
    assert_true(isnan(s->cycle_min_lr) && isnan(s->cycle_max_lr) && s->decay_lr_rate == 0);
    assert_int_equal(s->cycle_first_step_size, 2000);
    assert_int_equal(s->cycle_second_step_size, -1);
    assert_int_equal(s->cycle_first_stair_count, 0);
    assert_int_equal(s->cycle_second_stair_count, -1);
    assert_int_equal(s->decay_step_size, 0);
    assert_int_equal(s->cycle_momentum, 1);
    assert_true(s->cycle_min_mom == 0.8 && s->cycle_max_mom == 0.9 && s->decay_mom_rate == 0);
    assert_true(s->lr_range_test_min_lr == 1e-3 && s->lr_range_test_step_rate == 1.0);
    assert_int_equal(s->lr_range_test_step_size, 2000);
    assert_int_equal(s->lr_range_test_staircase, 0);

    assert_true(c.gradient_clipping == 1.0);
    assert_int_equal(c.prescale_gradients, 0);
    assert_true(c.gradient_predivide_factor == 1.0);
    assert_int_equal(c.allreduce_sum, 0);
    assert_int_equal(c.communication_data_type, -1);
    assert_int_equal(c.steps_per_print, 0);
    assert_int_equal(c.wall_clock_breakdown, 0);
    assert_int_equal(c.memory_breakdown, 0);
    assert_int_equal(c.seed, 1234);
    assert_int_equal(c.managed_gradient_accumulation, 1);
    assert_int_equal(c.zero_allow_untested_optimizer, 0);
    assert_int_equal(c.zero_force_ds_cpu_optimizer, 1);
    assert_int_equal(c.load_universal, 0);
    assert_int_equal(c.canonical, 0);
    assert_int_equal(c.exact, 0);
    assert_int_equal(c.model_dtype, ZN_F32);
}

/* spec: Z-CFG-008, Z-CFG-022 */
ZT_TEST(test_defaults_after_parse) {
    ZnConfig c = ok("{" MB "}");
    ZnConfig d;
    zn_config_defaults(&d);
    /* resolution fills the triad and overlap_comm; nothing else moves */
    assert_int_equal(c.train_batch_size, 1);
    assert_int_equal(c.micro_batch, 1);
    assert_int_equal(c.grad_accum, 1);
    assert_int_equal(c.zero.overlap_comm, 0);
    c.train_batch_size = c.micro_batch = c.grad_accum = -1;
    c.zero.overlap_comm = -1;
    /* NaN != NaN: compare the scheduler's None markers separately */
    assert_true(isnan(c.sched.warmup_max_lr) && isnan(c.sched.cycle_min_lr) && isnan(c.sched.cycle_max_lr));
    c.sched.warmup_max_lr = d.sched.warmup_max_lr = 0;
    c.sched.cycle_min_lr = d.sched.cycle_min_lr = 0;
    c.sched.cycle_max_lr = d.sched.cycle_max_lr = 0;
    assert_memory_equal(&c, &d, sizeof c);
}

/* spec: Z-CFG-043 */
ZT_TEST(test_args_init) {
    ZnConfigArgs a;
    memset(&a, 0x5a, sizeof a);
    zn_config_args_init(&a);
    assert_int_equal(a.world_size, 1);
    assert_int_equal(a.train_batch_size, -1);
    assert_int_equal(a.micro_batch, -1);
    assert_int_equal(a.grad_accum, -1);
    assert_int_equal(a.stage, -1);
    assert_int_equal(a.seed, -1);
    assert_true(isnan(a.lr) && isnan(a.weight_decay) && isnan(a.beta1) && isnan(a.beta2) && isnan(a.eps));
    assert_true(isnan(a.max_grad_norm));
    assert_int_equal(a.warmup_steps, -1);
    assert_int_equal(a.total_steps, -1);
    assert_int_equal(a.dtype, -1);
    assert_int_equal(a.hidden_size, -1);
    assert_int_equal(a.canonical, -1);
    assert_int_equal(a.exact, -1);
}

/* spec: Z-CFG-043 */
ZT_TEST(test_null_text_and_null_args) {
    ZnConfigArgs a = no_args();
    a.world_size = 2;
    a.micro_batch = 3;
    ZnConfig c;
    ZnErr e;
    assert_int_equal(zn_config_parse(NULL, 0, NULL, &a, &c, &e), ZN_OK);
    assert_int_equal(c.train_batch_size, 6);
    assert_int_equal(c.grad_accum, 1);
    assert_int_equal(c.seed, 1234);
    /* no text and no args: the triad is missing; the message names "config" */
    assert_int_equal(zn_config_parse(NULL, 0, NULL, NULL, &c, &e), ZN_E_USAGE);
    assert_string_equal(e.msg, "config: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    /* args NULL means zn_config_args_init's values (world size 1) */
    const char *j = "{\"train_batch_size\": 4}";
    assert_int_equal(zn_config_parse(j, strlen(j), SRC, NULL, &c, &e), ZN_OK);
    assert_int_equal(c.micro_batch, 4);
    /* text need not be NUL-terminated: len bounds it */
    const char buf[] = "{\"train_batch_size\": 8}garbage";
    assert_int_equal(zn_config_parse(buf, 23, SRC, NULL, &c, &e), ZN_OK);
    assert_int_equal(c.train_batch_size, 8);
    /* err may be NULL */
    assert_int_equal(zn_config_parse("{", 1, SRC, NULL, &c, NULL), ZN_E_USAGE);
}

/* spec: Z-CFG-043 */
ZT_TEST(test_out_untouched_on_error) {
    ZnConfig c, before;
    memset(&c, 0x77, sizeof c);
    before = c;
    ZnErr e;
    ZnConfigArgs a = no_args();
    assert_int_equal(parse("{\"zero_optimization\": {\"stage\": 9}}", &a, &c, &e), ZN_E_USAGE);
    assert_memory_equal(&c, &before, sizeof c);
}

/* ---- JSON syntax ---------------------------------------------------------- */

/* spec: Z-CFG-001 */
#define SWALLOW "this value is not JSON, so hjson reads it as a string to the end of the line, closing bracket included (quote it, or fix it)"
ZT_TEST(test_syntax_errors_one_line) {
    err_table(
        {"", "ds.json:1:1: JSON syntax error: unexpected end of input"},
        {"   ", "ds.json:1:4: JSON syntax error: unexpected end of input"},
        {"{", "ds.json:1:2: JSON syntax error: unexpected end of input"},
        {"{\"a\": }", "ds.json:1:7: JSON syntax error near '}'"},
        {"{\"a\" 1}", "ds.json:1:6: JSON syntax error near '1}'"},
        {"{\"a\"\"b\"}", "ds.json:1:5: JSON syntax error near '\"b\"}'"},
        {"{} x", "ds.json:1:4: JSON syntax error near 'x'"},
        {"{\"a\": tru}", "ds.json:1:7: JSON syntax error: " SWALLOW},
        {"{,}", "ds.json:1:2: JSON syntax error near ',}'"},
        {"{\"a\":1,x}", "ds.json:1:9: JSON syntax error near '}'"},   /* x is a quoteless key */
        {"{\"a\":{}x}", "ds.json:1:8: JSON syntax error near 'x}'"},
        {"{\"a\":[1,2x]}", "ds.json:1:9: JSON syntax error: " SWALLOW},
        {"{\"a\": \"abc", "ds.json:1:7: JSON syntax error: unterminated string"},
        {"{\"a\": \"\\q\"}", "ds.json:1:8: JSON syntax error near '\\q\"}'"},
        {"{\"a\":1,", "ds.json:1:8: JSON syntax error: unexpected end of input"},
        {"{\"a\": [1, 2", "ds.json:1:12: JSON syntax error: unexpected end of input"},
        {"{\"a\": 0123456789abcdefghij}", "ds.json:1:7: JSON syntax error: " SWALLOW},
        {"{\"a\": \xff}", "ds.json:1:7: JSON syntax error: " SWALLOW},
        /* a quoteless value (hjson) runs to the end of the line: bytes
           that are not JSON are a string there, not an error at once */
        {"{\"a\": \x80\x81\x82}", "ds.json:1:7: JSON syntax error: " SWALLOW},
        {"{\"a\":\x01 ]}", "ds.json:1:6: JSON syntax error: " SWALLOW});
}

/* spec: Z-CFG-001 */
ZT_TEST(test_syntax_errors_multi_line) {
    err_table(
        {"{\n  \"a\": [1,\n         2,,3]\n}", "ds.json:3:12: JSON syntax error near ',3]'"},
        {"{\n  \"a\": 1\n", "ds.json:3:1: JSON syntax error: unexpected end of input"},
        {"{\n\n  \"name\": \"abc\n}\n", "ds.json:3:11: JSON syntax error: unterminated string"},
        /* CRLF line ends: the column counts bytes after the '\n' */
        {"{\r\n  \"a\": ]\r\n}", "ds.json:2:8: JSON syntax error near ']'"},
        /* columns count bytes, not characters: "é" is two */
        {"{\"\xc3\xa9\": ,}", "ds.json:1:8: JSON syntax error near ',}'"});
}

/* spec: Z-CFG-001 */
ZT_TEST(test_syntax_nul_byte) {
    ZnConfigArgs a = no_args();
    ZnConfig c;
    ZnErr e;
    const char buf[] = "{\n  \"a\": 1\0}";
    assert_int_equal(zn_config_parse(buf, sizeof buf - 1, SRC, &a, &c, &e), ZN_E_USAGE);
    assert_string_equal(e.msg, "ds.json:2:9: JSON syntax error: NUL byte in input");
}

/* spec: Z-CFG-002 */
ZT_TEST(test_top_level_not_object) {
    err_table(
        {"[]", "ds.json: the top level must be a JSON object, got an array"},
        {"3", "ds.json: the top level must be a JSON object, got 3"},
        {"\"auto\"", "ds.json: the top level must be a JSON object, got \"auto\""},
        {"null", "ds.json: the top level must be a JSON object, got null"});
}

/* spec: Z-CFG-003 */
ZT_TEST(test_duplicate_keys) {
    err_table(
        {"{\"zero_optimization\": {\"stage\": 1, \"stage\": 2}}", "ds.json: zero_optimization.stage: duplicate key"},
        {"{" MB ", " MB "}", "ds.json: train_micro_batch_size_per_gpu: duplicate key"},
        /* inside sections zinc ignores, and inside arrays */
        {"{\"wandb\": {\"x\": [{\"a\": 1, \"b\": 2, \"a\": 3}]}}", "ds.json: wandb.x[0].a: duplicate key"},
        /* of several, the one whose second occurrence comes first */
        {"{\"b\": 1, \"a\": 1, \"c\": 1, \"a\": 2, \"b\": 2}", "ds.json: a: duplicate key"});
    /* keys are case-sensitive: these are two keys (one unknown) */
    warns("{" MB ", \"Seed\": 1, \"seed\": 2}", NULL, "zinc: warning: ds.json: Seed: unknown key, ignored\n");
    /* a big object goes through the sorted path as well */
    char big[40000];
    size_t n = (size_t)snprintf(big, sizeof big, "{\"wandb\": {");
    for (int i = 0; i < 2000; i++) n += (size_t)snprintf(big + n, sizeof big - n, "\"k%d\": %d, ", i, i);
    snprintf(big + n, sizeof big - n, "\"k1999\": 0}}");
    err_is(big, NULL, "ds.json: wandb.k1999: duplicate key");
}

/* ---- values and messages ---------------------------------------------------- */

/* spec: Z-CFG-004 */
ZT_TEST(test_wrong_types_name_the_path) {
    err_table(
        {"{\"zero_optimization\": {\"stage\": 7}}", "ds.json: zero_optimization.stage: expected an integer 0..3, got 7"},
        {"{\"zero_optimization\": {\"stage\": \"2x\"}}",
         "ds.json: zero_optimization.stage: expected an integer 0..3, got \"2x\""},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": \"abc\"}}}",
         "ds.json: optimizer.params.lr: expected a number >= 0, got \"abc\""},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"eps\": 0}}}",
         "ds.json: optimizer.params.eps: expected a positive number, got 0"},
        {"{\"zero_optimization\": {\"contiguous_gradients\": 2}}",
         "ds.json: zero_optimization.contiguous_gradients: expected true or false, got 2"},
        {"{\"zero_optimization\": {\"overlap_comm\": \"yess\"}}",
         "ds.json: zero_optimization.overlap_comm: expected true or false or null, got \"yess\""},
        {"{\"fp16\": {\"enabled\": 0}}", "ds.json: fp16.enabled: expected true or false, got 0"},
        {"{\"fp16\": {\"hysteresis\": 0}}", "ds.json: fp16.hysteresis: expected a positive integer, got 0"},
        {"{\"fp16\": {\"initial_scale_power\": 128}}",
         "ds.json: fp16.initial_scale_power: expected an integer 0..127, got 128"},
        {"{\"fp16\": {\"loss_scale\": true}}", "ds.json: fp16.loss_scale: expected a number >= 0, got true"},
        {"{\"fp16\": {\"loss_scale\": -1}}", "ds.json: fp16.loss_scale: expected a number >= 0, got -1"},
        {"{\"fp16\": {\"loss_scale\": 1e400}}", "ds.json: fp16.loss_scale: expected a number >= 0, got inf"},
        {"{\"fp16\": {\"min_loss_scale\": 0.5}}", "ds.json: fp16.min_loss_scale: expected an integer, got 0.5"},
        {"{\"fp16\": []}", "ds.json: fp16: expected an object, got an array"},
        {"{\"zero_optimization\": {\"offload_param\": {\"buffer_count\": -1}}}",
         "ds.json: zero_optimization.offload_param.buffer_count: expected an integer >= 0, got -1"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"ratio\": 1.5}}}",
         "ds.json: zero_optimization.offload_optimizer.ratio: expected a number in (0, 1], got 1.5"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"gpu\"}}}",
         "ds.json: zero_optimization.offload_optimizer.device: expected \"none\", \"cpu\" or \"nvme\", got \"gpu\""},
        {"{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_mom\": 1}}}",
         "ds.json: scheduler.params.cycle_min_mom: expected a number in [0, 1), got 1"},
        {"{\"seed\": -5}", "ds.json: seed: expected an integer >= 0, got -5"},
        {"{\"seed\": {\"value\": 1}}", "ds.json: seed: expected an integer >= 0, got an object"},
        {"{\"gradient_clipping\": null}", "ds.json: gradient_clipping: expected a number >= 0, got null"},
        {"{\"steps_per_print\": -1}", "ds.json: steps_per_print: expected an integer >= 0 or null, got -1"},
        {"{\"optimizer\": {\"type\": 7}}", "ds.json: optimizer.type: expected a string, got 7"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [0.9]}}}",
         "ds.json: optimizer.params.betas: expected [beta1, beta2], two numbers in [0, 1), got an array"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [0.9, 1.0]}}}",
         "ds.json: optimizer.params.betas[1]: expected a number in [0, 1), got 1"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [\"0.9\", 0.99]}}}",
         "ds.json: optimizer.params.betas[0]: expected a number in [0, 1), got \"0.9\""},
        {"{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": 3}}}",
         "ds.json: zero_optimization.offload_param.nvme_path: expected a path or null, got 3"},
        {"{\"zinc\": {\"exact\": \"true\"}}", "ds.json: zinc.exact: expected true or false, got \"true\""},
        {"{\"zero_optimization\": {\"reduce_bucket_size\": \"a very long string that goes on and on and on\"}}",
         "ds.json: zero_optimization.reduce_bucket_size: expected a positive integer,"
         " got \"a very long string that goes on and on a...\""});
}

/* spec: Z-CFG-004 */
ZT_TEST(test_integers_must_be_integral) {
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"reduce_bucket_size\": 5e8, \"allgather_bucket_size\": 2e8,"
                    " \"sub_group_size\": 1.0e12}}");
    assert_int_equal(c.zero.reduce_bucket_size, 500000000L);
    assert_int_equal(c.zero.allgather_bucket_size, 200000000L);
    assert_int_equal(c.zero.sub_group_size, 1000000000000L);
    err_table(
        {"{\"zero_optimization\": {\"reduce_bucket_size\": 2.5}}",
         "ds.json: zero_optimization.reduce_bucket_size: expected a positive integer, got 2.5"},
        {"{\"zero_optimization\": {\"sub_group_size\": 1e400}}",
         "ds.json: zero_optimization.sub_group_size: expected an integer >= 0, got inf"},
        {"{\"zero_optimization\": {\"max_live_parameters\": \"1e9\"}}",
         "ds.json: zero_optimization.max_live_parameters: expected an integer >= 0, got \"1e9\""},
        {"{\"fp16\": {\"loss_scale_window\": \"1000\"}}",
         "ds.json: fp16.loss_scale_window: expected an integer, got \"1000\""},
        {"{\"fp16\": {\"initial_scale_power\": 16.5}}",
         "ds.json: fp16.initial_scale_power: expected an integer 0..127, got 16.5"});
    /* -0 is an integer (zero) */
    c = ok("{" MB ", \"seed\": -0}");
    assert_int_equal(c.seed, 0);
    /* an integral double is fine for a double field read as integer */
    c = ok("{" MB ", \"fp16\": {\"min_loss_scale\": 2.0}}");
    assert_true(c.fp16.min_loss_scale == 2.0);
}

/* spec: Z-CFG-045 */
ZT_TEST(test_long_range) {
    /* sys.maxsize written out rounds to 2^63 as a double: read as LONG_MAX */
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage3_model_persistence_threshold\": 9223372036854775807}}");
    assert_int_equal(c.zero.model_persistence_threshold, LONG_MAX);
    c = ok("{" MB ", \"zero_optimization\": {\"stage3_model_persistence_threshold\": 4611686018427387904}}");
    assert_int_equal(c.zero.model_persistence_threshold, 4611686018427387904L);
    err_table(
        {"{\"zero_optimization\": {\"stage3_model_persistence_threshold\": 1e19}}",
         "ds.json: zero_optimization.stage3_model_persistence_threshold: expected an integer >= 0, got 1e+19"},
        {"{\"zero_optimization\": {\"mics_shard_size\": -1e19}}",
         "ds.json: zero_optimization.mics_shard_size: expected an integer, got -1e+19"},
        /* int fields stop at INT_MAX */
        {"{\"fp16\": {\"hysteresis\": 3e9}}", "ds.json: fp16.hysteresis: expected a positive integer, got 3000000000"});
}

/* ---- unknown and ignored keys ----------------------------------------------- */

/* spec: Z-CFG-005 */
ZT_TEST(test_unknown_key_in_zero_rejected) {
    err_table(
        {"{\"zero_optimization\": {\"foo\": 1}}",
         "ds.json: zero_optimization.foo: unknown key (DeepSpeed forbids unknown keys in zero_optimization)"},
        {"{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\", \"fast_init\": true}}}",
         "ds.json: zero_optimization.offload_param.fast_init: unknown key"
         " (DeepSpeed forbids unknown keys in zero_optimization.offload_param)"},
        {"{\"zero_optimization\": {\"offload_optimizer\": {\"buffer_size\": 4}}}",
         "ds.json: zero_optimization.offload_optimizer.buffer_size: unknown key"
         " (DeepSpeed forbids unknown keys in zero_optimization.offload_optimizer)"});
    /* keys are case-sensitive, as in pydantic */
    err_has("{\"zero_optimization\": {\"Stage\": 1}}", NULL, "zero_optimization.Stage: unknown key");
}

/* spec: Z-CFG-005 */
ZT_TEST(test_unknown_keys_elsewhere_warned) {
    ZnConfig c = warns("{" MB ", \"foo\": 1,"
                       " \"fp16\": {\"enabled\": true, \"bar\": 2},"
                       " \"bf16\": {\"baz\": false},"
                       " \"optimizer\": {\"type\": \"AdamW\", \"extra\": 1, \"params\": {\"lr\": 0.5, \"qux\": 3}},"
                       " \"scheduler\": {\"type\": \"WarmupLR\", \"what\": 0, \"params\": {\"nope\": 1}},"
                       " \"checkpoint\": {\"load_universal\": true, \"other\": 1}}",
                       NULL,
                       "zinc: warning: ds.json: foo: unknown key, ignored\n"
                       "zinc: warning: ds.json: fp16.bar: unknown key, ignored\n"
                       "zinc: warning: ds.json: bf16.baz: unknown key, ignored\n"
                       "zinc: warning: ds.json: optimizer.extra: unknown key, ignored\n"
                       "zinc: warning: ds.json: optimizer.params.qux: unknown key, ignored\n"
                       "zinc: warning: ds.json: scheduler.what: unknown key, ignored\n"
                       "zinc: warning: ds.json: scheduler.params.nope: unknown key, ignored\n"
                       "zinc: warning: ds.json: checkpoint.other: unknown key, ignored\n");
    /* and the rest was read */
    assert_int_equal(c.fp16.enabled, 1);
    assert_true(c.lr == 0.5);
    assert_int_equal(c.sched.type, ZN_SCHED_WARMUP_LR);
    assert_int_equal(c.load_universal, 1);
}

/* spec: Z-CFG-006 */
ZT_TEST(test_known_ignored_keys_silent) {
    ZnConfig c = warns("{" MB ", \"autotuning\": {}, \"flops_profiler\": {\"enabled\": false},"
                       " \"activation_checkpointing\": {}, \"sparse_attention\": {}, \"data_efficiency\": {},"
                       " \"compression_training\": {}, \"tensorboard\": {\"enabled\": true}, \"wandb\": {},"
                       " \"csv_monitor\": {}, \"comms_logger\": {}, \"elasticity\": {\"enabled\": false},"
                       " \"data_types\": {\"grad_accum_dtype\": \"fp32\"}, \"aio\": {\"block_size\": 1048576},"
                       " \"zero_allow_untested_optimizer\": true, \"zero_force_ds_cpu_optimizer\": false,"
                       " \"prescale_gradients\": false, \"gradient_predivide_factor\": 2.0,"
                       " \"gradient_allreduce_op\": \"mean\", \"communication_data_type\": \"fp32\","
                       " \"memory_breakdown\": true, \"steps_per_print\": 100, \"dump_state\": false,"
                       " \"wall_clock_breakdown\": true, \"sparse_gradients\": false, \"vocabulary_size\": 50257,"
                       " \"checkpoint\": {\"tag_validation\": \"Warn\", \"use_node_local_storage\": false}}",
                       NULL,
                       "zinc: warning: ds.json: sections zinc does not implement, ignored: autotuning, "
                       "flops_profiler, sparse_attention, data_efficiency, "
                       "compression_training, tensorboard, wandb, csv_monitor, comms_logger\n");
    assert_int_equal(c.activation_checkpointing, 1);   /* an implemented section now (Z-GPT-014) */
    ZnConfig c2 = warns("{" MB ", \"activation_checkpointing\": {\"partition_activations\": true, "
                        "\"number_checkpoints\": 4}}", NULL,
                        "zinc: warning: ds.json: activation_checkpointing: partition_activations and "
                        "cpu_checkpointing are not implemented: the checkpointed activations stay whole on "
                        "the device\n");
    assert_int_equal(c2.activation_checkpointing, 1);
    char w[512];
    c2 = ok_warn("{" MB ", \"activation_checkpointing\": null}", NULL, w, sizeof w);
    assert_int_equal(c2.activation_checkpointing, 0);
    /* settings with no effect on what zinc computes stay silent */
    warns("{" MB ", \"data_types\": {\"grad_accum_dtype\": \"fp32\"}, \"dump_state\": false,"
          " \"sparse_gradients\": false, \"vocabulary_size\": 50257, \"elasticity\": {\"enabled\": false}}",
          NULL, "");
    assert_int_equal(c.zero_allow_untested_optimizer, 1);
    assert_int_equal(c.zero_force_ds_cpu_optimizer, 0);
    assert_true(c.gradient_predivide_factor == 2.0);
    assert_int_equal(c.communication_data_type, ZN_F32);
    assert_int_equal(c.memory_breakdown, 1);
    assert_int_equal(c.steps_per_print, 100);
    assert_int_equal(c.wall_clock_breakdown, 1);
    /* a feature switched on that zinc does not implement is named */
    warns("{" MB ", \"amp\": {\"enabled\": true}, \"elasticity\": {\"enabled\": true}}", NULL,
          "zinc: warning: ds.json: amp.enabled: zinc does not implement amp; ignored\n"
          "zinc: warning: ds.json: elasticity.enabled: zinc does not implement elasticity; ignored\n");
}

/* spec: Z-CFG-007 */
ZT_TEST(test_zinc_section) {
    ZnConfig c = ok("{" MB ", \"zinc\": {\"canonical\": true, \"exact\": true}}");
    assert_int_equal(c.canonical, 1);
    assert_int_equal(c.exact, 1);
    err_is("{\"zinc\": {\"canon\": true}}", NULL,
           "ds.json: zinc.canon: unknown key (the \"zinc\" section takes canonical, exact, deepspeed_quirks, weight_decay_exclude)");
    err_is("{\"zinc\": {\"exact\": \"auto\"}}", NULL, "ds.json: zinc.exact: \"auto\" is not supported for this key");
    /* the args override the section */
    ZnConfigArgs a = no_args();
    a.canonical = 0;
    a.exact = 0;
    c = ok_with("{" MB ", \"zinc\": {\"canonical\": true, \"exact\": true}}", &a);
    assert_int_equal(c.canonical, 0);
    assert_int_equal(c.exact, 0);
    a.canonical = 1;
    c = ok_with("{" MB "}", &a);
    assert_int_equal(c.canonical, 1);
}

/* ---- batch triad -------------------------------------------------------------- */

/* A resolution of the batch triad: what is given, and what it resolves to,
   or (msg) the whole message it fails with */
typedef struct {
    int world;
    long tb, mb, ga;        /* -1: not given */
    long etb, emb, ega;     /* expected when it resolves */
    const char *msg;        /* NULL: it resolves */
} BatchCase;

static void run_batch_cases(const BatchCase *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const BatchCase *bc = &cases[i];
        long tb = bc->tb, mb = bc->mb, ga = bc->ga;
        ZnErr e = {0};
        int rc = zn_config_resolve_batch(&tb, &mb, &ga, bc->world, &e);
        if (!bc->msg) {
            if (rc != ZN_OK) fail_msg("case %zu: %s", i, e.msg);
            if (tb != bc->etb || mb != bc->emb || ga != bc->ega)
                fail_msg("case %zu: got (%ld, %ld, %ld), expected (%ld, %ld, %ld)", i, tb, mb, ga, bc->etb, bc->emb,
                         bc->ega);
        } else {
            if (rc != ZN_E_USAGE) fail_msg("case %zu: expected failure", i);
            if (strcmp(e.msg, bc->msg) != 0) fail_msg("case %zu: message\n  '%s'\nexpected\n  '%s'", i, e.msg, bc->msg);
            /* the inputs are left alone on failure */
            assert_true(tb == bc->tb && mb == bc->mb && ga == bc->ga);
        }
    }
}

/* spec: Z-CFG-009, Z-CFG-010, Z-CFG-011 */
ZT_TEST(test_batch_deepspeed_matrix) {
    /* DeepSpeed tests/unit/runtime/test_ds_config_dict.py::TestBatchConfig, world size 2 */
    static const BatchCase cases[] = {
        /* (32, 16, 1): success in every sub-case */
        {2, 32, 16, 1, 32, 16, 1, NULL},
        {2, 32, 16, -1, 32, 16, 1, NULL},
        {2, 32, -1, 1, 32, 16, 1, NULL},
        {2, -1, 16, 1, 32, 16, 1, NULL},
        {2, -1, 16, -1, 32, 16, 1, NULL},
        {2, 32, -1, -1, 32, 16, 1, NULL},
        /* (32, 8, 2): success */
        {2, 32, 8, 2, 32, 8, 2, NULL},
        {2, 32, 8, -1, 32, 8, 2, NULL},
        {2, 32, -1, 2, 32, 8, 2, NULL},
        {2, -1, 8, 2, 32, 8, 2, NULL},
        /* (33, 17, 2): failure in each sub-case */
        {2, 33, 17, 2, .msg = "train_batch_size 33 != train_micro_batch_size_per_gpu 17 *"
         " gradient_accumulation_steps 2 * world size 2 (= 68)"},
        {2, 33, 17, -1, .msg = "gradient_accumulation_steps 0 has to be greater than 0 (inferred: train_batch_size"
         " 33 // train_micro_batch_size_per_gpu 17 // world size 2)"},
        {2, -1, -1, 2, .msg = "either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
        {2, 33, -1, 2, .msg = "train_batch_size 33 != train_micro_batch_size_per_gpu 8 * gradient_accumulation_steps"
         " 2 * world size 2 (= 32) (inferred: train_batch_size 33 // world size 2 // gradient_accumulation_steps 2)"},
        /* (32, 18, 1): failure */
        {2, 32, 18, 1, .msg = "train_batch_size 32 != train_micro_batch_size_per_gpu 18 *"
         " gradient_accumulation_steps 1 * world size 2 (= 36)"},
        {2, 32, 18, -1, .msg = "gradient_accumulation_steps 0 has to be greater than 0 (inferred: train_batch_size"
         " 32 // train_micro_batch_size_per_gpu 18 // world size 2)"},
        {2, -1, -1, 1, .msg = "either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
    };
    run_batch_cases(cases, sizeof cases / sizeof *cases);
}

/* spec: Z-CFG-009, Z-CFG-011 */
ZT_TEST(test_batch_other_world_sizes) {
    static const BatchCase cases[] = {
        /* sub-cases DeepSpeed's table does not run for (32, 8, 2) */
        {2, -1, 8, -1, 16, 8, 1, NULL},
        {2, 32, -1, -1, 32, 16, 1, NULL},
        /* the (33, 17, 2) row with micro batch and accumulation: tb is inferred, fine */
        {2, -1, 17, 2, 68, 17, 2, NULL},
        /* W = 1 */
        {1, 8, -1, -1, 8, 8, 1, NULL},
        {1, -1, 8, -1, 8, 8, 1, NULL},
        {1, 8, 2, -1, 8, 2, 4, NULL},
        {1, 8, -1, 4, 8, 2, 4, NULL},
        {1, -1, 2, 4, 8, 2, 4, NULL},
        {1, 8, 2, 4, 8, 2, 4, NULL},
        {1, 9, 2, -1, .msg = "train_batch_size 9 != train_micro_batch_size_per_gpu 2 * gradient_accumulation_steps 4"
         " * world size 1 (= 8) (inferred: train_batch_size 9 // train_micro_batch_size_per_gpu 2 // world size 1)"},
        /* W = 3: floor division of 10 // 2 // 3 */
        {3, 12, 2, -1, 12, 2, 2, NULL},
        {3, 12, -1, 2, 12, 2, 2, NULL},
        {3, 10, 2, -1, .msg = "train_batch_size 10 != train_micro_batch_size_per_gpu 2 * gradient_accumulation_steps"
         " 1 * world size 3 (= 6) (inferred: train_batch_size 10 // train_micro_batch_size_per_gpu 2 // world size 3)"},
        {3, -1, 5, 3, 45, 5, 3, NULL},
        /* W = 4 */
        {4, 7, -1, -1, .msg = "train_batch_size 7 != train_micro_batch_size_per_gpu 1 * gradient_accumulation_steps"
         " 1 * world size 4 (= 4) (inferred: train_batch_size 7 // world size 4)"},
        {4, 64, 4, -1, 64, 4, 4, NULL},
        {4, 64, -1, 8, 64, 2, 8, NULL},
        /* W = 8 */
        {8, -1, 3, -1, 24, 3, 1, NULL},
        {8, 4, -1, -1, .msg =
         "train_micro_batch_size_per_gpu 0 has to be greater than 0 (inferred: train_batch_size 4 // world size 8)"},
        {8, 64, -1, 16, .msg = "train_micro_batch_size_per_gpu 0 has to be greater than 0 (inferred:"
         " train_batch_size 64 // world size 8 // gradient_accumulation_steps 16)"},
        {8, 256, 4, 8, 256, 4, 8, NULL},
    };
    run_batch_cases(cases, sizeof cases / sizeof *cases);
}

/* spec: Z-CFG-010 */
ZT_TEST(test_batch_nothing_or_ga_only) {
    static const BatchCase cases[] = {
        {1, -1, -1, -1, .msg = "either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
        {4, -1, -1, 8, .msg = "either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
    };
    run_batch_cases(cases, sizeof cases / sizeof *cases);
    err_is("{\"gradient_accumulation_steps\": 4}", NULL,
           "ds.json: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    err_is("{}", NULL, "ds.json: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
}

/* spec: Z-CFG-011 */
ZT_TEST(test_batch_zero_negative_overflow) {
    static const BatchCase cases[] = {
        {2, 0, 16, 1, .msg = "train_batch_size 0 has to be greater than 0"},
        {2, 32, 0, 1, .msg = "train_micro_batch_size_per_gpu 0 has to be greater than 0"},
        {2, 32, 16, 0, .msg = "gradient_accumulation_steps 0 has to be greater than 0"},
        {2, 32, 0, -1, .msg = "train_micro_batch_size_per_gpu 0 has to be greater than 0"},
        {2, 32, -1, 0, .msg = "gradient_accumulation_steps 0 has to be greater than 0"},
        {2, -1, 0, 4, .msg = "train_batch_size 0 has to be greater than 0"},
        {2, -1, -5, -1, .msg = "train_batch_size -10 has to be greater than 0"},
        {2, 0, -1, -1, .msg = "train_batch_size 0 has to be greater than 0"},
        {2, -1, LONG_MAX / 2, 4, .msg =
         "train_micro_batch_size_per_gpu 4611686018427387903 * gradient_accumulation_steps 4 * world size 2 overflows"},
        {4, -1, LONG_MAX / 2, -1, .msg =
         "train_micro_batch_size_per_gpu 4611686018427387903 * world size 4 overflows"},
        {2, 8, LONG_MAX / 2, 4, .msg = "train_batch_size 8 != train_micro_batch_size_per_gpu 4611686018427387903 *"
         " gradient_accumulation_steps 4 * world size 2 (overflows)"},
        {0, 8, -1, -1, .msg = "world size must be >= 1, got 0"},
    };
    run_batch_cases(cases, sizeof cases / sizeof *cases);
    /* err may be NULL */
    long tb = -1, mb = -1, ga = -1;
    assert_int_equal(zn_config_resolve_batch(&tb, &mb, &ga, 1, NULL), ZN_E_USAGE);
}

/* spec: Z-CFG-009, Z-CFG-011, Z-CFG-012 */
ZT_TEST(test_batch_through_parse) {
    ZnConfigArgs a = no_args();
    a.world_size = 2;
    ZnConfig c = ok_with("{\"train_batch_size\": 32, \"gradient_accumulation_steps\": 2}", &a);
    assert_true(c.train_batch_size == 32 && c.micro_batch == 8 && c.grad_accum == 2);
    /* null is "not given" (DeepSpeed's get_scalar_param returns None) */
    c = ok_with("{\"train_batch_size\": 32, \"train_micro_batch_size_per_gpu\": null,"
                " \"gradient_accumulation_steps\": null}", &a);
    assert_true(c.train_batch_size == 32 && c.micro_batch == 16 && c.grad_accum == 1);
    err_is("{\"train_batch_size\": 33, \"train_micro_batch_size_per_gpu\": 17, \"gradient_accumulation_steps\": 2}", &a,
           "ds.json: train_batch_size 33 != train_micro_batch_size_per_gpu 17 * gradient_accumulation_steps 2"
           " * world size 2 (= 68)");
    a.world_size = 0;
    err_is("{" MB "}", &a, "ds.json: world size must be >= 1, got 0");
}

/* spec: Z-CFG-012 */
ZT_TEST(test_batch_key_types) {
    err_table(
        {"{\"train_batch_size\": 0}", "ds.json: train_batch_size: expected a positive integer or null, got 0"},
        {"{\"train_micro_batch_size_per_gpu\": -1}",
         "ds.json: train_micro_batch_size_per_gpu: expected a positive integer or null, got -1"},
        {"{\"gradient_accumulation_steps\": 2.5}",
         "ds.json: gradient_accumulation_steps: expected a positive integer or null, got 2.5"},
        {"{\"train_batch_size\": \"8\"}", "ds.json: train_batch_size: expected a positive integer or null, got \"8\""});
    ZnConfig c = ok("{\"train_batch_size\": 1.6e1}");
    assert_int_equal(c.train_batch_size, 16);
}

/* ---- command-line args -------------------------------------------------------- */

/* spec: Z-CFG-013 */
ZT_TEST(test_args_override) {
    ZnConfigArgs a = no_args();
    args_batch(&a, 4, 2, 3);
    a.stage = 3;
    a.seed = 7;
    args_adam(&a, 0.25, 0.01, 0.8, 0.95, 1e-6);
    a.max_grad_norm = 0.5;
    a.warmup_steps = 10;
    a.dtype = ZN_BF16;
    const char *j = "{\"train_micro_batch_size_per_gpu\": 16, \"gradient_accumulation_steps\": 1,"
                    " \"zero_optimization\": {\"stage\": 1}, \"seed\": 99, \"gradient_clipping\": 2.0,"
                    " \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": false},"
                    " \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 1, \"weight_decay\": 0.5,"
                    " \"betas\": [0.1, 0.2], \"eps\": 0.1}},"
                    " \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 500}}}";
    ZnConfig c = ok_with(j, &a);
    assert_true(c.train_batch_size == 24 && c.micro_batch == 2 && c.grad_accum == 3);
    assert_int_equal(c.zero.stage, 3);
    assert_int_equal(c.zero.overlap_comm, 1); /* follows the overridden stage */
    assert_int_equal(c.seed, 7);
    assert_true(c.lr == 0.25 && c.weight_decay == 0.01 && c.beta1 == 0.8 && c.beta2 == 0.95 && c.eps == 1e-6);
    assert_true(c.gradient_clipping == 0.5);
    assert_int_equal(c.sched.warmup_num_steps, 10);
    assert_int_equal(c.fp16.enabled, 0);
    assert_int_equal(c.bf16.enabled, 1);
    assert_int_equal(c.model_dtype, ZN_BF16);
    /* dtype fp16 and fp32 */
    a = no_args();
    a.dtype = ZN_F16;
    c = ok_with("{" MB ", \"bf16\": {\"enabled\": true}}", &a);
    assert_true(c.fp16.enabled && !c.bf16.enabled && c.model_dtype == ZN_F16);
    a.dtype = ZN_F32;
    c = ok_with("{" MB ", \"fp16\": {\"enabled\": true}}", &a);
    assert_true(!c.fp16.enabled && !c.bf16.enabled && c.model_dtype == ZN_F32);
    /* train_batch_size from the args wins over the file's */
    a = no_args();
    a.train_batch_size = 12;
    c = ok_with("{\"train_batch_size\": 99, \"gradient_accumulation_steps\": 3}", &a);
    assert_true(c.train_batch_size == 12 && c.micro_batch == 4 && c.grad_accum == 3);
    /* total_steps and hidden_size only fill "auto" */
    a = no_args();
    a.total_steps = 50;
    a.hidden_size = 8;
    c = ok_with("{" MB ", \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 2000}},"
                " \"zero_optimization\": {\"reduce_bucket_size\": 1000}}", &a);
    assert_int_equal(c.sched.total_num_steps, 2000);
    assert_int_equal(c.zero.reduce_bucket_size, 1000);
    /* args apply with no optimizer section too */
    a = no_args();
    a.lr = 0.125;
    c = ok_with("{" MB "}", &a);
    assert_true(c.lr == 0.125);
    assert_int_equal(c.optimizer_present, 0);
    /* warmup_steps without a scheduler changes nothing visible */
    a = no_args();
    a.warmup_steps = 3;
    c = ok_with("{" MB "}", &a);
    assert_int_equal(c.sched.type, ZN_SCHED_NONE);
}

/* spec: Z-CFG-013 */
ZT_TEST(test_args_validated) {
    static const struct { int field; double v; const char *msg; } cases[] = {
        {0, 4, "ds.json: --stage: expected an integer 0..3, got 4"},
        {1, -3, "ds.json: --seed: expected an integer >= 0, got -3"},
        {2, -0.1, "ds.json: --lr: expected a number >= 0, got -0.1"},
        {3, 1.0, "ds.json: --beta1: expected a number in [0, 1), got 1"},
        {4, -1, "ds.json: --beta2: expected a number in [0, 1), got -1"},
        {5, 0, "ds.json: --eps: expected a positive number, got 0"},
        {6, -1, "ds.json: --weight-decay: expected a number >= 0, got -1"},
        {7, INFINITY, "ds.json: --max-grad-norm: expected a number >= 0, got inf"},
        {8, -2, "ds.json: --warmup-steps: expected an integer >= 0, got -2"},
        {9, ZN_U8, "ds.json: --dtype: expected fp32, fp16 or bf16, got u8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ZnConfigArgs a = no_args();
        switch (cases[i].field) {
        case 0: a.stage = (int)cases[i].v; break;
        case 1: a.seed = (long)cases[i].v; break;
        case 2: a.lr = cases[i].v; break;
        case 3: a.beta1 = cases[i].v; break;
        case 4: a.beta2 = cases[i].v; break;
        case 5: a.eps = cases[i].v; break;
        case 6: a.weight_decay = cases[i].v; break;
        case 7: a.max_grad_norm = cases[i].v; break;
        case 8: a.warmup_steps = (long)cases[i].v; break;
        case 9: a.dtype = (int)cases[i].v; break;
        }
        err_is("{" MB "}", &a, cases[i].msg);
    }
}

/* ---- "auto" ------------------------------------------------------------------ */

/* spec: Z-CFG-014 */
ZT_TEST(test_auto_batch_triad) {
    const char *all_auto = "{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": \"auto\","
                           " \"gradient_accumulation_steps\": \"auto\"}";
    ZnConfigArgs a = no_args();
    args_batch(&a, 4, 2, 3);
    ZnConfig c = ok_with(all_auto, &a);
    assert_true(c.train_batch_size == 24 && c.micro_batch == 2 && c.grad_accum == 3);
    /* accumulation arg unset: "auto" is "not given" and DeepSpeed's inference fills it */
    a.grad_accum = -1;
    c = ok_with(all_auto, &a);
    assert_true(c.train_batch_size == 8 && c.micro_batch == 2 && c.grad_accum == 1);
    /* train_batch_size "auto" from the file's own micro batch and accumulation */
    a = no_args();
    a.world_size = 2;
    c = ok_with("{\"train_batch_size\": \"auto\", \"train_micro_batch_size_per_gpu\": 4,"
                " \"gradient_accumulation_steps\": 5}", &a);
    assert_true(c.train_batch_size == 40 && c.micro_batch == 4 && c.grad_accum == 5);
    /* spec: Z-CFG-050 no flag for any of them: the Trainer's defaults,
       per_device_train_batch_size 8 and gradient_accumulation_steps 1 */
    c = ok_with(all_auto, &a);
    assert_true(c.train_batch_size == 16 && c.micro_batch == 8 && c.grad_accum == 1);
    /* train_batch_size "auto" but accumulation given alone, no micro batch
       key: nothing the Trainer fills, so the triad rule reports it */
    a.grad_accum = 2;
    err_is("{\"train_batch_size\": \"auto\"}", &a,
           "ds.json: either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    /* a filled value is checked like a written one */
    a = no_args();
    a.micro_batch = 0;
    err_is("{\"train_micro_batch_size_per_gpu\": \"auto\"}", &a,
           "ds.json: train_micro_batch_size_per_gpu: expected a positive integer or null,"
           " got 0 (\"auto\" from --micro-batch)");
}

/* spec: Z-CFG-015 */
ZT_TEST(test_auto_optimizer_params) {
    const char *j = "{" MB ", \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"auto\","
                    " \"betas\": \"auto\", \"eps\": \"auto\", \"weight_decay\": \"auto\"}}}";
    ZnConfigArgs a = no_args();
    args_adam(&a, 3e-4, 0.1, 0.85, 0.98, 1e-7);
    ZnConfig c = ok_with(j, &a);
    assert_true(c.lr == 3e-4 && c.beta1 == 0.85 && c.beta2 == 0.98 && c.eps == 1e-7 && c.weight_decay == 0.1);
    /* spec: Z-CFG-050 a flag not given: the Trainer's default (learning_rate
       5e-5, adam_epsilon 1e-8, weight_decay 0) */
    a.lr = NAN;
    c = ok_with(j, &a);
    assert_true(c.lr == 5e-5 && c.eps == 1e-7);
    a.lr = 3e-4;
    a.eps = NAN;
    a.weight_decay = NAN;
    c = ok_with(j, &a);
    assert_true(c.lr == 3e-4 && c.eps == 1e-8 && c.weight_decay == 0.0);
    a.eps = 1e-7;
    a.weight_decay = 0.1;
    a.lr = -1;
    err_is(j, &a, "ds.json: optimizer.params.lr: expected a number >= 0, got -1 (\"auto\" from --lr)");
}

/* spec: Z-CFG-015 */
ZT_TEST(test_auto_betas) {
    const char *j = "{" MB ", \"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": \"auto\"}}}";
    ZnConfigArgs a = no_args();
    /* spec: Z-CFG-050 each beta without its flag: the Trainer's adam_beta1
       0.9, adam_beta2 0.999 */
    a.beta1 = 0.5;
    ZnConfig c = ok_with(j, &a);
    assert_true(c.beta1 == 0.5 && c.beta2 == 0.999);
    a.beta1 = NAN;
    a.beta2 = 0.5;
    c = ok_with(j, &a);
    assert_true(c.beta1 == 0.9 && c.beta2 == 0.5);
    a.beta1 = 0.5;
    a.beta2 = 1.5;
    err_is(j, &a, "ds.json: optimizer.params.betas[1]: expected a number in [0, 1), got 1.5 (\"auto\" from --beta2)");
    a.beta2 = 0.25;
    c = ok_with(j, &a);
    assert_true(c.beta1 == 0.5 && c.beta2 == 0.25);
    /* "auto" inside the array is not a Hugging Face form */
    err_is("{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [\"auto\", 0.9]}}}", &a,
           "ds.json: optimizer.params.betas[0]: \"auto\" is not supported for this key");
}

/* spec: Z-CFG-016 */
ZT_TEST(test_auto_clipping_and_scheduler) {
    const char *j = "{" MB ", \"gradient_clipping\": \"auto\", \"scheduler\": {\"type\": \"WarmupDecayLR\","
                    " \"params\": {\"warmup_min_lr\": \"auto\", \"warmup_max_lr\": \"auto\","
                    " \"warmup_num_steps\": \"auto\", \"total_num_steps\": \"auto\"}}}";
    ZnConfigArgs a = no_args();
    a.max_grad_norm = 0.75;
    a.lr = 0.01;
    a.warmup_steps = 20;
    a.total_steps = 200;
    ZnConfig c = ok_with(j, &a);
    assert_true(c.gradient_clipping == 0.75);
    assert_true(c.sched.warmup_min_lr == 0 && c.sched.warmup_max_lr == 0.01);
    assert_int_equal(c.sched.warmup_num_steps, 20);
    assert_int_equal(c.sched.total_num_steps, 200);
    /* spec: Z-CFG-050 flags not given: the Trainer's max_grad_norm 1.0,
       learning_rate 5e-5, and warmup_steps 0 passed as max(1, 0) */
    a.max_grad_norm = NAN;
    a.lr = NAN;
    a.warmup_steps = -1;
    c = ok_with(j, &a);
    assert_true(c.gradient_clipping == 1.0 && c.sched.warmup_max_lr == 5e-5);
    assert_int_equal(c.sched.warmup_num_steps, 1);
    /* --warmup-steps 0, the Trainer's default, is no warmup: 1 step */
    a.warmup_steps = 0;
    c = ok_with(j, &a);
    assert_int_equal(c.sched.warmup_num_steps, 1);
    a.max_grad_norm = 1;
    a.lr = 0.01;
    a.warmup_steps = 20;
    a.total_steps = -1;
    err_is(j, &a, "ds.json: scheduler.params.total_num_steps is \"auto\" but no --steps was given");
    /* warmup_min_lr "auto" needs no flag: Hugging Face fills 0 */
    ZnConfigArgs none = no_args();
    c = ok_with("{" MB ", \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": \"auto\"}}}", &none);
    assert_true(c.sched.warmup_min_lr == 0);
}

/* spec: Z-CFG-017 */
ZT_TEST(test_auto_zero_from_hidden_size) {
    const char *j = "{" MB ", \"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": \"auto\","
                    " \"stage3_prefetch_bucket_size\": \"auto\", \"stage3_param_persistence_threshold\": \"auto\"}}";
    ZnConfigArgs a = no_args();
    a.hidden_size = 1024;
    ZnConfig c = ok_with(j, &a);
    assert_int_equal(c.zero.reduce_bucket_size, 1048576);
    assert_int_equal(c.zero.prefetch_bucket_size, 943718); /* int(0.9 * 1024 * 1024) */
    assert_int_equal(c.zero.param_persistence_threshold, 10240);
    a.hidden_size = 10;
    c = ok_with(j, &a);
    assert_int_equal(c.zero.reduce_bucket_size, 100);
    assert_int_equal(c.zero.prefetch_bucket_size, 90);
    assert_int_equal(c.zero.param_persistence_threshold, 100);
    a.hidden_size = 7; /* 0.9 * 7 * 7 = 44.1 -> 44 */
    c = ok_with(j, &a);
    assert_int_equal(c.zero.prefetch_bucket_size, 44);
    a.hidden_size = -1;
    err_is(j, &a, "ds.json: zero_optimization.reduce_bucket_size is \"auto\" but the model's hidden size is not known");
    err_is("{\"zero_optimization\": {\"prefetch_bucket_size\": \"auto\"}}", &a,
           "ds.json: zero_optimization.prefetch_bucket_size is \"auto\" but the model's hidden size is not known");
}

/* spec: Z-CFG-018 */
ZT_TEST(test_auto_precision_from_dtype) {
    const char *j = "{" MB ", \"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": \"auto\"}}";
    ZnConfigArgs a = no_args();
    ZnConfig c = ok_with(j, &a); /* no --dtype: both false */
    assert_true(!c.fp16.enabled && !c.bf16.enabled && c.model_dtype == ZN_F32);
    a.dtype = ZN_F16;
    c = ok_with(j, &a);
    assert_true(c.fp16.enabled && !c.bf16.enabled && c.model_dtype == ZN_F16);
    a.dtype = ZN_BF16;
    c = ok_with(j, &a);
    assert_true(!c.fp16.enabled && c.bf16.enabled && c.model_dtype == ZN_BF16);
    a.dtype = ZN_F32;
    c = ok_with(j, &a);
    assert_true(!c.fp16.enabled && !c.bf16.enabled);
}

/* spec: Z-CFG-019 */
ZT_TEST(test_auto_rejected_where_no_rule) {
    err_table(
        {"{\"fp16\": {\"loss_scale\": \"auto\"}}", "ds.json: fp16.loss_scale: \"auto\" is not supported for this key"},
        {"{\"optimizer\": {\"type\": \"auto\"}}", "ds.json: optimizer.type: \"auto\" is not supported for this key"},
        {"{\"optimizer\": \"auto\"}", "ds.json: optimizer: \"auto\" is not supported for this key"},
        {"{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_max_lr\": \"auto\"}}}",
         "ds.json: scheduler.params.cycle_max_lr: \"auto\" is not supported for this key"},
        {"{\"seed\": \"auto\"}", "ds.json: seed: \"auto\" is not supported for this key"},
        {"{\"steps_per_print\": \"auto\"}", "ds.json: steps_per_print: \"auto\" is not supported for this key"},
        {"{\"gradient_allreduce_op\": \"auto\"}",
         "ds.json: gradient_allreduce_op: \"auto\" is not supported for this key"},
        {"{\"bf16\": {\"check_grad_overflow\": \"auto\"}}",
         "ds.json: bf16.check_grad_overflow: \"auto\" is not supported for this key"});
    /* "Auto" is not "auto": it is just a wrong value */
    err_is("{\"gradient_clipping\": \"Auto\"}", NULL, "ds.json: gradient_clipping: expected a number >= 0, got \"Auto\"");
}

/* spec: Z-CFG-051 zero_optimization takes what DeepSpeed's pydantic takes:
   0/1 and yes/no strings for booleans, true/false and digit strings for
   integers, "auto" dropped (also under an unknown key); one warning each */
ZT_TEST(test_zero_lax_like_pydantic) {
    char w[4096];
    ZnConfig c = ok_warn("{" MB ", \"zero_optimization\": {\"stage\": \"2\", \"reduce_scatter\": \"No\","
                         " \"contiguous_gradients\": 0, \"reduce_bucket_size\": true,"
                         " \"allgather_bucket_size\": \" 1000 \", \"overlap_comm\": \"auto\", \"no_such\": \"auto\","
                         " \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": 1.0}}}", NULL, w, sizeof w);
    assert_int_equal(c.zero.stage, 2);
    assert_int_equal(c.zero.reduce_scatter, 0);
    assert_int_equal(c.zero.contiguous_gradients, 0);
    assert_int_equal(c.zero.reduce_bucket_size, 1);
    assert_int_equal(c.zero.allgather_bucket_size, 1000);
    assert_int_equal(c.zero.offload_optimizer.device, ZN_OFFLOAD_CPU);
    static const char *const lines[] = {
        "zinc: warning: ds.json: zero_optimization.stage: \"2\" taken as 2, as DeepSpeed's pydantic reads it\n",
        "zinc: warning: ds.json: zero_optimization.reduce_scatter: \"No\" taken as false, as DeepSpeed's pydantic reads it\n",
        "zinc: warning: ds.json: zero_optimization.contiguous_gradients: 0 taken as false, as DeepSpeed's pydantic reads it\n",
        "zinc: warning: ds.json: zero_optimization.reduce_bucket_size: true taken as 1, as DeepSpeed's pydantic reads it\n",
        "zinc: warning: ds.json: zero_optimization.allgather_bucket_size: \" 1000 \" taken as 1000, as DeepSpeed's pydantic reads it\n",
        "zinc: warning: ds.json: zero_optimization.overlap_comm: \"auto\" has no Hugging Face fill rule; dropped, as DeepSpeed drops it: the default applies\n",
        "zinc: warning: ds.json: zero_optimization.no_such: unknown key whose value is \"auto\"; dropped, as DeepSpeed drops it\n",
        "zinc: warning: ds.json: zero_optimization.offload_optimizer.pin_memory: 1 taken as true, as DeepSpeed's pydantic reads it\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        if (!strstr(w, lines[i])) fail_msg("missing warning %s in %s", lines[i], w);
    /* what pydantic refuses stays refused */
    err_is("{\"zero_optimization\": {\"reduce_scatter\": 2}}", NULL,
           "ds.json: zero_optimization.reduce_scatter: expected true or false, got 2");
    err_is("{\"zero_optimization\": {\"reduce_scatter\": \"maybe\"}}", NULL,
           "ds.json: zero_optimization.reduce_scatter: expected true or false, got \"maybe\"");
    err_is("{\"zero_optimization\": {\"sub_group_size\": \"5e8\"}}", NULL,
           "ds.json: zero_optimization.sub_group_size: expected an integer >= 0, got \"5e8\"");
    /* outside DeepSpeed's pydantic sections zinc stays strict */
    err_is("{\"wall_clock_breakdown\": 1}", NULL, "ds.json: wall_clock_breakdown: expected true or false, got 1");
}

/* spec: Z-CFG-006, Z-CFG-014, Z-CFG-015, Z-CFG-016, Z-CFG-017, Z-CFG-018 */
ZT_TEST(test_users_hf_config) {
    /* the annotated Hugging Face + DeepSpeed config users know, comments dropped */
    const char *j =
        "{\n"
        "  \"train_batch_size\": \"auto\",\n"
        "  \"train_micro_batch_size_per_gpu\": \"auto\",\n"
        "  \"gradient_accumulation_steps\": \"auto\",\n"
        "  \"gradient_clipping\": \"auto\",\n"
        "  \"steps_per_print\": 100,\n"
        "  \"wall_clock_breakdown\": false,\n"
        "  \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": \"auto\", \"betas\": \"auto\","
        " \"eps\": \"auto\", \"weight_decay\": \"auto\"}},\n"
        "  \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": \"auto\","
        " \"warmup_max_lr\": \"auto\", \"warmup_num_steps\": \"auto\"}},\n"
        "  \"fp16\": {\"enabled\": \"auto\", \"auto_cast\": false, \"loss_scale\": 0, \"initial_scale_power\": 16,"
        " \"loss_scale_window\": 1000, \"hysteresis\": 2, \"min_loss_scale\": 1},\n"
        "  \"bf16\": {\"enabled\": \"auto\"},\n"
        "  \"zero_optimization\": {\n"
        "    \"stage\": 3,\n"
        "    \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true, \"nvme_path\": \"/local_nvme\","
        " \"buffer_count\": 4, \"fast_init\": false},\n"
        "    \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true, \"nvme_path\": \"/local_nvme\","
        " \"buffer_count\": 5, \"buffer_size\": 1e8, \"max_in_cpu\": 1e9},\n"
        "    \"overlap_comm\": false,\n"
        "    \"reduce_bucket_size\": \"auto\",\n"
        "    \"allgather_partitions\": true,\n"
        "    \"allgather_bucket_size\": 5e8,\n"
        "    \"reduce_scatter\": true,\n"
        "    \"contiguous_gradients\": true,\n"
        "    \"round_robin_gradients\": false,\n"
        "    \"stage3_max_live_parameters\": 1e9,\n"
        "    \"stage3_max_reuse_distance\": 1e9,\n"
        "    \"stage3_prefetch_bucket_size\": \"auto\",\n"
        "    \"stage3_param_persistence_threshold\": \"auto\",\n"
        "    \"sub_group_size\": 1e12,\n"
        "    \"elastic_checkpoint\": false,\n"
        "    \"stage3_gather_16bit_weights_on_model_save\": true,\n"
        "    \"ignore_unused_parameters\": true\n"
        "  },\n"
        "  \"autotuning\": {}, \"flops_profiler\": {}, \"activation_checkpointing\": {},\n"
        "  \"sparse_attention\": {}, \"data_efficiency\": {}, \"compression_training\": {}\n"
        "}\n";
    ZnConfigArgs a = no_args();
    args_batch(&a, 8, 4, 2);
    a.max_grad_norm = 1.0;
    args_adam(&a, 5e-5, 0.0, 0.9, 0.999, 1e-8);
    a.warmup_steps = 100;
    a.dtype = ZN_BF16;
    a.hidden_size = 4096;
    char w[4096];
    ZnConfig c = ok_warn(j, &a, w, sizeof w);
    /* spec: Z-CFG-006 the sections zinc does not implement, in one line */
    const char *unimpl = "zinc: warning: ds.json: sections zinc does not implement, ignored: autotuning, "
                         "flops_profiler, sparse_attention, data_efficiency, compression_training\n";
    assert_memory_equal(w, unimpl, strlen(unimpl));
    /* spec: Z-CFG-050 then one line per "auto" and the value it took: 17 here */
    int lines = 0;
    for (const char *p = w + strlen(unimpl); *p; p = strchr(p, '\n') + 1, lines++)
        assert_memory_equal(p, "zinc: auto: ds.json: ", 21);
    assert_int_equal(lines, 17);
    assert_non_null(strstr(w, "zinc: auto: ds.json: optimizer.params.lr = 5e-05 (\"auto\" from --lr)\n"));
    assert_non_null(strstr(w, "zinc: auto: ds.json: bf16.enabled = true (\"auto\" from --dtype)\n"));
    assert_true(c.train_batch_size == 64 && c.micro_batch == 4 && c.grad_accum == 2);
    assert_true(c.gradient_clipping == 1.0 && c.steps_per_print == 100);
    assert_true(c.optimizer_present && c.opt_type == ZN_OPT_ADAM && c.adamw == 1 && c.lr == 5e-5);
    assert_true(c.sched.type == ZN_SCHED_WARMUP_LR && c.sched.warmup_max_lr == 5e-5 && c.sched.warmup_num_steps == 100);
    assert_true(!c.fp16.enabled && c.bf16.enabled && c.model_dtype == ZN_BF16);
    assert_int_equal(c.zero.stage, 3);
    assert_int_equal(c.zero.overlap_comm, 0);
    assert_int_equal(c.zero.offload_optimizer.device, ZN_OFFLOAD_CPU);
    assert_int_equal(c.zero.offload_param.device, ZN_OFFLOAD_CPU);
    assert_string_equal(c.zero.offload_param.nvme_path, "/local_nvme");
    assert_int_equal(c.zero.reduce_bucket_size, 4096L * 4096);
    assert_int_equal(c.zero.prefetch_bucket_size, 15099494L); /* int(0.9 * 4096 * 4096) */
    assert_int_equal(c.zero.param_persistence_threshold, 40960);
    assert_int_equal(c.zero.sub_group_size, 1000000000000L);
    assert_int_equal(c.zero.gather_16bit_weights_on_model_save, 1);
}

/* ---- zero_optimization -------------------------------------------------------- */

/* The config of one micro batch per rank and ZeRO stage s, with `more`
   (", KEY: VALUE" text, "" for none) after the stage in zero_optimization:
   a static buffer, good until the next call. */
static const char *at_stage(int s, const char *more) {
    static char j[256];
    snprintf(j, sizeof j, "{" MB ", \"zero_optimization\": {\"stage\": %d%s}}", s, more);
    return j;
}

/* spec: Z-CFG-020 */
ZT_TEST(test_zero_stage_forms) {
    for (int s = 0; s <= 3; s++) assert_int_equal(ok(at_stage(s, "")).zero.stage, s);
    assert_int_equal(ok("{" MB ", \"zero_optimization\": {\"stage\": true}}").zero.stage, 1);
    assert_int_equal(ok("{" MB ", \"zero_optimization\": {\"stage\": false}}").zero.stage, 0);
    assert_int_equal(ok("{" MB ", \"zero_optimization\": {\"stage\": 2.0}}").zero.stage, 2);
    err_table(
        {"{\"zero_optimization\": {\"stage\": -1}}",
         "ds.json: zero_optimization.stage: expected an integer 0..3, got -1"},
        {"{\"zero_optimization\": {\"stage\": 1.5}}",
         "ds.json: zero_optimization.stage: expected an integer 0..3, got 1.5"},
        {"{\"zero_optimization\": {\"stage\": null}}",
         "ds.json: zero_optimization.stage: expected an integer 0..3, got null"});
}

/* spec: Z-CFG-020 */
ZT_TEST(test_zero_deprecated_bool_section) {
    ZnConfig c = ok("{" MB ", \"zero_optimization\": true}");
    assert_int_equal(c.zero.stage, 1);
    assert_int_equal(c.zero.allgather_bucket_size, 500000000L);
    c = ok("{" MB ", \"zero_optimization\": true, \"allgather_size\": 1e6}");
    assert_int_equal(c.zero.stage, 1);
    assert_int_equal(c.zero.allgather_bucket_size, 1000000);
    c = ok("{" MB ", \"zero_optimization\": false, \"allgather_size\": 7}");
    assert_int_equal(c.zero.stage, 0);
    assert_int_equal(c.zero.allgather_bucket_size, 500000000L);
    err_is("{\"zero_optimization\": true, \"allgather_size\": -2}", NULL,
           "ds.json: allgather_size: expected a positive integer, got -2");
    err_is("{\"zero_optimization\": 2}", NULL, "ds.json: zero_optimization: expected an object, got 2");
}

/* spec: Z-CFG-021 */
ZT_TEST(test_zero_every_key_read) {
    const char *j =
        "{" MB ", \"zero_optimization\": {\"stage\": 2, \"contiguous_gradients\": false, \"reduce_scatter\": false,"
        " \"reduce_bucket_size\": 1000, \"use_multi_rank_bucket_allreduce\": false, \"allgather_partitions\": false,"
        " \"allgather_bucket_size\": 2000, \"overlap_comm\": true, \"load_from_fp32_weights\": false,"
        " \"elastic_checkpoint\": true, \"sub_group_size\": 3000, \"cpu_offload_use_pin_memory\": true,"
        " \"prefetch_bucket_size\": 4000, \"param_persistence_threshold\": 5000,"
        " \"model_persistence_threshold\": 6000, \"max_live_parameters\": 7000, \"max_reuse_distance\": 8000,"
        " \"gather_16bit_weights_on_model_save\": true, \"module_granularity_threshold\": -9,"
        " \"use_all_reduce_for_fetch_params\": true, \"allgather_sequential\": true,"
        " \"partition_stream_chunk_size\": 10, \"ignore_unused_parameters\": false, \"legacy_stage1\": false,"
        " \"round_robin_gradients\": true, \"zero_hpz_partition_size\": 2, \"zero_quantized_weights\": true,"
        " \"zero_quantized_nontrainable_weights\": true, \"zero_quantized_gradients\": true,"
        " \"zeropp_loco_param\": {\"err_beta\": 0.8}, \"mics_shard_size\": 4,"
        " \"mics_hierarchical_params_gather\": true, \"memory_efficient_linear\": false,"
        " \"pipeline_loading_checkpoint\": true, \"override_module_apply\": false, \"log_trace_cache_warnings\": true,"
        " \"enable_sanity_checks\": true, \"save_muon_momentum_buffer_in_memory\": true, \"leaf_module\": {},"
        " \"zenflow\": null, \"offload_param\": null, \"offload_optimizer\": null}}";
    every_key(j, "zero.", ZN_F32);
}

/* spec: Z-CFG-021 */
ZT_TEST(test_zero_aliases) {
    static const struct { const char *a, *b; size_t off; } names[] = {
        {"prefetch_bucket_size", "stage3_prefetch_bucket_size", offsetof(ZnZeroConfig, prefetch_bucket_size)},
        {"param_persistence_threshold", "stage3_param_persistence_threshold",
         offsetof(ZnZeroConfig, param_persistence_threshold)},
        {"model_persistence_threshold", "stage3_model_persistence_threshold",
         offsetof(ZnZeroConfig, model_persistence_threshold)},
        {"max_live_parameters", "stage3_max_live_parameters", offsetof(ZnZeroConfig, max_live_parameters)},
        {"max_reuse_distance", "stage3_max_reuse_distance", offsetof(ZnZeroConfig, max_reuse_distance)},
        {"module_granularity_threshold", "stage3_module_granularity_threshold",
         offsetof(ZnZeroConfig, module_granularity_threshold)},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        for (int which = 0; which < 2; which++) {
            char j[256];
            snprintf(j, sizeof j, "{" MB ", \"zero_optimization\": {\"%s\": 12345}}", which ? names[i].b : names[i].a);
            ZnConfig c = ok(j);
            long v;
            memcpy(&v, (const char *)&c.zero + names[i].off, sizeof v);
            assert_int_equal(v, 12345);
        }
        char j[256], msg[256];
        snprintf(j, sizeof j, "{\"zero_optimization\": {\"%s\": 1, \"%s\": 2}}", names[i].b, names[i].a);
        snprintf(msg, sizeof msg, "ds.json: zero_optimization.%s: given twice (as \"%s\" and \"%s\")", names[i].a,
                 names[i].b, names[i].a);
        err_is(j, NULL, msg);
    }
    static const char *const gather[] = {
        "gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
        "stage3_gather_fp16_weights_on_model_save", /* deprecated */
    };
    for (int i = 0; i < 3; i++) {
        char j[256];
        snprintf(j, sizeof j, "{" MB ", \"zero_optimization\": {\"%s\": true}}", gather[i]);
        assert_int_equal(ok(j).zero.gather_16bit_weights_on_model_save, 1);
    }
    err_is("{\"zero_optimization\": {\"stage3_gather_fp16_weights_on_model_save\": true,"
           " \"stage3_gather_16bit_weights_on_model_save\": true}}", NULL,
           "ds.json: zero_optimization.stage3_gather_16bit_weights_on_model_save: given twice"
           " (as \"stage3_gather_fp16_weights_on_model_save\" and \"stage3_gather_16bit_weights_on_model_save\")");
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"stage3_use_all_reduce_for_fetch_params\": true,"
                    " \"stage3_partition_stream_chunk_size\": 0}}");
    assert_int_equal(c.zero.use_all_reduce_for_fetch_params, 1);
}

/* spec: Z-CFG-022 */
ZT_TEST(test_overlap_comm_default_by_stage) {
    for (int s = 0; s <= 3; s++) {
        assert_int_equal(ok(at_stage(s, "")).zero.overlap_comm, s == 3);
        assert_int_equal(ok(at_stage(s, ", \"overlap_comm\": null")).zero.overlap_comm, s == 3);
        const char *other = s == 3 ? ", \"overlap_comm\": false" : ", \"overlap_comm\": true";
        assert_int_equal(ok(at_stage(s, other)).zero.overlap_comm, s != 3);
    }
    /* the default follows a stage given on the command line */
    ZnConfigArgs a = no_args();
    a.stage = 3;
    assert_int_equal(ok_with(at_stage(1, ""), &a).zero.overlap_comm, 1);
}

/* spec: Z-CFG-023 */
ZT_TEST(test_bucket_sizes_positive) {
    err_table(
        {"{\"zero_optimization\": {\"reduce_bucket_size\": 0}}",
         "ds.json: zero_optimization.reduce_bucket_size: expected a positive integer, got 0"},
        {"{\"zero_optimization\": {\"allgather_bucket_size\": -1}}",
         "ds.json: zero_optimization.allgather_bucket_size: expected an integer >= 0, got -1"},
        {"{\"zero_optimization\": {\"sub_group_size\": -1}}",
         "ds.json: zero_optimization.sub_group_size: expected an integer >= 0, got -1"},
        {"{\"zero_optimization\": {\"stage3_max_live_parameters\": -1}}",
         "ds.json: zero_optimization.stage3_max_live_parameters: expected an integer >= 0, got -1"});
    /* 0 is meaningful for these: no prefetch, nothing persistent */
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage3_prefetch_bucket_size\": 0,"
                    " \"stage3_param_persistence_threshold\": 0, \"zero_hpz_partition_size\": 0}}");
    assert_int_equal(c.zero.prefetch_bucket_size, 0);
    assert_int_equal(c.zero.param_persistence_threshold, 0);
}

/* spec: Z-CFG-023 */
ZT_TEST(test_allgather_bucket_size_odd) {
    /* DeepSpeed's TestIncorectAllgatherBucketSize: odd fails at stage 1/2 */
    for (int s = 1; s <= 2; s++) {
        char msg[200];
        snprintf(msg, sizeof msg, "ds.json: zero_optimization.allgather_bucket_size: must be even (a multiple of 2)"
                 " at ZeRO stage %d, got 1001", s);
        err_is(at_stage(s, ", \"allgather_bucket_size\": 1001"), NULL, msg);
        assert_int_equal(ok(at_stage(s, ", \"allgather_bucket_size\": 1002")).zero.allgather_bucket_size, 1002);
    }
    /* stages 0 and 3 do not use it */
    for (int s = 0; s <= 3; s += 3)
        assert_int_equal(ok(at_stage(s, ", \"allgather_bucket_size\": 3")).zero.allgather_bucket_size, 3);
    /* the check runs after a --stage override */
    ZnConfigArgs a = no_args();
    a.stage = 2;
    err_has("{" MB ", \"zero_optimization\": {\"stage\": 0, \"allgather_bucket_size\": 3}}", &a,
            "zero_optimization.allgather_bucket_size: must be even");
}

/* spec: Z-CFG-024 */
ZT_TEST(test_legacy_stage1_and_zenflow) {
    /* DeepSpeed 0.19.8 accepts legacy_stage1 and reads nothing of it */
    assert_int_equal(warns("{" MB ", \"zero_optimization\": {\"legacy_stage1\": true}}", NULL,
                           "zinc: warning: ds.json: zero_optimization.legacy_stage1: ignored, as DeepSpeed ignores it "
                           "(the legacy ZeRO stage 1 was removed in DeepSpeed 0.5.9)\n").zero.stage, 0);
    assert_int_equal(ok("{" MB ", \"zero_optimization\": {\"legacy_stage1\": false}}").zero.stage, 0);
    /* spec: Z-CFG-051 DeepSpeed 0.19.8's parameter_alignment and compute_grad_norm */
    warns_of("{" MB ", \"zero_optimization\": {\"stage\": 2, \"parameter_alignment\": true}}", NULL,
             "zero_optimization.parameter_alignment: accepted; zinc's flat buffers are not aligned");
    ZnConfig c = ok("{" MB ", \"gradient_clipping\": 0, \"zero_optimization\": {\"stage\": 1, \"compute_grad_norm\": false}}");
    assert_int_equal(c.zero.compute_grad_norm, 0);
    assert_int_equal(ok("{" MB "}").zero.compute_grad_norm, 1);
    err_is("{" MB ", \"gradient_clipping\": 0, \"zero_optimization\": {\"stage\": 3, \"compute_grad_norm\": false}}", NULL,
           "ds.json: zero_optimization.compute_grad_norm: false is supported only with ZeRO stage 1 or 2");
    err_is("{" MB ", \"zero_optimization\": {\"stage\": 2, \"compute_grad_norm\": false}}", NULL,
           "ds.json: zero_optimization.compute_grad_norm: false requires gradient_clipping 0");
    err_is("{" MB ", \"gradient_clipping\": 0, \"zero_optimization\": {\"stage\": 2, \"compute_grad_norm\": false,"
           " \"offload_optimizer\": {\"device\": \"cpu\"}}}", NULL,
           "ds.json: zero_optimization.compute_grad_norm: false does not support optimizer offload");
    err_is("{\"zero_optimization\": {\"zenflow\": {\"topk_ratio\": 0.1}}}", NULL,
           "ds.json: zero_optimization.zenflow: zenflow is not supported by zinc");
    err_is("{\"zero_optimization\": {\"offload_optimizer\": {\"super_offload\": true}}}", NULL,
           "ds.json: zero_optimization.offload_optimizer.super_offload: super_offload is not supported by zinc");
}

/* spec: Z-CFG-025 */
ZT_TEST(test_offload_sections) {
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\","
                    " \"nvme_path\": \"/local_nvme\", \"buffer_count\": 6, \"buffer_size\": 2e8, \"max_in_cpu\": 3e9,"
                    " \"pin_memory\": false}, \"offload_optimizer\": {\"device\": \"cpu\", \"buffer_count\": 8,"
                    " \"pin_memory\": false, \"pipeline_read\": true, \"pipeline_write\": false, \"fast_init\": true,"
                    " \"ratio\": 0.5, \"super_offload\": false, \"cpuadam_cores_perc\": 0.5, \"nvme_path\": null}}}");
    const ZnOffloadConfig *p = &c.zero.offload_param, *o = &c.zero.offload_optimizer;
    assert_true(p->present && p->device == ZN_OFFLOAD_NVME && p->buffer_count == 6);
    assert_string_equal(p->nvme_path, "/local_nvme");
    assert_true(p->buffer_size == 2e8 && p->max_in_cpu == 3e9 && p->pin_memory == 0);
    assert_true(o->present && o->device == ZN_OFFLOAD_CPU && o->buffer_count == 8 && o->pin_memory == 0);
    assert_true(o->fast_init == 1 && o->ratio == 0.5);
    assert_string_equal(o->nvme_path, "");
    /* an empty section: present, device none, defaults */
    c = ok("{" MB ", \"zero_optimization\": {\"offload_optimizer\": {}}}");
    assert_true(c.zero.offload_optimizer.present && c.zero.offload_optimizer.device == ZN_OFFLOAD_NONE);
    assert_true(c.zero.offload_optimizer.pin_memory == 1 && c.zero.offload_optimizer.buffer_count == 4);
    /* device "none" with stage 0 is fine */
    c = ok("{" MB ", \"zero_optimization\": {\"offload_param\": {\"device\": \"none\"}}}");
    assert_int_equal(c.zero.offload_param.device, ZN_OFFLOAD_NONE);
    /* device names are exact */
    err_has("{\"zero_optimization\": {\"offload_param\": {\"device\": \"CPU\"}}}", NULL,
            "zero_optimization.offload_param.device: expected \"none\", \"cpu\" or \"nvme\", got \"CPU\"");
    char longpath[400];
    memset(longpath, 'p', sizeof longpath);
    snprintf(longpath, sizeof longpath, "{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": \"/%0300d\"}}}", 0);
    err_is(longpath, NULL, "ds.json: zero_optimization.offload_param.nvme_path: longer than 255 bytes");
}

/* spec: Z-CFG-026 */
ZT_TEST(test_offload_validation) {
    err_table(
        {"{" MB ", \"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\"}}}",
         "ds.json: zero_optimization.offload_optimizer: offload requires ZeRO stage 1, 2 or 3 (stage is 0)"},
        {"{" MB ", \"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"}}}",
         "ds.json: zero_optimization.offload_param: offload requires ZeRO stage 1, 2 or 3 (stage is 0)"},
        {"{" MB ", \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"nvme\"}}}",
         "ds.json: zero_optimization.offload_optimizer.nvme_path: required when device is \"nvme\""},
        {"{" MB ", \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\","
         " \"nvme_path\": null}}}",
         "ds.json: zero_optimization.offload_param.nvme_path: required when device is \"nvme\""},
        {"{" MB ", \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\", \"ratio\": 0.3}}}",
         "ds.json: zero_optimization.offload_optimizer.ratio: partial offload (ratio < 1) needs ZeRO stage 3"},
        {"{" MB ", \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"ratio\": 0}}}",
         "ds.json: zero_optimization.offload_optimizer.ratio: expected a number in (0, 1], got 0"});
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\","
                    " \"ratio\": 0.3}}}");
    assert_true(c.zero.offload_optimizer.ratio == 0.3);
    c = ok("{" MB ", \"zero_optimization\": {\"stage\": 1, \"offload_optimizer\": {\"device\": \"cpu\"}}}");
    assert_int_equal(c.zero.offload_optimizer.device, ZN_OFFLOAD_CPU);
    /* parameters are offloaded only at stage 3: named at stage 1/2 */
    warns("{" MB ", \"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"cpu\"}}}", NULL,
          "zinc: warning: ds.json: zero_optimization.offload_param: only ZeRO stage 3 offloads parameters;"
          " ignored at stage 2\n");
    /* nvme at stages 1/2 is DeepSpeed's cpu: a warning, and no path needed */
    warns("{" MB ", \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"nvme\"}}}", NULL,
          "zinc: warning: ds.json: zero_optimization.offload_optimizer.device: \"nvme\" at ZeRO stage 2"
          " behaves as \"cpu\" (DeepSpeed swaps to NVMe only at stage 3); nvme_path is not used\n");
    /* an offload that is fine in the file is checked against --stage */
    ZnConfigArgs a = no_args();
    a.stage = 0;
    err_has("{" MB ", \"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"}}}", &a,
            "offload requires ZeRO stage 1, 2 or 3 (stage is 0)");
}

/* spec: Z-CFG-048 the aio section: DeepSpeed's defaults, its keys read,
   retired names and unknown keys warned, GPUDirect Storage refused */
ZT_TEST(test_aio_section) {
    ZnConfig c = ok("{" MB "}");
    check_fields(&c, "aio.", 0);   /* each as FIELDS has it */
    assert_int_equal(c.zero.offload_optimizer.pipeline_read, 0);
    c = ok("{" MB ", \"aio\": {\"block_size\": 262144, \"queue_depth\": 32, \"intra_op_parallelism\": 4,"
           " \"single_submit\": true, \"overlap_events\": false, \"use_gds\": false},"
           " \"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\","
           " \"pipeline_read\": true, \"pipeline_write\": true}}}");
    check_fields(&c, "aio.", 1);   /* each as FIELDS writes it */
    assert_int_equal(c.zero.offload_optimizer.pipeline_read, 1);
    assert_int_equal(c.zero.offload_optimizer.pipeline_write, 1);
    c = warns("{" MB ", \"aio\": {\"thread_count\": 2}}", NULL,
              "zinc: warning: ds.json: aio.thread_count: DeepSpeed ignores thread_count (renamed "
              "intra_op_parallelism); ignored\n");
    assert_int_equal(c.aio.intra_op_parallelism, 1);
    warns_of("{" MB ", \"aio\": {\"num_threads\": 8}}", NULL,
             "aio.num_threads: DeepSpeed ignores num_threads (renamed intra_op_parallelism)");
    warns_of("{" MB ", \"aio\": {\"blok_size\": 8}}", NULL, "aio.blok_size");
    err_table(
        {"{" MB ", \"aio\": {\"use_gds\": true}}",
         "ds.json: aio.use_gds: GPUDirect Storage is not supported by zinc (its NVMe swap goes through host buffers);"
         " set it to false"},
        {"{" MB ", \"aio\": {\"queue_depth\": 0}}", "ds.json: aio.queue_depth: expected a positive integer, got 0"});
}

/* spec: Z-CFG-027 */
ZT_TEST(test_cpu_offload_deprecated) {
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"cpu_offload\": true, \"cpu_offload_param\": true,"
                    " \"cpu_offload_use_pin_memory\": false}}");
    assert_true(c.zero.offload_optimizer.present && c.zero.offload_optimizer.device == ZN_OFFLOAD_CPU);
    assert_true(c.zero.offload_param.present && c.zero.offload_param.device == ZN_OFFLOAD_CPU);
    assert_int_equal(c.zero.offload_optimizer.pin_memory, 1); /* cpu_offload_use_pin_memory sets nothing */
    c = ok("{" MB ", \"zero_optimization\": {\"stage\": 2, \"cpu_offload\": false, \"cpu_offload_param\": null,"
           " \"cpu_offload_use_pin_memory\": null}}");
    assert_true(!c.zero.offload_optimizer.present && !c.zero.offload_param.present);
    err_table(
        {"{\"zero_optimization\": {\"stage\": 2, \"offload_optimizer\": {\"device\": \"cpu\"},"
         " \"cpu_offload\": true}}",
         "ds.json: zero_optimization.cpu_offload: cannot give the deprecated cpu_offload together with"
         " offload_optimizer"},
        {"{\"zero_optimization\": {\"stage\": 3, \"cpu_offload_param\": false, \"offload_param\": null}}",
         "ds.json: zero_optimization.cpu_offload_param: cannot give the deprecated cpu_offload_param together"
         " with offload_param"},
        {"{\"zero_optimization\": {\"cpu_offload\": 2}}",
         "ds.json: zero_optimization.cpu_offload: expected true or false or null, got 2"});
}

/* spec: Z-CFG-028 */
ZT_TEST(test_allgather_sequential_stage3) {
    ZnConfig c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"stage3_allgather_sequential\": true,"
                    " \"stage3_prefetch_bucket_size\": 5000}}");
    assert_int_equal(c.zero.prefetch_bucket_size, 1);
    c = ok("{" MB ", \"zero_optimization\": {\"stage\": 3, \"stage3_prefetch_bucket_size\": 5000}}");
    assert_int_equal(c.zero.prefetch_bucket_size, 5000);
}

/* ---- optimizer -------------------------------------------------------------- */

/* spec: Z-CFG-029 */
ZT_TEST(test_optimizer_types) {
    static const struct { const char *name; ZnOptType t; } good[] = {
        {"Adam", ZN_OPT_ADAM}, {"adam", ZN_OPT_ADAM}, {"ADAM", ZN_OPT_ADAM},
        {"AdamW", ZN_OPT_ADAMW}, {"adamw", ZN_OPT_ADAMW}, {"ADAMW", ZN_OPT_ADAMW},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char j[128];
        snprintf(j, sizeof j, "{" MB ", \"optimizer\": {\"type\": \"%s\"}}", good[i].name);
        ZnConfig c = ok(j);
        assert_int_equal(c.opt_type, good[i].t);
        assert_int_equal(c.optimizer_present, 1);
        assert_int_equal(c.adamw, 1);
    }
    err_table(
        {"{\"optimizer\": {\"type\": \"SGD\"}}", "ds.json: optimizer.type: 'sgd' is not supported by zinc (Adam, AdamW)"},
        {"{\"optimizer\": {\"type\": \"Lamb\", \"params\": {\"lr\": 1}}}",
         "ds.json: optimizer.type: 'lamb' is not supported by zinc (Adam, AdamW)"},
        {"{\"optimizer\": {\"type\": \"OneBitAdam\"}}",
         "ds.json: optimizer.type: 'onebitadam' is not supported by zinc (Adam, AdamW)"},
        {"{\"optimizer\": {\"params\": {\"lr\": 1}}}", "ds.json: optimizer.type: missing (zinc supports Adam, AdamW)"});
    /* no section: defaults, not present */
    ZnConfig c = ok("{" MB "}");
    assert_int_equal(c.optimizer_present, 0);
    assert_true(c.opt_type == ZN_OPT_ADAM && c.adamw == 1 && c.lr == 1e-3);
}

/* spec: Z-CFG-030 */
ZT_TEST(test_optimizer_params) {
    ZnConfig c = ok("{" MB ", \"optimizer\": {\"type\": \"Adam\", \"legacy_fusion\": false, \"params\": {\"lr\": 0.002,"
                    " \"betas\": [0.8, 0.99], \"eps\": 1e-6, \"weight_decay\": 0.01, \"bias_correction\": false,"
                    " \"torch_adam\": true, \"amsgrad\": false, \"set_grad_none\": true,"
                    " \"fp32_optimizer_states\": true}}}");
    assert_true(c.lr == 0.002 && c.beta1 == 0.8 && c.beta2 == 0.99 && c.eps == 1e-6 && c.weight_decay == 0.01);
    assert_int_equal(c.bias_correction, 0);
    assert_int_equal(c.torch_adam, 1);
    assert_int_equal(c.adamw, 1);
    /* effective adamw = type AdamW or adam_w_mode */
    static const struct { const char *type, *mode; int adamw; } m[] = {
        {"Adam", "true", 1}, {"Adam", "false", 0}, {"AdamW", "true", 1}, {"AdamW", "false", 1},
    };
    for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
        char j[160];
        snprintf(j, sizeof j, "{" MB ", \"optimizer\": {\"type\": \"%s\", \"params\": {\"adam_w_mode\": %s}}}",
                 m[i].type, m[i].mode);
        assert_int_equal(ok(j).adamw, m[i].adamw);
    }
    /* boundaries: lr 0 and betas 0 are allowed */
    c = ok("{" MB ", \"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 0, \"betas\": [0, 0]}}}");
    assert_true(c.lr == 0 && c.beta1 == 0 && c.beta2 == 0);
}

/* spec: Z-CFG-030 */
ZT_TEST(test_optimizer_param_errors) {
    err_table(
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"amsgrad\": true}}}",
         "ds.json: optimizer.params.amsgrad: amsgrad is not supported by zinc"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"max_grad_norm\": 1.0}}}",
         "ds.json: optimizer.params.max_grad_norm: not supported as an optimizer parameter (DeepSpeed raises);"
         " use the top-level \"gradient_clipping\""},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": -0.1}}}",
         "ds.json: optimizer.params.lr: expected a number >= 0, got -0.1"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"weight_decay\": -1}}}",
         "ds.json: optimizer.params.weight_decay: expected a number >= 0, got -1"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [-0.1, 0.9]}}}",
         "ds.json: optimizer.params.betas[0]: expected a number in [0, 1), got -0.1"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": [0.9, 0.99, 0.999]}}}",
         "ds.json: optimizer.params.betas: expected [beta1, beta2], two numbers in [0, 1), got an array"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": 0}}}",
         "ds.json: optimizer.params.adam_w_mode: expected true or false, got 0"},
        {"{\"optimizer\": {\"type\": \"Adam\", \"params\": [1]}}",
         "ds.json: optimizer.params: expected an object, got an array"});
}

/* ---- fp16 / bf16 ------------------------------------------------------------- */

/* spec: Z-CFG-031 */
ZT_TEST(test_fp16_keys) {
    ZnConfig c = every_key("{" MB ", \"zero_optimization\": {\"stage\": 1}, \"fp16\": {\"enabled\": true,"
                           " \"auto_cast\": true, \"loss_scale\": 0, \"initial_scale_power\": 8, \"loss_scale_window\": 2,"
                           " \"hysteresis\": 1, \"consecutive_hysteresis\": true, \"min_loss_scale\": 2,"
                           " \"fp16_master_weights_and_grads\": true}}", "fp16.", ZN_F16);
    /* a static scale */
    c = ok("{" MB ", \"fp16\": {\"enabled\": true, \"loss_scale\": 128.5}}");
    assert_true(c.fp16.loss_scale == 128.5);
    c = ok("{" MB ", \"fp16\": {\"initial_scale_power\": 0}}");
    assert_int_equal(c.fp16.initial_scale_power, 0);
    c = ok("{" MB ", \"fp16\": {\"initial_scale_power\": 32}}");
    assert_int_equal(c.fp16.initial_scale_power, 32);
    err_is("{\"fp16\": {\"initial_scale_power\": -1}}", NULL,
           "ds.json: fp16.initial_scale_power: expected an integer 0..127, got -1");
    err_is("{\"fp16\": {\"consecutive_hysteresis\": \"no\"}}", NULL,
           "ds.json: fp16.consecutive_hysteresis: expected true or false, got \"no\"");
}

/* spec: Z-CFG-032 */
ZT_TEST(test_fp16_dynamic_scale_checks) {
    err_table(
        {"{" MB ", \"fp16\": {\"enabled\": true, \"loss_scale_window\": 0}}",
         "ds.json: fp16.loss_scale_window: must be > 0 when dynamic loss scaling is enabled (loss_scale 0), got 0"},
        {"{" MB ", \"fp16\": {\"enabled\": true, \"loss_scale_window\": -5}}",
         "ds.json: fp16.loss_scale_window: must be > 0 when dynamic loss scaling is enabled (loss_scale 0), got -5"},
        {"{" MB ", \"fp16\": {\"enabled\": true, \"min_loss_scale\": 0}}",
         "ds.json: fp16.min_loss_scale: must be > 0 when dynamic loss scaling is enabled (loss_scale 0), got 0"},
        {"{" MB ", \"fp16\": {\"enabled\": true, \"min_loss_scale\": -1}}",
         "ds.json: fp16.min_loss_scale: must be > 0 when dynamic loss scaling is enabled (loss_scale 0), got -1"});
    /* unused values are not checked: static scale, or fp16 off */
    ZnConfig c = ok("{" MB ", \"fp16\": {\"enabled\": true, \"loss_scale\": 4, \"loss_scale_window\": 0,"
                    " \"min_loss_scale\": 0}}");
    assert_true(c.fp16.loss_scale == 4);
    ok("{" MB ", \"fp16\": {\"enabled\": false, \"loss_scale_window\": 0, \"min_loss_scale\": -3}}");
    /* ... until --dtype fp16 switches fp16 on */
    ZnConfigArgs a = no_args();
    a.dtype = ZN_F16;
    err_has("{" MB ", \"fp16\": {\"enabled\": false, \"loss_scale_window\": 0}}", &a,
            "fp16.loss_scale_window: must be > 0");
}

/* spec: Z-CFG-033 */
ZT_TEST(test_bf16_keys_and_old_name) {
    every_key("{" MB ", \"zero_optimization\": {\"stage\": 2}, \"bf16\": {\"enabled\": true,"
              " \"immediate_grad_update\": true, \"check_grad_overflow\": false,"
              " \"bf16_master_weights_and_grads\": true, \"bf16_optimizer_states\": true}}", "bf16.", ZN_BF16);
    ZnConfig c = ok("{" MB ", \"bfloat16\": {\"enabled\": true}}");
    assert_int_equal(c.bf16.enabled, 1);
    assert_int_equal(c.model_dtype, ZN_BF16);
    err_is("{\"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": false}}", NULL,
           "ds.json: bfloat16: given twice (as \"bf16\" and \"bfloat16\")");
    err_is("{\"bfloat16\": {\"enabled\": \"yes\"}}", NULL, "ds.json: bfloat16.enabled: expected true or false, got \"yes\"");
}

/* spec: Z-CFG-034 */
ZT_TEST(test_fp16_and_bf16_both_on) {
    err_is("{" MB ", \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}", NULL,
           "ds.json: fp16.enabled and bf16.enabled are both true; bf16 and fp16 modes cannot be enabled together");
    /* --dtype settles it */
    ZnConfigArgs a = no_args();
    a.dtype = ZN_F16;
    ZnConfig c = ok_with("{" MB ", \"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}", &a);
    assert_int_equal(c.model_dtype, ZN_F16);
    c = ok("{" MB ", \"fp16\": {\"enabled\": false}, \"bf16\": {\"enabled\": false}}");
    assert_int_equal(c.model_dtype, ZN_F32);
}

/* spec: Z-CFG-035 */
ZT_TEST(test_master_weight_options_need_zero) {
    err_table(
        {"{" MB ", \"fp16\": {\"fp16_master_weights_and_grads\": true}}",
         "ds.json: fp16.fp16_master_weights_and_grads: only supported with ZeRO stage 1, 2 or 3"},
        {"{" MB ", \"bf16\": {\"bf16_master_weights_and_grads\": true}}",
         "ds.json: bf16.bf16_master_weights_and_grads: only supported with ZeRO stage 1, 2 or 3"},
        {"{" MB ", \"bf16\": {\"bf16_optimizer_states\": true, \"bf16_master_weights_and_grads\": true}}",
         "ds.json: bf16.bf16_master_weights_and_grads: only supported with ZeRO stage 1, 2 or 3"},
        {"{" MB ", \"zero_optimization\": {\"stage\": 1}, \"bf16\": {\"bf16_optimizer_states\": true}}",
         "ds.json: bf16.bf16_optimizer_states: requires bf16.bf16_master_weights_and_grads"});
    ok("{" MB ", \"zero_optimization\": {\"stage\": 3}, \"bf16\": {\"bf16_optimizer_states\": true,"
       " \"bf16_master_weights_and_grads\": true}}");
}

/* ---- scheduler -------------------------------------------------------------- */

/* spec: Z-CFG-036 */
ZT_TEST(test_scheduler_types) {
    static const struct { const char *name, *params; ZnSchedType t; } good[] = {
        {"WarmupLR", "{}", ZN_SCHED_WARMUP_LR},
        {"WarmupDecayLR", "{\"total_num_steps\": 10}", ZN_SCHED_WARMUP_DECAY_LR},
        {"WarmupCosineLR", "{\"total_num_steps\": 10}", ZN_SCHED_WARMUP_COSINE_LR},
        {"OneCycle", "{\"cycle_min_lr\": 0.1, \"cycle_max_lr\": 1}", ZN_SCHED_ONE_CYCLE},
        {"LRRangeTest", "{}", ZN_SCHED_LR_RANGE_TEST},
    };
    char w[512];
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        char j[200];
        snprintf(j, sizeof j, "{" MB ", \"scheduler\": {\"type\": \"%s\", \"params\": %s}}", good[i].name, good[i].params);
        ZnConfig c = ok_warn(j, NULL, w, sizeof w); /* T < warmup warns for the two with total_num_steps */
        assert_int_equal(c.sched.type, good[i].t);
    }
    err_is("{\"scheduler\": {\"type\": \"Foo\"}}", NULL,
           "ds.json: scheduler.type: unknown schedule 'Foo' (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle,"
           " LRRangeTest)");
    /* names are exact: DeepSpeed would look "warmuplr" up in torch.optim.lr_scheduler */
    err_has("{\"scheduler\": {\"type\": \"warmuplr\"}}", NULL, "scheduler.type: unknown schedule 'warmuplr'");
    err_is("{\"scheduler\": {\"params\": {}}}", NULL,
           "ds.json: scheduler.type: missing (WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest)");
    err_is("{\"scheduler\": {\"type\": null}}", NULL, "ds.json: scheduler.type: expected a string, got null");
    /* no params at all: the constructor's defaults */
    ZnConfig c = ok("{" MB ", \"scheduler\": {\"type\": \"LRRangeTest\"}}");
    assert_true(c.sched.lr_range_test_min_lr == 1e-3 && c.sched.lr_range_test_step_size == 2000);
}

/* spec: Z-CFG-037 */
ZT_TEST(test_scheduler_params_and_defaults) {
    ZnConfig c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupLR\"}}");
    assert_true(isnan(c.sched.warmup_max_lr)); /* None: the optimizer's lr, resolved at use */
    assert_true(c.sched.warmup_min_lr == 0 && c.sched.warmup_num_steps == 1000 && !c.sched.warmup_type_linear);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 5000}}}");
    assert_true(c.sched.warmup_max_lr == 0.001);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 5000,"
           " \"warmup_max_lr\": null}}}");
    assert_true(isnan(c.sched.warmup_max_lr));
    c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 0.001,"
           " \"warmup_max_lr\": 0.01, \"warmup_num_steps\": 50, \"warmup_type\": \"linear\", \"last_batch_iteration\": -1}}}");
    assert_true(c.sched.warmup_min_lr == 0.001 && c.sched.warmup_max_lr == 0.01);
    assert_int_equal(c.sched.warmup_num_steps, 50);
    assert_int_equal(c.sched.warmup_type_linear, 1);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 5000,"
           " \"warmup_min_ratio\": 0.1, \"cos_min_ratio\": 0.01, \"warmup_num_steps\": 100}}}");
    assert_true(c.sched.warmup_min_ratio == 0.1 && c.sched.cos_min_ratio == 0.01 && c.sched.total_num_steps == 5000);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.01, \"cycle_max_lr\": 0.1,"
           " \"decay_lr_rate\": 0.5, \"cycle_first_step_size\": 10, \"cycle_second_step_size\": 20,"
           " \"cycle_first_stair_count\": 2, \"cycle_second_stair_count\": 3, \"decay_step_size\": 4,"
           " \"cycle_momentum\": false, \"cycle_min_mom\": 0.5, \"cycle_max_mom\": 0.6, \"decay_mom_rate\": 0.1}}}");
    const ZnSchedConfig *s = &c.sched;
    assert_true(s->cycle_min_lr == 0.01 && s->cycle_max_lr == 0.1 && s->decay_lr_rate == 0.5);
    assert_true(s->cycle_first_step_size == 10 && s->cycle_second_step_size == 20);
    assert_true(s->cycle_first_stair_count == 2 && s->cycle_second_stair_count == 3 && s->decay_step_size == 4);
    assert_true(!s->cycle_momentum && s->cycle_min_mom == 0.5 && s->cycle_max_mom == 0.6 && s->decay_mom_rate == 0.1);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0.01, \"cycle_max_lr\": 0.1,"
           " \"cycle_second_step_size\": null, \"cycle_second_stair_count\": null}}}");
    assert_true(c.sched.cycle_second_step_size == -1 && c.sched.cycle_second_stair_count == -1);
    assert_true(c.sched.cycle_first_step_size == 2000 && c.sched.cycle_momentum == 1);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_min_lr\": 0.5,"
           " \"lr_range_test_step_size\": 7, \"lr_range_test_step_rate\": 2, \"lr_range_test_staircase\": true}}}");
    assert_true(c.sched.lr_range_test_min_lr == 0.5 && c.sched.lr_range_test_step_size == 7);
    assert_true(c.sched.lr_range_test_step_rate == 2 && c.sched.lr_range_test_staircase == 1);
}

/* spec: Z-CFG-037 */
ZT_TEST(test_scheduler_param_of_another_schedule) {
    err_table(
        {"{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"total_num_steps\": 10}}}",
         "ds.json: scheduler.params.total_num_steps: not a parameter of WarmupLR"},
        {"{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_max_lr\": 0.1}}}",
         "ds.json: scheduler.params.warmup_max_lr: not a parameter of WarmupCosineLR"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"cycle_min_lr\": 0.1}}}",
         "ds.json: scheduler.params.cycle_min_lr: not a parameter of LRRangeTest"},
        {"{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"warmup_type\": \"log\"}}}",
         "ds.json: scheduler.params.warmup_type: not a parameter of OneCycle"});
}

/* spec: Z-CFG-038 */
ZT_TEST(test_scheduler_requirements) {
    err_table(
        {"{" MB ", \"scheduler\": {\"type\": \"WarmupDecayLR\"}}",
         "ds.json: scheduler.params.total_num_steps: required by WarmupDecayLR"},
        {"{" MB ", \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {}}}",
         "ds.json: scheduler.params.total_num_steps: required by WarmupCosineLR"},
        {"{" MB ", \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_max_lr\": 1}}}",
         "ds.json: scheduler.params.cycle_min_lr: required by OneCycle"},
        {"{" MB ", \"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 1}}}",
         "ds.json: scheduler.params.cycle_max_lr: required by OneCycle"},
        {"{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 0}}}",
         "ds.json: scheduler.params.warmup_num_steps: expected a positive integer, got 0"},
        {"{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_num_steps\": 10.5}}}",
         "ds.json: scheduler.params.warmup_num_steps: expected a positive integer, got 10.5"},
        {"{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_first_step_size\": 0}}}",
         "ds.json: scheduler.params.cycle_first_step_size: expected a positive integer, got 0"},
        {"{\"scheduler\": {\"type\": \"LRRangeTest\", \"params\": {\"lr_range_test_step_size\": -2}}}",
         "ds.json: scheduler.params.lr_range_test_step_size: expected a positive integer, got -2"});
    /* total below warmup parses quietly: the scheduler warns (Z-SCHED-008) */
    warns("{" MB ", \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 10,"
          " \"warmup_num_steps\": 100}}}", NULL, "");
}

/* spec: Z-CFG-039 */
ZT_TEST(test_warmup_type) {
    ZnConfig c = warns("{" MB ", \"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"cosine\"}}}",
                       NULL, "zinc: warning: ds.json: scheduler.params.warmup_type: unknown warmup_type 'cosine',"
                             " using 'log'\n");
    assert_int_equal(c.sched.warmup_type_linear, 0);
    c = ok("{" MB ", \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_type\": \"log\","
           " \"total_num_steps\": 2000}}}");
    assert_int_equal(c.sched.warmup_type_linear, 0);
    err_is("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": 1}}}", NULL,
           "ds.json: scheduler.params.warmup_type: expected \"log\" or \"linear\", got 1");
}

/* ---- top level -------------------------------------------------------------- */

/* spec: Z-CFG-040 */
ZT_TEST(test_misc_top_level) {
    ZnConfig c = ok("{" MB ", \"gradient_clipping\": 0, \"prescale_gradients\": true, \"gradient_predivide_factor\": 4,"
                    " \"communication_data_type\": \"BF16\", \"steps_per_print\": null, \"wall_clock_breakdown\": true,"
                    " \"memory_breakdown\": true, \"seed\": 42, \"managed_gradient_accumulation\": false}");
    assert_true(c.gradient_clipping == 0 && c.prescale_gradients == 1 && c.gradient_predivide_factor == 4);
    assert_int_equal(c.communication_data_type, ZN_BF16);
    assert_int_equal(c.steps_per_print, 0);
    assert_true(c.wall_clock_breakdown && c.memory_breakdown && c.seed == 42 && !c.managed_gradient_accumulation);
    assert_int_equal(ok("{" MB ", \"communication_data_type\": \"fp16\"}").communication_data_type, ZN_F16);
    assert_int_equal(ok("{" MB ", \"communication_data_type\": null}").communication_data_type, -1);
    err_table(
        {"{\"communication_data_type\": \"fp8\"}",
         "ds.json: communication_data_type: expected \"fp32\", \"fp16\", \"bf16\" or null, got \"fp8\""},
        {"{\"gradient_clipping\": -1}", "ds.json: gradient_clipping: expected a number >= 0, got -1"},
        {"{\"gradient_predivide_factor\": 0}", "ds.json: gradient_predivide_factor: expected a positive number, got 0"},
        {"{\"prescale_gradients\": \"false\"}", "ds.json: prescale_gradients: expected true or false, got \"false\""},
        {"{\"seed\": 1.5}", "ds.json: seed: expected an integer >= 0, got 1.5"});
}

/* spec: Z-CFG-040 */
ZT_TEST(test_gradient_allreduce_op) {
    assert_int_equal(ok("{" MB "}").allreduce_sum, 0);
    assert_int_equal(ok("{" MB ", \"gradient_allreduce_op\": \"mean\"}").allreduce_sum, 0);
    assert_int_equal(ok("{" MB ", \"gradient_allreduce_op\": \"MEAN\"}").allreduce_sum, 0);
    assert_int_equal(ok("{" MB ", \"gradient_allreduce_op\": \"SUM\"}").allreduce_sum, 1);
    assert_int_equal(ok("{" MB ", \"gradient_allreduce_op\": \"sum\", \"zero_optimization\": {\"stage\": 2}}")
                         .allreduce_sum, 1);
    err_table(
        {"{\"gradient_allreduce_op\": \"max\"}",
         "ds.json: gradient_allreduce_op: expected \"mean\" or \"sum\", got \"max\""},
        {"{\"gradient_allreduce_op\": null}", "ds.json: gradient_allreduce_op: expected \"mean\" or \"sum\", got null"},
        {"{" MB ", \"gradient_allreduce_op\": \"sum\", \"zero_optimization\": {\"stage\": 3}}",
         "ds.json: gradient_allreduce_op: 'sum' is not supported with ZeRO stage 3"});
}

/* spec: Z-CFG-041 */
ZT_TEST(test_checkpoint_section) {
    ZnConfig c = ok("{" MB ", \"checkpoint\": {\"load_universal\": true, \"tag_validation\": \"FAIL\","
                    " \"parallel_write\": {\"pipeline_stage\": false}, \"writer\": null}}");
    assert_int_equal(c.load_universal, 1);
    ok("{" MB ", \"checkpoint\": {\"tag_validation\": \"ignore\"}}");
    err_is("{\"checkpoint\": {\"tag_validation\": \"strict\"}}", NULL,
           "ds.json: checkpoint.tag_validation: expected \"Ignore\", \"Warn\" or \"Fail\", got \"strict\"");
    err_is("{\"checkpoint\": {\"load_universal\": 1}}", NULL,
           "ds.json: checkpoint.load_universal: expected true or false, got 1");
}

/* spec: Z-CFG-049 MiCS and hpZ groups are consecutive ranks: a size that
 * does not divide the world is refused; Z-OPT-020 weight_decay_exclude is an
 * array of at most 16 non-empty strings; Z-CFG-048 use_gds is a boolean;
 * Z-GPT-014 activation_checkpointing an object or null; Z-CFG-041
 * tag_validation a string; Z-CFG-030 betas a pair. Each message names the
 * key and what it got. */
ZT_TEST(test_shape_errors) {
    ZnConfigArgs a = no_args();
    a.world_size = 4;
    err_is("{" MB ", \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 3}}", &a,
           "ds.json: zero_optimization.mics_shard_size: 3 does not divide the world size 4 (shard groups are "
           "consecutive ranks)");
    err_is("{" MB ", \"zero_optimization\": {\"stage\": 3, \"mics_shard_size\": 8}}", &a,
           "ds.json: zero_optimization.mics_shard_size: 8 does not divide the world size 4 (shard groups are "
           "consecutive ranks)");
    err_is("{" MB ", \"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 3}}", &a,
           "ds.json: zero_optimization.zero_hpz_partition_size: 3 does not divide the world size 4 (hpZ groups are "
           "consecutive ranks)");
    err_table(
        {"{" MB ", \"zinc\": {\"weight_decay_exclude\": \"bias\"}}",
         "ds.json: zinc.weight_decay_exclude: expected an array of parameter-name substrings, got \"bias\""},
        {"{" MB ", \"zinc\": {\"weight_decay_exclude\": [\"bias\", 1]}}",
         "ds.json: zinc.weight_decay_exclude[1]: expected a non-empty string of at most 63 characters"},
        {"{" MB ", \"zinc\": {\"weight_decay_exclude\": [\"\"]}}",
         "ds.json: zinc.weight_decay_exclude[0]: expected a non-empty string of at most 63 characters"},
        {"{" MB ", \"zinc\": {\"weight_decay_exclude\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\","
         " \"j\", \"k\", \"l\", \"m\", \"n\", \"o\", \"p\", \"q\"]}}",
         "ds.json: zinc.weight_decay_exclude: at most 16 substrings"},
        {"{" MB ", \"aio\": {\"use_gds\": \"maybe\"}}", "ds.json: aio.use_gds: expected true or false, got \"maybe\""},
        {"{" MB ", \"activation_checkpointing\": 3}", "ds.json: activation_checkpointing: expected an object, got 3"},
        {"{" MB ", \"checkpoint\": {\"tag_validation\": 5}}",
         "ds.json: checkpoint.tag_validation: expected \"Ignore\", \"Warn\" or \"Fail\", got 5"},
        {"{" MB ", \"optimizer\": {\"type\": \"Adam\", \"params\": {\"betas\": {}}}}",
         "ds.json: optimizer.params.betas: expected [beta1, beta2], two numbers in [0, 1), got an object"});
}

/* spec: Z-CFG-044 */
ZT_TEST(test_null_sections_are_absent) {
    ZnConfig c = ok("{" MB ", \"optimizer\": null, \"scheduler\": null, \"fp16\": null, \"bf16\": null,"
                    " \"zero_optimization\": null, \"checkpoint\": null, \"zinc\": null}");
    ZnConfig d = ok("{" MB "}");
    assert_int_equal(c.optimizer_present, 0);
    assert_int_equal(c.sched.type, ZN_SCHED_NONE);
    assert_int_equal(c.zero.stage, 0);
    c.sched.warmup_max_lr = d.sched.warmup_max_lr = 0;
    c.sched.cycle_min_lr = d.sched.cycle_min_lr = 0;
    c.sched.cycle_max_lr = d.sched.cycle_max_lr = 0;
    assert_memory_equal(&c, &d, sizeof c);
    err_table(
        {"{\"scheduler\": \"WarmupLR\"}", "ds.json: scheduler: expected an object, got \"WarmupLR\""},
        {"{\"checkpoint\": true}", "ds.json: checkpoint: expected an object, got true"},
        {"{\"zinc\": 1}", "ds.json: zinc: expected an object, got 1"},
        {"{\"zero_optimization\": {\"offload_param\": []}}",
         "ds.json: zero_optimization.offload_param: expected an object, got an array"});
}

/* ---- files ------------------------------------------------------------------- */

static void write_file(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* spec: Z-CFG-042 */
ZT_TEST(test_load_file) {
    char path[] = "/tmp/zinc_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *j = "{\n  \"train_batch_size\": 16,\n  \"zero_optimization\": {\"stage\": 2}\n}\n";
    write_file(path, j, strlen(j));
    ZnConfigArgs a = no_args();
    a.world_size = 2;
    ZnConfig c;
    ZnErr e;
    assert_int_equal(zn_config_load(path, &a, &c, &e), ZN_OK);
    assert_true(c.train_batch_size == 16 && c.micro_batch == 8 && c.zero.stage == 2);
    /* the path is the source in messages */
    const char *bad = "{\n  \"zero_optimization\": {\"stage\": 9}\n}\n";
    write_file(path, bad, strlen(bad));
    assert_int_equal(zn_config_load(path, &a, &c, &e), ZN_E_USAGE);
    char want[256];
    snprintf(want, sizeof want, "%s: zero_optimization.stage: expected an integer 0..3, got 9", path);
    assert_string_equal(e.msg, want);
    const char *syn = "{\n  \"a\": 1,,\n}\n";
    write_file(path, syn, strlen(syn));
    assert_int_equal(zn_config_load(path, &a, &c, &e), ZN_E_USAGE);
    snprintf(want, sizeof want, "%s:2:10: JSON syntax error near ','", path);
    assert_string_equal(e.msg, want);
    unlink(path);
}

/* spec: Z-CFG-042 */
ZT_TEST(test_load_errors) {
    ZnConfigArgs a = no_args();
    ZnConfig c;
    ZnErr e;
    assert_int_equal(zn_config_load("/nonexistent/zinc/ds.json", &a, &c, &e), ZN_E_USAGE);
    assert_string_equal(e.msg, "cannot open '/nonexistent/zinc/ds.json': No such file or directory");
    /* a directory opens but does not read */
    assert_int_equal(zn_config_load("/tmp", &a, &c, &e), ZN_E_IO);
    assert_string_equal(e.msg, "cannot read '/tmp': Is a directory");
    /* exactly 16 MiB is accepted; one byte more is not */
    char path[] = "/tmp/zinc_test_config_big_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t cap = (size_t)16 << 20;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    memset(buf, ' ', cap + 1);
    memcpy(buf, "{" MB "}", strlen("{" MB "}"));
    assert_int_equal(write(fd, buf, cap), (ssize_t)cap);
    close(fd);
    assert_int_equal(zn_config_load(path, &a, &c, &e), ZN_OK);
    write_file(path, buf, cap + 1);
    assert_int_equal(zn_config_load(path, &a, &c, &e), ZN_E_USAGE);
    char want[256];
    snprintf(want, sizeof want, "%s: config is larger than 16 MiB", path);
    assert_string_equal(e.msg, want);
    /* the same cap applies to text handed to zn_config_parse */
    assert_int_equal(zn_config_parse(buf, cap + 1, SRC, &a, &c, &e), ZN_E_USAGE);
    assert_string_equal(e.msg, "ds.json: config is larger than 16 MiB");
    free(buf);
    unlink(path);
}

ZT_MAIN(
    cmocka_unit_test(test_shape_errors),
    cmocka_unit_test(test_defaults_every_field),
    cmocka_unit_test(test_defaults_after_parse),
    cmocka_unit_test(test_args_init),
    cmocka_unit_test(test_null_text_and_null_args),
    cmocka_unit_test(test_out_untouched_on_error),
    cmocka_unit_test(test_syntax_errors_one_line),
    cmocka_unit_test(test_syntax_errors_multi_line),
    cmocka_unit_test(test_syntax_nul_byte),
    cmocka_unit_test(test_top_level_not_object),
    cmocka_unit_test(test_duplicate_keys),
    cmocka_unit_test(test_wrong_types_name_the_path),
    cmocka_unit_test(test_integers_must_be_integral),
    cmocka_unit_test(test_long_range),
    cmocka_unit_test(test_unknown_key_in_zero_rejected),
    cmocka_unit_test(test_unknown_keys_elsewhere_warned),
    cmocka_unit_test(test_known_ignored_keys_silent),
    cmocka_unit_test(test_zinc_section),
    cmocka_unit_test(test_batch_deepspeed_matrix),
    cmocka_unit_test(test_batch_other_world_sizes),
    cmocka_unit_test(test_batch_nothing_or_ga_only),
    cmocka_unit_test(test_batch_zero_negative_overflow),
    cmocka_unit_test(test_batch_through_parse),
    cmocka_unit_test(test_batch_key_types),
    cmocka_unit_test(test_args_override),
    cmocka_unit_test(test_args_validated),
    cmocka_unit_test(test_auto_batch_triad),
    cmocka_unit_test(test_auto_optimizer_params),
    cmocka_unit_test(test_auto_betas),
    cmocka_unit_test(test_auto_clipping_and_scheduler),
    cmocka_unit_test(test_auto_zero_from_hidden_size),
    cmocka_unit_test(test_auto_precision_from_dtype),
    cmocka_unit_test(test_auto_rejected_where_no_rule),
    cmocka_unit_test(test_users_hf_config),
    cmocka_unit_test(test_zero_lax_like_pydantic),
    cmocka_unit_test(test_zero_stage_forms),
    cmocka_unit_test(test_zero_deprecated_bool_section),
    cmocka_unit_test(test_zero_every_key_read),
    cmocka_unit_test(test_zero_aliases),
    cmocka_unit_test(test_overlap_comm_default_by_stage),
    cmocka_unit_test(test_bucket_sizes_positive),
    cmocka_unit_test(test_allgather_bucket_size_odd),
    cmocka_unit_test(test_legacy_stage1_and_zenflow),
    cmocka_unit_test(test_offload_sections),
    cmocka_unit_test(test_offload_validation),
    cmocka_unit_test(test_cpu_offload_deprecated), cmocka_unit_test(test_aio_section),
    cmocka_unit_test(test_allgather_sequential_stage3),
    cmocka_unit_test(test_optimizer_types),
    cmocka_unit_test(test_optimizer_params),
    cmocka_unit_test(test_optimizer_param_errors),
    cmocka_unit_test(test_fp16_keys),
    cmocka_unit_test(test_fp16_dynamic_scale_checks),
    cmocka_unit_test(test_bf16_keys_and_old_name),
    cmocka_unit_test(test_fp16_and_bf16_both_on),
    cmocka_unit_test(test_master_weight_options_need_zero),
    cmocka_unit_test(test_scheduler_types),
    cmocka_unit_test(test_scheduler_params_and_defaults),
    cmocka_unit_test(test_scheduler_param_of_another_schedule),
    cmocka_unit_test(test_scheduler_requirements),
    cmocka_unit_test(test_warmup_type),
    cmocka_unit_test(test_misc_top_level),
    cmocka_unit_test(test_gradient_allreduce_op),
    cmocka_unit_test(test_checkpoint_section),
    cmocka_unit_test(test_null_sections_are_absent),
    cmocka_unit_test(test_load_file),
    cmocka_unit_test(test_load_errors))
