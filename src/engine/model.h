/* model.h: models zinc trains, written to the module interface of
 * DESIGN.md: a model is a sequence of modules, each naming the parameters
 * it uses (at most two) and having a forward and a backward over a batch.
 * The engine wraps every module with gather/release (stage 3) and gradient
 * hooks (buckets), so it never looks inside a module (spec Z-MOD-*).
 *
 * The MLP "mlp:D0,D1,...,Dk": k Linear layers D(i) -> D(i+1), ReLU after
 * every layer but the last, softmax cross-entropy over C = Dk classes.
 * Parameters in model order: layers.0.weight [D1,D0], layers.0.bias [D1],
 * layers.1.weight, ... (PyTorch's nn.Linear layout and names); module l is
 * layer l.
 *
 * GPT-2 "gpt2:n_layer=..,n_head=..,n_embd=..,vocab_size=..,n_positions=.."
 * (or a preset): Hugging Face GPT2LMHeadModel's parameters, names and
 * layout (Conv1D weights [in, out]); model_gpt2.c lists its modules. */
#ifndef ZN_MODEL_H
#define ZN_MODEL_H
#include <stdint.h>
#include "core/err.h"
#include "core/layout.h"
#include "device/device.h"
#include "engine/data.h"

#define ZN_MAX_LAYERS 64     /* MLP layers; GPT-2 blocks (gpt2-xl has 48) */
#define ZN_MAX_PARAMS 1540   /* GPT-2 with 128 blocks: 12 per block + 4 (GPT-3 175B has 96) */
#define ZN_MAX_MODULES 771   /* GPT-2: 6 per block + 3 */

typedef enum { ZN_MODEL_MLP = 0, ZN_MODEL_GPT2 } ZnModelKind;

/* GPT2Config's shape fields (Hugging Face names). */
typedef struct { int n_layer, n_head, n_embd, vocab_size, n_positions; } ZnGpt2Shape;

/* The unit stage 3 gathers before it runs and releases after. */
typedef struct {
    char name[ZN_MAX_NAME];
    int nparams;                 /* 0..2 */
    int param[2];
    int block;                   /* activation checkpointing's unit (a transformer block), or -1 */
} ZnModule;

typedef struct {
    ZnModelKind kind;
    ZnGpt2Shape gpt2;
    int seq_len;                 /* GPT-2: tokens per sample (T <= n_positions) */
    int nmodules;
    ZnModule modules[ZN_MAX_MODULES];
    int nlayers;                 /* MLP: k */
    int dims[ZN_MAX_LAYERS + 1]; /* D0..Dk */
    int nparams;                 /* 2k */
    ZnParamSpec params[ZN_MAX_PARAMS];
    /* layer l uses params[layer_param[l][0]] (weight) and [1] (bias); a tied
       model may point two layers at one param */
    int layer_param[ZN_MAX_LAYERS][2];
    /* tied weights ("tie:L=M": layer L uses layer M's weight, M < L): the
       names under which a shared parameter is also known */
    int naliases;
    struct { char name[ZN_MAX_NAME]; int param; } aliases[ZN_MAX_LAYERS];
} ZnModel;

/* Parses a model spec: "mlp:..." (below) or "gpt2:..." / a GPT-2 preset
 * (zn_gpt2_parse). */
int zn_model_parse(const char *spec, ZnModel *m, ZnErr *err);
/* The MLP: parses "mlp:D0,D1,...,Dk" (k >= 1, each D in 1..1<<20), optionally
 * followed by ",tie:L=M" parts: layer L uses layer M's weight (M < L, equal
 * shapes), so the parameter "layers.M.weight" is also known as
 * "layers.L.weight" and gets the gradient of both uses. Errors name the spec
 * and the offending part: "model spec 'mlp:4,x': 'x' is not a positive integer". */
int zn_mlp_parse(const char *spec, ZnModel *m, ZnErr *err);
/* GPT-2: "gpt2:key=value,..." with the keys n_layer, n_head, n_embd,
 * vocab_size, n_positions (each optional, defaults those of "gpt2"), or a
 * preset: "gpt2-tiny" (2 layers, 2 heads, 32 wide, vocabulary 256, 32
 * positions), "gpt2" (124M), "gpt2-medium", "gpt2-large", "gpt2-xl". The
 * sequence length starts at n_positions (zn_model_set_seq_len changes it). */
int zn_gpt2_parse(const char *spec, ZnModel *m, ZnErr *err);
/* The GPT-3-shaped spec of about P parameters (`--params`): width 128 per
 * layer and heads of 128 (n_embd = 128 L, n_head = L, as GPT-3 6.7B, 13B and
 * 175B have), 2048 positions, GPT-2's vocabulary; of the layer counts
 * around cbrt(P / (12 * 128^2)) the one whose count is nearest P (1..128
 * layers; P past 128 layers' count is ZN_E_USAGE). */
int zn_gpt3_spec_for(long long P, char *spec, size_t n, ZnErr *err);
/* GPT-2's tokens per sample: 1..n_positions. */
int zn_model_set_seq_len(ZnModel *m, long T, ZnErr *err);
/* Loss rows per sample: T for GPT-2, 1 for the MLP (the loss is the mean
 * over rows: the engine scales the gradient by 1 / (micro-batch * rows)). */
int zn_model_rows_per_sample(const ZnModel *m);
/* Widest layer (max D): the "hidden size" used for "auto" bucket sizes. */
long zn_model_hidden_size(const ZnModel *m);
long zn_model_numel(const ZnModel *m);

/* Initial value of elements [lo, hi) of param p, keyed by (seed, param
 * name, element index) only. MLP: uniform in [-1/sqrt(fan_in),
 * 1/sqrt(fan_in)) (PyTorch's nn.Linear default range); GPT-2: Hugging
 * Face's _init_weights (Z-GPT-002). out is host memory: a
 * caller filling a device buffer generates into a host temporary and
 * uploads it. */
void zn_model_init_param(const ZnModel *m, int p, uint64_t seed, long lo, long hi, float *out);

/* Layer l forward over a batch of B rows: y = x W^T + b (gemm_nt), then a = relu(y)
 * for all but the last layer (a may equal NULL for the last layer: the
 * logits are y). x [B, D_l], y and a [B, D_{l+1}]. Every buffer lives in d's
 * memory; the layer runs d's kernels (d->k). */
void zn_layer_forward(ZnDevice *d, const ZnModel *m, int l, int B,
                      const float *W, const float *b, const float *x, float *y, float *a);
/* Layer l backward. dout: gradient w.r.t. the layer's output (for hidden
 * layers the gradient w.r.t. a = relu(y); for the last layer w.r.t. the
 * logits). a: the layer's ReLU output (NULL for the last layer). Writes
 * dW [D_{l+1}, D_l] = dy^T x, db = colsum(dy), and dx [B, D_l] = dy W unless
 * dx == NULL. scratch: B * D_{l+1} floats (holds dy). */
void zn_layer_backward(ZnDevice *d, const ZnModel *m, int l, int B,
                       const float *W, const float *x, const float *a, const float *dout,
                       float *dW, float *db, float *dx, float *scratch);

/* ------------------------------------------------------------------------
 * Running a model, module by module (what the engine calls). A ZnModelRun
 * is made once per engine: its host staging of a micro-batch is allocated
 * then, so a step allocates nothing on the host (Z-ENG-017). Each
 * micro-step allocates the device activations (zn_run_begin), runs every
 * module forward in order, the loss, every module backward in reverse, and
 * frees them (zn_run_end). W[k] / dW[k]: the device buffers of the module's
 * k-th param and of its gradient (written, never added to). Outputs stored
 * in the model dtype are rounded to it by the module (Z-PREC-001). */
typedef struct ZnModelRun ZnModelRun;

/* NULL + err: no memory, or a device without the model's kernels. */
ZnModelRun *zn_run_new(const ZnModel *m, ZnDevice *d, ZnDtype dt, int B, ZnErr *err);
void zn_run_free(ZnModelRun *R);
/* Activation checkpointing (Z-GPT-014): the caller runs each block's
 * modules forward again before its backward, so one block's activations
 * are kept instead of every block's (the block inputs are kept). */
void zn_run_set_recompute(ZnModelRun *R, int on);
/* Allocates the micro-batch's activations and uploads samples
 * [first, first + B) of data. */
int zn_run_begin(ZnModelRun *R, const ZnData *data, long first, ZnErr *err);
void zn_run_forward(ZnModelRun *R, int mod, float *const *W);
/* Mean loss over the micro-batch's rows; the output gradient is
 * (softmax - onehot) * grad_scale, rounded to the model dtype. */
float zn_run_loss(ZnModelRun *R, float grad_scale);
void zn_run_backward(ZnModelRun *R, int mod, float *const *W, float *const *dW);
void zn_run_end(ZnModelRun *R);
/* After every module's forward: the logits of rows [row, row + n) of the
 * micro-batch (GPT-2: row b * T + t; the MLP: sample b) copied to host out
 * [n, classes] (zinc sample reads the last row, Z-SAMPLE-002). */
void zn_run_logits(ZnModelRun *R, long row, long n, float *out);

#endif
