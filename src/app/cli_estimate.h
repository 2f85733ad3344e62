/* cli_estimate.h: the flags and report of `zinc estimate` (spec
 * Z-EST-008..Z-EST-013); the estimators are engine/estimate.h. */
#ifndef ZN_CLI_ESTIMATE_H
#define ZN_CLI_ESTIMATE_H
#include <stdio.h>
#include "engine/estimate.h"
#include "engine/model.h"

/* Parses a parameter count (Z-EST-008): decimal digits with an optional
 * fraction, then an optional suffix K, M, B or T (any case: 10^3, 10^6, 10^9,
 * 10^12) or an exponent e<digits> ("2851e6"). The value must be a whole
 * number in lo..ZN_EST_MAX_PARAMS. flag names the flag in messages. */
int zn_est_parse_count(const char *flag, const char *s, long long lo, long long *out, ZnErr *err);

typedef struct {
    long long params;       /* total trainable parameters (shared counted once) */
    long long largest_layer;/* the largest module's direct parameters */
    int have_largest;       /* --largest-layer or --model given */
    int gpus_per_node, nodes;
    int stage;              /* 1, 2 or 3 with --stage */
    int have_stage;         /* 0: no --stage: the stage 2 and stage 3 tables */
    int rows;               /* ZN_EST_ROWS_* */
    double buffer_factor;   /* additional_buffer_factor */
    const char *model_spec; /* --model, or NULL */
    int largest_layer_index;/* --model: index of the largest layer's module */
    char largest_layer_name[96];   /* --model: the nn.Module it is (its parameters' name prefix) */
    int help;               /* -h / --help */
} ZnEstOpts;

/* DeepSpeed's largest_layer_params of a zinc model: the most parameters
 * one nn.Module owns directly; *index (if not NULL) the zinc module holding
 * it, name_out (if not NULL) its parameters' name prefix. */
long long zn_est_largest_layer(const ZnModel *m, int *index, char *name_out, size_t name_len);

/* Parses the flags after `zinc estimate` (Z-EST-009..Z-EST-013); with
 * --model, fills params and largest_layer from the model. */
int zn_est_parse_args(int argc, char **argv, ZnEstOpts *o, ZnErr *err);

/* The whole subcommand: parses, then writes the report to out and notes to
 * note. Returns 0, or ZN_E_USAGE with err set (nothing written to out). */
int zn_est_run(int argc, char **argv, FILE *out, FILE *note, ZnErr *err);

#endif
