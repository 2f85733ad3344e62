/* torch_file.c: a torch.save file's tensors, located and read lazily (spec
 * Z-DSCK-003). The format, from torch/serialization.py (_save, _load) and
 * torch/_utils.py (_rebuild_tensor_v2): every storage is written once as
 * the zip entry ARCHIVE/data/KEY, and the pickle names it by the
 * persistent id ('storage', torch.<T>Storage, KEY, LOCATION, NUMEL); a
 * tensor is _rebuild_tensor_v2(storage, offset, size, stride,
 * requires_grad, hooks[, metadata]) over it. */
#include "io/torch_file.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"

#define fail(x, ...) zn_err_src(err, ZN_E_CORRUPT, (x), __VA_ARGS__)

/* data.pkl of a checkpoint holds names and shapes, never tensor data: a
 * pickle past this is not one DeepSpeed wrote, and reading it would cost
 * memory the caller did not ask for. */
#define MAX_PICKLE (256ull << 20)

static const struct { const char *storage, *name; size_t size; } TYPES[ZN_PT_TYPE_N] = {
    [ZN_PT_F32] = {"torch FloatStorage", "float32", 4},
    [ZN_PT_F16] = {"torch HalfStorage", "float16", 2},
    [ZN_PT_BF16] = {"torch BFloat16Storage", "bfloat16", 2},
    [ZN_PT_F64] = {"torch DoubleStorage", "float64", 8},
    [ZN_PT_I64] = {"torch LongStorage", "int64", 8},
    [ZN_PT_I32] = {"torch IntStorage", "int32", 4},
    [ZN_PT_I16] = {"torch ShortStorage", "int16", 2},
    [ZN_PT_I8] = {"torch CharStorage", "int8", 1},
    [ZN_PT_U8] = {"torch ByteStorage", "uint8", 1},
    [ZN_PT_BOOL] = {"torch BoolStorage", "bool", 1},
};

size_t zn_pt_type_size(ZnPtType t) { return (unsigned)t < ZN_PT_TYPE_N ? TYPES[t].size : 0; }
const char *zn_pt_type_name(ZnPtType t) { return (unsigned)t < ZN_PT_TYPE_N ? TYPES[t].name : "?"; }

ZnDtype zn_pt_float_dtype(ZnPtType t) {
    switch (t) {
    case ZN_PT_F32: return ZN_F32;
    case ZN_PT_F16: return ZN_F16;
    case ZN_PT_BF16: return ZN_BF16;
    case ZN_PT_F64: return ZN_F64;
    default: return ZN_DTYPE_N;
    }
}

/* The archive folder: the entry ".../data.pkl" one level down. */
static const ZnZipEntry *find_pickle(const ZnZip *z) {
    for (int i = 0; i < z->n; i++) {
        const char *s = strchr(z->e[i].name, '/');
        if (s && s != z->e[i].name && !strcmp(s, "/data.pkl")) return &z->e[i];
    }
    return NULL;
}

/* An entry ARCHIVE/rest, or NULL. */
static const ZnZipEntry *entry(const ZnPt *f, const char *rest) {
    char name[512];
    if ((size_t)snprintf(name, sizeof name, "%s/%s", f->archive, rest) >= sizeof name) return NULL;
    return zn_zip_find(&f->zip, name);
}

static int check_byteorder(ZnPt *f, ZnErr *err) {
    const ZnZipEntry *e = entry(f, "byteorder");
    if (!e) return 0;   /* torch before 1.13 wrote none: little-endian */
    char s[16] = {0};
    if (e->size >= sizeof s) return fail(f->zip.path, "entry '%s' is %llu bytes, not 'little' or 'big'", e->name,
                                         (unsigned long long)e->size);
    int rc = zn_zip_read(&f->zip, e, 0, s, e->size, err);
    if (rc) return rc;
    if (strcmp(s, "little")) return fail(f->zip.path, "entry '%s' says the tensors are '%s'-endian; zinc reads "
                                         "little-endian files", e->name, s);
    return 0;
}

int zn_pt_open(ZnPt *f, const char *path, ZnErr *err) {
    memset(f, 0, sizeof *f);
    f->zip.fd = -1;
    int rc = zn_zip_open(&f->zip, path, err);
    if (rc) return rc;
    const ZnZipEntry *pe = find_pickle(&f->zip);
    if (!pe) {
        rc = fail(path, "no entry 'ARCHIVE/data.pkl': not a file torch.save writes");
        goto out;
    }
    size_t alen = (size_t)(strchr(pe->name, '/') - pe->name);
    if (!(f->archive = zn_strndup(ZN_HOST_IO, pe->name, alen))) {
        rc = zn_nomem(err);
        goto out;
    }
    if ((rc = check_byteorder(f, err))) goto out;
    if (pe->size > MAX_PICKLE) {
        rc = fail(path, "entry '%s' is %llu bytes, more than the %llu-byte limit of a checkpoint's pickle", pe->name,
                  (unsigned long long)pe->size, MAX_PICKLE);
        goto out;
    }
    unsigned char *buf = zn_malloc(ZN_HOST_IO, pe->size ? pe->size : 1);
    if (!buf) {
        rc = zn_nomem(err);
        goto out;
    }
    rc = zn_zip_read(&f->zip, pe, 0, buf, pe->size, err);
    if (!rc) {
        char where[600];
        snprintf(where, sizeof where, "%s: %s", path, pe->name);
        rc = zn_pickle_load(buf, pe->size, where, &f->pk, &f->root, err);
    }
    free(buf);
out:
    if (rc) zn_pt_close(f);
    return rc;
}

void zn_pt_close(ZnPt *f) {
    zn_pickle_free(&f->pk);
    zn_zip_close(&f->zip);
    free(f->archive);
    f->archive = NULL;
    f->root = NULL;
}

/* The argument tuple of v when v calls the global name, else NULL. */
static const ZnPy *args_of(const ZnPy *v, const char *name) {
    if (!v || v->kind != ZN_PY_CALL || v->n < 2 || v->item[0]->kind != ZN_PY_GLOBAL) return NULL;
    if (strcmp(v->item[0]->s, name) || v->item[1]->kind != ZN_PY_TUPLE) return NULL;
    return v->item[1];
}

static int is_int(const ZnPy *v) { return v && v->kind == ZN_PY_INT; }

/* A tuple of ndim non-negative integers into out[]. */
static int int_tuple(const ZnPy *v, int64_t *out, int *ndim) {
    if (!v || v->kind != ZN_PY_TUPLE || v->n > ZN_PT_MAX_DIMS) return -1;
    for (int i = 0; i < v->n; i++) {
        if (!is_int(v->item[i]) || v->item[i]->i < 0) return -1;
        out[i] = v->item[i]->i;
    }
    *ndim = v->n;
    return 0;
}

/* The storage a persistent id names: its type, its entry, its numel. */
static int storage_of(const ZnPt *f, const ZnPy *pid, const char *what, ZnPtTensor *t, uint64_t *numel,
                      ZnErr *err) {
    const ZnPy *id = pid && pid->kind == ZN_PY_PERSID ? pid->item[0] : NULL;
    if (!id || id->kind != ZN_PY_TUPLE || id->n != 5 || id->item[0]->kind != ZN_PY_STR ||
        strcmp(id->item[0]->s, "storage") || id->item[1]->kind != ZN_PY_GLOBAL || id->item[2]->kind != ZN_PY_STR ||
        !is_int(id->item[4]) || id->item[4]->i < 0)
        return fail(f->zip.path, "%s: the storage is not ('storage', type, key, location, numel)", what);
    int type = 0;
    while (type < ZN_PT_TYPE_N && strcmp(id->item[1]->s, TYPES[type].storage)) type++;
    if (type == ZN_PT_TYPE_N) return fail(f->zip.path, "%s: storage type '%s' is not one zinc reads", what,
                                          id->item[1]->s);
    t->type = (ZnPtType)type;
    *numel = (uint64_t)id->item[4]->i;
    char rest[300];
    if ((size_t)snprintf(rest, sizeof rest, "data/%s", id->item[2]->s) >= sizeof rest || !(t->storage = entry(f, rest)))
        return fail(f->zip.path, "%s: storage '%.200s' has no entry in the archive", what, id->item[2]->s);
    uint64_t bytes;
    if (__builtin_mul_overflow(*numel, TYPES[type].size, &bytes) || bytes != t->storage->size)
        return fail(f->zip.path, "%s: storage '%s' holds %llu bytes, not %llu elements of %s", what, t->storage->name,
                    (unsigned long long)t->storage->size, (unsigned long long)*numel, TYPES[type].name);
    return 0;
}

int zn_pt_tensor(const ZnPt *f, const ZnPy *v, const char *what, ZnPtTensor *t, ZnErr *err) {
    memset(t, 0, sizeof *t);
    const ZnPy *a;
    if ((a = args_of(v, "torch._utils _rebuild_parameter")) && a->n >= 1) v = a->item[0];
    if ((a = args_of(v, "torch._tensor _rebuild_from_type_v2")) && a->n == 4) {
        /* a tensor subclass: (func, type, args, state); func must be the plain rebuild */
        if (a->item[0]->kind != ZN_PY_GLOBAL || strcmp(a->item[0]->s, "torch._utils _rebuild_tensor_v2") ||
            a->item[2]->kind != ZN_PY_TUPLE)
            return fail(f->zip.path, "%s: a tensor subclass rebuilt by something other than _rebuild_tensor_v2", what);
        a = a->item[2];
    } else if (!(a = args_of(v, "torch._utils _rebuild_tensor_v2"))) {
        return fail(f->zip.path, "%s: expected a tensor", what);
    }
    if (a->n < 4 || !is_int(a->item[1]) || a->item[1]->i < 0)
        return fail(f->zip.path, "%s: _rebuild_tensor_v2 without (storage, offset, size, stride)", what);
    uint64_t snumel;
    int rc = storage_of(f, a->item[0], what, t, &snumel, err);
    if (rc) return rc;
    int sdims = -1;
    if (int_tuple(a->item[2], t->shape, &t->ndim) || int_tuple(a->item[3], t->stride, &sdims) || sdims != t->ndim)
        return fail(f->zip.path, "%s: size and stride are not tuples of as many non-negative integers (at most %d)",
                    what, ZN_PT_MAX_DIMS);
    t->offset = (uint64_t)a->item[1]->i;
    /* the last element reached: offset + sum (size-1)*stride, which must lie in the storage */
    uint64_t numel = 1, last = t->offset, expect = 1;
    int over = 0;
    t->contiguous = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        uint64_t s = (uint64_t)t->shape[i], step;
        over |= __builtin_mul_overflow(numel, s, &numel);
        if (s > 1 && (uint64_t)t->stride[i] != expect) t->contiguous = 0;
        if (s) {
            over |= __builtin_mul_overflow(s - 1, (uint64_t)t->stride[i], &step);
            over |= __builtin_add_overflow(last, step, &last);
        }
        over |= __builtin_mul_overflow(expect, s ? s : 1, &expect);
    }
    t->numel = numel;
    if (numel == 0) t->contiguous = 1;
    if (over || (numel && last >= snumel) || t->offset > snumel)
        return fail(f->zip.path, "%s: reaches past its storage '%s' of %llu elements (offset %llu)", what,
                    t->storage->name, (unsigned long long)snumel, (unsigned long long)t->offset);
    return 0;
}

int zn_pt_read(const ZnPt *f, const ZnPtTensor *t, uint64_t first, uint64_t n, void *dst, ZnErr *err) {
    if (!t->contiguous || first > t->numel || n > t->numel - first)
        return zn_err(err, ZN_E_INTERNAL, "%s: a read of elements [%llu, +%llu) of a %s tensor of %llu", f->zip.path,
                      (unsigned long long)first, (unsigned long long)n, t->contiguous ? "contiguous" : "strided",
                      (unsigned long long)t->numel);
    const uint64_t es = zn_pt_type_size(t->type);
    return zn_zip_read(&f->zip, t->storage, (t->offset + first) * es, dst, n * es, err);
}

void zn_pt_advise(const ZnPt *f, const ZnPtTensor *t, uint64_t first, uint64_t n) {
    const uint64_t es = zn_pt_type_size(t->type);
    if (t->contiguous && first <= t->numel && n <= t->numel - first)
        (void)posix_fadvise(f->zip.fd, (off_t)(t->storage->offset + (t->offset + first) * es), (off_t)(n * es),
                            POSIX_FADV_WILLNEED);
}
