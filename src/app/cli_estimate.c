/* cli_estimate.c: `zinc estimate` (spec Z-EST-008..Z-EST-013): its flags
 * (parameter counts such as 7.5B, GPUs, nodes, --stage, --offload, --model),
 * which of DeepSpeed's tables a stage selects, and the report. The
 * estimators themselves are src/engine/estimate.c. */
#include "app/cli_estimate.h"
#include "app/cli.h"
#include "core/plan.h"
#include "engine/model.h"
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which of DeepSpeed's estimators a --stage selects: the stage 3 one when
 * the stage's plan partitions the parameters, else the stage 2 one (which
 * DeepSpeed's docs use for stages 1 and 2, Z-EST-009); both without --stage. */
static void estimators_for(const ZnEstOpts *o, int *zero2, int *zero3) {
    ZnPlan S;
    ZnErr e;
    if (!o->have_stage || zn_config_stage_plan(o->stage, &S, &e)) { *zero2 = *zero3 = 1; return; }
    *zero3 = S.params == ZN_HOLD_PART;
    *zero2 = !*zero3;
}

/* ------------------------------------------------------------------------ */
/* parsing */

/* At most this many characters in a count: enough for any valid spelling,
 * and it bounds the digit buffer below. */
#define COUNT_MAX_LEN 40

int zn_est_parse_count(const char *flag, const char *s, long long lo, long long *out, ZnErr *err) {
    const char *bad_fmt = "%s: expected a parameter count such as 350M, 7.5B or 2851e6, got '%.60s'";
    size_t len = strlen(s);
    if (len == 0 || len > COUNT_MAX_LEN) return zn_err(err, ZN_E_USAGE, bad_fmt, flag, s);

    /* mantissa digits (integer part then fraction) and the power of ten that
       scales them: value = digits * 10^exp10 */
    char dig[COUNT_MAX_LEN + 1];
    int nd = 0, exp10 = 0, ndigits_seen = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) { dig[nd++] = *p; ndigits_seen++; }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) { dig[nd++] = *p; ndigits_seen++; exp10--; }
    }
    if (ndigits_seen == 0) return zn_err(err, ZN_E_USAGE, bad_fmt, flag, s);
    /* the suffix: one letter, or an exponent, and then the end */
    if (*p) {
        int e = -1;
        switch (*p) {
        case 'k': case 'K': e = 3; break;
        case 'm': case 'M': e = 6; break;  /* model names say 350m and 350M alike */
        case 'b': case 'B': e = 9; break;
        case 't': case 'T': e = 12; break;
        case 'e': case 'E': {
            /* one or two digits: the count is below 10^15 anyway */
            const char *q = p + 1;
            int v = 0, n = 0;
            for (; *q >= '0' && *q <= '9' && n < 3; q++, n++) v = v * 10 + (*q - '0');
            if (n == 0 || n > 2 || *q) return zn_err(err, ZN_E_USAGE, bad_fmt, flag, s);
            e = v;
            p = q - 1;   /* the loop below steps past the last digit */
            break;
        }
        default: return zn_err(err, ZN_E_USAGE, bad_fmt, flag, s);
        }
        p++;
        if (*p) return zn_err(err, ZN_E_USAGE, bad_fmt, flag, s);
        exp10 += e;
    }
    /* drop leading zeros, then move trailing zeros into the exponent, so the
       digits left are significant and the last one is not 0 */
    int first = 0;
    while (first < nd && dig[first] == '0') first++;
    while (nd > first && dig[nd - 1] == '0') { nd--; exp10++; }
    long long v = 0;
    if (nd > first) {
        /* a fraction left over means a part of a parameter */
        if (exp10 < 0)
            return zn_err(err, ZN_E_USAGE, "%s: '%s' is not a whole number of parameters", flag, s);
        /* more than 15 digits is over 10^14 for sure; else it fits in 64 bits */
        if (nd - first + exp10 > 15)
            return zn_err(err, ZN_E_USAGE, "%s: '%s' is too large (at most 100T = 10^14)", flag, s);
        for (int i = first; i < nd; i++) v = v * 10 + (dig[i] - '0');
        for (int i = 0; i < exp10; i++) v *= 10;
    }
    if (v > ZN_EST_MAX_PARAMS)
        return zn_err(err, ZN_E_USAGE, "%s: '%s' is too large (at most 100T = 10^14)", flag, s);
    if (v < lo) return zn_err(err, ZN_E_USAGE, "%s: '%s' is below %lld", flag, s, lo);
    *out = v;
    return 0;
}

/* A plain decimal integer in lo..hi: digits only (no sign, no space), so
 * "+8" and " 8" are refused rather than read half-way. */
static int parse_int(const char *flag, const char *s, int lo, int hi, int *out, ZnErr *err) {
    long long v = 0;
    int n = 0;
    for (const char *p = s; *p; p++, n++) {
        if (*p < '0' || *p > '9' || n >= 10) { n = -1; break; }
        v = v * 10 + (*p - '0');
    }
    if (n <= 0 || v < lo || v > hi)
        return zn_err(err, ZN_E_USAGE, "%s: expected an integer in %d..%d, got '%.60s'", flag, lo, hi, s);
    *out = (int)v;
    return 0;
}

/* A finite number > 0 (strtod's whole string: no trailing characters). */
static int parse_factor(const char *flag, const char *s, double *out, ZnErr *err) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v) || !(v > 0))
        return zn_err(err, ZN_E_USAGE, "%s: expected a finite number > 0, got '%.60s'", flag, s);
    *out = v;
    return 0;
}

/* Every table entry the options will print, checked for the clamp of
 * py_int: Python would print a big int, we refuse instead (Z-EST-013). */
static int fits(const ZnEstOpts *o) {
    for (int off = 0; off < 2; off++) {
        ZnEst e = zn_est_zero2(o->params, o->gpus_per_node, o->nodes, off, o->buffer_factor);
        if (e.cpu == LLONG_MAX || e.gpu == LLONG_MAX) return 0;
        for (int offp = 0; offp < 2; offp++)
            for (int zi = 0; zi < 2; zi++) {
                e = zn_est_zero3(o->params, o->largest_layer, o->gpus_per_node, o->nodes, off, offp,
                                 zi, o->buffer_factor);
                if (e.cpu == LLONG_MAX || e.gpu == LLONG_MAX) return 0;
            }
    }
    return 1;
}

/* The largest layer: the most parameters one nn.Module owns, as DeepSpeed's
 * *_all_live helpers count them (recurse=False): within each of zinc's
 * modules, the params sharing a name prefix up to the last '.' are one
 * nn.Module's (a Linear's weight and bias; GPT-2's embeddings module holds
 * two, wte and wpe); a tied param is counted with every module that uses it. */
long long zn_est_largest_layer(const ZnModel *m, int *index, char *name_out, size_t name_len) {
    long long largest = 0;
    int at = -1;
    for (int i = 0; i < m->nmodules; i++) {
        const ZnModule *md = &m->modules[i];
        for (int q = 0; q < md->nparams; q++) {
            const char *name = m->params[md->param[q]].name, *dot = strrchr(name, '.');
            size_t plen = dot ? (size_t)(dot - name) : strlen(name);
            long long n = 0;
            for (int r = 0; r < md->nparams; r++) {
                const char *o2 = m->params[md->param[r]].name;
                if (strlen(o2) > plen && !strncmp(o2, name, plen) && o2[plen] == '.' && !strchr(o2 + plen + 1, '.') &&
                    (r == 0 || md->param[r] != md->param[0]))
                    n += m->params[md->param[r]].numel;
            }
            if (n > largest || at < 0) {
                largest = n;
                at = i;
                if (name_out && name_len) snprintf(name_out, name_len, "%.*s", (int)plen, name);
            }
        }
    }
    if (index) *index = at;
    return largest;
}

int zn_est_parse_args(int argc, char **argv, ZnEstOpts *o, ZnErr *err) {
    memset(o, 0, sizeof *o);
    /* DeepSpeed's defaults: one node with one GPU, additional_buffer_factor 1.5 */
    o->gpus_per_node = 1;
    o->nodes = 1;
    o->buffer_factor = 1.5;
    o->rows = ZN_EST_ROWS_ALL;
    o->largest_layer_index = -1;
    int have_params = 0;
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            o->help = 1;
            return 0;
        }
        static const char *with_value[] = {"--params", "--largest-layer", "--gpus-per-node", "--nodes",
                                           "--stage", "--offload", "--buffer-factor", "--model", NULL};
        int k = -1;
        for (int j = 0; with_value[j]; j++)
            if (!strcmp(a, with_value[j])) k = j;
        if (k < 0) {
            if (a[0] != '-')
                return zn_err(err, ZN_E_USAGE, "unexpected argument '%.200s' for 'zinc estimate' "
                              "(try --params 7.5B)", a);
            return zn_err(err, ZN_E_USAGE, "unknown flag '%.200s' for 'zinc estimate'", a);
        }
        if (i + 1 >= argc) return zn_err(err, ZN_E_USAGE, "%s needs a value", a);
        const char *v = argv[++i];
        switch (k) {
        case 0: rc = zn_est_parse_count(a, v, 1, &o->params, err); have_params = 1; break;
        case 1: rc = zn_est_parse_count(a, v, 0, &o->largest_layer, err); o->have_largest = 1; break;
        case 2: rc = parse_int(a, v, 1, ZN_EST_MAX_GPUS, &o->gpus_per_node, err); break;
        case 3: rc = parse_int(a, v, 1, ZN_EST_MAX_GPUS, &o->nodes, err); break;
        case 4: rc = parse_int(a, v, 1, 3, &o->stage, err); o->have_stage = 1; break;
        case 5:
            if (!strcmp(v, "none")) o->rows = ZN_EST_ROWS_NONE;
            else if (!strcmp(v, "cpu")) o->rows = ZN_EST_ROWS_CPU;
            else if (!strcmp(v, "all")) o->rows = ZN_EST_ROWS_BOTH;
            else rc = zn_err(err, ZN_E_USAGE, "--offload: expected none, cpu or all, got '%.60s'", v);
            break;
        case 6: rc = parse_factor(a, v, &o->buffer_factor, err); break;
        case 7: o->model_spec = v; break;
        }
        if (rc) return rc;
    }

    if (o->model_spec) {
        /* the model gives both counts, as DeepSpeed's *_all_live helpers do */
        if (have_params || o->have_largest)
            return zn_err(err, ZN_E_USAGE, "--model gives the parameter counts: do not combine it with "
                          "--params or --largest-layer");
        ZnModel m;
        rc = zn_model_parse(o->model_spec, &m, err);
        if (rc) return rc;
        /* total: every parameter once (a tied parameter is one entry) */
        o->params = zn_model_numel(&m);
        o->largest_layer = zn_est_largest_layer(&m, &o->largest_layer_index, o->largest_layer_name,
                                                sizeof o->largest_layer_name);
        o->have_largest = 1;
        have_params = 1;
    }
    if (!have_params)
        return zn_err(err, ZN_E_USAGE, "--params P or --model (mlp:D0,...,Dk, gpt2...) is required "
                      "(e.g. zinc estimate --params 7.5B --gpus-per-node 8)");
    if (o->largest_layer > o->params)
        return zn_err(err, ZN_E_USAGE, "--largest-layer (%lld) exceeds --params (%lld)",
                      o->largest_layer, o->params);
    if ((long long)o->gpus_per_node * o->nodes > ZN_EST_MAX_GPUS)
        return zn_err(err, ZN_E_USAGE, "--nodes x --gpus-per-node = %lld GPUs: at most %d",
                      (long long)o->gpus_per_node * o->nodes, ZN_EST_MAX_GPUS);
    /* stages 1 and 2 keep every parameter on the GPU: no row to show */
    int zero2, zero3;
    estimators_for(o, &zero2, &zero3);
    if (o->rows == ZN_EST_ROWS_BOTH && zero2)
        return zn_err(err, ZN_E_USAGE, "--offload all also offloads parameters, which only stage 3 "
                      "does: add --stage 3 (or use --offload cpu)");
    if (!fits(o))
        return zn_err(err, ZN_E_USAGE, "estimate too large: more than 2^63 bytes (use fewer params, "
                      "GPUs per node or a smaller --buffer-factor)");
    return 0;
}

static void print_estimate_usage(FILE *f) {
    fprintf(f,
        "usage: zinc estimate --params P [--largest-layer L] [--gpus-per-node G] [--nodes M]\n"
        "                     [--stage 1|2|3] [--offload none|cpu|all] [--buffer-factor F]\n"
        "       zinc estimate --model mlp:D0,...,Dk [...]\n"
        "Model-state memory per CPU (node) and per GPU: DeepSpeed's estimators\n"
        "(estimate_zero2/zero3_model_states_mem_needs_all_cold; GB = 2^30 bytes) and the\n"
        "ZeRO paper's formula with K = 12 (GB = 1e9 bytes), Nd = G * M.\n"
        "P and L: 350M, 7.5B, 2851e6 or plain digits. Defaults: G 1, M 1, F 1.5, both\n"
        "stage tables, every offload combination. Activations are not counted.\n");
}

int zn_est_run(int argc, char **argv, FILE *out, FILE *note, ZnErr *err) {
    ZnEstOpts o;
    int rc = zn_est_parse_args(argc, argv, &o, err);
    if (rc) return rc;
    if (o.help) {
        print_estimate_usage(out);
        return 0;
    }
    int stage2, stage3;
    estimators_for(&o, &stage2, &stage3);
    if (o.model_spec)
        fprintf(out, "Model %s: %lld params, largest layer %s with %lld params (its own parameters).\n\n",
                o.model_spec, o.params, o.largest_layer_name, o.largest_layer);
    if (stage3 && !o.have_largest && note)
        fprintf(note, "zinc estimate: note: --largest-layer not given: stage 3 counts 0 for the largest "
                      "layer, so its GPU figures are lower bounds\n");
    if (stage2) {
        /* DeepSpeed has no stage 1 estimator: its docs use the stage 2 one for
           stages 1 and 2 (Z-EST-009) */
        fprintf(out, "DeepSpeed estimate_zero2_model_states_mem_needs_all_cold (ZeRO stages 1 and 2):\n");
        zn_est_print_zero2(out, o.params, o.gpus_per_node, o.nodes, o.buffer_factor, o.rows);
        fprintf(out, "\n");
    }
    if (stage3) {
        fprintf(out, "DeepSpeed estimate_zero3_model_states_mem_needs_all_cold (ZeRO stage 3):\n");
        zn_est_print_zero3(out, o.params, o.largest_layer, o.gpus_per_node, o.nodes, o.buffer_factor,
                           o.rows);
        fprintf(out, "\n");
    }
    zn_est_print_paper(out, o.params, o.gpus_per_node * o.nodes, 12);
    return 0;
}

int zn_cmd_estimate(int argc, char **argv) {
    ZnErr err = {0};
    if (zn_est_run(argc, argv, stdout, stderr, &err)) {
        zn_err_print(stderr, "", &err);
        return 2;
    }
    return 0;
}

const ZnCommand zn_estimate_command = {"estimate", zn_cmd_estimate, print_estimate_usage};
