/* config.c: DeepSpeed's JSON config as zinc reads it (spec clauses Z-CFG-*).
 *
 * zn_config_parse does its work in this order:
 *   1. DeepSpeed's defaults (zn_config_defaults).
 *   2. JSON syntax (cJSON), with line:column of the first error, duplicate
 *      keys anywhere, a top-level object.
 *   3. Every section is read through a table of key descriptors (type, range,
 *      where the value goes, which "auto" rule fills it). "auto" is filled from
 *      the command-line args while reading, the way Hugging Face's Trainer does.
 *   4. Args that are set override what the file says.
 *   5. Resolution: the batch triad (DeepSpeed's inference), overlap_comm's
 *      stage-dependent default, the model dtype, and the checks that involve
 *      more than one key.
 * Nothing here keeps state between calls; all memory is freed before return. */
#include "core/config.h"
#include "core/alloc.h"
#include "core/json_track.h"
#include "core/hjson.h"
#include "core/plan.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_CONFIG_BYTES (16L << 20) /* a DeepSpeed config is a few KiB; this is a sanity cap */
#define PATH_LEN 256
#define MAX_KEYS 64                  /* most keys in one table (checked at compile time) */
#define INF HUGE_VAL
#define TWO63 9223372036854775808.0  /* 2^63: LONG_MAX rounds to this as a double */

/* ------------------------------------------------------------------------ */
/* defaults                                                                  */

void zn_config_args_init(ZnConfigArgs *a) {
    memset(a, 0, sizeof *a);
    a->world_size = 1;
    a->train_batch_size = a->micro_batch = a->grad_accum = -1;
    a->stage = -1;
    a->seed = -1;
    a->lr = a->weight_decay = a->beta1 = a->beta2 = a->eps = NAN;
    a->max_grad_norm = NAN;
    a->warmup_steps = a->total_steps = -1;
    a->dtype = -1;
    a->hidden_size = -1;
    a->canonical = a->exact = -1;
}


/* ------------------------------------------------------------------------ */
/* the batch triad: DeepSpeedConfig._set_batch_related_parameters and
   _batch_assertion, with integer floor division */

int zn_config_resolve_batch(long *tb, long *mb, long *ga, int world, ZnErr *err) {
    if (world < 1) return zn_err(err, ZN_E_USAGE, "world size must be >= 1, got %d", world);
    long t = *tb, m = *mb, g = *ga, w = world;
    int gt = t != -1, gm = m != -1, gg = g != -1;
    char how[160] = ""; /* how an inferred value came about, for the message */

    if (gt && gm && gg) {
        /* all three given: nothing inferred */
    } else if (gt && gm) {
        if (m == 0) return zn_err(err, ZN_E_USAGE, "train_micro_batch_size_per_gpu 0 has to be greater than 0");
        g = t / m / w;
        snprintf(how, sizeof how, " (inferred: train_batch_size %ld // train_micro_batch_size_per_gpu %ld"
                 " // world size %ld)", t, m, w);
    } else if (gt && gg) {
        if (g == 0) return zn_err(err, ZN_E_USAGE, "gradient_accumulation_steps 0 has to be greater than 0");
        m = t / w / g;
        snprintf(how, sizeof how, " (inferred: train_batch_size %ld // world size %ld"
                 " // gradient_accumulation_steps %ld)", t, w, g);
    } else if (gm && gg) {
        if (__builtin_mul_overflow(m, g, &t) || __builtin_mul_overflow(t, w, &t))
            return zn_err(err, ZN_E_USAGE, "train_micro_batch_size_per_gpu %ld * gradient_accumulation_steps %ld"
                          " * world size %ld overflows", m, g, w);
    } else if (gt) {
        g = 1;
        m = t / w;
        snprintf(how, sizeof how, " (inferred: train_batch_size %ld // world size %ld)", t, w);
    } else if (gm) {
        if (__builtin_mul_overflow(m, w, &t))
            return zn_err(err, ZN_E_USAGE, "train_micro_batch_size_per_gpu %ld * world size %ld overflows", m, w);
        g = 1;
    } else {
        return zn_err(err, ZN_E_USAGE,
                      "either train_batch_size or train_micro_batch_size_per_gpu needs to be provided");
    }

    if (t <= 0) return zn_err(err, ZN_E_USAGE, "train_batch_size %ld has to be greater than 0", t);
    if (m <= 0) return zn_err(err, ZN_E_USAGE, "train_micro_batch_size_per_gpu %ld has to be greater than 0%s", m, how);
    if (g <= 0) return zn_err(err, ZN_E_USAGE, "gradient_accumulation_steps %ld has to be greater than 0%s", g, how);
    long prod;
    if (__builtin_mul_overflow(m, g, &prod) || __builtin_mul_overflow(prod, w, &prod) || t != prod) {
        char eq[48] = " (overflows)";
        if (!__builtin_mul_overflow(m, g, &prod) && !__builtin_mul_overflow(prod, w, &prod))
            snprintf(eq, sizeof eq, " (= %ld)", prod);
        return zn_err(err, ZN_E_USAGE, "train_batch_size %ld != train_micro_batch_size_per_gpu %ld"
                      " * gradient_accumulation_steps %ld * world size %ld%s%s", t, m, g, w, eq, how);
    }
    *tb = t;
    *mb = m;
    *ga = g;
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* parse context and messages                                                */

typedef struct {
    const char *src;            /* file name used in messages */
    const ZnConfigArgs *args;
    ZnErr *err;
    ZnConfig *c;
    const cJSON *root;
    /* things read now and settled after the args are applied */
    int tb_auto;                /* train_batch_size was "auto" */
    int mb_auto, ga_auto;       /* micro batch / accumulation were "auto" with their flag unset */
    int cpu_offload, cpu_offload_param;  /* deprecated bools: -1 absent, 0, 1 */
    int offload_optimizer_given, offload_param_given;
    char unimpl[512];           /* F_UNIMPL sections present, ", "-separated */
    char autos[4096];           /* one "PATH = VALUE (from WHERE)" line per filled "auto" */
    int lax;                    /* reading a section DeepSpeed validates with pydantic (Z-CFG-051) */
} Ctx;

/* "SRC: what", a usage error at the caller's line */
#define fail(x, ...) zn_err_src((x)->err, ZN_E_USAGE, (x)->src, __VA_ARGS__)

static void warn(Ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(Ctx *x, const char *fmt, ...) {
    /* built whole and written with one call so lines from threads do not mix */
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "zinc: warning: %s: ", x->src);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    zn_msg_escape(msg, sizeof msg);   /* a key from the file may hold any byte */
    fprintf(stderr, "%s\n", msg);
}

/* Shortest "%g" that reads back as the same double. */
static void fmt_num(double d, char *buf, size_t n) {
    snprintf(buf, n, "%.15g", d);
    if (strtod(buf, NULL) != d) snprintf(buf, n, "%.17g", d);
}

/* Records the value an "auto" took, printed once the whole config has been
 * read without error (one line per key; Z-CFG-050). */
static void note_auto(Ctx *x, const char *path, double v, int is_bool, const char *from) {
    char num[48], line[1024];
    size_t n = strlen(x->autos);
    if (is_bool) snprintf(num, sizeof num, "%s", v != 0 ? "true" : "false");
    else fmt_num(v, num, sizeof num);
    snprintf(line, sizeof line, "zinc: auto: %s: %s = %s (%s)", x->src, path, num, from);
    zn_msg_escape(line, sizeof line);   /* the file name may hold any byte */
    if (n + strlen(line) + 2 <= sizeof x->autos) snprintf(x->autos + n, sizeof x->autos - n, "%s\n", line);
}

/* A JSON value as it would appear in a message: 7, 2.5, "abc", true, null. */
static void render(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) fmt_num(v->valuedouble, buf, n);
    else if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        size_t len = strlen(s);
        if (len > 40) snprintf(buf, n, "\"%.40s...\"", s);
        else snprintf(buf, n, "\"%s\"", s);
    } else if (cJSON_IsTrue(v)) snprintf(buf, n, "true");
    else if (cJSON_IsFalse(v)) snprintf(buf, n, "false");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
    else snprintf(buf, n, "?");
}

static int is_auto(const cJSON *v) {
    return cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0;
}

/* The one "PATH: expected WANT, got VALUE" error. With no_auto, the string
 * "auto" (which DeepSpeed's HF integration fills in) gets its own message. */
static int expected(Ctx *x, const cJSON *v, const char *path, const char *want, int no_auto) {
    if (no_auto && is_auto(v)) return fail(x, "%s: \"auto\" is not supported for this key", path);
    char got[64];
    render(v, got, sizeof got);
    return fail(x, "%s: expected %s, got %s", path, want, got);
}

static void join(char *out, const char *path, const char *key) {
    if (path[0]) snprintf(out, PATH_LEN, "%s.%s", path, key);
    else snprintf(out, PATH_LEN, "%s", key);
}

/* ------------------------------------------------------------------------ */
/* key descriptors                                                           */

typedef enum {
    K_BOOL,    /* JSON true/false into an int */
    K_INT,     /* integral number into an int */
    K_LONG,    /* integral number into a long */
    K_NUM,     /* finite number into a double */
    K_INTNUM,  /* integral number into a double (DeepSpeed int fields zinc keeps as double) */
    K_ANY,     /* known to DeepSpeed, not used by zinc: any value accepted */
    K_FN,      /* read by the key's own function */
    K_SECTION, /* an object (or null) read through the key's sub-table */
} KType;

enum {
    F_NULL = 1,     /* JSON null means DeepSpeed's None: store .none */
    F_GT = 2,       /* lower bound exclusive */
    F_UNIMPL = 4,   /* K_ANY: a DeepSpeed feature section zinc does not implement (named in one warning) */
    F_LT = 4,       /* upper bound exclusive */
    F_DISCARD = 8,  /* validated, then dropped (zinc has no use for it) */
};

/* Hugging Face Trainer's "auto" fill rules (transformers integrations/deepspeed.py
   HfTrainerDeepSpeedConfig.trainer_config_process / trainer_config_finalize) */
typedef enum {
    FILL_NONE = 0, FILL_TB, FILL_MB, FILL_GA, FILL_LR, FILL_WD, FILL_EPS, FILL_BETAS, FILL_CLIP,
    FILL_MAX_LR, FILL_MIN_LR, FILL_WARMUP, FILL_TOTAL, FILL_REDUCE_BUCKET, FILL_PREFETCH,
    FILL_PERSIST, FILL_FP16, FILL_BF16,
} Fill;

typedef enum { UNKNOWN_WARN, UNKNOWN_FORBID, UNKNOWN_ZINC } Unknown;

typedef struct Key Key;
typedef int (*KeyFn)(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base);
struct Key {
    const char *name, *alias, *alias2; /* accepted spellings of one setting */
    KType type;
    size_t off;                        /* field offset in the section's struct */
    double lo, hi;                     /* accepted range */
    unsigned flags;
    double none;                       /* stored for null when F_NULL */
    Fill fill;
    double def;                        /* DeepSpeed's default (zn_config_defaults) */
    KeyFn fn;                          /* K_FN */
    /* a section (K_SECTION, or a K_FN that reads one): its table, read at
       .off of the parent's struct; zn_config_defaults walks it too */
    const Key *sub;
    size_t nsub;
    Unknown unknown;
    unsigned sched;                    /* scheduler.params: schedules taking the key */
};

#define RANGE(LO_, HI_) .lo = (LO_), .hi = (HI_)
#define SUB(T, OFF) .sub = (T), .nsub = sizeof(T) / sizeof *(T), .off = (OFF)

/* "an integer 0..3", "a positive number", ... for "expected ..." messages */
static void describe(const Key *k, char *buf, size_t n) {
    char lo[32], hi[32];
    fmt_num(k->lo, lo, sizeof lo);
    fmt_num(k->hi, hi, sizeof hi);
    const char *null = (k->flags & F_NULL) ? " or null" : "";
    if (k->type == K_BOOL) {
        snprintf(buf, n, "true or false%s", null);
        return;
    }
    int integer = k->type != K_NUM;
    const char *what = integer ? "an integer" : "a number";
    if (k->lo == -INF && k->hi == INF) {
        snprintf(buf, n, "%s%s", integer ? "an integer" : "a finite number", null);
    } else if (k->hi == INF || (k->type == K_INT && k->hi >= INT_MAX)) {
        if ((k->lo == 0 && (k->flags & F_GT)) || (integer && k->lo == 1 && !(k->flags & F_GT)))
            snprintf(buf, n, "a positive %s%s", integer ? "integer" : "number", null);
        else
            snprintf(buf, n, "%s %s %s%s", what, (k->flags & F_GT) ? ">" : ">=", lo, null);
    } else if (integer) {
        snprintf(buf, n, "an integer %s..%s%s", lo, hi, null);
    } else {
        snprintf(buf, n, "a number in %s%s, %s%s%s", (k->flags & F_GT) ? "(" : "[", lo, hi,
                 (k->flags & F_LT) ? ")" : "]", null);
    }
}

static int bad_value(Ctx *x, const Key *k, const char *path, const char *got, const char *from) {
    char want[96];
    describe(k, want, sizeof want);
    return fail(x, "%s: expected %s, got %s%s", path, want, got, from);
}

static int in_range(const Key *k, double d) {
    if ((k->flags & F_GT) ? !(d > k->lo) : !(d >= k->lo)) return 0;
    if ((k->flags & F_LT) ? !(d < k->hi) : !(d <= k->hi)) return 0;
    return 1;
}

static void store(const Key *k, void *base, double d) {
    if (k->flags & F_DISCARD) return;
    char *p = (char *)base + k->off;
    switch (k->type) {
    case K_BOOL: case K_INT: *(int *)p = (int)d; break;
    /* 2^63 is what sys.maxsize (LONG_MAX) becomes in a double: read it as LONG_MAX */
    case K_LONG: *(long *)p = d >= TWO63 ? LONG_MAX : (long)d; break;
    case K_NUM: case K_INTNUM: *(double *)p = d; break;
    default: break;
    }
}

/* Checks a number against the key's type and range, then stores it. */
static int put_number(Ctx *x, const Key *k, double d, const char *path, void *base, const char *from) {
    if (k->type == K_BOOL) { /* only from "auto" */
        store(k, base, d != 0);
        return ZN_OK;
    }
    int ok = isfinite(d);
    if (ok && k->type != K_NUM) ok = d == floor(d) && d >= -TWO63 && d <= TWO63;
    if (ok && k->type == K_INT) ok = d >= INT_MIN && d <= INT_MAX;
    if (ok) ok = in_range(k, d);
    if (!ok) {
        char got[48];
        fmt_num(d, got, sizeof got);
        return bad_value(x, k, path, got, from);
    }
    store(k, base, d);
    return ZN_OK;
}

/* Value of an "auto" from the args, as the Hugging Face Trainer fills it:
   the flag's value, else the TrainingArguments default (the Trainer always
   has one). Returns 1 with *v set and *from naming the source, 0 when the
   key stays "not given" (a batch triad key whose flag is unset: inferred
   later, Z-CFG-014), or an error. */
static int auto_value(Ctx *x, const Key *k, const char *path, double *v, char *from, size_t nfrom) {
    const ZnConfigArgs *a = x->args;
    const char *flag = NULL, *dflt = NULL;   /* the flag, and the Trainer's default when it is unset */
    double h = (double)a->hidden_size;
    int have = 1;
    switch (k->fill) {
    case FILL_TB: x->tb_auto = 1; return 0; /* settled once micro batch and accumulation are known */
    case FILL_MB: flag = "--micro-batch"; if (a->micro_batch == -1) return x->mb_auto = 1, 0; *v = (double)a->micro_batch; break;
    case FILL_GA: flag = "--grad-accum"; if (a->grad_accum == -1) return x->ga_auto = 1, 0; *v = (double)a->grad_accum; break;
    case FILL_LR: case FILL_MAX_LR:
        flag = "--lr"; have = !isnan(a->lr); *v = have ? a->lr : 5e-5; dflt = "learning_rate 5e-05"; break;
    case FILL_WD:
        flag = "--weight-decay"; have = !isnan(a->weight_decay); *v = have ? a->weight_decay : 0.0;
        dflt = "weight_decay 0.0"; break;
    case FILL_EPS: flag = "--eps"; have = !isnan(a->eps); *v = have ? a->eps : 1e-8; dflt = "adam_epsilon 1e-08"; break;
    case FILL_CLIP:
        flag = "--max-grad-norm"; have = !isnan(a->max_grad_norm); *v = have ? a->max_grad_norm : 1.0;
        dflt = "max_grad_norm 1.0"; break;
    case FILL_MIN_LR: have = 0; *v = 0.0; dflt = "warmup_min_lr 0 (not a Trainer argument)"; break;
    case FILL_WARMUP:
        /* max(1, warmup steps): DeepSpeed >= 0.19.6 refuses 0, the Trainer
           keeps a no-warmup run working that way */
        flag = "--warmup-steps"; have = a->warmup_steps != -1;
        *v = have && a->warmup_steps > 1 ? (double)a->warmup_steps : 1.0;
        dflt = "warmup_steps 0, as max(1, 0)"; break;
    case FILL_TOTAL:   /* the run's step count: the Trainer's num_training_steps */
        flag = "--steps"; have = a->total_steps != -1; *v = (double)a->total_steps; break;
    case FILL_FP16: flag = "--dtype"; have = a->dtype != -1; *v = a->dtype == ZN_F16; dflt = "fp16 false"; break;
    case FILL_BF16: flag = "--dtype"; have = a->dtype != -1; *v = a->dtype == ZN_BF16; dflt = "bf16 false"; break;
    case FILL_REDUCE_BUCKET: case FILL_PREFETCH: case FILL_PERSIST:
        if (a->hidden_size <= 0) return fail(x, "%s is \"auto\" but the model's hidden size is not known", path);
        flag = "the model's hidden size";
        /* Python's int(0.9 * h * h): left to right in double, truncated */
        *v = k->fill == FILL_REDUCE_BUCKET ? h * h : k->fill == FILL_PREFETCH ? floor(0.9 * h * h) : 10 * h;
        break;
    default: return fail(x, "%s: \"auto\" is not supported for this key", path);
    }
    if (!have && !dflt) return fail(x, "%s is \"auto\" but no %s was given", path, flag);
    if (have) snprintf(from, nfrom, "\"auto\" from %s", flag);
    else snprintf(from, nfrom, "\"auto\": the Hugging Face Trainer's default %s", dflt);
    return 1;
}

/* Pydantic's lax coercions, which DeepSpeed's config models (zero_optimization
 * and its offload sections) accept: zinc accepts them there too, with one
 * warning naming the value it took (Z-CFG-051). */

/* A bool from 0/1 (0.0, 1.0, -0.0) or one of pydantic's strings, in any case.
   Returns 1 with *out set, 0 when v is none of them. */
static int lax_bool(Ctx *x, const cJSON *v, const char *path, int *out) {
    static const char *const yes[] = {"1", "on", "t", "true", "y", "yes"};
    static const char *const no[] = {"0", "off", "f", "false", "n", "no"};
    char got[64];
    if (!x->lax) return 0;
    if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)) *out = v->valuedouble == 1;
    else if (cJSON_IsString(v)) {
        int hit = 0;
        for (size_t i = 0; i < sizeof yes / sizeof *yes && !hit; i++) {
            if (!strcasecmp(v->valuestring, yes[i])) *out = 1, hit = 1;
            else if (!strcasecmp(v->valuestring, no[i])) *out = 0, hit = 1;
        }
        if (!hit) return 0;
    } else return 0;
    render(v, got, sizeof got);
    warn(x, "%s: %s taken as %s, as DeepSpeed's pydantic reads it", path, got, *out ? "true" : "false");
    return 1;
}

/* An integer from a bool (true 1, false 0) or a string of decimal digits
   with an optional sign and surrounding whitespace. Returns 1 with *d set. */
static int lax_int(Ctx *x, const cJSON *v, const char *path, double *d) {
    char got[64];
    if (!x->lax) return 0;
    if (cJSON_IsBool(v)) *d = cJSON_IsTrue(v);
    else if (cJSON_IsString(v)) {
        const char *p = v->valuestring;
        while (isspace((unsigned char)*p)) p++;
        const char *q = p + (*p == '+' || *p == '-');
        if (!isdigit((unsigned char)*q)) return 0;
        while (isdigit((unsigned char)*q)) q++;
        while (isspace((unsigned char)*q)) q++;
        if (*q) return 0;
        *d = strtod(p, NULL);
    } else return 0;
    render(v, got, sizeof got);
    char num[48];
    fmt_num(*d, num, sizeof num);
    warn(x, "%s: %s taken as %s, as DeepSpeed's pydantic reads it", path, got, num);
    return 1;
}

/* sections call back into these */
static int read_object(Ctx *x, const cJSON *obj, const char *path, const Key *keys, size_t n,
                       void *base, Unknown unknown);
static int section(Ctx *x, const cJSON *v, const char *path, int *present);

static int read_key(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    char got[64];
    if (k->type == K_ANY) {
        size_t n = strlen(x->unimpl);
        if ((k->flags & F_UNIMPL) && n + strlen(k->name) + 3 < sizeof x->unimpl)
            snprintf(x->unimpl + n, sizeof x->unimpl - n, "%s%s", n ? ", " : "", k->name);
        return ZN_OK;
    }
    /* (in DeepSpeed's pydantic sections read_object has dropped it already) */
    if (is_auto(v) && k->fill == FILL_NONE) return fail(x, "%s: \"auto\" is not supported for this key", path);
    if (k->type == K_FN) return k->fn(x, k, v, path, base);
    if (k->type == K_SECTION) {
        int present;
        int rc = section(x, v, path, &present);
        if (rc || !present) return rc;
        return read_object(x, v, path, k->sub, k->nsub, (char *)base + k->off, k->unknown);
    }
    double d = 0;
    int b;
    if (is_auto(v)) {
        char from[96], paren[100];
        int r = auto_value(x, k, path, &d, from, sizeof from);
        if (r != 1) return r;
        snprintf(paren, sizeof paren, " (%s)", from);
        if ((r = put_number(x, k, d, path, base, paren))) return r;
        note_auto(x, path, d, k->type == K_BOOL, from);
        return ZN_OK;
    }
    if (cJSON_IsNull(v) && (k->flags & F_NULL)) {
        store(k, base, k->none);
        return ZN_OK;
    }
    if (k->type == K_BOOL) {
        if (lax_bool(x, v, path, &b)) { store(k, base, b); return ZN_OK; }
        if (!cJSON_IsBool(v)) { render(v, got, sizeof got); return bad_value(x, k, path, got, ""); }
        store(k, base, cJSON_IsTrue(v));
        return ZN_OK;
    }
    if (k->type != K_NUM && lax_int(x, v, path, &d)) return put_number(x, k, d, path, base, "");
    if (!cJSON_IsNumber(v)) { render(v, got, sizeof got); return bad_value(x, k, path, got, ""); }
    return put_number(x, k, v->valuedouble, path, base, "");
}

static const Key *find_key(const Key *keys, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        const Key *k = &keys[i];
        if (strcmp(k->name, name) == 0 || (k->alias && strcmp(k->alias, name) == 0) ||
            (k->alias2 && strcmp(k->alias2, name) == 0))
            return k;
    }
    return NULL;
}

/* Reads every member of obj through the table. A setting given twice under
   two spellings (an alias, a deprecated name) is an error, as DeepSpeed's
   deprecated-field check asserts. */
static int read_object(Ctx *x, const cJSON *obj, const char *path, const Key *keys, size_t n,
                       void *base, Unknown unknown) {
    const char *seen[MAX_KEYS] = {0};
    for (const cJSON *it = obj->child; it; it = it->next) {
        char sub[PATH_LEN];
        join(sub, path, it->string);
        const Key *k = find_key(keys, n, it->string);
        if (unknown == UNKNOWN_FORBID && is_auto(it) && (!k || k->fill == FILL_NONE)) {
            /* DeepSpeedConfigModel drops "auto" values before pydantic sees
               the key: neither "unknown" nor "given twice" */
            if (!k) warn(x, "%s: unknown key whose value is \"auto\"; dropped, as DeepSpeed drops it", sub);
            else warn(x, "%s: \"auto\" has no Hugging Face fill rule; dropped, as DeepSpeed drops it: the default "
                      "applies", sub);
            continue;
        }
        if (!k) {
            if (unknown == UNKNOWN_FORBID)
                return fail(x, "%s: unknown key (DeepSpeed forbids unknown keys in %s)", sub, path);
            if (unknown == UNKNOWN_ZINC)
                return fail(x, "%s: unknown key (the \"zinc\" section takes canonical, exact, deepspeed_quirks, weight_decay_exclude)", sub);
            warn(x, "%s: unknown key, ignored", sub);
            continue;
        }
        size_t i = (size_t)(k - keys);
        if (seen[i]) return fail(x, "%s: given twice (as \"%s\" and \"%s\")", sub, seen[i], it->string);
        seen[i] = it->string;
        const int lax = x->lax;
        x->lax = unknown == UNKNOWN_FORBID;   /* DeepSpeed's pydantic sections */
        int rc = read_key(x, k, it, sub, base);
        x->lax = lax;
        if (rc) return rc;
    }
    return ZN_OK;
}

/* A section that must be an object; null counts as absent (*present = 0). */
static int section(Ctx *x, const cJSON *v, const char *path, int *present) {
    *present = cJSON_IsObject(v);
    if (cJSON_IsNull(v) || cJSON_IsObject(v)) return ZN_OK;
    return expected(x, v, path, "an object", 0);
}

static int want_string(Ctx *x, const cJSON *v, const char *path, const char *want) {
    if (cJSON_IsString(v) && !is_auto(v)) return ZN_OK;
    return expected(x, v, path, want, 1);
}

/* ------------------------------------------------------------------------ */
/* zero_optimization (runtime/zero/config.py DeepSpeedZeroConfig,
   runtime/zero/offload_config.py)                                           */

static int read_stage(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnZeroConfig *z = base;
    if (cJSON_IsBool(v)) {           /* deprecated form: true is stage 1 */
        z->stage = cJSON_IsTrue(v);
        return ZN_OK;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if ((cJSON_IsNumber(v) || lax_int(x, v, path, &d)) && isfinite(d) && d == floor(d) && d >= 0 && d <= 3) {
        z->stage = (int)d;
        return ZN_OK;
    }
    return expected(x, v, path, "an integer 0..3", 1);
}

static int read_bool_to(Ctx *x, const cJSON *v, const char *path, int null_ok, int *out) {
    if (cJSON_IsBool(v)) { *out = cJSON_IsTrue(v); return ZN_OK; }
    if (lax_bool(x, v, path, out)) return ZN_OK;
    if (null_ok && cJSON_IsNull(v)) { *out = 0; return ZN_OK; }
    return expected(x, v, path, null_ok ? "true or false or null" : "true or false", 1);
}

static int read_legacy_stage1(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k; (void)base;
    int on = 0;
    int rc = read_bool_to(x, v, path, 0, &on);
    if (rc) return rc;
    /* DeepSpeed 0.19.8 still accepts the key and reads nothing of it */
    if (on) warn(x, "%s: ignored, as DeepSpeed ignores it (the legacy ZeRO stage 1 was removed in DeepSpeed 0.5.9)", path);
    return ZN_OK;
}

/* parameter_alignment (DeepSpeed 0.19.8): 16-byte alignment of each
   parameter in the stage 1/2 flat buffers. The values computed do not
   change; zinc's buffers stay unaligned, which it says. */
static int read_parameter_alignment(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k; (void)base;
    int on = 0;
    int rc = read_bool_to(x, v, path, 0, &on);
    if (!rc && on)
        warn(x, "%s: accepted; zinc's flat buffers are not aligned per parameter (the values are the same, the "
             "memory figures lack DeepSpeed's alignment padding)", path);
    return rc;
}

static int read_cpu_offload(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)base;
    int on = 0;
    int rc = read_bool_to(x, v, path, 1, &on);
    if (rc) return rc;
    if (strcmp(k->name, "cpu_offload") == 0) x->cpu_offload = on;
    else x->cpu_offload_param = on;
    return ZN_OK;
}

static int read_unsupported_object(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)base;
    if (cJSON_IsNull(v)) return ZN_OK;
    return fail(x, "%s: %s is not supported by zinc", path, k->name);
}

static int read_true_unsupported(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)base;
    int on = 0;
    int rc = read_bool_to(x, v, path, 0, &on);
    if (rc) return rc;
    if (on) return fail(x, "%s: %s is not supported by zinc", path, k->name);
    return ZN_OK;
}

static int read_device(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnOffloadConfig *o = base;
    if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        if (strcmp(s, "none") == 0) { o->device = ZN_OFFLOAD_NONE; return ZN_OK; }
        if (strcmp(s, "cpu") == 0) { o->device = ZN_OFFLOAD_CPU; return ZN_OK; }
        if (strcmp(s, "nvme") == 0) { o->device = ZN_OFFLOAD_NVME; return ZN_OK; }
    }
    return expected(x, v, path, "\"none\", \"cpu\" or \"nvme\"", 0);
}

static int read_nvme_path(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnOffloadConfig *o = base;
    if (cJSON_IsNull(v)) { o->nvme_path[0] = 0; return ZN_OK; }
    int rc = want_string(x, v, path, "a path or null");
    if (rc) return rc;
    if (strlen(v->valuestring) >= sizeof o->nvme_path)
        return fail(x, "%s: longer than %zu bytes", path, sizeof o->nvme_path - 1);
    snprintf(o->nvme_path, sizeof o->nvme_path, "%s", v->valuestring);
    return ZN_OK;
}

#define O(f) offsetof(ZnOffloadConfig, f)
static const Key OFFLOAD_PARAM_KEYS[] = {
    {"device", .type = K_FN, .fn = read_device},
    {"nvme_path", .type = K_FN, .fn = read_nvme_path},
    {"buffer_count", .type = K_LONG, .off = O(buffer_count), .def = 5, RANGE(0, INF)},
    {"buffer_size", .type = K_INTNUM, .off = O(buffer_size), .def = 1e8, RANGE(0, INF)},
    {"max_in_cpu", .type = K_INTNUM, .off = O(max_in_cpu), .def = 1e9, RANGE(0, INF)},
    {"pin_memory", .type = K_BOOL, .off = O(pin_memory), .def = 1},   /* True since DeepSpeed PR #8207 */
};
static const Key OFFLOAD_OPTIMIZER_KEYS[] = {
    {"device", .type = K_FN, .fn = read_device},
    {"nvme_path", .type = K_FN, .fn = read_nvme_path},
    {"buffer_count", .type = K_LONG, .off = O(buffer_count), .def = 4, RANGE(0, INF)},
    {"pin_memory", .type = K_BOOL, .off = O(pin_memory), .def = 1},
    {"pipeline_read", .type = K_BOOL, .off = O(pipeline_read)},
    {"pipeline_write", .type = K_BOOL, .off = O(pipeline_write)},
    {"fast_init", .type = K_BOOL, .off = O(fast_init)},
    /* DeepSpeed allows 0; zinc wants a section that offloads something */
    {"ratio", .type = K_NUM, .off = O(ratio), .def = 1.0, RANGE(0, 1), .flags = F_GT},
    {"super_offload", .type = K_FN, .fn = read_true_unsupported},
    {"cpuadam_cores_perc", .type = K_NUM, RANGE(0, 1), .flags = F_DISCARD},
};
#undef O

static int read_offload(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    ZnZeroConfig *z = base;
    int is_param = strcmp(k->name, "offload_param") == 0;
    ZnOffloadConfig *o = is_param ? &z->offload_param : &z->offload_optimizer;
    if (is_param) x->offload_param_given = 1;
    else x->offload_optimizer_given = 1;
    int present;
    int rc = section(x, v, path, &present);
    if (rc || !present) return rc; /* null: no offload */
    o->present = 1;
    if (is_param)
        return read_object(x, v, path, OFFLOAD_PARAM_KEYS,
                           sizeof OFFLOAD_PARAM_KEYS / sizeof *OFFLOAD_PARAM_KEYS, o, UNKNOWN_FORBID);
    return read_object(x, v, path, OFFLOAD_OPTIMIZER_KEYS,
                       sizeof OFFLOAD_OPTIMIZER_KEYS / sizeof *OFFLOAD_OPTIMIZER_KEYS, o, UNKNOWN_FORBID);
}

#define Z(f) offsetof(ZnZeroConfig, f)
static const Key ZERO_KEYS[] = {
    {"stage", .type = K_FN, .fn = read_stage},
    {"contiguous_gradients", .type = K_BOOL, .off = Z(contiguous_gradients), .def = 1},
    {"reduce_scatter", .type = K_BOOL, .off = Z(reduce_scatter), .def = 1},
    {"reduce_bucket_size", .type = K_LONG, .off = Z(reduce_bucket_size), .def = 500000000L, RANGE(0, INF), .flags = F_GT,
     .fill = FILL_REDUCE_BUCKET},
    {"use_multi_rank_bucket_allreduce", .type = K_BOOL, .off = Z(use_multi_rank_bucket_allreduce), .def = 1},
    {"allgather_partitions", .type = K_BOOL, .off = Z(allgather_partitions), .def = 1},
    {"allgather_bucket_size", .type = K_LONG, .off = Z(allgather_bucket_size), .def = 500000000L, RANGE(0, INF)},
    {"overlap_comm", .type = K_BOOL, .off = Z(overlap_comm), .def = -1, .flags = F_NULL, .none = -1}, /* None: from the stage */
    {"load_from_fp32_weights", .type = K_BOOL, .off = Z(load_from_fp32_weights), .def = 1},
    {"elastic_checkpoint", .type = K_BOOL, .off = Z(elastic_checkpoint)},
    {"offload_param", .type = K_FN, .fn = read_offload, SUB(OFFLOAD_PARAM_KEYS, Z(offload_param))},
    {"offload_optimizer", .type = K_FN, .fn = read_offload, SUB(OFFLOAD_OPTIMIZER_KEYS, Z(offload_optimizer))},
    {"zenflow", .type = K_FN, .fn = read_unsupported_object},
    {"sub_group_size", .type = K_LONG, .off = Z(sub_group_size), .def = 1000000000L, RANGE(0, INF)},
    {"cpu_offload_param", .type = K_FN, .fn = read_cpu_offload},
    {"cpu_offload_use_pin_memory", .type = K_BOOL, .flags = F_NULL | F_DISCARD},
    {"cpu_offload", .type = K_FN, .fn = read_cpu_offload},
    {"prefetch_bucket_size", "stage3_prefetch_bucket_size", .type = K_LONG, .off = Z(prefetch_bucket_size), .def = 50000000L,
     RANGE(0, INF), .fill = FILL_PREFETCH},
    {"param_persistence_threshold", "stage3_param_persistence_threshold", .type = K_LONG,
     .off = Z(param_persistence_threshold), .def = 100000L, RANGE(0, INF), .fill = FILL_PERSIST},
    {"model_persistence_threshold", "stage3_model_persistence_threshold", .type = K_LONG,
     .off = Z(model_persistence_threshold), .def = TWO63, RANGE(0, INF)},   /* sys.maxsize: store() reads 2^63 as LONG_MAX */
    {"max_live_parameters", "stage3_max_live_parameters", .type = K_LONG, .off = Z(max_live_parameters), .def = 1000000000L,
     RANGE(0, INF)},
    {"max_reuse_distance", "stage3_max_reuse_distance", .type = K_LONG, .off = Z(max_reuse_distance), .def = 1000000000L,
     RANGE(0, INF)},
    {"gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save",
     "stage3_gather_fp16_weights_on_model_save", .type = K_BOOL, .off = Z(gather_16bit_weights_on_model_save)},
    {"module_granularity_threshold", "stage3_module_granularity_threshold", .type = K_LONG,
     .off = Z(module_granularity_threshold), RANGE(-INF, INF)},
    {"use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params", .type = K_BOOL,
     .off = Z(use_all_reduce_for_fetch_params)},
    {"allgather_sequential", "stage3_allgather_sequential", .type = K_BOOL, .off = Z(allgather_sequential)},
    {"partition_stream_chunk_size", "stage3_partition_stream_chunk_size", .type = K_LONG, RANGE(0, INF),
     .flags = F_DISCARD},
    {"ignore_unused_parameters", .type = K_BOOL, .off = Z(ignore_unused_parameters), .def = 1},
    {"legacy_stage1", .type = K_FN, .fn = read_legacy_stage1},
    {"parameter_alignment", .type = K_FN, .fn = read_parameter_alignment},
    /* false keeps stage 1/2 from computing the global norm (DeepSpeed
       0.19.8); checked in resolve as DeepSpeed checks it. zinc computes the
       norm regardless: its log's grad_norm column stays. */
    {"compute_grad_norm", .type = K_BOOL, .off = Z(compute_grad_norm), .def = 1},
    {"round_robin_gradients", .type = K_BOOL, .off = Z(round_robin_gradients)},
    {"zero_hpz_partition_size", .type = K_LONG, .off = Z(zero_hpz_partition_size), .def = 1, RANGE(0, INF)},
    {"zero_quantized_weights", .type = K_BOOL, .off = Z(zero_quantized_weights)},
    {"zero_quantized_nontrainable_weights", .type = K_BOOL, .off = Z(zero_quantized_nontrainable_weights)},
    {"zero_quantized_gradients", .type = K_BOOL, .off = Z(zero_quantized_gradients)},
    {"zeropp_loco_param", .type = K_ANY},
    {"mics_shard_size", .type = K_LONG, .off = Z(mics_shard_size), .def = -1, RANGE(-INF, INF)},
    {"mics_hierarchical_params_gather", .type = K_BOOL, .off = Z(mics_hierarchical_params_gather)},
    {"memory_efficient_linear", .type = K_BOOL, .off = Z(memory_efficient_linear), .def = 1},
    {"pipeline_loading_checkpoint", .type = K_BOOL, .off = Z(pipeline_loading_checkpoint)},
    {"override_module_apply", .type = K_BOOL, .off = Z(override_module_apply), .def = 1},
    {"log_trace_cache_warnings", .type = K_BOOL, .off = Z(log_trace_cache_warnings)},
    {"enable_sanity_checks", .type = K_BOOL, .flags = F_DISCARD},
    {"save_muon_momentum_buffer_in_memory", .type = K_BOOL, .flags = F_DISCARD},
    {"leaf_module", .type = K_ANY},
};
#undef Z

/* Applies the deprecated cpu_offload / cpu_offload_param bools the way
   DeepSpeedConfigModel._process_deprecated_field does. */
static int apply_cpu_offload(Ctx *x, int flag, int given_new, ZnOffloadConfig *o, const char *old_name,
                             const char *new_name) {
    if (flag == -1) return ZN_OK;
    if (given_new)
        return fail(x, "zero_optimization.%s: cannot give the deprecated %s together with %s", old_name,
                    old_name, new_name);
    if (flag) {
        o->present = 1;
        o->device = ZN_OFFLOAD_CPU;
    }
    return ZN_OK;
}

static int read_zero(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    if (cJSON_IsBool(v)) {
        /* the deprecated "zero_optimization": true form (read_zero_config_deprecated) */
        c->zero.stage = cJSON_IsTrue(v);
        const cJSON *ag = cJSON_GetObjectItemCaseSensitive(x->root, "allgather_size");
        if (cJSON_IsTrue(v) && ag) {   /* true: stage 1 */
            static const Key agk = {"allgather_size", .type = K_LONG, .off = offsetof(ZnZeroConfig,
                                    allgather_bucket_size), RANGE(0, INF), .flags = F_GT};
            return read_key(x, &agk, ag, "allgather_size", &c->zero);
        }
        return ZN_OK;
    }
    int present;
    int rc = section(x, v, path, &present);
    if (rc || !present) return rc;
    rc = read_object(x, v, path, ZERO_KEYS, sizeof ZERO_KEYS / sizeof *ZERO_KEYS, &c->zero, UNKNOWN_FORBID);
    if (rc) return rc;
    rc = apply_cpu_offload(x, x->cpu_offload, x->offload_optimizer_given, &c->zero.offload_optimizer,
                           "cpu_offload", "offload_optimizer");
    if (rc) return rc;
    return apply_cpu_offload(x, x->cpu_offload_param, x->offload_param_given, &c->zero.offload_param,
                             "cpu_offload_param", "offload_param");
}

/* ------------------------------------------------------------------------ */
/* fp16 / bf16 (runtime/precision_config.py)                                 */

#define H(f) offsetof(ZnFp16Config, f)
static const Key FP16_KEYS[] = {
    {"enabled", .type = K_BOOL, .off = H(enabled), .fill = FILL_FP16},
    {"auto_cast", .type = K_BOOL, .off = H(auto_cast)},
    {"loss_scale", .type = K_NUM, .off = H(loss_scale), RANGE(0, INF)},
    /* zinc keeps 2^power a finite fp32 >= 1 */
    {"initial_scale_power", .type = K_INT, .off = H(initial_scale_power), .def = 16, RANGE(0, 127)},
    {"loss_scale_window", .type = K_LONG, .off = H(loss_scale_window), .def = 1000, RANGE(-INF, INF)},
    {"hysteresis", .type = K_INT, .off = H(hysteresis), .def = 2, RANGE(1, INT_MAX)},
    {"consecutive_hysteresis", .type = K_BOOL, .off = H(consecutive_hysteresis)},
    {"min_loss_scale", .type = K_INTNUM, .off = H(min_loss_scale), .def = 1.0, RANGE(-INF, INF)},
    {"fp16_master_weights_and_grads", .type = K_BOOL, .off = H(fp16_master_weights_and_grads)},
};
#undef H

#define B(f) offsetof(ZnBf16Config, f)
static const Key BF16_KEYS[] = {
    {"enabled", .type = K_BOOL, .off = B(enabled), .fill = FILL_BF16},
    {"immediate_grad_update", .type = K_BOOL, .off = B(immediate_grad_update)},
    {"check_grad_overflow", .type = K_BOOL, .off = B(check_grad_overflow), .def = 1},
    {"bf16_master_weights_and_grads", .type = K_BOOL, .off = B(bf16_master_weights_and_grads)},
    {"bf16_optimizer_states", .type = K_BOOL, .off = B(bf16_optimizer_states)},
};
#undef B

/* ------------------------------------------------------------------------ */
/* optimizer (runtime/config.py, engine._configure_basic_optimizer)          */

static int read_betas(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    static const Key beta = {"beta", .type = K_NUM, RANGE(0, 1), .flags = F_LT | F_DISCARD};
    double b[2] = {0, 0};
    if (is_auto(v)) {
        /* the flags, else the Trainer's adam_beta1 0.9 and adam_beta2 0.999 */
        const ZnConfigArgs *a = x->args;
        const int flag[2] = {!isnan(a->beta1), !isnan(a->beta2)};
        b[0] = flag[0] ? a->beta1 : 0.9;
        b[1] = flag[1] ? a->beta2 : 0.999;
        for (int i = 0; i < 2; i++) {
            char sub[PATH_LEN], from[96], paren[100];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            if (flag[i]) snprintf(from, sizeof from, "\"auto\" from --beta%d", i + 1);
            else snprintf(from, sizeof from, "\"auto\": the Hugging Face Trainer's default adam_beta%d %s", i + 1,
                          i ? "0.999" : "0.9");
            snprintf(paren, sizeof paren, " (%s)", from);
            int rc = put_number(x, &beta, b[i], sub, NULL, paren);
            if (rc) return rc;
            note_auto(x, sub, b[i], 0, from);
        }
    } else {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) {
            return expected(x, v, path, "[beta1, beta2], two numbers in [0, 1)", 0);
        }
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++) {
            char sub[PATH_LEN];
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            int rc = read_key(x, &beta, e, sub, NULL);
            if (rc) return rc;
            b[i] = e->valuedouble;
        }
    }
    c->beta1 = b[0];
    c->beta2 = b[1];
    return ZN_OK;
}

static int read_max_grad_norm(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k; (void)v; (void)base;
    return fail(x, "%s: not supported as an optimizer parameter (DeepSpeed raises); use the top-level"
                " \"gradient_clipping\"", path);
}

#define C(f) offsetof(ZnConfig, f)
static const Key OPT_PARAM_KEYS[] = {
    /* FusedAdam's constructor defaults */
    {"lr", .type = K_NUM, .off = C(lr), .def = 1e-3, RANGE(0, INF), .fill = FILL_LR},
    {"betas", .type = K_FN, .fn = read_betas, .fill = FILL_BETAS},
    {"eps", .type = K_NUM, .off = C(eps), .def = 1e-8, RANGE(0, INF), .flags = F_GT, .fill = FILL_EPS},
    {"weight_decay", .type = K_NUM, .off = C(weight_decay), RANGE(0, INF), .fill = FILL_WD},
    {"adam_w_mode", .type = K_BOOL, .off = C(adamw), .def = 1}, /* combined with the type after reading */
    {"bias_correction", .type = K_BOOL, .off = C(bias_correction), .def = 1},
    {"torch_adam", .type = K_BOOL, .off = C(torch_adam)},
    {"amsgrad", .type = K_FN, .fn = read_true_unsupported},
    {"max_grad_norm", .type = K_FN, .fn = read_max_grad_norm},
    {"set_grad_none", .type = K_BOOL, .flags = F_DISCARD},
    {"fp32_optimizer_states", .type = K_BOOL, .flags = F_DISCARD},
};

static const Key OPT_KEYS[] = {
    {"type", .type = K_ANY},  /* read first, by read_optimizer */
    {"params", .type = K_SECTION, SUB(OPT_PARAM_KEYS, 0), .unknown = UNKNOWN_WARN},
    {"legacy_fusion", .type = K_ANY},
};

/* A section named by its "type" string (optimizer, scheduler): *t is NULL
   when the section is null or absent. known: the types, for the message. */
static int typed_section(Ctx *x, const cJSON *v, const char *path, const char *known, const cJSON **t) {
    int present;
    *t = NULL;
    int rc = section(x, v, path, &present);
    if (rc || !present) return rc;
    char tpath[PATH_LEN];
    snprintf(tpath, sizeof tpath, "%s.type", path);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(v, "type");
    if (!ty) return fail(x, "%s: missing (%s)", tpath, known);
    if ((rc = want_string(x, ty, tpath, "a string"))) return rc;
    *t = ty;
    return ZN_OK;
}

static int read_optimizer(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    const cJSON *t;
    int rc = typed_section(x, v, path, "zinc supports Adam, AdamW", &t);
    if (rc || !t) return rc;
    /* DeepSpeed lower-cases the names it knows */
    char name[64];
    snprintf(name, sizeof name, "%s", t->valuestring);
    for (char *p = name; *p; p++) *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    if (strcmp(name, "adam") == 0) c->opt_type = ZN_OPT_ADAM;
    else if (strcmp(name, "adamw") == 0) c->opt_type = ZN_OPT_ADAMW;
    else return fail(x, "optimizer.type: '%s' is not supported by zinc (Adam, AdamW)", name);
    c->optimizer_present = 1;
    c->adamw = 1;
    rc = read_object(x, v, path, OPT_KEYS, sizeof OPT_KEYS / sizeof *OPT_KEYS, c, UNKNOWN_WARN);
    if (rc) return rc;
    /* "Adam" means AdamW unless adam_w_mode is false */
    c->adamw = c->opt_type == ZN_OPT_ADAMW || c->adamw;
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* scheduler (runtime/lr_schedules.py)                                       */

enum {
    SK_WARMUP = 1u << ZN_SCHED_WARMUP_LR,
    SK_DECAY = 1u << ZN_SCHED_WARMUP_DECAY_LR,
    SK_COSINE = 1u << ZN_SCHED_WARMUP_COSINE_LR,
    SK_CYCLE = 1u << ZN_SCHED_ONE_CYCLE,
    SK_RANGE = 1u << ZN_SCHED_LR_RANGE_TEST,
    SK_ALL = SK_WARMUP | SK_DECAY | SK_COSINE | SK_CYCLE | SK_RANGE,
};

static const char *const SCHED_NAMES[] = {
    NULL, "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest",
};

static int read_warmup_type(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnSchedConfig *s = base;
    int rc = want_string(x, v, path, "\"log\" or \"linear\"");
    if (rc) return rc;
    if (strcmp(v->valuestring, "linear") == 0) s->warmup_type_linear = 1;
    else if (strcmp(v->valuestring, "log") == 0) s->warmup_type_linear = 0;
    else {
        /* DeepSpeed warns and falls back to log */
        warn(x, "%s: unknown warmup_type '%s', using 'log'", path, v->valuestring);
        s->warmup_type_linear = 0;
    }
    return ZN_OK;
}

#define S(f) offsetof(ZnSchedConfig, f)
/* .def: the constructor defaults of runtime/lr_schedules.py; NaN where
   DeepSpeed has None (warmup_max_lr: the optimizer's lr) or no default */
static const Key SCHED_PARAM_KEYS[] = {
    {"warmup_min_lr", .type = K_NUM, .off = S(warmup_min_lr), RANGE(0, INF), .fill = FILL_MIN_LR,
     .sched = SK_WARMUP | SK_DECAY},
    {"warmup_max_lr", .type = K_NUM, .off = S(warmup_max_lr), .def = NAN, RANGE(0, INF), .flags = F_NULL, .none = NAN,
     .fill = FILL_MAX_LR, .sched = SK_WARMUP | SK_DECAY},
    {"warmup_num_steps", .type = K_LONG, .off = S(warmup_num_steps), .def = 1000, RANGE(1, INF), .fill = FILL_WARMUP,
     .sched = SK_WARMUP | SK_DECAY | SK_COSINE},
    {"warmup_type", .type = K_FN, .fn = read_warmup_type, .sched = SK_WARMUP | SK_DECAY | SK_COSINE},
    {"total_num_steps", .type = K_LONG, .off = S(total_num_steps), .def = -1, RANGE(1, INF), .fill = FILL_TOTAL,
     .sched = SK_DECAY | SK_COSINE},
    {"warmup_min_ratio", .type = K_NUM, .off = S(warmup_min_ratio), RANGE(0, INF), .sched = SK_COSINE},
    {"cos_min_ratio", .type = K_NUM, .off = S(cos_min_ratio), .def = 1e-4, RANGE(0, INF), .sched = SK_COSINE},
    {"cycle_min_lr", .type = K_NUM, .off = S(cycle_min_lr), .def = NAN, RANGE(0, INF), .sched = SK_CYCLE},
    {"cycle_max_lr", .type = K_NUM, .off = S(cycle_max_lr), .def = NAN, RANGE(0, INF), .sched = SK_CYCLE},
    {"decay_lr_rate", .type = K_NUM, .off = S(decay_lr_rate), RANGE(0, INF), .sched = SK_CYCLE},
    {"cycle_first_step_size", .type = K_LONG, .off = S(cycle_first_step_size), .def = 2000, RANGE(1, INF), .sched = SK_CYCLE},
    {"cycle_second_step_size", .type = K_LONG, .off = S(cycle_second_step_size), .def = -1, RANGE(0, INF),
     .flags = F_NULL, .none = -1, .sched = SK_CYCLE},
    {"cycle_first_stair_count", .type = K_LONG, .off = S(cycle_first_stair_count), RANGE(0, INF),
     .sched = SK_CYCLE},
    {"cycle_second_stair_count", .type = K_LONG, .off = S(cycle_second_stair_count), .def = -1, RANGE(0, INF),
     .flags = F_NULL, .none = -1, .sched = SK_CYCLE},
    {"decay_step_size", .type = K_LONG, .off = S(decay_step_size), RANGE(0, INF), .sched = SK_CYCLE},
    {"cycle_momentum", .type = K_BOOL, .off = S(cycle_momentum), .def = 1, .sched = SK_CYCLE},
    {"cycle_min_mom", .type = K_NUM, .off = S(cycle_min_mom), .def = 0.8, RANGE(0, 1), .flags = F_LT, .sched = SK_CYCLE},
    {"cycle_max_mom", .type = K_NUM, .off = S(cycle_max_mom), .def = 0.9, RANGE(0, 1), .flags = F_LT, .sched = SK_CYCLE},
    {"decay_mom_rate", .type = K_NUM, .off = S(decay_mom_rate), RANGE(0, INF), .sched = SK_CYCLE},
    {"lr_range_test_min_lr", .type = K_NUM, .off = S(lr_range_test_min_lr), .def = 1e-3, RANGE(0, INF), .sched = SK_RANGE},
    {"lr_range_test_step_size", .type = K_LONG, .off = S(lr_range_test_step_size), .def = 2000, RANGE(1, INF),
     .sched = SK_RANGE},
    {"lr_range_test_step_rate", .type = K_NUM, .off = S(lr_range_test_step_rate), .def = 1.0, RANGE(0, INF),
     .sched = SK_RANGE},
    {"lr_range_test_staircase", .type = K_BOOL, .off = S(lr_range_test_staircase), .sched = SK_RANGE},
    /* every constructor takes it; zinc resumes schedules from checkpoints instead */
    {"last_batch_iteration", .type = K_LONG, RANGE(-1, INF), .flags = F_DISCARD, .sched = SK_ALL},
};
#undef S

static int read_sched_params(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    int present;
    int rc = section(x, v, path, &present);
    if (rc || !present) return rc;
    size_t n = sizeof SCHED_PARAM_KEYS / sizeof *SCHED_PARAM_KEYS;
    unsigned mine = 1u << c->sched.type;
    /* The constructor is called with **params: a parameter of another
       schedule is a TypeError in DeepSpeed, so it is an error here too. */
    for (const cJSON *it = v->child; it; it = it->next) {
        const Key *sk = find_key(SCHED_PARAM_KEYS, n, it->string);
        if (sk && !(sk->sched & mine))
            return fail(x, "%s.%s: not a parameter of %s", path, it->string, SCHED_NAMES[c->sched.type]);
    }
    return read_object(x, v, path, SCHED_PARAM_KEYS, n, &c->sched, UNKNOWN_WARN);
}

static const Key SCHED_KEYS[] = {
    {"type", .type = K_ANY},  /* read first, by read_scheduler */
    {"params", .type = K_FN, .fn = read_sched_params, SUB(SCHED_PARAM_KEYS, offsetof(ZnConfig, sched))},
};

static int read_scheduler(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    const cJSON *t;
    int rc = typed_section(x, v, path, "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest", &t);
    if (rc || !t) return rc;
    ZnConfig *c = base;
    c->sched.type = ZN_SCHED_NONE;
    for (int i = ZN_SCHED_WARMUP_LR; i <= ZN_SCHED_LR_RANGE_TEST; i++)
        if (strcmp(t->valuestring, SCHED_NAMES[i]) == 0) c->sched.type = (ZnSchedType)i;
    if (c->sched.type == ZN_SCHED_NONE)
        return fail(x, "scheduler.type: unknown schedule '%s' (WarmupLR, WarmupDecayLR, WarmupCosineLR,"
                    " OneCycle, LRRangeTest)", t->valuestring);
    /* WarmupDecayLR's warmup_max_lr defaults to 0.001; WarmupLR's to None */
    if (c->sched.type == ZN_SCHED_WARMUP_DECAY_LR) c->sched.warmup_max_lr = 0.001;
    return read_object(x, v, path, SCHED_KEYS, sizeof SCHED_KEYS / sizeof *SCHED_KEYS, c, UNKNOWN_WARN);
}

/* ------------------------------------------------------------------------ */
/* top level                                                                 */

static int read_allreduce_op(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    if (cJSON_IsString(v) && strcasecmp(v->valuestring, "mean") == 0) { c->allreduce_sum = 0; return ZN_OK; }
    if (cJSON_IsString(v) && strcasecmp(v->valuestring, "sum") == 0) { c->allreduce_sum = 1; return ZN_OK; }
    return expected(x, v, path, "\"mean\" or \"sum\"", 0);
}

static int read_comm_dtype(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    if (cJSON_IsNull(v)) { c->communication_data_type = -1; return ZN_OK; }
    if (cJSON_IsString(v)) {   /* DeepSpeed lower-cases it */
        if (strcasecmp(v->valuestring, "fp32") == 0) { c->communication_data_type = ZN_F32; return ZN_OK; }
        if (strcasecmp(v->valuestring, "fp16") == 0) { c->communication_data_type = ZN_F16; return ZN_OK; }
        if (strcasecmp(v->valuestring, "bf16") == 0) { c->communication_data_type = ZN_BF16; return ZN_OK; }
    }
    return expected(x, v, path, "\"fp32\", \"fp16\", \"bf16\" or null", 0);
}

static int read_tag_validation(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k; (void)base;
    if (cJSON_IsString(v) && (strcasecmp(v->valuestring, "ignore") == 0 ||
                              strcasecmp(v->valuestring, "warn") == 0 || strcasecmp(v->valuestring, "fail") == 0))
        return ZN_OK;
    return expected(x, v, path, "\"Ignore\", \"Warn\" or \"Fail\"", 0);
}

/* DeepSpeed's aio section (runtime/swap_tensor/aio_config.py): get_aio_config
   reads only its known keys, so a misspelt or retired one is silently
   ignored there; zinc warns (Z-CFG-048). thread_count was renamed
   intra_op_parallelism (DeepSpeed PR #7056) and ds_nvme_tune still prints
   num_threads: both name the key that replaced them. */
static int read_aio_retired(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)v; (void)base;
    warn(x, "%s: DeepSpeed ignores %s (renamed intra_op_parallelism); ignored", path, k->name);
    return ZN_OK;
}

static int read_use_gds(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnAioConfig *a = base;
    int rc = read_bool_to(x, v, path, 0, &a->use_gds);
    if (rc) return rc;
    if (a->use_gds) return fail(x, "%s: GPUDirect Storage is not supported by zinc (its NVMe swap goes through host "
                                   "buffers); set it to false", path);
    return ZN_OK;
}

#define A(f) offsetof(ZnAioConfig, f)
static const Key AIO_KEYS[] = {
    {"block_size", .type = K_LONG, .off = A(block_size), .def = 1048576, RANGE(0, INF), .flags = F_GT},
    {"queue_depth", .type = K_LONG, .off = A(queue_depth), .def = 8, RANGE(0, INF), .flags = F_GT},
    {"intra_op_parallelism", .type = K_LONG, .off = A(intra_op_parallelism), .def = 1, RANGE(0, 1024), .flags = F_GT},
    {"single_submit", .type = K_BOOL, .off = A(single_submit)},
    {"overlap_events", .type = K_BOOL, .off = A(overlap_events), .def = 1},
    {"use_gds", .type = K_FN, .fn = read_use_gds},
    {"thread_count", .type = K_FN, .fn = read_aio_retired},
    {"num_threads", .type = K_FN, .fn = read_aio_retired},
};
#undef A

static const Key CHECKPOINT_KEYS[] = {
    {"load_universal", .type = K_BOOL, .off = C(load_universal)},
    {"tag_validation", .type = K_FN, .fn = read_tag_validation},
    {"use_node_local_storage", .type = K_BOOL, .flags = F_DISCARD},
    {"parallel_write", .type = K_ANY},
    {"writer", .type = K_ANY},
};

/* DeepSpeed's activation_checkpointing keys (runtime/activation_checkpointing/
   config.py); zinc recomputes each transformer block in backward when the
   section is present and keeps the activations whole on the device. */
typedef struct { int partition, cpu; } ActCkptOpts;
static const Key ACT_CKPT_KEYS[] = {
    {"partition_activations", .type = K_BOOL, .off = offsetof(ActCkptOpts, partition)},
    {"cpu_checkpointing", .type = K_BOOL, .off = offsetof(ActCkptOpts, cpu)},
    {"contiguous_memory_optimization", .type = K_BOOL, .flags = F_DISCARD},
    {"number_checkpoints", .type = K_LONG, RANGE(1, INF), .flags = F_NULL | F_DISCARD},
    {"synchronize_checkpoint_boundary", .type = K_BOOL, .flags = F_DISCARD},
    {"profile", .type = K_BOOL, .flags = F_DISCARD},
};

static int read_act_ckpt(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    int present;
    int rc = section(x, v, path, &present);
    if (rc || !present) return rc;   /* null: off */
    ActCkptOpts o = {0, 0};
    rc = read_object(x, v, path, ACT_CKPT_KEYS, sizeof ACT_CKPT_KEYS / sizeof *ACT_CKPT_KEYS, &o, UNKNOWN_WARN);
    if (rc) return rc;
    if (o.partition || o.cpu)
        warn(x, "%s: partition_activations and cpu_checkpointing are not implemented: the checkpointed "
             "activations stay whole on the device", path);
    ((ZnConfig *)base)->activation_checkpointing = 1;
    return ZN_OK;
}

/* zinc.weight_decay_exclude: an array of name substrings (Z-OPT-020) */
static int read_wd_exclude(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k;
    ZnConfig *c = base;
    if (cJSON_IsNull(v)) return ZN_OK;
    if (!cJSON_IsArray(v)) return expected(x, v, path, "an array of parameter-name substrings", 0);
    int n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (n == ZN_WD_EXCLUDE_MAX)
            return fail(x, "%s: at most %d substrings", path, ZN_WD_EXCLUDE_MAX);
        if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) >= sizeof c->wd_exclude[0])
            return fail(x, "%s[%d]: expected a non-empty string of at most %zu characters", path, n,
                        sizeof c->wd_exclude[0] - 1);
        snprintf(c->wd_exclude[n++], sizeof c->wd_exclude[0], "%s", it->valuestring);
    }
    c->n_wd_exclude = n;
    return ZN_OK;
}

static const Key ZINC_KEYS[] = {
    {"canonical", .type = K_BOOL, .off = C(canonical)},
    {"exact", .type = K_BOOL, .off = C(exact)},
    {"deepspeed_quirks", .type = K_BOOL, .off = C(deepspeed_quirks)},
    {"comm_timeout", .type = K_NUM, .off = C(comm_timeout), RANGE(1, INF)},   /* 0: unset */
    {"weight_decay_exclude", .type = K_FN, .fn = read_wd_exclude},
};

/* Sections zinc accepts and ignores; when one of them is switched on it
   would change what DeepSpeed computes, so say that it is ignored. */
static int read_ignored_feature(Ctx *x, const Key *k, const cJSON *v, const char *path, void *base) {
    (void)k; (void)base;
    const cJSON *en = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "enabled") : NULL;
    if (cJSON_IsTrue(en)) warn(x, "%s.enabled: zinc does not implement %s; ignored", path, path);
    return ZN_OK;
}

static const Key TOP_KEYS[] = {
    {"train_batch_size", .type = K_LONG, .off = C(train_batch_size), .def = -1, RANGE(1, INF), .flags = F_NULL,
     .none = -1, .fill = FILL_TB},
    {"train_micro_batch_size_per_gpu", .type = K_LONG, .off = C(micro_batch), .def = -1, RANGE(1, INF), .flags = F_NULL,
     .none = -1, .fill = FILL_MB},
    {"gradient_accumulation_steps", .type = K_LONG, .off = C(grad_accum), .def = -1, RANGE(1, INF), .flags = F_NULL,
     .none = -1, .fill = FILL_GA},
    {"optimizer", .type = K_FN, .fn = read_optimizer, SUB(OPT_KEYS, 0)},
    {"scheduler", .type = K_FN, .fn = read_scheduler, SUB(SCHED_KEYS, 0)},
    {"fp16", .type = K_SECTION, SUB(FP16_KEYS, C(fp16)), .unknown = UNKNOWN_WARN},
    {"bf16", "bfloat16", .type = K_SECTION, SUB(BF16_KEYS, C(bf16)), .unknown = UNKNOWN_WARN},
    {"zero_optimization", .type = K_FN, .fn = read_zero, SUB(ZERO_KEYS, C(zero))},
    {"allgather_size", .type = K_ANY},   /* read with a boolean zero_optimization */
    {"gradient_clipping", .type = K_NUM, .off = C(gradient_clipping), .def = 1.0, RANGE(0, INF), .fill = FILL_CLIP},   /* DeepSpeed >= 0.19.3 */
    {"prescale_gradients", .type = K_BOOL, .off = C(prescale_gradients)},
    {"gradient_predivide_factor", .type = K_NUM, .off = C(gradient_predivide_factor), .def = 1.0, RANGE(0, INF),
     .flags = F_GT},
    {"gradient_allreduce_op", .type = K_FN, .fn = read_allreduce_op},
    {"communication_data_type", .type = K_FN, .fn = read_comm_dtype},
    {"steps_per_print", .type = K_LONG, .off = C(steps_per_print), RANGE(0, INF), .flags = F_NULL, .none = 0},
    {"wall_clock_breakdown", .type = K_BOOL, .off = C(wall_clock_breakdown)},
    {"memory_breakdown", .type = K_BOOL, .off = C(memory_breakdown)},
    {"seed", .type = K_LONG, .off = C(seed), .def = 1234, RANGE(0, INF)},
    {"managed_gradient_accumulation", .type = K_BOOL, .off = C(managed_gradient_accumulation), .def = 1},
    {"zero_allow_untested_optimizer", .type = K_BOOL, .off = C(zero_allow_untested_optimizer)},
    {"zero_force_ds_cpu_optimizer", .type = K_BOOL, .off = C(zero_force_ds_cpu_optimizer), .def = 1},
    {"checkpoint", .type = K_SECTION, SUB(CHECKPOINT_KEYS, 0), .unknown = UNKNOWN_WARN},
    {"aio", .type = K_SECTION, SUB(AIO_KEYS, C(aio)), .unknown = UNKNOWN_WARN},
    {"activation_checkpointing", .type = K_FN, .fn = read_act_ckpt},
    {"zinc", .type = K_SECTION, SUB(ZINC_KEYS, 0), .unknown = UNKNOWN_ZINC},
    /* DeepSpeed features zinc does not implement */
    {"amp", .type = K_FN, .fn = read_ignored_feature},
    {"torch_autocast", .type = K_FN, .fn = read_ignored_feature},
    {"elasticity", .type = K_FN, .fn = read_ignored_feature},
    {"progressive_layer_drop", .type = K_FN, .fn = read_ignored_feature},
    /* DeepSpeed feature sections zinc does not implement: accepted, and
       named together in one warning (Z-CFG-006) */
#define UNIMPL .type = K_ANY, .flags = F_UNIMPL
    {"autotuning", UNIMPL}, {"flops_profiler", UNIMPL},
    {"sparse_attention", UNIMPL},
    {"data_efficiency", UNIMPL}, {"curriculum_learning", UNIMPL},
    {"compression_training", UNIMPL}, {"tensorboard", UNIMPL},
    {"wandb", UNIMPL}, {"csv_monitor", UNIMPL}, {"comet", UNIMPL},
    {"comms_logger", UNIMPL}, {"nebula", UNIMPL}, {"pipeline", UNIMPL},
    {"eigenvalue", UNIMPL}, {"quantize_training", UNIMPL}, {"hybrid_engine", UNIMPL},
    {"weight_quantization", UNIMPL}, {"compile", UNIMPL}, {"tensor_parallel", UNIMPL},
#undef UNIMPL
    /* DeepSpeed settings with no effect on what zinc computes: silent */
    {"data_types", .type = K_ANY}, {"timers", .type = K_ANY}, {"sparse_gradients", .type = K_ANY},
    {"disable_allgather", .type = K_ANY}, {"dump_state", .type = K_ANY},
    {"graph_harvesting", .type = K_ANY}, {"dataloader_drop_last", .type = K_ANY},
    {"log_level", .type = K_ANY}, {"use_data_before_expert_parallelism", .type = K_ANY},
    {"seq_parallel_communication_data_type", .type = K_ANY}, {"vocabulary_size", .type = K_ANY},
    {"sequence_parallel_size", .type = K_ANY},
};

/* ------------------------------------------------------------------------ */
/* defaults: the key tables hold them (Key.def); what no table stores (the
   settings a key's own function reads) is set here                          */

/* Every key's default, walking the sections from the top table. */
static void apply_defaults(const Key *keys, size_t n, char *base) {
    for (size_t i = 0; i < n; i++) {
        const Key *k = &keys[i];
        if (k->sub) apply_defaults(k->sub, k->nsub, base + k->off);
        else if (k->type <= K_INTNUM) store(k, base, k->def);
    }
}

void zn_config_defaults(ZnConfig *c) {
    memset(c, 0, sizeof *c);
    apply_defaults(TOP_KEYS, sizeof TOP_KEYS / sizeof *TOP_KEYS, (char *)c);
    c->optimizer_present = 0;
    c->n_wd_exclude = -1;   /* not given: the model's default (Z-OPT-020) */
    c->opt_type = ZN_OPT_ADAM;
    c->beta1 = 0.9;          /* FusedAdam's constructor defaults (betas: read_betas) */
    c->beta2 = 0.999;
    c->allreduce_sum = 0;
    c->communication_data_type = -1;
    c->model_dtype = ZN_F32;
    c->zero.stage = 0;
    c->zero.offload_param.device = c->zero.offload_optimizer.device = ZN_OFFLOAD_NONE;
    /* DeepSpeed's one offload model has every field; each of zinc's tables
       reads only those of its section */
    c->zero.offload_param.ratio = 1.0;
    c->zero.offload_optimizer.buffer_size = 1e8;
    c->zero.offload_optimizer.max_in_cpu = 1e9;
    c->sched.type = ZN_SCHED_NONE;
    c->sched.warmup_type_linear = 0;
    c->world_size = 1;
    zn_config_plan(c, NULL);   /* stage 0: cannot fail */
}
#undef C

_Static_assert(sizeof TOP_KEYS / sizeof *TOP_KEYS <= MAX_KEYS, "raise MAX_KEYS");
_Static_assert(sizeof ZERO_KEYS / sizeof *ZERO_KEYS <= MAX_KEYS, "raise MAX_KEYS");

/* ------------------------------------------------------------------------ */
/* JSON syntax                                                               */


static int syntax_error(Ctx *x, const char *buf, size_t len, size_t pos, const char *why) {
    long line = 1;
    size_t bol = 0;
    for (size_t i = 0; i < pos && i < len; i++)
        if (buf[i] == '\n') { line++; bol = i + 1; }
    long col = (long)(pos - bol) + 1;
    char near[256] = ""; /* a reason, or " near '" + 16 bytes as \xNN at most + "'" */
    if (why) {
        snprintf(near, sizeof near, ": %s", why);
    } else if (pos >= len) {
        snprintf(near, sizeof near, ": unexpected end of input");
    } else {
        /* up to 16 bytes of what is there, on this line, non-printables as \xNN */
        size_t n = 0;
        n += (size_t)snprintf(near + n, sizeof near - n, " near '");
        for (size_t i = pos; i < len && i < pos + 16 && buf[i] != '\n' && buf[i] != '\r'; i++) {
            unsigned char ch = (unsigned char)buf[i];
            if (ch >= 32 && ch < 127) near[n++] = (char)ch;
            else n += (size_t)snprintf(near + n, sizeof near - n, "\\x%02x", ch);
        }
        snprintf(near + n, sizeof near - n, "'");
    }
    return zn_err(x->err, ZN_E_USAGE, "%s:%ld:%ld: JSON syntax error%s", x->src, line, col, near);
}

typedef struct { const char *key; size_t index; } KeyRef;

static int cmp_keyref(const void *a, const void *b) {
    const KeyRef *p = a, *q = b;
    int r = strcmp(p->key, q->key);
    if (r) return r;
    return p->index < q->index ? -1 : p->index > q->index;
}

/* Python's json with DeepSpeed's dict_raise_error_on_duplicate_keys rejects a
   key given twice in one object; cJSON keeps both, so look for them. Sorting
   keeps this O(n log n) for big objects; the duplicate reported is the one
   whose second occurrence comes first in the file. */
static int check_duplicates(Ctx *x, const cJSON *node, char *path, size_t plen) {
    if (cJSON_IsObject(node)) {
        size_t n = 0;
        for (const cJSON *it = node->child; it; it = it->next) n++;
        if (n > 1) {
            KeyRef *refs = zn_malloc(ZN_HOST_CORE, n * sizeof *refs);
            if (!refs) return zn_err(x->err, ZN_E_NOMEM, "%s: out of memory", x->src);
            size_t i = 0;
            for (const cJSON *it = node->child; it; it = it->next, i++) refs[i] = (KeyRef){it->string, i};
            qsort(refs, n, sizeof *refs, cmp_keyref);
            const char *dup = NULL;
            size_t dup_at = n;
            for (i = 1; i < n; i++)
                if (strcmp(refs[i].key, refs[i - 1].key) == 0 && refs[i].index < dup_at &&
                    (i < 2 || strcmp(refs[i].key, refs[i - 2].key) != 0)) {
                    dup = refs[i].key;
                    dup_at = refs[i].index;
                }
            int rc = ZN_OK;
            if (dup) {
                char full[PATH_LEN];
                join(full, path, dup);
                rc = fail(x, "%s: duplicate key", full);
            }
            free(refs);
            if (rc) return rc;
        }
    }
    int idx = 0;
    for (const cJSON *it = node->child; it; it = it->next, idx++) {
        if (!cJSON_IsObject(it) && !cJSON_IsArray(it)) continue;
        if (cJSON_IsObject(node))
            snprintf(path + plen, PATH_LEN - plen, "%s%s", plen ? "." : "", it->string);
        else
            snprintf(path + plen, PATH_LEN - plen, "[%d]", idx);
        size_t sub = strlen(path);
        int rc = check_duplicates(x, it, path, sub);
        path[plen] = 0;
        if (rc) return rc;
    }
    return ZN_OK;
}

static int parse_json(Ctx *x, const char *text, size_t len, cJSON **out) {
    *out = NULL;
    if (len > (size_t)MAX_CONFIG_BYTES) return fail(x, "config is larger than 16 MiB");
    const char *nul = memchr(text, 0, len);
    if (nul) return syntax_error(x, text, len, (size_t)(nul - text), "NUL byte in input");
    /* DeepSpeed reads configs with hjson: rewrite to strict JSON (strict
       JSON passes unchanged), keeping where each byte came from (Z-CFG-014) */
    ZnHjson h;
    int hrc = zn_hjson_to_json(text, len, &h);
    if (hrc) {
        int rc = hrc == -2 ? zn_err(x->err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while reading the config", x->src)
                           : syntax_error(x, text, len, h.err_at, h.why);
        zn_hjson_free(&h);
        return rc;
    }
    const char *end = NULL;
    zn_json_track();   /* out of memory is not a syntax error */
    cJSON *root = zn_json_parse(h.json, h.len + 1, &end, 1);
    if (zn_json_failed()) {
        cJSON_Delete(root);
        zn_hjson_free(&h);
        return zn_err(x->err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while reading the config", x->src);
    }
    if (!root) {
        size_t p = end ? (size_t)(end - h.json) : 0;
        int unterminated;
        size_t at = zn_json_error_offset(h.json, h.len, p, &unterminated);
        int rc = syntax_error(x, text, len, h.from[at < h.len ? at : h.len], unterminated ? "unterminated string" : NULL);
        zn_hjson_free(&h);
        return rc;
    }
    zn_hjson_free(&h);
    if (!cJSON_IsObject(root)) {
        char got[64];
        render(root, got, sizeof got);
        cJSON_Delete(root);
        return fail(x, "the top level must be a JSON object, got %s", got);
    }
    char path[PATH_LEN] = "";
    int rc = check_duplicates(x, root, path, 0);
    if (rc) {
        cJSON_Delete(root);
        return rc;
    }
    *out = root;
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* args, then resolution                                                     */

static int apply_args(Ctx *x) {
    const ZnConfigArgs *a = x->args;
    ZnConfig *c = x->c;
    if (a->world_size < 1) return fail(x, "world size must be >= 1, got %d", a->world_size);
    if (a->train_batch_size != -1) { c->train_batch_size = a->train_batch_size; x->tb_auto = 0; }
    if (a->micro_batch != -1) c->micro_batch = a->micro_batch;
    if (a->grad_accum != -1) c->grad_accum = a->grad_accum;
    if (a->stage != -1) {
        ZnPlan P;
        ZnErr e;
        if (zn_config_stage_plan(a->stage, &P, &e)) return fail(x, "--stage: expected an integer 0..3, got %d", a->stage);
        c->zero.stage = a->stage;
    }
    if (a->seed != -1) {
        if (a->seed < 0) return fail(x, "--seed: expected an integer >= 0, got %ld", a->seed);
        c->seed = a->seed;
    }
    struct { double v; double *dst; const char *flag; double lo, hi; int gt, lt; } nums[] = {
        {a->lr, &c->lr, "--lr", 0, INF, 0, 0},
        {a->weight_decay, &c->weight_decay, "--weight-decay", 0, INF, 0, 0},
        {a->beta1, &c->beta1, "--beta1", 0, 1, 0, 1},
        {a->beta2, &c->beta2, "--beta2", 0, 1, 0, 1},
        {a->eps, &c->eps, "--eps", 0, INF, 1, 0},
        {a->max_grad_norm, &c->gradient_clipping, "--max-grad-norm", 0, INF, 0, 0},
    };
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
        if (isnan(nums[i].v)) continue;
        Key k = {nums[i].flag, .type = K_NUM, RANGE(nums[i].lo, nums[i].hi),
                 .flags = F_DISCARD | (nums[i].gt ? F_GT : 0) | (nums[i].lt ? F_LT : 0)};
        int rc = put_number(x, &k, nums[i].v, nums[i].flag, NULL, "");
        if (rc) return rc;
        *nums[i].dst = nums[i].v;
    }
    if (a->warmup_steps != -1) {
        /* 0, the Trainer's default, means no warmup: 1 step, as the Trainer
           passes max(1, warmup_steps) to DeepSpeed (which refuses 0) */
        if (a->warmup_steps < 0) return fail(x, "--warmup-steps: expected an integer >= 0, got %ld", a->warmup_steps);
        c->sched.warmup_num_steps = a->warmup_steps > 1 ? a->warmup_steps : 1;
    }
    if (a->dtype != -1) {
        if (a->dtype != ZN_F32 && a->dtype != ZN_F16 && a->dtype != ZN_BF16)
            return fail(x, "--dtype: expected fp32, fp16 or bf16, got %s", zn_dtype_name((ZnDtype)a->dtype));
        c->fp16.enabled = a->dtype == ZN_F16;
        c->bf16.enabled = a->dtype == ZN_BF16;
    }
    if (a->canonical != -1) c->canonical = a->canonical != 0;
    if (a->exact != -1) c->exact = a->exact != 0;
    /* an "auto" micro batch or accumulation with no flag, and no train batch
       size to infer them from: the Trainer's defaults, per_device_train_batch_size
       8 and gradient_accumulation_steps 1 */
    if (c->train_batch_size <= 0 && c->micro_batch <= 0 && x->mb_auto) {
        c->micro_batch = 8;
        note_auto(x, "train_micro_batch_size_per_gpu", 8, 0, "\"auto\": the Hugging Face Trainer's default "
                  "per_device_train_batch_size 8");
    }
    if (c->train_batch_size <= 0 && c->grad_accum <= 0 && x->ga_auto) {
        c->grad_accum = 1;
        note_auto(x, "gradient_accumulation_steps", 1, 0, "\"auto\": the Hugging Face Trainer's default "
                  "gradient_accumulation_steps 1");
    }
    /* Hugging Face: train_batch_size = world size * micro batch * accumulation */
    if (x->tb_auto && c->micro_batch > 0 && c->grad_accum > 0) {
        long t;
        if (__builtin_mul_overflow(c->micro_batch, c->grad_accum, &t) ||
            __builtin_mul_overflow(t, (long)a->world_size, &t))
            return fail(x, "train_batch_size: \"auto\" overflows");
        c->train_batch_size = t;
        note_auto(x, "train_batch_size", (double)t, 0, "\"auto\": world size x micro batch x accumulation");
    }
    return ZN_OK;
}

static const char *offload_name(int is_param) { return is_param ? "offload_param" : "offload_optimizer"; }

static int check_offload(Ctx *x, const ZnPlan *P, const ZnOffloadConfig *o, int is_param) {
    const ZnConfig *c = x->c;
    const char *name = offload_name(is_param);
    if (o->device != ZN_OFFLOAD_NONE) {
        if (P->optim == ZN_HOLD_FULL)
            return fail(x, "zero_optimization.%s: offload requires ZeRO stage 1, 2 or 3 (stage is 0)", name);
        /* only stage 3 swaps (below): elsewhere nvme is cpu and needs no path */
        if (o->device == ZN_OFFLOAD_NVME && !o->nvme_path[0] && P->ds_optimizer == ZN_DS_ZERO3)
            return fail(x, "zero_optimization.%s.nvme_path: required when device is \"nvme\"", name);
        if (is_param && P->params == ZN_HOLD_FULL)
            warn(x, "zero_optimization.offload_param: only ZeRO stage 3 offloads parameters; ignored at stage %d",
                 c->zero.stage);
        /* stage_1_and_2.py sets cpu_offload for any device but none */
        if (!is_param && o->device == ZN_OFFLOAD_NVME && P->ds_optimizer != ZN_DS_ZERO3)
            warn(x, "zero_optimization.offload_optimizer.device: \"nvme\" at ZeRO stage %d behaves as \"cpu\" "
                 "(DeepSpeed swaps to NVMe only at stage 3); nvme_path is not used", c->zero.stage);
    }
    /* DeepSpeedZeroConfig.offload_ratio_check: looks at the ratio whatever the device */
    if (!is_param && o->present && o->ratio < 1.0 && P->ds_optimizer != ZN_DS_ZERO3)
        return fail(x, "zero_optimization.offload_optimizer.ratio: partial offload (ratio < 1) needs ZeRO stage 3");
    return ZN_OK;
}

/* ZeRO++ and MiCS keys (Z-CFG-049): DeepSpeed reads them only where
 * parameters are partitioned (stage 3); zinc says so instead of ignoring
 * them in silence. */
static int check_zeropp(Ctx *x, const ZnPlan *P) {
    const ZnZeroConfig *z = &x->c->zero;
    const int world = x->args->world_size;
    const int any = z->zero_hpz_partition_size > 1 || z->zero_quantized_weights || z->zero_quantized_gradients;
    if ((any || z->mics_shard_size > 0) && !P->gather_per_layer) {
        warn(x, "zero_optimization: zero_hpz_partition_size, zero_quantized_weights, zero_quantized_gradients "
             "(ZeRO++) and mics_shard_size (MiCS) apply at ZeRO stage 3; ignored at stage %d", z->stage);
        return ZN_OK;
    }
    if (z->zero_hpz_partition_size > 1 && world > 0) {
        long g = z->zero_hpz_partition_size < world ? z->zero_hpz_partition_size : world;
        if (world % g)
            return fail(x, "zero_optimization.zero_hpz_partition_size: %ld does not divide the world size %d "
                        "(hpZ groups are consecutive ranks)", z->zero_hpz_partition_size, world);
    }
    if (z->zero_quantized_gradients && !z->reduce_scatter)
        return fail(x, "zero_optimization.zero_quantized_gradients: needs reduce_scatter true (the quantized "
                    "all-to-all replaces the reduce-scatter)");
    if (z->zero_quantized_nontrainable_weights && P->gather_per_layer)
        warn(x, "zero_optimization.zero_quantized_nontrainable_weights: every parameter of a zinc model trains; "
             "no effect");
    if (z->mics_shard_size > 0) {
        if (world > 0 && (z->mics_shard_size > world || world % z->mics_shard_size))
            return fail(x, "zero_optimization.mics_shard_size: %ld does not divide the world size %d (shard groups "
                        "are consecutive ranks)", z->mics_shard_size, world);
        if (any)
            return fail(x, "zero_optimization.mics_shard_size: MiCS and ZeRO++ (zero_hpz_partition_size, "
                        "zero_quantized_weights, zero_quantized_gradients) are different stage-3 optimizers in "
                        "DeepSpeed; use one of them");
    }
    if (z->mics_hierarchical_params_gather && z->mics_shard_size <= 0)
        warn(x, "zero_optimization.mics_hierarchical_params_gather: applies with mics_shard_size > 0; ignored");
    return ZN_OK;
}

static int resolve(Ctx *x) {
    ZnConfig *c = x->c;
    ZnZeroConfig *z = &c->zero;
    int rc = zn_config_resolve_batch(&c->train_batch_size, &c->micro_batch, &c->grad_accum, x->args->world_size,
                                     x->err);
    if (rc) return zn_err_prefix(x->err, "%s: ", x->src);

    /* the DeepSpeed rules below depend on the optimizer class the stage
       builds (plan.h); the stage is in range here (its key's check) */
    c->world_size = x->args->world_size;
    if ((rc = zn_config_plan(c, x->err))) return zn_err_prefix(x->err, "%s: ", x->src);
    const ZnPlan *P = &c->plan;
    if (z->overlap_comm == -1) z->overlap_comm = P->ds_optimizer == ZN_DS_ZERO3;
    /* the engine sets prefetch_bucket_size to 1 when it builds the stage 3 optimizer */
    if (z->allgather_sequential && P->ds_optimizer == ZN_DS_ZERO3) z->prefetch_bucket_size = 1;
    /* stage 1/2 assert 4-byte (2 fp16 elements) alignment of the all-gather bucket */
    if (P->ds_optimizer == ZN_DS_ZERO12 && z->allgather_bucket_size % 2 != 0)
        return fail(x, "zero_optimization.allgather_bucket_size: must be even (a multiple of 2) at ZeRO stage %d,"
                    " got %ld", z->stage, z->allgather_bucket_size);
    if (!z->compute_grad_norm) {   /* DeepSpeed's checks (zero/config.py, stage_1_and_2.py) */
        if (P->ds_optimizer != ZN_DS_ZERO12)
            return fail(x, "zero_optimization.compute_grad_norm: false is supported only with ZeRO stage 1 or 2");
        if (c->gradient_clipping > 0)
            return fail(x, "zero_optimization.compute_grad_norm: false requires gradient_clipping 0");
        if (z->offload_optimizer.device != ZN_OFFLOAD_NONE)
            return fail(x, "zero_optimization.compute_grad_norm: false does not support optimizer offload");
    }
    if ((rc = check_offload(x, P, &z->offload_optimizer, 0))) return rc;
    if ((rc = check_offload(x, P, &z->offload_param, 1))) return rc;
    if ((rc = check_zeropp(x, P))) return rc;

    if (c->fp16.enabled && c->bf16.enabled)
        return fail(x, "fp16.enabled and bf16.enabled are both true; bf16 and fp16 modes cannot be enabled together");
    if (c->fp16.enabled && c->fp16.loss_scale == 0) {
        if (c->fp16.loss_scale_window <= 0)
            return fail(x, "fp16.loss_scale_window: must be > 0 when dynamic loss scaling is enabled"
                        " (loss_scale 0), got %ld", c->fp16.loss_scale_window);
        if (c->fp16.min_loss_scale <= 0)
            return fail(x, "fp16.min_loss_scale: must be > 0 when dynamic loss scaling is enabled"
                        " (loss_scale 0), got %.17g", c->fp16.min_loss_scale);
    }
    if (c->fp16.fp16_master_weights_and_grads && P->ds_optimizer == ZN_DS_FP16_OPTIMIZER)
        return fail(x, "fp16.fp16_master_weights_and_grads: only supported with ZeRO stage 1, 2 or 3");
    if (c->bf16.bf16_master_weights_and_grads && P->ds_optimizer == ZN_DS_FP16_OPTIMIZER)
        return fail(x, "bf16.bf16_master_weights_and_grads: only supported with ZeRO stage 1, 2 or 3");
    if (c->bf16.bf16_optimizer_states && P->ds_optimizer == ZN_DS_FP16_OPTIMIZER)
        return fail(x, "bf16.bf16_optimizer_states: only supported with ZeRO stage 1, 2 or 3");
    if (c->bf16.bf16_optimizer_states && !c->bf16.bf16_master_weights_and_grads)
        return fail(x, "bf16.bf16_optimizer_states: requires bf16.bf16_master_weights_and_grads");
    if (c->allreduce_sum && P->ds_optimizer == ZN_DS_ZERO3)
        return fail(x, "gradient_allreduce_op: 'sum' is not supported with ZeRO stage 3");

    ZnSchedConfig *s = &c->sched;
    const char *sname = SCHED_NAMES[s->type];
    if ((s->type == ZN_SCHED_WARMUP_DECAY_LR || s->type == ZN_SCHED_WARMUP_COSINE_LR)) {
        if (s->total_num_steps == -1) return fail(x, "scheduler.params.total_num_steps: required by %s", sname);
        /* total_num_steps < warmup_num_steps is warned about by the scheduler
           itself (Z-SCHED-008), built once per run */
    }
    if (s->type == ZN_SCHED_ONE_CYCLE) {
        if (isnan(s->cycle_min_lr)) return fail(x, "scheduler.params.cycle_min_lr: required by OneCycle");
        if (isnan(s->cycle_max_lr)) return fail(x, "scheduler.params.cycle_max_lr: required by OneCycle");
    }

    c->model_dtype = c->fp16.enabled ? ZN_F16 : c->bf16.enabled ? ZN_BF16 : ZN_F32;
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* the plan                                                                  */

int zn_config_plan(ZnConfig *c, ZnErr *err) {
    const ZnZeroConfig *z = &c->zero;
    ZnPlan P;
    int rc = zn_plan_build(&P, z->stage, err);
    if (rc) return rc;
    zn_plan_offload(&P, (int)z->offload_optimizer.device, (int)z->offload_param.device, z->offload_optimizer.ratio);
    zn_plan_zeropp(&P, z->zero_hpz_partition_size, z->zero_quantized_weights, z->zero_quantized_gradients,
                   c->world_size);
    zn_plan_mics(&P, z->mics_shard_size, z->mics_hierarchical_params_gather);
    c->plan = P;
    return 0;
}

int zn_config_stage_plan(int stage, ZnPlan *P, ZnErr *err) {
    ZnConfig c;
    zn_config_defaults(&c);
    c.zero.stage = stage;
    int rc = zn_config_plan(&c, err);
    if (!rc) *P = c.plan;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* entry points                                                              */

int zn_config_parse(const char *text, size_t len, const char *source, const ZnConfigArgs *args, ZnConfig *out,
                    ZnErr *err) {
    ZnConfigArgs none;
    if (!args) {
        zn_config_args_init(&none);
        args = &none;
    }
    ZnConfig c;
    zn_config_defaults(&c);
    Ctx x = {.src = source ? source : "config", .args = args, .err = err, .c = &c,
             .cpu_offload = -1, .cpu_offload_param = -1};
    cJSON *root = NULL;
    int rc = ZN_OK;
    if (text) rc = parse_json(&x, text, len, &root);
    if (!rc && root) {
        x.root = root;
        rc = read_object(&x, root, "", TOP_KEYS, sizeof TOP_KEYS / sizeof *TOP_KEYS, &c, UNKNOWN_WARN);
        if (!rc && x.unimpl[0]) warn(&x, "sections zinc does not implement, ignored: %s", x.unimpl);
    }
    cJSON_Delete(root);
    if (!rc) rc = apply_args(&x);
    if (!rc) rc = resolve(&x);
    if (!rc && x.autos[0]) fputs(x.autos, stderr);   /* what each "auto" took, in one write */
    if (!rc) *out = c;  /* out is written only on success */
    return rc;
}

int zn_config_load(const char *path, const ZnConfigArgs *args, ZnConfig *out, ZnErr *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return zn_err(err, ZN_E_USAGE, "cannot open '%s': %s", path, strerror(errno));
    /* read one byte past the cap to tell "exactly 16 MiB" from "more" */
    char *buf = zn_malloc(ZN_HOST_CORE, (size_t)MAX_CONFIG_BYTES + 1);
    if (!buf) {
        fclose(f);
        return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    }
    errno = 0;
    size_t n = fread(buf, 1, (size_t)MAX_CONFIG_BYTES + 1, f);
    int bad = ferror(f), e = errno;
    fclose(f);
    int rc;
    if (bad) rc = zn_err(err, ZN_E_IO, "cannot read '%s': %s", path, strerror(e ? e : EIO));
    else if (n > (size_t)MAX_CONFIG_BYTES) rc = zn_err(err, ZN_E_USAGE, "%s: config is larger than 16 MiB", path);
    else rc = zn_config_parse(buf, n, path, args, out, err);
    free(buf);
    return rc;
}
