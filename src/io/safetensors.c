/* safetensors.c: writer and strict reader of the safetensors format.
 *
 * The reader trusts nothing in the file. It reads the header into a
 * NUL-terminated buffer, runs a byte-level scan (UTF-8, control characters,
 * number syntax, nesting and size limits) that cJSON does not do, parses with
 * cJSON, checks the schema (types, duplicates, known dtypes), and finally
 * checks that the tensors tile the byte buffer exactly. Sources: huggingface
 * safetensors README "Format" and safetensors/src/tensor.rs
 * (SafeTensors::read_metadata, Metadata::validate, prepare). */
#include "core/json_track.h"
#include "io/safetensors.h"
#define XXH_STATIC_LINKING_ONLY   /* XXH3_state_t on the stack */
#include <xxhash.h>
#include "core/alloc.h"
#include "core/fileio.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_EXACT ((uint64_t)1 << 53)   /* integers cJSON's doubles hold exactly */

/* ------------------------------------------------------------------------ */
/* dtypes                                                                   */

/* rank: the dtype's position in the reference's Dtype enum, which is in
 * "increasing alignment order"; the writer sorts by it, descending. */
static const struct { const char *name; ZnDtype dtype; int rank; } DTYPES[] = {
    {"U8", ZN_U8, 4},     {"F16", ZN_F16, 13}, {"BF16", ZN_BF16, 14},
    {"F32", ZN_F32, 17},  {"F64", ZN_F64, 19}, {"U64", ZN_U64, 21},
};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

/* Valid in safetensors, but zinc has no ZnDtype to read them into. */
static const char *const UNSUPPORTED[] = {
    "BOOL", "F4", "F6_E2M3", "F6_E3M2", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
    "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "I32", "U32", "C64", "I64",
};

static int dtype_index(ZnDtype t) {
    for (int i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dtype == t) return i;
    return -1;
}

const char *zn_st_dtype_name(ZnDtype t) {
    int i = dtype_index(t);
    return i < 0 ? "?" : DTYPES[i].name;
}

/* ------------------------------------------------------------------------ */
/* shared helpers                                                           */

static int valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = zn_utf8_len(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* "[2, 3]" into buf, for messages. */
static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

/* Names compare bytewise (strcmp compares unsigned chars), as Rust's String
 * Ord does in the reference writer's sort. */
static int name_cmp(const char *a, const char *b) { return strcmp(a, b); }

/* ------------------------------------------------------------------------ */
/* writer                                                                   */

static void sb_put(ZnBytes *b, const char *s, size_t n) { zn_bytes_put(ZN_HOST_IO, b, s, n); }
static void sb_str(ZnBytes *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string as serde_json writes it: short escapes where JSON has them,
 * \u00XX (lowercase hex) for other control characters, UTF-8 kept raw. */
static void sb_json_string(ZnBytes *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': sb_put(b, "\\\"", 2); break;
        case '\\': sb_put(b, "\\\\", 2); break;
        case '\b': sb_put(b, "\\b", 2); break;
        case '\f': sb_put(b, "\\f", 2); break;
        case '\n': sb_put(b, "\\n", 2); break;
        case '\r': sb_put(b, "\\r", 2); break;
        case '\t': sb_put(b, "\\t", 2); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                sb_put(b, esc, 6);
            } else {
                sb_put(b, (const char *)p, 1);
            }
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(ZnBytes *b, uint64_t v) {
    char t[24];
    int k = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sb_put(b, t, (size_t)k);
}

/* qsort contexts: qsort has no user pointer, so sort index arrays that carry
 * what they need */
typedef struct { const ZnStEntry *e; int rank; uint64_t bytes; } WItem;

static int witem_cmp(const void *a, const void *b) {
    const WItem *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;   /* alignment, descending */
    return name_cmp(x->e->name, y->e->name);
}

typedef struct { const char *k, *v; } KV;

static int kv_cmp(const void *a, const void *b) {
    return name_cmp(((const KV *)a)->k, ((const KV *)b)->k);
}

/* Checks one entry and computes its byte size. */
static int check_entry(const ZnStEntry *e, int i, uint64_t *bytes, int fill, ZnErr *err) {
    if (!e->name) return zn_err(err, ZN_E_USAGE, "safetensors: entry %d has no name", i);
    if (!valid_utf8(e->name)) return zn_err(err, ZN_E_USAGE, "safetensors: entry %d: name is not valid UTF-8", i);
    if (!strcmp(e->name, "__metadata__"))
        return zn_err(err, ZN_E_USAGE, "safetensors: '__metadata__' is reserved, not a tensor name");
    if (dtype_index(e->dtype) < 0)
        return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': dtype %d has no safetensors name", e->name, (int)e->dtype);
    if (e->ndim < 0 || e->ndim > ZN_ST_MAX_DIMS)
        return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': %d dimensions (0..%d supported)", e->name, e->ndim,
                      ZN_ST_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0 || (uint64_t)e->shape[d] > MAX_EXACT)
            return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': dimension %d is %lld", e->name, d,
                          (long long)e->shape[d]);
        if (__builtin_mul_overflow(numel, (uint64_t)e->shape[d], &numel))
            return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': too many elements", e->name);
    }
    if (__builtin_mul_overflow(numel, (uint64_t)zn_dtype_size(e->dtype), bytes) || *bytes > MAX_EXACT)
        return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': more than 2^53 bytes", e->name);
    if (*bytes > 0 && !e->data && !fill)
        return zn_err(err, ZN_E_USAGE, "safetensors: tensor '%s': data is NULL", e->name);
    return ZN_OK;
}

/* Builds the padded header text for items (already sorted) and meta (sorted). */
static int build_header(ZnBytes *h, const WItem *items, int n, const KV *meta, int nmeta, ZnErr *err) {
    sb_put(h, "{", 1);
    if (nmeta > 0) {
        sb_str(h, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) sb_put(h, ",", 1);
            sb_json_string(h, meta[i].k);
            sb_put(h, ":", 1);
            sb_json_string(h, meta[i].v);
        }
        sb_put(h, "}", 1);
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const ZnStEntry *e = items[i].e;
        if (i || nmeta > 0) sb_put(h, ",", 1);
        sb_json_string(h, e->name);
        sb_str(h, ":{\"dtype\":\"");
        sb_str(h, zn_st_dtype_name(e->dtype));
        sb_str(h, "\",\"shape\":[");
        for (int d = 0; d < e->ndim; d++) {
            if (d) sb_put(h, ",", 1);
            sb_u64(h, (uint64_t)e->shape[d]);
        }
        sb_str(h, "],\"data_offsets\":[");
        sb_u64(h, off);
        sb_put(h, ",", 1);
        if (__builtin_add_overflow(off, items[i].bytes, &off) || off > MAX_EXACT)
            return zn_err(err, ZN_E_USAGE, "safetensors: tensors total more than 2^53 bytes");
        sb_u64(h, off);
        sb_str(h, "]}");
    }
    sb_put(h, "}", 1);
    /* pad with spaces so the byte buffer starts 8-aligned (reference prepare()) */
    while (!h->failed && h->n % 8) sb_put(h, " ", 1);
    if (h->failed) return zn_err(err, ZN_E_NOMEM, "safetensors: out of memory for the header");
    if (h->n > ZN_ST_MAX_HEADER)
        return zn_err(err, ZN_E_USAGE, "safetensors: header would be %zu bytes, over the %llu-byte limit", h->n,
                      ZN_ST_MAX_HEADER);
    return ZN_OK;
}

/* Collects, checks and sorts the metadata pairs. */
static int collect_meta(const char *const *kv, KV **out, int *nout, ZnErr *err) {
    *out = NULL;
    *nout = 0;
    if (!kv) return ZN_OK;
    int n = 0;
    while (kv[2 * n]) {
        if (!kv[2 * n + 1])
            return zn_err(err, ZN_E_USAGE, "safetensors: metadata key '%s' has no value (pairs must be complete)", kv[2 * n]);
        if (++n > ZN_ST_MAX_META) return zn_err(err, ZN_E_USAGE, "safetensors: more than %d metadata entries", ZN_ST_MAX_META);
    }
    if (n == 0) return ZN_OK;
    KV *m = zn_malloc(ZN_HOST_IO, (size_t)n * sizeof *m);
    if (!m) return zn_err(err, ZN_E_NOMEM, "safetensors: out of memory");
    for (int i = 0; i < n; i++) {
        m[i].k = kv[2 * i];
        m[i].v = kv[2 * i + 1];
        if (!valid_utf8(m[i].k) || !valid_utf8(m[i].v)) {
            free(m);
            return zn_err(err, ZN_E_USAGE, "safetensors: metadata entry %d is not valid UTF-8", i);
        }
    }
    qsort(m, (size_t)n, sizeof *m, kv_cmp);
    for (int i = 1; i < n; i++)
        if (!strcmp(m[i - 1].k, m[i].k)) {
            int rc = zn_err(err, ZN_E_USAGE, "safetensors: metadata key '%s' given twice", m[i].k);
            free(m);
            return rc;
        }
    *out = m;
    *nout = n;
    return ZN_OK;
}

/* One piece of the file: to the writer and, where a sum is wanted (st not
 * NULL), into the running hash, a piece of 1 MiB at a time, so the write's
 * copy into the page cache reads what the hash just brought into cache. */
static int put(ZnWriter *w, XXH3_state_t *st, ZnStSum *sum, const void *p, size_t n, ZnErr *err) {
    const char *c = p;
    int rc = 0;
    if (!st) return zn_writer_write(w, p, n, err);   /* no sum asked for: one write */
    for (size_t at = 0; at < n && !rc; at += (size_t)1 << 20) {
        size_t k = n - at < (size_t)1 << 20 ? n - at : (size_t)1 << 20;
        XXH3_64bits_update(st, c + at, k);
        rc = zn_writer_write(w, c + at, k, err);
    }
    sum->bytes += n;
    return rc;
}

/* A fill callback's tensors go through one buffer of the largest one's size. */
typedef struct { ZnStFill fn; void *ctx; unsigned char *buf; } Fill;

static int write_body(const char *path, const ZnBytes *h, const WItem *items, int n, Fill *fill, ZnStSum *sum,
                      ZnErr *err) {
    unsigned char len8[8];
    uint64_t hn = h->n;
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hn >> (8 * i));   /* little-endian */
    ZnWriter *w;
    int rc = zn_writer_open(&w, path, err);
    if (rc) return rc;
    XXH3_state_t hs, *st = sum ? &hs : NULL;   /* the static-linking layout: no allocation */
    if (sum) {
        XXH3_64bits_reset(st);
        memset(sum, 0, sizeof *sum);
    }
    rc = put(w, st, sum, len8, 8, err);
    if (!rc) rc = put(w, st, sum, h->p, h->n, err);
    for (int i = 0; i < n && !rc; i++) {
        if (!items[i].bytes) continue;
        const void *data = items[i].e->data;
        if (fill) {
            rc = fill->fn(fill->ctx, items[i].e, fill->buf, (size_t)items[i].bytes, err);
            data = fill->buf;
        }
        if (!rc) rc = put(w, st, sum, data, (size_t)items[i].bytes, err);
    }
    if (rc) {
        zn_writer_abort(w);
        return rc;
    }
    if (sum) sum->xxh3 = XXH3_64bits_digest(st);
    return zn_writer_commit(w, err);
}

int zn_st_write(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnErr *err) {
    ZnStSum sum;
    return zn_st_write_sum(path, entries, n, meta_kv, &sum, err);
}

static int write_all(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, Fill *fill,
                     ZnStSum *sum, ZnErr *err) {
    if (n < 0 || n > ZN_ST_MAX_TENSORS || (n > 0 && !entries))
        return zn_err(err, ZN_E_USAGE, "%s: %d tensors (0..%d supported)", path, n, ZN_ST_MAX_TENSORS);
    WItem *items = zn_malloc(ZN_HOST_IO, (size_t)(n ? n : 1) * sizeof *items);
    if (!items) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    int rc = ZN_OK;
    for (int i = 0; i < n && !rc; i++) {
        items[i].e = &entries[i];
        rc = check_entry(&entries[i], i, &items[i].bytes, fill != NULL, err);
        if (!rc) items[i].rank = DTYPES[dtype_index(entries[i].dtype)].rank;
    }
    if (!rc) {
        qsort(items, (size_t)n, sizeof *items, witem_cmp);
        for (int i = 1; i < n && !rc; i++)
            if (!strcmp(items[i - 1].e->name, items[i].e->name))
                rc = zn_err(err, ZN_E_USAGE, "safetensors: tensor name '%s' given twice", items[i].e->name);
    }
    KV *meta = NULL;
    int nmeta = 0;
    if (!rc) rc = collect_meta(meta_kv, &meta, &nmeta, err);
    ZnBytes h = {0};
    if (!rc) rc = build_header(&h, items, n, meta, nmeta, err);
    uint64_t most = 0;
    for (int i = 0; i < n && !rc; i++) most = items[i].bytes > most ? items[i].bytes : most;
    if (!rc && fill && !(fill->buf = zn_malloc(ZN_HOST_IO, most ? (size_t)most : 1))) rc = zn_nomem(err);
    if (!rc) rc = write_body(path, &h, items, n, fill, sum, err);
    else if (rc == ZN_E_USAGE) zn_err_prefix(err, "%s: ", path);
    free(h.p);
    free(meta);
    free(items);
    if (fill) free(fill->buf);
    return rc;
}

int zn_st_write_sum(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnStSum *sum,
                    ZnErr *err) {
    return write_all(path, entries, n, meta_kv, NULL, sum, err);
}

int zn_st_write_fill(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnStFill fn,
                     void *ctx, ZnErr *err) {
    Fill fill = {fn, ctx, NULL};
    return write_all(path, entries, n, meta_kv, &fill, NULL, err);   /* no sum: no hashing */
}

/* ------------------------------------------------------------------------ */
/* reader: state and errors                                                 */

struct ZnStFile {
    char *path;
    int fd;
    const unsigned char *mem;   /* the whole file in memory (zn_st_open_mem), or NULL: read fd */
    uint64_t file_size, header_len, data_start;
    int n;
    ZnStTensor *t;       /* sorted by (begin, end, name) */
    int *by_name;        /* indices into t, sorted by name */
    int nmeta;
    KV *meta;            /* sorted by key */
    char *arena;         /* every name, key and value */
};

static int corrupt(const ZnStFile *f, ZnErr *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int corrupt(const ZnStFile *f, ZnErr *err, const char *fmt, ...) {
    char m[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return zn_err(err, ZN_E_CORRUPT, "%s: %s", f->path, m);
}

/* n bytes at file offset off, from the file or the caller's copy of it */
static int st_pread(const ZnStFile *f, void *dst, size_t n, uint64_t off, ZnErr *err) {
    if (!f->mem) return zn_pread_full(f->fd, dst, n, off, f->path, err);
    if (off > f->file_size || n > f->file_size - off)
        return zn_err(err, ZN_E_IO, "%s: read of %zu bytes at %llu past the end (%llu bytes)", f->path, n,
                      (unsigned long long)off, (unsigned long long)f->file_size);
    memcpy(dst, f->mem + off, n);
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* reader: byte-level scan of the header                                    */

/* What cJSON does not check and serde_json does (or what keeps cJSON's
 * memory bounded): UTF-8 validity; no raw control characters; no \u0000
 * (it would cut a C string short); numbers only as plain non-negative (or
 * "-digits", reported later with the tensor's name) integers up to 2^53, so
 * that every value cJSON hands back as a double is exact; at most 3 levels of
 * nesting, 8 array elements, 3 keys per tensor entry, one raw __metadata__ key
 * with at most ZN_ST_MAX_META entries and ZN_ST_MAX_TENSORS + 1 top-level keys. */
typedef struct {
    const ZnStFile *f;
    const unsigned char *h;
    size_t n;
    ZnErr *err;
    int depth;
    char kind[4];       /* '{' or '[' per depth */
    long count[4];      /* members so far per depth */
    int meta[4];        /* container is the __metadata__ object */
    int expect_key;     /* next string is an object key */
    int key_is_meta;    /* last depth-1 key was "__metadata__" */
    int meta_seen;
} Scan;

static int scan_fail(Scan *s, size_t at, const char *what, ...) __attribute__((format(printf, 3, 4)));
static int scan_fail(Scan *s, size_t at, const char *what, ...) {
    char m[600];
    va_list ap;
    va_start(ap, what);
    vsnprintf(m, sizeof m, what, ap);
    va_end(ap);
    return corrupt(s->f, s->err, "header byte %zu (file offset %zu): %s", at, at + 8, m);
}

static int hexval(unsigned c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* Scans the string starting at the quote at *i; leaves *i after the closing quote. */
static int scan_string(Scan *s, size_t *i) {
    size_t start = *i, j = *i + 1;
    while (j < s->n && s->h[j] != '"') {
        unsigned c = s->h[j];
        if (c == '\\') {
            /* an escape cut off by the end of the header: unterminated */
            if (j + 1 >= s->n || (s->h[j + 1] == 'u' && j + 6 > s->n)) {
                j = s->n;
                break;
            }
            if (s->h[j + 1] == 'u') {
                int v = 0;
                for (int k = 2; k < 6; k++) {
                    int x = hexval(s->h[j + k]);
                    if (x < 0) return scan_fail(s, j, "bad \\u escape in a string");
                    v = v * 16 + x;
                }
                if (v == 0) return scan_fail(s, j, "\\u0000 in a string");
                j += 6;
            } else {
                j += 2;   /* the escape letter is checked by cJSON */
            }
        } else if (c < 0x20) {
            return scan_fail(s, j, "control character 0x%02x in a string", c);
        } else if (c >= 0x80) {
            size_t k = zn_utf8_len(s->h + j, s->n - j);
            if (!k) return scan_fail(s, j, "invalid UTF-8 (byte 0x%02x)", c);
            j += k;
        } else {
            j++;
        }
    }
    if (j >= s->n) return scan_fail(s, start, "unterminated string");
    if (s->depth == 1 && s->kind[1] == '{' && s->expect_key) {
        s->key_is_meta = (j - start - 1 == 12 && !memcmp(s->h + start + 1, "__metadata__", 12));
        if (s->key_is_meta && s->meta_seen++) return scan_fail(s, start, "key \"__metadata__\" appears twice");
    }
    s->expect_key = 0;
    *i = j + 1;
    return ZN_OK;
}

static int scan_number(Scan *s, size_t *i) {
    size_t a = *i, j = *i;
    /* the whole token as cJSON's number parser would take it */
    while (j < s->n && s->h[j] && strchr("0123456789+-.eE", s->h[j])) j++;
    size_t d = a + (s->h[a] == '-');   /* first digit */
    size_t nd = j - d;
    int digits_only = nd > 0;
    for (size_t k = d; k < j; k++)
        if (s->h[k] < '0' || s->h[k] > '9') digits_only = 0;
    int len = (int)(j - a > 40 ? 40 : j - a);
    if (!digits_only || (nd > 1 && s->h[d] == '0'))
        return scan_fail(s, a, "number '%.*s' is not an integer written as plain digits", len, (const char *)s->h + a);
    if (nd > 16 || (nd == 16 && memcmp(s->h + d, "9007199254740992", 16) > 0))
        return scan_fail(s, a, "number '%.*s' is larger than 2^53", len, (const char *)s->h + a);
    s->expect_key = 0;
    *i = j;
    return ZN_OK;
}

/* A ',' at the current depth: one more member; enforce the size limits. */
static int scan_comma(Scan *s, size_t at) {
    int d = s->depth;
    if (d == 0) return scan_fail(s, at, "',' outside the header object");
    long members = ++s->count[d] + 1;
    if (d == 1 && members > (long)ZN_ST_MAX_TENSORS + 1)
        return scan_fail(s, at, "more than %d tensors", ZN_ST_MAX_TENSORS);
    if (s->kind[d] == '[' && members > ZN_ST_MAX_DIMS)
        return scan_fail(s, at, "array with more than %d elements (zinc supports at most %d dimensions)",
                         ZN_ST_MAX_DIMS, ZN_ST_MAX_DIMS);
    if (d >= 2 && s->kind[d] == '{') {
        if (s->meta[d] && members > ZN_ST_MAX_META)
            return scan_fail(s, at, "__metadata__ has more than %d entries", ZN_ST_MAX_META);
        if (!s->meta[d] && members > 3)
            return scan_fail(s, at, "tensor entry with more than 3 keys (dtype, shape, data_offsets)");
    }
    s->expect_key = s->kind[d] == '{';
    return ZN_OK;
}

static int scan_header(Scan *s) {
    for (size_t i = 0; i < s->n;) {
        unsigned c = s->h[i];
        int rc = ZN_OK;
        if (c == '"') {
            rc = scan_string(s, &i);
            if (rc) return rc;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            rc = scan_number(s, &i);
            if (rc) return rc;
            continue;
        }
        if (c == '{' || c == '[') {
            if (s->depth == 3)
                return scan_fail(s, i, "nesting deeper than 3 levels (a safetensors header has at most 3)");
            int d = ++s->depth;
            s->kind[d] = (char)c;
            s->count[d] = 0;
            s->meta[d] = d == 2 && c == '{' && s->key_is_meta;
            s->expect_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (s->depth == 0) return scan_fail(s, i, "unbalanced '%c'", c);
            s->depth--;
            s->expect_key = 0;
        } else if (c == ',') {
            rc = scan_comma(s, i);
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ':') {
            /* JSON whitespace and the key separator */
        } else if (c < 0x20 || c == 0x7f) {
            return scan_fail(s, i, "control character 0x%02x outside a string", c);
        } else if (c >= 0x80) {
            return scan_fail(s, i, "byte 0x%02x outside a string", c);
        } else {
            s->expect_key = 0;   /* true/false/null or junk: cJSON judges */
        }
        if (rc) return rc;
        i++;
    }
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* reader: schema                                                           */

static const char *json_type(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

/* A number the scan has already proved integral and <= 2^53; only its sign
 * is left to check ("-0" counts as negative: it is not plain digits). */
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (signbit(d) || !(d <= (double)MAX_EXACT) || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int dtype_from_name(const ZnStFile *f, const char *tname, const char *s, ZnDtype *out, ZnErr *err) {
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(s, DTYPES[i].name)) {
            *out = DTYPES[i].dtype;
            return ZN_OK;
        }
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
        if (!strcmp(s, UNSUPPORTED[i]))
            return corrupt(f, err, "tensor '%.200s': dtype '%s' is valid safetensors but zinc does not support it", tname, s);
    return corrupt(f, err, "tensor '%.200s': unknown dtype '%.40s'", tname, s);
}

static int take_shape(const ZnStFile *f, const char *tname, const cJSON *v, ZnStTensor *t, ZnErr *err) {
    if (!cJSON_IsArray(v)) return corrupt(f, err, "tensor '%.200s': shape must be an array, got %s", tname, json_type(v));
    int nd = cJSON_GetArraySize(v);
    if (nd > ZN_ST_MAX_DIMS)
        return corrupt(f, err, "tensor '%.200s': shape has %d dimensions (zinc supports at most %d)", tname, nd, ZN_ST_MAX_DIMS);
    t->ndim = 0;
    for (const cJSON *x = v->child; x; x = x->next) {
        uint64_t u;
        if (json_uint(x, &u))
            return corrupt(f, err, "tensor '%.200s': shape[%d] must be a non-negative integer, got %s", tname, t->ndim,
                           cJSON_IsNumber(x) ? "a negative number" : json_type(x));
        t->shape[t->ndim++] = (int64_t)u;
    }
    return ZN_OK;
}

static int take_offsets(const ZnStFile *f, const char *tname, const cJSON *v, ZnStTensor *t, ZnErr *err) {
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2)
        return corrupt(f, err, "tensor '%.200s': data_offsets must be an array of 2 integers [BEGIN, END], got %s", tname,
                       cJSON_IsArray(v) ? "another length" : json_type(v));
    if (json_uint(v->child, &t->begin) || json_uint(v->child->next, &t->end))
        return corrupt(f, err, "tensor '%.200s': data_offsets must be non-negative integers", tname);
    return ZN_OK;
}

/* numel and the byte size, with overflow checks (reference: ValidationOverflow). */
static int take_sizes(const ZnStFile *f, ZnStTensor *t, ZnErr *err) {
    char sh[200];
    uint64_t numel = 1, bytes;
    for (int d = 0; d < t->ndim; d++)
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel)) {
            shape_str(sh, sizeof sh, t->ndim, t->shape);
            return corrupt(f, err, "tensor '%.200s': shape %s has more than 2^64 elements", t->name, sh);
        }
    if (__builtin_mul_overflow(numel, (uint64_t)zn_dtype_size(t->dtype), &bytes)) {
        shape_str(sh, sizeof sh, t->ndim, t->shape);
        return corrupt(f, err, "tensor '%.200s': %s %s is more than 2^64 bytes", t->name, zn_st_dtype_name(t->dtype), sh);
    }
    t->numel = numel;
    return ZN_OK;
}

static int take_tensor(const ZnStFile *f, const cJSON *e, ZnStTensor *t, ZnErr *err) {
    const char *tname = e->string;
    if (!cJSON_IsObject(e)) return corrupt(f, err, "tensor '%.200s': entry must be an object, got %s", tname, json_type(e));
    static const char *const KEYS[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *field[3] = {NULL, NULL, NULL};
    for (const cJSON *x = e->child; x; x = x->next) {
        int k = 0;
        while (k < 3 && strcmp(x->string, KEYS[k])) k++;
        if (k == 3)
            return corrupt(f, err, "tensor '%.200s': unknown key '%.60s' (only dtype, shape, data_offsets)", tname, x->string);
        if (field[k]) return corrupt(f, err, "tensor '%.200s': key '%s' appears twice", tname, KEYS[k]);
        field[k] = x;
    }
    for (int k = 0; k < 3; k++)
        if (!field[k]) return corrupt(f, err, "tensor '%.200s': missing '%s'", tname, KEYS[k]);
    if (!cJSON_IsString(field[0]))
        return corrupt(f, err, "tensor '%.200s': dtype must be a string, got %s", tname, json_type(field[0]));
    int rc = dtype_from_name(f, tname, field[0]->valuestring, &t->dtype, err);
    if (!rc) rc = take_shape(f, tname, field[1], t, err);
    if (!rc) rc = take_offsets(f, tname, field[2], t, err);
    return rc;
}

static int take_meta(ZnStFile *f, const cJSON *m, char **arena, ZnErr *err) {
    if (!cJSON_IsObject(m)) return corrupt(f, err, "__metadata__ must be an object of strings, got %s", json_type(m));
    int n = cJSON_GetArraySize(m);
    if (n > ZN_ST_MAX_META) return corrupt(f, err, "__metadata__ has more than %d entries", ZN_ST_MAX_META);
    f->meta = zn_malloc(ZN_HOST_IO, (size_t)(n ? n : 1) * sizeof *f->meta);
    if (!f->meta) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", f->path);
    for (const cJSON *x = m->child; x; x = x->next) {
        if (!cJSON_IsString(x))
            return corrupt(f, err, "__metadata__ value of '%.200s' must be a string, got %s", x->string, json_type(x));
        KV *kv = &f->meta[f->nmeta++];
        size_t lk = strlen(x->string) + 1, lv = strlen(x->valuestring) + 1;
        kv->k = memcpy(*arena, x->string, lk);
        kv->v = memcpy(*arena + lk, x->valuestring, lv);
        *arena += lk + lv;
    }
    qsort(f->meta, (size_t)f->nmeta, sizeof *f->meta, kv_cmp);
    for (int i = 1; i < f->nmeta; i++)
        if (!strcmp(f->meta[i - 1].k, f->meta[i].k))
            return corrupt(f, err, "__metadata__ key '%.200s' appears twice", f->meta[i].k);
    return ZN_OK;
}

/* Bytes needed to copy every key and string value the file keeps. */
static size_t arena_size(const cJSON *root) {
    size_t total = 1;
    for (const cJSON *x = root->child; x; x = x->next) {
        total += strlen(x->string) + 1;
        if (!strcmp(x->string, "__metadata__") && cJSON_IsObject(x))
            for (const cJSON *y = x->child; y; y = y->next)
                total += strlen(y->string) + 1 + (cJSON_IsString(y) ? strlen(y->valuestring) + 1 : 0);
    }
    return total;
}

static int walk_root(ZnStFile *f, const cJSON *root, ZnErr *err) {
    long ntensors = 0;
    int nmeta_obj = 0;
    for (const cJSON *x = root->child; x; x = x->next) {
        if (!strcmp(x->string, "__metadata__")) nmeta_obj++;
        else ntensors++;
    }
    /* "__metadata__" spelled with escapes slips past the byte scan */
    if (nmeta_obj > 1) return corrupt(f, err, "key '__metadata__' appears twice");
    if (ntensors > ZN_ST_MAX_TENSORS) return corrupt(f, err, "more than %d tensors", ZN_ST_MAX_TENSORS);
    f->arena = zn_malloc(ZN_HOST_IO, arena_size(root));
    f->t = zn_calloc(ZN_HOST_IO, (size_t)(ntensors ? ntensors : 1), sizeof *f->t);
    if (!f->arena || !f->t) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", f->path);
    char *a = f->arena;
    for (const cJSON *x = root->child; x; x = x->next) {
        int rc;
        if (!strcmp(x->string, "__metadata__")) {
            rc = take_meta(f, x, &a, err);
        } else {
            ZnStTensor *t = &f->t[f->n++];
            size_t len = strlen(x->string) + 1;
            t->name = memcpy(a, x->string, len);
            a += len;
            rc = take_tensor(f, x, t, err);
            if (!rc) rc = take_sizes(f, t, err);
        }
        if (rc) return rc;
    }
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* reader: layout of the byte buffer                                        */

static int offset_cmp(const void *a, const void *b) {
    const ZnStTensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return name_cmp(x->name, y->name);
}

/* qsort has no context argument, so the by-name index is built by sorting
 * (name, index) pairs. */
typedef struct { const char *name; int i; } NameIdx;
static int nameidx_cmp(const void *a, const void *b) {
    return name_cmp(((const NameIdx *)a)->name, ((const NameIdx *)b)->name);
}

static int index_names(ZnStFile *f, ZnErr *err) {
    NameIdx *tmp = zn_malloc(ZN_HOST_IO, (size_t)(f->n ? f->n : 1) * sizeof *tmp);
    f->by_name = zn_malloc(ZN_HOST_IO, (size_t)(f->n ? f->n : 1) * sizeof *f->by_name);
    if (!tmp || !f->by_name) {
        free(tmp);
        return zn_err(err, ZN_E_NOMEM, "%s: out of memory", f->path);
    }
    for (int i = 0; i < f->n; i++) tmp[i] = (NameIdx){f->t[i].name, i};
    qsort(tmp, (size_t)f->n, sizeof *tmp, nameidx_cmp);
    int rc = ZN_OK;
    for (int i = 0; i < f->n; i++) {
        f->by_name[i] = tmp[i].i;
        if (i && !strcmp(tmp[i - 1].name, tmp[i].name) && !rc)
            rc = corrupt(f, err, "tensor name '%.200s' appears twice", tmp[i].name);
    }
    free(tmp);
    return rc;
}

/* Reference Metadata::validate: sorted by offsets, the first at 0, each
 * beginning where the previous ended, each holding exactly its bytes; then
 * the buffer ends exactly at the end of the file. */
static int check_layout(const ZnStFile *f, ZnErr *err) {
    uint64_t pos = 0;
    char sh[200];
    for (int i = 0; i < f->n; i++) {
        const ZnStTensor *t = &f->t[i];
        if (t->end < t->begin)
            return corrupt(f, err, "tensor '%.200s': data_offsets [%llu, %llu] end before they begin", t->name,
                           (unsigned long long)t->begin, (unsigned long long)t->end);
        if (t->begin != pos) {
            if (i == 0)
                return corrupt(f, err, "tensor '%.200s': data_offsets [%llu, %llu]: the first tensor must begin at 0 "
                               "(no hole at the start of the byte buffer)", t->name,
                               (unsigned long long)t->begin, (unsigned long long)t->end);
            const ZnStTensor *p = &f->t[i - 1];
            return corrupt(f, err, "tensor '%.200s': data_offsets [%llu, %llu] %s tensor '%.200s' [%llu, %llu]: "
                           "tensors must tile the byte buffer", t->name,
                           (unsigned long long)t->begin, (unsigned long long)t->end,
                           t->begin > pos ? "leave a hole after" : "overlap", p->name,
                           (unsigned long long)p->begin, (unsigned long long)p->end);
        }
        uint64_t need = t->numel * zn_dtype_size(t->dtype);   /* overflow checked in take_sizes */
        if (t->end - t->begin != need) {
            shape_str(sh, sizeof sh, t->ndim, t->shape);
            return corrupt(f, err, "tensor '%.200s': data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu",
                           t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                           (unsigned long long)(t->end - t->begin), zn_st_dtype_name(t->dtype), sh,
                           (unsigned long long)need);
        }
        pos = t->end;
    }
    /* pos <= 2^53 and data_start <= 8 + 1e8: no overflow */
    uint64_t want = f->data_start + pos;
    if (want != f->file_size)
        return corrupt(f, err, "the tensors end at byte %llu of the byte buffer, so the file should be %llu bytes "
                       "(8 + header %llu + %llu), but it is %llu bytes (%s)",
                       (unsigned long long)pos, (unsigned long long)want, (unsigned long long)f->header_len,
                       (unsigned long long)pos, (unsigned long long)f->file_size,
                       want < f->file_size ? "trailing bytes" : "truncated");
    return ZN_OK;
}

/* ------------------------------------------------------------------------ */
/* reader: open                                                             */

/* Reads and checks the 8-byte length and the header text. *hbuf is
 * NUL-terminated (the cJSON recipe: never hand cJSON an unterminated slice). */
static int read_header(ZnStFile *f, char **hbuf, ZnErr *err) {
    *hbuf = NULL;
    if (f->file_size < 8)
        return corrupt(f, err, "file is %llu bytes, shorter than the 8-byte header length",
                       (unsigned long long)f->file_size);
    unsigned char b[8];
    int rc = st_pread(f, b, 8, 0, err);
    if (rc) return rc;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];   /* little-endian, whatever the host */
    if (n > ZN_ST_MAX_HEADER)
        return corrupt(f, err, "byte 0: header length %llu is over the %llu-byte limit",
                       (unsigned long long)n, ZN_ST_MAX_HEADER);
    if (8 + n > f->file_size)
        return corrupt(f, err, "byte 0: header length %llu runs past the end of the file (%llu bytes)",
                       (unsigned long long)n, (unsigned long long)f->file_size);
    if (n == 0) return corrupt(f, err, "byte 0: header length is 0; the header must be a JSON object");
    f->header_len = n;
    f->data_start = 8 + n;
    char *h = zn_malloc(ZN_HOST_IO, (size_t)n + 1);
    if (!h) return zn_err(err, ZN_E_NOMEM, "%s: out of memory for a %llu-byte header", f->path, (unsigned long long)n);
    rc = st_pread(f, h, (size_t)n, 8, err);
    if (rc) {
        free(h);
        return rc;
    }
    h[n] = 0;
    *hbuf = h;
    /* the README's "MUST begin with {": no leading whitespace, no BOM */
    if (h[0] != '{')
        return corrupt(f, err, "byte 8: the header must begin with '{', found byte 0x%02x", (unsigned char)h[0]);
    return ZN_OK;
}

static int parse_header(ZnStFile *f, char *h, ZnErr *err) {
    Scan s = {.f = f, .h = (const unsigned char *)h, .n = (size_t)f->header_len, .err = err};
    int rc = scan_header(&s);
    if (rc) return rc;
    const char *end = NULL;
    /* length n+1 includes the NUL, and require_null_terminated rejects
     * anything but whitespace after the object (the space padding) */
    zn_json_track();
    cJSON *root = zn_json_parse(h, (size_t)f->header_len + 1, &end, 1);
    if (!root && zn_json_failed()) return zn_err(err, ZN_E_NOMEM, "%s: out of memory parsing the header", f->path);
    if (!root) {
        size_t at = end ? (size_t)(end - h) : 0;
        return corrupt(f, err, "header byte %zu (file offset %zu): not valid JSON", at, at + 8);
    }
    if (!cJSON_IsObject(root)) rc = corrupt(f, err, "the header is not a JSON object");
    if (!rc) rc = walk_root(f, root, err);
    cJSON_Delete(root);
    return rc;
}

/* zn_st_open and zn_st_open_mem: buf NULL reads the file at path */
static int st_open(ZnStFile **out, const char *path, const void *buf, size_t len, ZnErr *err) {
    *out = NULL;
    ZnStFile *f = zn_calloc(ZN_HOST_IO, 1, sizeof *f);
    if (!f) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    f->fd = -1;
    f->path = zn_strdup(ZN_HOST_IO, path);
    if (!f->path) {
        free(f);
        return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    }
    char *h = NULL;
    int rc = ZN_OK;
    if (buf) {
        f->mem = buf;
        f->file_size = len;
    } else rc = zn_open_read(path, &f->fd, &f->file_size, err);
    if (!rc) rc = read_header(f, &h, err);
    if (!rc) rc = parse_header(f, h, err);
    free(h);
    if (!rc) {
        qsort(f->t, (size_t)f->n, sizeof *f->t, offset_cmp);
        rc = index_names(f, err);
    }
    if (!rc) rc = check_layout(f, err);
    if (rc) {
        zn_st_close(f);
        return rc;
    }
    *out = f;
    return ZN_OK;
}

int zn_st_open(ZnStFile **out, const char *path, ZnErr *err) { return st_open(out, path, NULL, 0, err); }

int zn_st_open_mem(ZnStFile **out, const char *path, const void *buf, size_t len, ZnErr *err) {
    return st_open(out, path, buf ? buf : "", len, err);
}

void zn_st_close(ZnStFile *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    ZN_FREE_ALL(f->path, f->t, f->by_name, f->meta, f->arena, f);
}

/* ------------------------------------------------------------------------ */
/* reader: access                                                           */

const char *zn_st_path(const ZnStFile *f) { return f->path; }
int zn_st_count(const ZnStFile *f) { return f->n; }

const ZnStTensor *zn_st_tensor(const ZnStFile *f, int i) {
    return i >= 0 && i < f->n ? &f->t[i] : NULL;
}

const ZnStTensor *zn_st_find(const ZnStFile *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const ZnStTensor *t = &f->t[f->by_name[mid]];
        int c = name_cmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

int zn_st_read(const ZnStFile *f, const ZnStTensor *t, void *dst, size_t dst_bytes, ZnErr *err) {
    uintptr_t p = (uintptr_t)t, lo = (uintptr_t)f->t, hi = (uintptr_t)(f->t + f->n);
    if (p < lo || p >= hi || (p - lo) % sizeof *t)
        return zn_err(err, ZN_E_INTERNAL, "%s: zn_st_read: tensor does not belong to this file", f->path);
    uint64_t bytes = t->end - t->begin;
    if (dst_bytes != bytes)
        return zn_err(err, ZN_E_INTERNAL, "%s: tensor '%.200s' is %llu bytes, the destination %zu", f->path, t->name,
                      (unsigned long long)bytes, dst_bytes);
    return st_pread(f, dst, (size_t)bytes, f->data_start + t->begin, err);
}

int zn_st_meta_count(const ZnStFile *f) { return f->nmeta; }

const char *zn_st_meta(const ZnStFile *f, const char *key) {
    int lo = 0, hi = f->nmeta - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = name_cmp(key, f->meta[mid].k);
        if (c == 0) return f->meta[mid].v;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *zn_st_meta_at(const ZnStFile *f, int i, const char **value) {
    if (i < 0 || i >= f->nmeta) return NULL;
    if (value) *value = f->meta[i].v;
    return f->meta[i].k;
}
