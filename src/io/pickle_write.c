/* pickle_write.c: protocol-2 pickles, opcode by opcode (spec Z-DSCK-009).
 * The opcodes are CPython's (Lib/pickle.py); the shapes of the values are
 * what torch.save and DeepSpeed 0.19.8 write (see pickle_write.h). */
#include "io/pickle_write.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"

static void put(ZnPw *w, const void *b, size_t n) { zn_bytes_put(ZN_HOST_IO, w, b, n); }
static void op(ZnPw *w, char c) { put(w, &c, 1); }
static void le32(ZnPw *w, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    put(w, b, 4);
}

void zn_pw_begin(ZnPw *w) {
    memset(w, 0, sizeof *w);
    put(w, "\x80\x02", 2);
}
int zn_pw_finish(ZnPw *w, ZnErr *err) {
    op(w, '.');
    if (!w->failed) return 0;
    zn_pw_free(w);
    return zn_nomem(err);
}
void zn_pw_free(ZnPw *w) {
    free(w->p);
    memset(w, 0, sizeof *w);
}

void zn_pw_none(ZnPw *w) { op(w, 'N'); }
void zn_pw_bool(ZnPw *w, int v) { op(w, v ? '\x88' : '\x89'); }
void zn_pw_int(ZnPw *w, long long v) {
    if (v >= 0 && v < 256) {
        unsigned char b[2] = {'K', (unsigned char)v};
        put(w, b, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(w, 'J');
        le32(w, (uint32_t)(int32_t)v);
    } else {   /* LONG1: 8 bytes of two's complement, little-endian */
        unsigned char b[10] = {0x8a, 8};
        for (int i = 0; i < 8; i++) b[2 + i] = (unsigned char)((uint64_t)v >> (8 * i));
        put(w, b, 10);
    }
}
void zn_pw_float(ZnPw *w, double v) {   /* BINFLOAT: big-endian IEEE double */
    uint64_t u;
    memcpy(&u, &v, 8);
    unsigned char b[9] = {'G'};
    for (int i = 0; i < 8; i++) b[1 + i] = (unsigned char)(u >> (56 - 8 * i));
    put(w, b, 9);
}
void zn_pw_str(ZnPw *w, const char *s) {
    size_t n = strlen(s);
    op(w, 'X');
    le32(w, (uint32_t)n);
    put(w, s, n);
}
void zn_pw_kv_int(ZnPw *w, const char *key, long long v) {
    zn_pw_str(w, key);
    zn_pw_int(w, v);
}
void zn_pw_kv_float(ZnPw *w, const char *key, double v) {
    zn_pw_str(w, key);
    zn_pw_float(w, v);
}
void zn_pw_kv_bool(ZnPw *w, const char *key, int v) {
    zn_pw_str(w, key);
    zn_pw_bool(w, v);
}
void zn_pw_global(ZnPw *w, const char *name) {   /* "module name" as GLOBAL's two lines */
    const char *sp = strchr(name, ' ');
    op(w, 'c');
    put(w, name, (size_t)(sp - name));
    op(w, '\n');
    put(w, sp + 1, strlen(sp + 1));
    op(w, '\n');
}

void zn_pw_dict(ZnPw *w) { put(w, "}(", 2); }
void zn_pw_ordered_dict(ZnPw *w) {
    zn_pw_global(w, "collections OrderedDict");
    put(w, ")R(", 3);   /* OrderedDict() then its items */
}
void zn_pw_dict_end(ZnPw *w) { op(w, 'u'); }   /* SETITEMS */
void zn_pw_list(ZnPw *w) { put(w, "](", 2); }
void zn_pw_list_end(ZnPw *w) { op(w, 'e'); }   /* APPENDS */
void zn_pw_tuple(ZnPw *w) { op(w, '('); }
void zn_pw_tuple_end(ZnPw *w) { op(w, 't'); }

void zn_pw_size(ZnPw *w, int ndim, const int64_t *shape) {
    zn_pw_global(w, "torch Size");
    zn_pw_tuple(w);
    zn_pw_tuple(w);
    for (int d = 0; d < ndim; d++) zn_pw_int(w, shape[d]);
    zn_pw_tuple_end(w);
    zn_pw_tuple_end(w);
    op(w, 'R');
}

void zn_pw_tensor(ZnPw *w, const char *storage, long key, uint64_t storage_numel, int ndim, const int64_t *shape) {
    char cls[64], k[32];
    snprintf(cls, sizeof cls, "torch %s", storage);
    snprintf(k, sizeof k, "%ld", key);
    zn_pw_global(w, "torch._utils _rebuild_tensor_v2");
    zn_pw_tuple(w);
    zn_pw_tuple(w);   /* the persistent id: ('storage', type, key, location, numel) */
    zn_pw_str(w, "storage");
    zn_pw_global(w, cls);
    zn_pw_str(w, k);
    zn_pw_str(w, "cpu");
    zn_pw_int(w, (long long)storage_numel);
    zn_pw_tuple_end(w);
    op(w, 'Q');        /* BINPERSID */
    zn_pw_int(w, 0);   /* storage offset */
    int64_t stride[16];
    int64_t s = 1;
    for (int d = ndim; d-- > 0;) {
        stride[d] = s;
        s *= shape[d];
    }
    zn_pw_tuple(w);
    for (int d = 0; d < ndim; d++) zn_pw_int(w, shape[d]);
    zn_pw_tuple_end(w);
    zn_pw_tuple(w);
    for (int d = 0; d < ndim; d++) zn_pw_int(w, stride[d]);
    zn_pw_tuple_end(w);
    zn_pw_bool(w, 0);   /* requires_grad */
    zn_pw_global(w, "collections OrderedDict");
    put(w, ")R", 2);    /* backward hooks: OrderedDict() */
    zn_pw_tuple_end(w);
    op(w, 'R');
}

void zn_pw_object(ZnPw *w, const char *cls) {
    zn_pw_global(w, cls);
    put(w, ")\x81}(", 4);   /* cls.__new__(cls), then its state dict */
}
void zn_pw_object_end(ZnPw *w) { put(w, "ub", 2); }   /* SETITEMS, BUILD */

void zn_pw_enum(ZnPw *w, const char *cls, long long arg) {
    zn_pw_global(w, cls);
    zn_pw_int(w, arg);
    put(w, "\x85R", 2);   /* TUPLE1, REDUCE */
}
