/* model_mlp.c: the MLP "mlp:D0,D1,...,Dk" (spec Z-MOD-001..Z-MOD-005).
 * k Linear layers D(l) -> D(l+1) in PyTorch's nn.Linear layout, ReLU between
 * them, logits out of the last. The engine sees only the layer interface of
 * model.h: which params a layer uses, and forward/backward over a batch. */
#include "engine/model.h"
#include "engine/model_run.h"
#include "core/rng.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ZN_MAX_DIM (1L << 20)

/* ------------------------------------------------------------------------ */
/* parsing */

/* Reads one size: the part must be all decimal digits (no sign, no space),
 * with a value in 1..ZN_MAX_DIM. Digits beyond the limit stop counting early,
 * so a part like "99999999999999999999" cannot overflow. */
static int parse_dim(const char *spec, const char *s, size_t len, int *out, ZnErr *err) {
    int show = len > 40 ? 40 : (int)len;  /* keep the message short */
    const char *dots = len > 40 ? "..." : "";
    if (len == 0)
        return zn_err(err, ZN_E_USAGE,
                      "model spec '%.200s': empty size (sizes are separated by single commas)", spec);
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s%s' is not a positive integer",
                          spec, show, s, dots);
        if (v <= ZN_MAX_DIM) v = v * 10 + (s[i] - '0');
    }
    if (v == 0)
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s%s' is not a positive integer",
                      spec, show, s, dots);
    if (v > ZN_MAX_DIM)
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s%s' is too large (at most %ld)",
                      spec, show, s, dots, ZN_MAX_DIM);
    *out = (int)v;
    return 0;
}

/* A layer number of a tie part: all decimal digits (sscanf's %d accepted
 * a sign and spaces, and wrapped "4294967297" to 1); -1 if it is not one.
 * Counting stops past ZN_MAX_LAYERS, so a long number cannot overflow and
 * reads as too large. */
static long parse_index(const char *s, size_t len) {
    if (len == 0) return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v <= ZN_MAX_LAYERS) v = v * 10 + (s[i] - '0');
    }
    return v;
}

int zn_mlp_parse(const char *spec, ZnModel *m, ZnErr *err) {
    if (!spec) return zn_err(err, ZN_E_USAGE, "model spec missing (expected mlp:D0,D1,... or gpt2...)");
    memset(m, 0, sizeof *m);
    const char *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    if (kind_len != 3 || strncmp(spec, "mlp", 3) != 0) {
        int show = kind_len > 40 ? 40 : (int)kind_len;
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': unknown model '%.*s' (expected mlp:D0,D1,..., gpt2:key=value,... or a "
                      "preset gpt2-tiny, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3-small ... gpt3-175b)",
                      spec, show, spec);
    }
    if (!colon)
        return zn_err(err, ZN_E_USAGE, "model spec '%.200s': missing sizes (expected mlp:D0,D1,...)", spec);

    /* sizes, comma separated; every part must be a size, so "mlp:4,," and
       "mlp:4,3," fail on the empty part */
    int n = 0;
    const char *p = colon + 1;
    int tie[ZN_MAX_LAYERS];
    for (int l = 0; l < ZN_MAX_LAYERS; l++) tie[l] = -1;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 4 && !strncmp(p, "tie:", 4)) {   /* "tie:L=M" */
            const char *eq = memchr(p + 4, '=', len - 4);
            long a = eq ? parse_index(p + 4, (size_t)(eq - p) - 4) : -1;
            long b = eq ? parse_index(eq + 1, len - (size_t)(eq - p) - 1) : -1;
            if (a < 0 || b < 0)
                return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s' is not tie:L=M (L and M layer numbers)",
                              spec, (int)len, p);
            if (a >= ZN_MAX_LAYERS || b >= a)
                return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s' needs 0 <= M < L <= %d", spec, (int)len, p,
                              ZN_MAX_LAYERS - 1);
            if (tie[a] >= 0)   /* a second tie would silently replace the first */
                return zn_err(err, ZN_E_USAGE, "model spec '%.200s': '%.*s': layer %ld is already tied (tie:%ld=%d)",
                              spec, (int)len, p, a, a, tie[a]);
            tie[a] = (int)b;
            if (!end) break;
            p = end + 1;
            continue;
        }
        if (n == ZN_MAX_LAYERS + 1)
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': too many layers (at most %d)",
                          spec, ZN_MAX_LAYERS);
        int rc = parse_dim(spec, p, len, &m->dims[n], err);
        if (rc) return rc;
        n++;
        if (!end) break;
        p = end + 1;
    }
    if (n < 2)
        return zn_err(err, ZN_E_USAGE,
                      "model spec '%.200s': need at least two sizes (D0 and the class count)", spec);

    /* params in model order: layers.l.weight [D(l+1), D(l)], then
       layers.l.bias [D(l+1)]; a tied weight is not a param of its own */
    m->nlayers = n - 1;
    for (int l = 0; l < ZN_MAX_LAYERS; l++) {
        if (tie[l] < 0) continue;
        if (l >= m->nlayers)
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': tie:%d=%d names a layer the model does not have",
                          spec, l, tie[l]);
        if (m->dims[l] != m->dims[tie[l]] || m->dims[l + 1] != m->dims[tie[l] + 1])
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': tie:%d=%d joins weights of different shapes "
                          "[%d x %d] and [%d x %d]", spec, l, tie[l], m->dims[l + 1], m->dims[l],
                          m->dims[tie[l] + 1], m->dims[tie[l]]);
        if (tie[tie[l]] >= 0)
            return zn_err(err, ZN_E_USAGE, "model spec '%.200s': tie:%d=%d points at a tied weight", spec, l, tie[l]);
    }
    m->nparams = 0;
    for (int l = 0; l < m->nlayers; l++) {
        if (tie[l] >= 0) {   /* layer l borrows layer tie[l]'s weight */
            int shared = m->layer_param[tie[l]][0];
            snprintf(m->aliases[m->naliases].name, sizeof m->aliases[0].name, "layers.%d.weight", l);
            m->aliases[m->naliases++].param = shared;
            ZnParamSpec *b = &m->params[m->nparams];
            snprintf(b->name, sizeof b->name, "layers.%d.bias", l);
            b->ndim = 1;
            b->shape[0] = m->dims[l + 1];
            b->numel = b->shape[0];
            m->layer_param[l][0] = shared;
            m->layer_param[l][1] = m->nparams++;
            continue;
        }
        ZnParamSpec *w = &m->params[m->nparams], *b = &m->params[m->nparams + 1];
        snprintf(w->name, sizeof w->name, "layers.%d.weight", l);
        w->ndim = 2;
        w->shape[0] = m->dims[l + 1];
        w->shape[1] = m->dims[l];
        w->numel = w->shape[0] * w->shape[1];
        snprintf(b->name, sizeof b->name, "layers.%d.bias", l);
        b->ndim = 1;
        b->shape[0] = m->dims[l + 1];
        b->numel = b->shape[0];
        m->layer_param[l][0] = m->nparams;
        m->layer_param[l][1] = m->nparams + 1;
        m->nparams += 2;
    }
    /* module l is layer l: its weight (perhaps shared) and its bias */
    m->kind = ZN_MODEL_MLP;
    m->nmodules = m->nlayers;
    for (int l = 0; l < m->nlayers; l++) {
        ZnModule *md = &m->modules[l];
        snprintf(md->name, sizeof md->name, "layers.%d", l);
        md->nparams = 2;
        md->param[0] = m->layer_param[l][0];
        md->param[1] = m->layer_param[l][1];
        md->block = -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* initialisation */

/* Element i of param p = (2u - 1) * bound, u = zn_rng_uniform(key, i),
 * key = zn_mix64(seed) ^ zn_hash_str(name), bound = 1/sqrtf(fan_in) in float,
 * fan_in = D(l) of the layer that uses p (for the weight and the bias alike,
 * as nn.Linear.reset_parameters). The value depends on nothing but (seed,
 * name, i), so a rank that owns only [lo, hi) of the param computes exactly
 * the bits every other partitioning would (spec Z-MOD-003). 2u - 1 is exact
 * in float (u has 24 bits), so the only rounding is the final multiply. */
static void mlp_init_param(const ZnModel *m, int p, uint64_t seed, long lo, long hi, float *out) {
    int fan_in = 0;
    for (int l = 0; l < m->nlayers && !fan_in; l++)
        if (m->layer_param[l][0] == p || m->layer_param[l][1] == p) fan_in = m->dims[l];
    if (!fan_in) return;  /* a param no layer uses has no fan-in */
    float bound = 1.0f / sqrtf((float)fan_in);
    uint64_t key = zn_mix64(seed) ^ zn_hash_str(m->params[p].name);
    for (long i = lo; i < hi; i++) {
        float u = zn_rng_uniform(key, (uint64_t)i);
        out[i - lo] = (2.0f * u - 1.0f) * bound;
    }
}

/* ------------------------------------------------------------------------ */
/* forward and backward */

void zn_layer_forward(ZnDevice *d, const ZnModel *m, int l, int B,
                      const float *W, const float *b, const float *x, float *y, float *a) {
    const ZnKernels *k = d->k;
    int din = m->dims[l], dout = m->dims[l + 1];
    /* y[B, dout] = x[B, din] . W[dout, din]^T + b: each y[i][j] a k-ordered sum, then + b[j] */
    k->gemm_nt(d, B, dout, din, x, W, b, y);
    /* the last layer's y are the logits: no ReLU, a is not written */
    if (l < m->nlayers - 1) k->relu_fwd(d, (long)B * dout, y, a);
}

void zn_layer_backward(ZnDevice *d, const ZnModel *m, int l, int B,
                       const float *W, const float *x, const float *a, const float *dout,
                       float *dW, float *db, float *dx, float *scratch) {
    const ZnKernels *k = d->k;
    int din = m->dims[l], dn = m->dims[l + 1];
    /* dy: gradient w.r.t. the pre-activation y. The last layer has no ReLU,
       so dy is dout itself; a hidden layer masks dout where a = relu(y) is 0. */
    const float *dy = dout;
    if (l < m->nlayers - 1) {
        k->relu_bwd(d, (long)B * dn, a, dout, scratch);
        dy = scratch;
    }
    /* dW[dn, din] = dy^T x: dW[j][c] = sum over batch rows i in order of dy[i][j] x[i][c] */
    k->gemm_tn(d, dn, din, B, dy, x, dW);
    /* db[j] = sum over batch rows i in order of dy[i][j] */
    k->colsum(d, B, dn, dy, db);
    /* dx[B, din] = dy W: dx[i][c] = sum over j in order of dy[i][j] W[j][c] */
    if (dx) k->gemm_nn(d, B, din, dn, dy, W, dx);
}

/* ------------------------------------------------------------------------ */
/* the run: activations of one micro-batch, module l = layer l */

static int mlp_run_begin(ZnModelRun *R, const ZnData *data, long first, ZnErr *err) {
    const ZnModel *m = R->m;
    const int B = R->B, nl = m->nlayers;
    long maxw = zn_model_hidden_size(m);
    if (!(R->labels = (int *)zn_dev_alloc(R->d, (size_t)B * sizeof(int), ZN_MEM_ACTIVATIONS, err))) return err->code;
    for (int l = 0; l <= nl; l++)
        if (!(R->acts[l] = zn_run_talloc(R, (long)B * m->dims[l], ZN_MEM_ACTIVATIONS, err))) return err->code;
    for (int i = 0; i < 2; i++)
        if (!(R->dbuf[i] = zn_run_talloc(R, (long)B * maxw, ZN_MEM_ACTIVATIONS, err))) return err->code;
    if (!(R->yscratch = zn_run_falloc(R, (long)B * maxw, ZN_MEM_WORKSPACE, err))) return err->code;
    /* the data is made on the host, then uploaded; inputs arrive in the model
       dtype (a meta device's upload reads nothing: no sample is made) */
    if (!R->d->meta) zn_data_batch(data, first, B, R->host_x, R->host_in);
    R->k->upload(R->d, R->acts[0], R->host_x, (size_t)B * m->dims[0] * sizeof(float));
    R->k->upload(R->d, R->labels, R->host_in, (size_t)B * sizeof(int));
    zn_run_round(R, R->acts[0], (long)B * m->dims[0]);
    return 0;
}

static void mlp_run_forward(ZnModelRun *R, int l, float *const *W) {
    const ZnModel *m = R->m;
    int last = l == m->nlayers - 1;
    /* products accumulate in fp32; outputs are stored in the model dtype */
    zn_layer_forward(R->d, m, l, R->B, W[0], W[1], R->acts[l], last ? R->acts[l + 1] : R->yscratch,
                     last ? NULL : R->acts[l + 1]);
    zn_run_round(R, R->acts[l + 1], (long)R->B * m->dims[l + 1]);
}

static float mlp_run_loss(ZnModelRun *R, float grad_scale) {
    const ZnModel *m = R->m;
    const int C = m->dims[m->nlayers];
    float loss = R->k->softmax_xent(R->d, R->B, C, R->acts[m->nlayers], R->labels, grad_scale, R->dbuf[0]);
    zn_run_round(R, R->dbuf[0], (long)R->B * C);
    R->dcur = R->dbuf[0];
    return loss;
}

static void mlp_run_backward(ZnModelRun *R, int l, float *const *W, float *const *dW) {
    const ZnModel *m = R->m;
    float *dx = l > 0 ? (R->dcur == R->dbuf[0] ? R->dbuf[1] : R->dbuf[0]) : NULL;
    zn_layer_backward(R->d, m, l, R->B, W[0], R->acts[l], l == m->nlayers - 1 ? NULL : R->acts[l + 1], R->dcur,
                      dW[0], dW[1], dx, R->yscratch);
    if (dx) zn_run_round(R, dx, (long)R->B * m->dims[l]);
    R->dcur = dx;
}

static void mlp_run_end(ZnModelRun *R) {
    for (int l = 0; l <= R->m->nlayers; l++) {
        zn_run_release(R, R->acts[l]);
        R->acts[l] = NULL;
    }
    for (int i = 0; i < 2; i++) {
        zn_run_release(R, R->dbuf[i]);
        R->dbuf[i] = NULL;
    }
    zn_run_release(R, R->yscratch);
    R->yscratch = NULL;
}

/* the logits: the last layer's output [B, C] */
static const float *mlp_run_logits(const ZnModelRun *R) { return R->acts[R->m->nlayers]; }

/* in ZnModelOps's order; the MLP's buffers are the run's own (model_run.h):
   no run_init or run_free */
const ZnModelOps zn_mlp_ops = {mlp_init_param, NULL, NULL, mlp_run_begin, mlp_run_forward, mlp_run_loss,
                               mlp_run_backward, mlp_run_end, mlp_run_logits};
