/* ds_probe.c: zinc's side of the differential tests against DeepSpeed's own
 * Python (tests/diff_deepspeed.py, make test-deepspeed; spec Z-DSP-005..007).
 *
 * Reads one JSON request per line on stdin and writes one JSON answer per
 * line on stdout, so that thousands of cases cost one process:
 * "config" is a ds_config file's text, as a JSON string.
 *   {"op":"lr","config":"{...}","steps":N}
 *       -> {"lr":[...],"beta1":[...]}: the lr and beta1 the schedule holds at
 *          t = -1 .. N-1 (zinc's zn_sched_lr_at), or {"error":"..."}
 *   {"op":"scaler","config":"{...}","overflow":[0,1,...]}
 *       -> {"scale":[...],"hysteresis":[...],"error_at":-1}: the scale and
 *          hysteresis after each update_scale(overflow), error_at the index
 *          of the update that raised (an overflow at the minimum scale)
 *   {"op":"config","config":"{...}","world":W}
 *       -> {"ok":1,"train_batch_size":..,"micro_batch":..,"grad_accum":..,
 *           "gradient_clipping":..} or {"ok":0,"error":"..."}
 *   {"op":"estimate","stage":2|3,"params":P,"largest":L,"gpus":G,"nodes":N,
 *    "cpu_offload":0|1,"cpu_offload_params":0|1,"zero_init":0|1,"buffer_factor":F}
 *       -> {"cpu":BYTES,"gpu":BYTES}: DeepSpeed's estimators as zinc computes them
 * Doubles print with 17 significant digits: they read back to the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "core/config.h"
#include "engine/estimate.h"
#include "engine/loss_scaler.h"
#include "engine/lr_schedule.h"

/* Parses the request's "config", a string holding a ds_config file's text,
 * as zinc parses the file. (Text, not a nested object: cJSON prints a double
 * with 15 digits where they read back within its epsilon, which can lose the
 * last bit of an lr.) */
static int parse_config(const cJSON *req, int world, ZnConfig *cfg, ZnErr *err) {
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(req, "config");
    if (!cJSON_IsString(text)) return zn_err(err, ZN_E_USAGE, "request has no \"config\" string");
    ZnConfigArgs args;
    zn_config_args_init(&args);
    args.world_size = world;
    args.hidden_size = 768;   /* zinc train knows its model's: "auto" bucket sizes fill from it */
    return zn_config_parse(text->valuestring, strlen(text->valuestring), "config", &args, cfg, err);
}

static void print_error(const char *msg) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "ok", 0);
    cJSON_AddStringToObject(o, "error", msg);
    char *s = cJSON_PrintUnformatted(o);
    puts(s ? s : "{\"ok\":0,\"error\":\"out of memory\"}");
    free(s);
    cJSON_Delete(o);
}

static void print_doubles(const char *name, const double *v, long n, int last) {
    printf("\"%s\":[", name);
    for (long i = 0; i < n; i++) printf("%s%.17g", i ? "," : "", v[i]);
    printf("]%s", last ? "" : ",");
}

static int op_lr(const cJSON *req, ZnErr *err) {
    ZnConfig cfg;
    int rc = parse_config(req, 1, &cfg, err);
    if (rc) return rc;
    ZnLrSched s;
    if ((rc = zn_sched_init(&s, &cfg.sched, cfg.lr, cfg.beta1, cfg.beta2, err))) return rc;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(req, "steps");
    long n = cJSON_IsNumber(st) && st->valuedouble >= 0 ? (long)st->valuedouble : 0;
    double *lr = malloc(sizeof *lr * (size_t)(n + 1)), *b1 = malloc(sizeof *b1 * (size_t)(n + 1));
    if (!lr || !b1) {
        free(lr);
        free(b1);
        return zn_err(err, ZN_E_NOMEM, "out of host memory");
    }
    for (long t = -1; t < n; t++) {
        double beta2;
        lr[t + 1] = zn_sched_lr_at(&s, t);
        zn_sched_betas_at(&s, t, &b1[t + 1], &beta2);
    }
    printf("{");
    print_doubles("lr", lr, n + 1, 0);
    print_doubles("beta1", b1, n + 1, 1);
    printf("}\n");
    free(lr);
    free(b1);
    return 0;
}

static int op_scaler(const cJSON *req, ZnErr *err) {
    ZnConfig cfg;
    int rc = parse_config(req, 1, &cfg, err);
    if (rc) return rc;
    ZnLossScaler s;
    zn_scaler_init_fp16(&s, &cfg.fp16);
    const cJSON *ov = cJSON_GetObjectItemCaseSensitive(req, "overflow");
    long n = cJSON_GetArraySize(ov), error_at = -1;
    double *scale = calloc((size_t)n + 1, sizeof *scale), *hyst = calloc((size_t)n + 1, sizeof *hyst);
    if (!scale || !hyst) {
        free(scale);
        free(hyst);
        return zn_err(err, ZN_E_NOMEM, "out of host memory");
    }
    long i = 0;
    for (const cJSON *e = ov ? ov->child : NULL; e; e = e->next, i++) {
        ZnErr e2 = {0};
        if (zn_scaler_update(&s, cJSON_IsTrue(e) || (cJSON_IsNumber(e) && e->valuedouble != 0), &e2)) {
            error_at = i;
            break;
        }
        scale[i] = s.cur_scale;
        hyst[i] = s.cur_hysteresis;
    }
    printf("{");
    print_doubles("scale", scale, i, 0);
    print_doubles("hysteresis", hyst, i, 0);
    printf("\"initial\":%.17g,\"error_at\":%ld}\n", cfg.fp16.loss_scale == 0 ? 0.0 : cfg.fp16.loss_scale, error_at);
    free(scale);
    free(hyst);
    return 0;
}

static int op_config(const cJSON *req, ZnErr *err) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(req, "world");
    ZnConfig cfg;
    int rc = parse_config(req, cJSON_IsNumber(w) ? (int)w->valuedouble : 1, &cfg, err);
    if (rc) return rc;
    printf("{\"ok\":1,\"train_batch_size\":%ld,\"micro_batch\":%ld,\"grad_accum\":%ld,\"gradient_clipping\":%.17g}\n",
           cfg.train_batch_size, cfg.micro_batch, cfg.grad_accum, cfg.gradient_clipping);
    return 0;
}

static double num(const cJSON *req, const char *name, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, name);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static int op_estimate(const cJSON *req) {
    const long long params = (long long)num(req, "params", 0), largest = (long long)num(req, "largest", 0);
    const int gpus = (int)num(req, "gpus", 1), nodes = (int)num(req, "nodes", 1);
    const double bf = num(req, "buffer_factor", 1.5);
    ZnEst e = num(req, "stage", 2) == 3
                  ? zn_est_zero3(params, largest, gpus, nodes, num(req, "cpu_offload", 0) != 0,
                                 num(req, "cpu_offload_params", 0) != 0, num(req, "zero_init", 1) != 0, bf)
                  : zn_est_zero2(params, gpus, nodes, num(req, "cpu_offload", 0) != 0, bf);
    printf("{\"cpu\":%lld,\"gpu\":%lld}\n", e.cpu, e.gpu);
    return 0;
}

int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        cJSON *req = cJSON_Parse(line);
        const cJSON *op = req ? cJSON_GetObjectItemCaseSensitive(req, "op") : NULL;
        ZnErr err = {0};
        int rc;
        if (!cJSON_IsString(op)) rc = zn_err(&err, ZN_E_USAGE, "a request is a JSON object with an \"op\"");
        else if (!strcmp(op->valuestring, "lr")) rc = op_lr(req, &err);
        else if (!strcmp(op->valuestring, "scaler")) rc = op_scaler(req, &err);
        else if (!strcmp(op->valuestring, "config")) rc = op_config(req, &err);
        else if (!strcmp(op->valuestring, "estimate")) rc = op_estimate(req);
        else rc = zn_err(&err, ZN_E_USAGE, "unknown op \"%s\"", op->valuestring);
        if (rc) print_error(err.msg);
        fflush(stdout);
        cJSON_Delete(req);
    }
    return 0;
}
