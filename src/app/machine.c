/* machine.c: machines for step-time predictions (spec Z-MACH-*).
 *
 * A machine is a preset (the table below) or a JSON file. The file speaks
 * human units (TFLOP/s, GB/s, GiB, microseconds) and the struct SI units, so
 * every number is scaled on the way in and out. To keep a write+load round
 * trip bit-exact, the scaling is done on the number's decimal text, not on
 * its double: "593.64" TFLOP/s becomes strtod("593.64e12"), the double
 * nearest 593.64 x 10^12, where 593.64 (already rounded) x 1e12 (rounded
 * again) could land one ulp away. The writer does the reverse with the
 * digits of the shortest decimal that reads back as the SI double.
 *
 * zn_machine_load does its work in this order:
 *   1. read the file (at most 1 MiB), JSON syntax, a top-level object;
 *   2. keys: unknown or repeated keys are errors, in both nested objects;
 *   3. "preset" gives the starting values, then every other key overrides;
 *      without a preset, every key must be there;
 *   4. the whole machine is checked (validate), the same check the writer
 *      makes. */
#include "app/machine.h"
#include "core/alloc.h"
#include "core/fileio.h"
#include "core/json_track.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_MACHINE_BYTES ((size_t)1 << 20) /* a machine file is a few hundred bytes */
#define MAX_GPUS_PER_NODE 4096
#define GIB 1073741824.0                    /* 2^30 */

/* ------------------------------------------------------------------------ */
/* presets                                                                   */

/* Every figure is a datasheet number times the efficiency a real kernel or
 * collective reaches (the "x 0.8" factors), written as that product so the
 * table shows both. Sources: NVIDIA H100 and A100 datasheets, DGX H100 and
 * DGX A100 user guides. */
static const ZnMachine PRESETS[] = {
    {
        .name = "dgx-h100",
        .gpus_per_node = 8,
        .overlap = 1,   /* NCCL and copies on their own streams */
        /* H100 SXM bf16 dense tensor core peak 989.4 TFLOP/s; large GEMMs sustain ~60% */
        .device_flops = 989.4e12 * 0.6,
        /* fp32 (no TF32) on the CUDA cores: 66.9 TFLOP/s x the same 60% (an H200
           measured 37.6 TFLOP/s in PyTorch's fp32 GPT-2 124M step: 56%) */
        .device_flops_fp32 = 66.9e12 * 0.6,
        /* HBM3 3.35 TB/s; a streaming kernel (Adam, casts) reaches ~80% */
        .device_mem_bw = 3.35e12 * 0.8,
        /* the "80 GB" card (NVIDIA's name, not 80e9 bytes): nvidia-smi shows
           81559 MiB, so it holds 80 GiB (a little of it reserved); 80e9
           would undercount by 7% */
        .device_memory = 80.0 * GIB,
        /* NVLink 4: 900 GB/s bidirectional = 450 GB/s per direction per GPU;
           NCCL ring bus bandwidth ~80% of it. Latency per ring hop ~1 us:
           an 8-GPU all-reduce of a few bytes (16 hops) takes ~15 us */
        .intra = {.alpha = 1e-6, .beta = 450e9 * 0.8},
        /* InfiniBand NDR 400 Gb/s, one ConnectX-7 per GPU = 50 GB/s; ~90% on
           large messages; ~6 us per hop between nodes (NIC, switch, NCCL's
           proxy): two nodes' small all-reduce ~40 us */
        .inter = {.alpha = 6e-6, .beta = 400e9 / 8 * 0.9},
        /* PCIe Gen5 x16: 64 GB/s per direction; pinned copies reach ~80% */
        .h2d_bw = 64e9 * 0.8,
        /* DeepSpeed CPU-Adam is memory-bound (~16 bytes of fp32 state read and
           written per element): assumed 1e9 elements/s for one rank's share of
           the host's cores and memory bandwidth */
        .host_adam_rate = 1.0e9,
        /* 8 U.2 NVMe drives per node, ~25 GB/s aggregate read; a rank's
           share of 8 is ~3 GB/s */
        .nvme_bw = 3.0e9,
    },
    {
        .name = "dgx-a100",
        .gpus_per_node = 8,
        .overlap = 1,   /* NCCL and copies on their own streams */
        /* A100 SXM bf16 dense tensor core peak 312 TFLOP/s x 60% */
        .device_flops = 312e12 * 0.6,
        /* fp32 (no TF32) 19.5 TFLOP/s x 60% */
        .device_flops_fp32 = 19.5e12 * 0.6,
        /* HBM2e 2.039 TB/s (the "80 GB" card) x 80% */
        .device_mem_bw = 2.039e12 * 0.8,
        /* the "80 GB" card (NVIDIA's name) holds 80 GiB, as the H100's */
        .device_memory = 80.0 * GIB,
        /* NVLink 3: 600 GB/s bidirectional = 300 GB/s per direction x 80%;
           ~1 us per hop, as for the H100 */
        .intra = {.alpha = 1e-6, .beta = 300e9 * 0.8},
        /* InfiniBand HDR 200 Gb/s per GPU = 25 GB/s x 90%; ~6 us per hop */
        .inter = {.alpha = 6e-6, .beta = 200e9 / 8 * 0.9},
        /* PCIe Gen4 x16: 32 GB/s per direction x 80% */
        .h2d_bw = 32e9 * 0.8,
        /* CPU-Adam on the older hosts' cores and DDR4: assumed half the H100 node's */
        .host_adam_rate = 0.5e9,
        /* the DGX A100's NVMe RAID: a rank's share ~2 GB/s */
        .nvme_bw = 2.0e9,
    },
};
#define NPRESETS ((int)(sizeof PRESETS / sizeof *PRESETS))

/* kept by hand in step with PRESETS; test_machine checks that they agree */
const char *zn_machine_preset_names(void) { return "dgx-h100, dgx-a100"; }

static const ZnMachine *find_preset(const char *name) {
    for (int i = 0; i < NPRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0) return &PRESETS[i];
    return NULL;
}

int zn_machine_preset(const char *name, ZnMachine *m, ZnErr *err) {
    const ZnMachine *p = find_preset(name);
    if (!p) return zn_err(err, ZN_E_USAGE, "unknown machine preset '%s' (presets: %s)", name, zn_machine_preset_names());
    *m = *p;
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* the figures, their file keys and units                                    */

/* A number in the file is its SI value divided by 10^pow10 (or by 2^pow2,
 * for GiB, where the scaling is exact in binary). */
typedef struct {
    const char *path;   /* JSON path in the file */
    size_t off;         /* the double in ZnMachine */
    int pow10;
    int pow2;
    int optional;       /* may be left out without a preset (read_machine says what it then is) */
} Figure;

static const Figure FIGURES[] = {
    {"device_tflops", offsetof(ZnMachine, device_flops), 12, 0},
    {"device_tflops_fp32", offsetof(ZnMachine, device_flops_fp32), 12, 0, 1},
    {"device_mem_gbps", offsetof(ZnMachine, device_mem_bw), 9, 0},
    {"device_memory_gib", offsetof(ZnMachine, device_memory), 0, 30},
    {"intra_node.latency_us", offsetof(ZnMachine, intra.alpha), -6, 0},
    {"intra_node.bandwidth_gbps", offsetof(ZnMachine, intra.beta), 9, 0},
    {"inter_node.latency_us", offsetof(ZnMachine, inter.alpha), -6, 0},
    {"inter_node.bandwidth_gbps", offsetof(ZnMachine, inter.beta), 9, 0},
    {"host_device_gbps", offsetof(ZnMachine, h2d_bw), 9, 0},
    {"host_adam_gelems", offsetof(ZnMachine, host_adam_rate), 9, 0},
    {"nvme_gbps", offsetof(ZnMachine, nvme_bw), 9, 0},
};
#define NFIGURES ((int)(sizeof FIGURES / sizeof *FIGURES))

static double *figure_of(ZnMachine *m, const Figure *f) { return (double *)((char *)m + f->off); }
static double figure_get(const ZnMachine *m, const Figure *f) { return *(const double *)((const char *)m + f->off); }

/* The keys each object may hold (NULL-ended): anything else is a typo. */
static const char *const TOP_KEYS[] = {"name", "preset", "gpus_per_node", "overlap", "device_tflops",
                                       "device_tflops_fp32", "device_mem_gbps",
                                       "device_memory_gib", "intra_node", "inter_node", "host_device_gbps",
                                       "host_adam_gelems", "nvme_gbps", NULL};
static const char *const LINK_KEYS[] = {"latency_us", "bandwidth_gbps", NULL};
#define TOP_KEY_LIST "name, preset, gpus_per_node, overlap, device_tflops, device_tflops_fp32, device_mem_gbps, " \
                     "device_memory_gib, " \
                     "intra_node, inter_node, host_device_gbps, host_adam_gelems, nvme_gbps"
#define LINK_KEY_LIST "latency_us, bandwidth_gbps"

/* ------------------------------------------------------------------------ */
/* validation, shared by the loader and the writer                           */

/* A name is printed in reports and pictures: 1..63 bytes of printable UTF-8. */
static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof((ZnMachine *)0)->name) return 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) return 0;
        size_t k = zn_utf8_len((const unsigned char *)s + i, n - i);
        if (k == 0) return 0;
        i += k;
    }
    return 1;
}

int zn_machine_name_ok(const char *s) { return name_ok(s); }

static int figure_ok(double d) { return isfinite(d) && d > 0; }

/* where: the file name (or "machine") that messages start with */
static int validate(const ZnMachine *m, const char *where, ZnErr *err) {
    if (memchr(m->name, 0, sizeof m->name) == NULL || !name_ok(m->name))
        return zn_err(err, ZN_E_USAGE, "%s: name: expected 1 to 63 bytes of printable UTF-8", where);
    if (m->gpus_per_node < 1 || m->gpus_per_node > MAX_GPUS_PER_NODE)
        return zn_err(err, ZN_E_USAGE, "%s: gpus_per_node: expected an integer from 1 to %d, got %d", where,
                      MAX_GPUS_PER_NODE, m->gpus_per_node);
    if (m->overlap != 0 && m->overlap != 1)
        return zn_err(err, ZN_E_USAGE, "%s: overlap: expected 0 or 1, got %d", where, m->overlap);
    for (int i = 0; i < NFIGURES; i++) {
        double d = figure_get(m, &FIGURES[i]);
        if (!figure_ok(d))
            return zn_err(err, ZN_E_USAGE, "%s: %s: expected a finite number > 0, got %g (in SI units)", where,
                          FIGURES[i].path, d);
    }
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* numbers as decimal text                                                   */

static int is_number_char(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e' || c == 'E' || c == '.';
}

/* The text of number k (from 0, in document order) of JSON text s that has
 * parsed: outside strings a number is the only token holding a digit or
 * '-', and it runs over the characters cJSON's parse_number takes. */
static int number_text(const char *s, size_t n, long k, const char **tok, size_t *len) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') { in_str = 1; continue; }
        if (c != '-' && !(c >= '0' && c <= '9')) continue;
        size_t j = i;
        while (j < n && is_number_char(s[j])) j++;
        if (k-- == 0) {
            *tok = s + i;
            *len = j - i;
            return 0;
        }
        i = j - 1;
    }
    return -1;
}

/* How many numbers come before target in a document-order walk of node
 * (the number's index for number_text); -1 while not found. */
static long number_index(const cJSON *node, const cJSON *target, long *seen) {
    if (node == target) return *seen;
    if (cJSON_IsNumber(node)) (*seen)++;
    for (const cJSON *c = node->child; c; c = c->next) {
        long k = number_index(c, target, seen);
        if (k >= 0) return k;
    }
    return -1;
}

/* strtod of the decimal text tok x 10^pow10, by shifting its exponent: one
 * rounding, from the decimal to the double. *out is 0 or inf when the
 * number is out of range (the caller refuses those). */
static int shifted_strtod(const char *tok, size_t len, int pow10, double *out, ZnErr *err) {
    size_t e = 0;
    while (e < len && tok[e] != 'e' && tok[e] != 'E') e++;
    long x = 0;
    if (e < len) {
        size_t i = e + 1;
        int neg = i < len && tok[i] == '-';
        if (i < len && (tok[i] == '-' || tok[i] == '+')) i++;
        /* saturate: beyond 10^+-100000 every double is 0 or inf anyway */
        for (; i < len && x < 100000; i++) x = x * 10 + (tok[i] - '0');
        if (neg) x = -x;
    }
    char *buf = zn_malloc(ZN_HOST_CORE, e + 32);
    if (!buf) return zn_nomem(err);
    snprintf(buf, e + 32, "%.*se%ld", (int)e, tok, x + pow10);
    *out = strtod(buf, NULL);
    free(buf);
    return ZN_OK;
}

/* The shortest "%.*e" of d that reads back as d (at most 17 digits). */
static void shortest_e(double d, char *buf, size_t n) {
    for (int p = 0; p < 17; p++) {
        snprintf(buf, n, "%.*e", p, d);
        if (strtod(buf, NULL) == d) return;
    }
}

/* d / 10^pow10 as JSON decimal text with the digits of d's shortest
 * round-trip form: positional ("593.64", "3", "0.5") for ordinary
 * magnitudes, "1.5e-9" otherwise. shifted_strtod(text, pow10) == d. */
static void shifted_text(double d, int pow10, char *out, size_t n) {
    char e[40];
    shortest_e(d, e, sizeof e);       /* "5.9364e+14", "-" never: d > 0 */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    digits[nd] = 0;
    long exp10 = strtol(p + 1, NULL, 10) - pow10;   /* d = digits[0].digits[1..] x 10^exp10 */
    if (exp10 < -6 || exp10 > 20) {
        snprintf(out, n, "%c%s%se%+ld", digits[0], nd > 1 ? "." : "", digits + 1, exp10);
        return;
    }
    size_t o = 0;
    if (exp10 < 0) {
        o += (size_t)snprintf(out + o, n - o, "0.");
        for (long z = 1; z < -exp10; z++) out[o++] = '0';
        o += (size_t)snprintf(out + o, n - o, "%s", digits);
        return;
    }
    for (long i = 0; i <= exp10 || i < (long)nd; i++) {
        if (i == exp10 + 1) out[o++] = '.';
        out[o++] = i < (long)nd ? digits[i] : '0';
    }
    out[o] = 0;
}

/* ------------------------------------------------------------------------ */
/* reading a file                                                            */

typedef struct {
    const char *src;     /* file name for messages */
    const char *text;    /* the file, NUL-ended */
    size_t len;
    const cJSON *root;
    ZnErr *err;
} Ctx;

/* "SRC: what", a usage error at the caller's line */
#define fail(x, ...) zn_err_src((x)->err, ZN_E_USAGE, (x)->src, __VA_ARGS__)

/* A value as a message shows it: a number as the file wrote it. */
static void render(Ctx *x, const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) {
        long seen = 0;
        const char *tok = NULL;
        size_t len = 0;
        long k = number_index(x->root, v, &seen);
        if (k >= 0 && number_text(x->text, x->len, k, &tok, &len) == 0)
            snprintf(buf, n, "%.*s%s", len > 40 ? 40 : (int)len, tok, len > 40 ? "..." : "");
        else
            snprintf(buf, n, "%g", v->valuedouble);
    } else if (cJSON_IsString(v)) {
        size_t len = strlen(v->valuestring);
        snprintf(buf, n, "\"%.40s%s\"", v->valuestring, len > 40 ? "..." : "");
    } else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, n, "null");
    else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else snprintf(buf, n, "an object");
}

static int expected(Ctx *x, const char *path, const char *want, const cJSON *v) {
    char got[64];
    render(x, v, got, sizeof got);
    return fail(x, "%s: expected %s, got %s", path, want, got);
}

static int syntax_error(Ctx *x, size_t at, const char *why) {
    long line = 1;
    size_t bol = 0;
    for (size_t i = 0; i < at && i < x->len; i++)
        if (x->text[i] == '\n') { line++; bol = i + 1; }
    if (!why && at >= x->len) why = "unexpected end of input";
    return fail(x, "JSON syntax error at byte %zu (line %ld, column %zu)%s%s", at, line, at - bol + 1,
                why ? ": " : "", why ? why : "");
}

static int parse(Ctx *x, cJSON **root) {
    *root = NULL;
    /* cJSON stops at a NUL and would take what precedes it for the file */
    const char *nul = memchr(x->text, 0, x->len);
    if (nul) return syntax_error(x, (size_t)(nul - x->text), "NUL byte");
    const char *end = NULL;
    zn_json_track();   /* out of memory is not a syntax error */
    cJSON *r = zn_json_parse(x->text, x->len + 1, &end, 1);
    if (zn_json_failed()) {
        cJSON_Delete(r);
        return zn_err(x->err, ZN_E_NOMEM, "%s: " ZN_NOMEM_MSG " while reading it", x->src);
    }
    if (!r) {
        int unterminated;
        size_t at = zn_json_error_offset(x->text, x->len, end ? (size_t)(end - x->text) : 0, &unterminated);
        return syntax_error(x, at, unterminated ? "unterminated string" : NULL);
    }
    x->root = r;
    if (!cJSON_IsObject(r)) {
        int rc = expected(x, "the top level", "a JSON object", r);
        cJSON_Delete(r);
        x->root = NULL;
        return rc;
    }
    *root = r;
    return ZN_OK;
}

static int is_known(const char *const *keys, const char *k) {
    for (; *keys; keys++)
        if (strcmp(*keys, k) == 0) return 1;
    return 0;
}

/* Every key of obj (at prefix) known, none twice. */
static int check_keys(Ctx *x, const cJSON *obj, const char *prefix, const char *const *keys, const char *list) {
    for (const cJSON *it = obj->child; it; it = it->next) {
        const char *dot = prefix[0] ? "." : "";
        if (!is_known(keys, it->string))
            return fail(x, "%s%s%s: unknown key (%s%s may hold: %s)", prefix, dot, it->string, prefix,
                        prefix[0] ? "" : "a machine file", list);
        for (const cJSON *before = obj->child; before != it; before = before->next)
            if (strcmp(before->string, it->string) == 0) return fail(x, "%s%s%s: duplicate key", prefix, dot, it->string);
    }
    return ZN_OK;
}

static int check_all_keys(Ctx *x) {
    int rc = check_keys(x, x->root, "", TOP_KEYS, TOP_KEY_LIST);
    const char *links[] = {"intra_node", "inter_node"};
    for (int i = 0; i < 2 && !rc; i++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(x->root, links[i]);
        if (!o) continue;
        if (!cJSON_IsObject(o)) return expected(x, links[i], "an object", o);
        rc = check_keys(x, o, links[i], LINK_KEYS, LINK_KEY_LIST);
    }
    return rc;
}

/* The value at a path of one or two keys ("nvme_gbps", "intra_node.latency_us"). */
static const cJSON *at_path(const cJSON *root, const char *path) {
    const char *dot = strchr(path, '.');
    if (!dot) return cJSON_GetObjectItemCaseSensitive(root, path);
    char head[32];
    snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, head);
    return o ? cJSON_GetObjectItemCaseSensitive(o, dot + 1) : NULL;
}

static int missing(Ctx *x, const char *path) {
    return fail(x, "%s: missing (a machine file without \"preset\" gives every key)", path);
}

static int read_preset(Ctx *x, ZnMachine *m, int *have) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->root, "preset");
    *have = v != NULL;
    memset(m, 0, sizeof *m);
    if (!v) return ZN_OK;
    if (!cJSON_IsString(v)) return expected(x, "preset", "a preset name", v);
    const ZnMachine *p = find_preset(v->valuestring);
    if (!p) return fail(x, "preset: unknown preset \"%s\" (presets: %s)", v->valuestring, zn_machine_preset_names());
    *m = *p;
    return ZN_OK;
}

static int read_name(Ctx *x, ZnMachine *m, int have_preset) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->root, "name");
    if (!v) return have_preset ? ZN_OK : missing(x, "name");   /* a preset keeps its own name */
    if (!cJSON_IsString(v) || !name_ok(v->valuestring))
        return expected(x, "name", "a string of 1 to 63 bytes of printable UTF-8", v);
    snprintf(m->name, sizeof m->name, "%s", v->valuestring);
    return ZN_OK;
}

static int read_gpus(Ctx *x, ZnMachine *m, int have_preset) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->root, "gpus_per_node");
    if (!v) return have_preset ? ZN_OK : missing(x, "gpus_per_node");
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    /* the range check comes first, so the cast to int is defined */
    if (!(d >= 1 && d <= MAX_GPUS_PER_NODE) || d != floor(d))
        return expected(x, "gpus_per_node", "an integer from 1 to 4096", v);
    m->gpus_per_node = (int)d;
    return ZN_OK;
}

/* optional: a preset's, else true (the presets are GPUs) */
static int read_overlap(Ctx *x, ZnMachine *m, int have_preset) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->root, "overlap");
    if (!have_preset) m->overlap = 1;
    if (!v) return ZN_OK;
    if (!cJSON_IsBool(v)) return expected(x, "overlap", "true or false", v);
    m->overlap = cJSON_IsTrue(v);
    return ZN_OK;
}

static int read_figure(Ctx *x, ZnMachine *m, const Figure *f, int have_preset) {
    const cJSON *v = at_path(x->root, f->path);
    if (!v) return have_preset || f->optional ? ZN_OK : missing(x, f->path);
    if (!cJSON_IsNumber(v)) return expected(x, f->path, "a number", v);
    long seen = 0;
    const char *tok = NULL;
    size_t len = 0;
    long k = number_index(x->root, v, &seen);
    if (k < 0 || number_text(x->text, x->len, k, &tok, &len))
        return zn_err(x->err, ZN_E_INTERNAL, "%s: %s: the number's text was not found", x->src, f->path);
    double d = 0;
    int rc = shifted_strtod(tok, len, f->pow10, &d, x->err);
    if (rc) return rc;
    if (f->pow2) d = ldexp(d, f->pow2);
    if (!figure_ok(d)) {
        if (!figure_ok(v->valuedouble)) return expected(x, f->path, "a finite number > 0", v);
        /* fine as written, but 0 or inf once scaled (1e300 TFLOP/s, 1e-318 us) */
        char got[64];
        render(x, v, got, sizeof got);
        return fail(x, "%s: %s is out of range once scaled to SI units", f->path, got);
    }
    *figure_of(m, f) = d;
    return ZN_OK;
}

static int read_machine(Ctx *x, ZnMachine *m) {
    int have_preset;
    int rc = check_all_keys(x);
    if (!rc) rc = read_preset(x, m, &have_preset);
    if (!rc) rc = read_name(x, m, have_preset);
    if (!rc) rc = read_gpus(x, m, have_preset);
    if (!rc) rc = read_overlap(x, m, have_preset);
    /* intra_node and inter_node are whole objects without a preset */
    if (!rc && !have_preset && !cJSON_GetObjectItemCaseSensitive(x->root, "intra_node")) rc = missing(x, "intra_node");
    if (!rc && !have_preset && !cJSON_GetObjectItemCaseSensitive(x->root, "inter_node")) rc = missing(x, "inter_node");
    for (int i = 0; i < NFIGURES && !rc; i++) rc = read_figure(x, m, &FIGURES[i], have_preset);
    /* a file that says how fast its GEMMs run and not how fast in fp32
       describes one rate: a preset's fp32 figure is for the preset's GEMMs */
    if (!rc && !at_path(x->root, "device_tflops_fp32") && at_path(x->root, "device_tflops"))
        m->device_flops_fp32 = m->device_flops;
    if (!rc) rc = validate(m, x->src, x->err);
    return rc;
}

static int load_file(const char *path, ZnMachine *m, ZnErr *err) {
    char *text = NULL;
    size_t len = 0;
    int rc = zn_read_file(path, MAX_MACHINE_BYTES, &text, &len, err);
    if (rc == ZN_E_CORRUPT) rc = err->code = ZN_E_USAGE;   /* over the cap: the user's file, not a broken one (Z-MACH-005) */
    if (rc == ZN_E_IO) {
        /* a mistyped preset name lands here too: say what the presets are */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return zn_err(err, ZN_E_IO, "%s (not a machine preset either: %s)", msg, zn_machine_preset_names());
    }
    if (rc) return rc;
    Ctx x = {.src = path, .text = text, .len = len, .err = err};
    cJSON *root;
    rc = parse(&x, &root);
    ZnMachine tmp;
    if (!rc) rc = read_machine(&x, &tmp);
    if (!rc) *m = tmp;   /* m is untouched by a failed load */
    cJSON_Delete(root);
    free(text);
    return rc;
}

int zn_machine_load(const char *name_or_path, ZnMachine *m, ZnErr *err) {
    if (find_preset(name_or_path)) return zn_machine_preset(name_or_path, m, err);
    return load_file(name_or_path, m, err);
}

/* ------------------------------------------------------------------------ */
/* writing                                                                   */

/* name as a JSON string: validate() let through no control characters, so
   only the quote and the backslash need escaping */
static void put_name(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A figure as the file writes it, in its unit. */
static void figure_text(const ZnMachine *m, const Figure *fg, char *buf, size_t n) {
    double d = figure_get(m, fg);
    if (!fg->pow2) {
        shifted_text(d, fg->pow10, buf, n);
        return;
    }
    /* exact in binary: d / 2^30 in its shortest decimal reads back */
    shifted_text(ldexp(d, -fg->pow2), 0, buf, n);
}

int zn_machine_write_json(FILE *f, const ZnMachine *m, ZnErr *err) {
    int rc = validate(m, "machine", err);
    if (rc) return rc;
    /* a machine too small for the GiB unit (below 2^-992 bytes) would not read back */
    if (ldexp(ldexp(m->device_memory, -30), 30) != m->device_memory)
        return zn_err(err, ZN_E_USAGE, "machine: device_memory: %g bytes cannot be written in GiB", m->device_memory);
    char t[NFIGURES][64];   /* in FIGURES' order, which is the file's */
    for (int i = 0; i < NFIGURES; i++) figure_text(m, &FIGURES[i], t[i], sizeof t[i]);
    fputs("{\n  \"name\": ", f);
    put_name(f, m->name);
    fprintf(f, ",\n  \"gpus_per_node\": %d,\n  \"overlap\": %s,\n", m->gpus_per_node, m->overlap ? "true" : "false");
    fprintf(f, "  \"device_tflops\": %s,\n  \"device_tflops_fp32\": %s,\n", t[0], t[1]);
    fprintf(f, "  \"device_mem_gbps\": %s,\n  \"device_memory_gib\": %s,\n", t[2], t[3]);
    fprintf(f, "  \"intra_node\": {\"latency_us\": %s, \"bandwidth_gbps\": %s},\n", t[4], t[5]);
    fprintf(f, "  \"inter_node\": {\"latency_us\": %s, \"bandwidth_gbps\": %s},\n", t[6], t[7]);
    fprintf(f, "  \"host_device_gbps\": %s,\n  \"host_adam_gelems\": %s,\n  \"nvme_gbps\": %s\n}\n", t[8], t[9], t[10]);
    if (fflush(f) != 0 || ferror(f)) return zn_err(err, ZN_E_IO, "machine: writing the JSON failed");
    return ZN_OK;
}
