/* safetensors.h: the huggingface safetensors format, written the way the
 * reference writer writes it and read with every check the reference reader
 * makes, and a few stricter ones (spec Z-ST-*).
 *
 * File layout: [0,8) the header length N as an unsigned little-endian u64;
 * [8, 8+N) a JSON object {"__metadata__": {str: str}, "name": {"dtype": "F32",
 * "shape": [2,3], "data_offsets": [BEGIN, END]}, ...}; [8+N, EOF) the byte
 * buffer, which the tensors tile exactly, in order, with no holes. Offsets
 * are relative to the byte buffer. Tensor data is little-endian, row-major.
 *
 * Supported dtypes: F32, F16, BF16, F64, U64, U8 (ZnDtype). 16-bit floats
 * are raw uint16_t bit patterns. Other valid safetensors dtypes (I64, BOOL,
 * ...) are rejected by name: zinc has no type to read them into. */
#ifndef ZN_SAFETENSORS_H
#define ZN_SAFETENSORS_H
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"

#define ZN_ST_MAX_TENSORS (1 << 20)
#define ZN_ST_MAX_HEADER 100000000ull   /* the reference reader's limit */
#define ZN_ST_MAX_DIMS 8
#define ZN_ST_MAX_META 65536             /* __metadata__ entries */

/* One tensor to write. data holds numel * dtype size bytes, little-endian
 * (may be NULL when that is 0). A scalar has ndim 0. */
typedef struct {
    const char *name;
    ZnDtype dtype;
    int ndim;
    int64_t shape[ZN_ST_MAX_DIMS];
    const void *data;
} ZnStEntry;

/* Writes path atomically (fileio's temp + fsync + rename). Tensors are laid
 * out as the reference writer does: sorted by dtype alignment (descending),
 * then by name bytewise; the header is compact JSON with __metadata__ first
 * (keys sorted), padded with spaces to a multiple of 8 bytes. meta_kv is
 * {key0, value0, key1, value1, ..., NULL} or NULL for no __metadata__.
 * Bad input (duplicate names, a name "__metadata__", invalid UTF-8, ndim > 8,
 * a negative dimension, missing data, over a limit) is ZN_E_USAGE and writes
 * nothing. */
int zn_st_write(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnErr *err);
/* The same, reporting what went to disk: its size and its XXH3-64 hash,
 * computed from the bytes as they are written (no read-back). */
typedef struct { uint64_t bytes, xxh3; } ZnStSum;
int zn_st_write_sum(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnStSum *sum,
                    ZnErr *err);

/* The same, with each tensor's bytes made when the writer reaches it:
 * fn(ctx, entry, buf, bytes, err) fills buf (the entry's numel * dtype
 * size bytes) and returns 0 or an error, which aborts the write (nothing
 * is left on disk). Entries' data may be NULL. The writer holds one buffer,
 * of the largest tensor's size: a file far larger than memory can be
 * written one tensor at a time. */
typedef int (*ZnStFill)(void *ctx, const ZnStEntry *e, void *buf, size_t bytes, ZnErr *err);
int zn_st_write_fill(const char *path, const ZnStEntry *entries, int n, const char *const *meta_kv, ZnStFill fn,
                     void *ctx, ZnErr *err);

/* A tensor in an opened file. begin/end are offsets into the byte buffer. */
typedef struct {
    const char *name;    /* owned by the ZnStFile */
    ZnDtype dtype;
    int ndim;
    int64_t shape[ZN_ST_MAX_DIMS];
    uint64_t numel;      /* 1 for a scalar, 0 if any dimension is 0 */
    uint64_t begin, end; /* end - begin == numel * dtype size */
} ZnStTensor;

typedef struct ZnStFile ZnStFile;

/* Opens and fully validates path (Z-ST-005..018): after success every tensor's
 * bytes lie inside the file and match its dtype and shape. Every failure of
 * the content is ZN_E_CORRUPT with a message naming the file, the byte offset
 * where there is one, the tensor, and what is wrong. The file stays open for
 * zn_st_read until zn_st_close. */
int zn_st_open(ZnStFile **f, const char *path, ZnErr *err);
/* The same over a copy of the whole file already in memory (len bytes;
 * path labels messages): every check is the file reader's; buf must stay
 * valid until zn_st_close. */
int zn_st_open_mem(ZnStFile **out, const char *path, const void *buf, size_t len, ZnErr *err);
void zn_st_close(ZnStFile *f);   /* NULL ok */

const char *zn_st_path(const ZnStFile *f);
int zn_st_count(const ZnStFile *f);
const ZnStTensor *zn_st_tensor(const ZnStFile *f, int i);   /* by offset; NULL if out of range */
const ZnStTensor *zn_st_find(const ZnStFile *f, const char *name);   /* NULL if absent */
/* Copies the tensor's raw little-endian bytes; dst_bytes must equal
 * end - begin (a mismatch is ZN_E_INTERNAL: the caller's bug). */
int zn_st_read(const ZnStFile *f, const ZnStTensor *t, void *dst, size_t dst_bytes, ZnErr *err);

int zn_st_meta_count(const ZnStFile *f);
const char *zn_st_meta(const ZnStFile *f, const char *key);   /* NULL if absent */
const char *zn_st_meta_at(const ZnStFile *f, int i, const char **value);   /* sorted by key */

/* "F32", "BF16", ...; "?" for a value out of range. */
const char *zn_st_dtype_name(ZnDtype t);

#endif
