/* model.h: models zinc trains, written to the layer interface of DESIGN.md:
 * each layer names its parameters and has forward and backward over a batch.
 * The engine wraps every layer with gather/release (stage 3) and gradient
 * hooks (buckets), so it never looks inside a layer.
 *
 * The MLP "mlp:D0,D1,...,Dk": k Linear layers D(i) -> D(i+1), ReLU after
 * every layer but the last, softmax cross-entropy over C = Dk classes.
 * Parameters in model order: layers.0.weight [D1,D0], layers.0.bias [D1],
 * layers.1.weight, ... (PyTorch's nn.Linear layout and names). */
#ifndef ZN_MODEL_H
#define ZN_MODEL_H
#include <stdint.h>
#include "core/err.h"
#include "core/layout.h"
#include "device/device.h"

#define ZN_MAX_LAYERS 64

typedef struct {
    int nlayers;                 /* k */
    int dims[ZN_MAX_LAYERS + 1]; /* D0..Dk */
    int nparams;                 /* 2k */
    ZnParamSpec params[2 * ZN_MAX_LAYERS];
    /* layer l uses params[layer_param[l][0]] (weight) and [1] (bias); a tied
       model may point two layers at one param */
    int layer_param[ZN_MAX_LAYERS][2];
    /* tied weights ("tie:L=M": layer L uses layer M's weight, M < L): the
       names under which a shared parameter is also known */
    int naliases;
    struct { char name[ZN_MAX_NAME]; int param; } aliases[ZN_MAX_LAYERS];
} ZnModel;

/* Parses "mlp:D0,D1,...,Dk" (k >= 1, each D in 1..1<<20), optionally
 * followed by ",tie:L=M" parts: layer L uses layer M's weight (M < L, equal
 * shapes), so the parameter "layers.M.weight" is also known as
 * "layers.L.weight" and gets the gradient of both uses. Errors name the spec
 * and the offending part: "model spec 'mlp:4,x': 'x' is not a positive integer". */
int zn_model_parse(const char *spec, ZnModel *m, ZnErr *err);
/* Widest layer (max D): the "hidden size" used for "auto" bucket sizes. */
long zn_model_hidden_size(const ZnModel *m);
long zn_model_numel(const ZnModel *m);

/* Initial value of elements [lo, hi) of param p: uniform in
 * [-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's nn.Linear default range),
 * keyed by (seed, param name, element index) only. out is host memory: a
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

#endif
