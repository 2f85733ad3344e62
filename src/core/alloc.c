/* alloc.c: host allocations by category (core/alloc.h). */
#include "core/alloc.h"
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *cat_name[ZN_HOST_NCAT] = {"core", "engine", "comm", "io", "app"};

static atomic_long n_calls[ZN_HOST_NCAT], n_failed[ZN_HOST_NCAT];
static atomic_ullong n_bytes[ZN_HOST_NCAT];

/* This thread's last failed request, until zn_nomem reports it. Threads
 * are ranks in the simulator: each reports its own failure. */
static _Thread_local struct { int pending; ZnHostCat cat; size_t bytes; } last_fail;

static void *counted(ZnHostCat cat, size_t bytes, void *p) {
    atomic_fetch_add(&n_calls[cat], 1);
    atomic_fetch_add(&n_bytes[cat], (unsigned long long)bytes);
    if (!p) {
        atomic_fetch_add(&n_failed[cat], 1);
        last_fail.pending = 1;
        last_fail.cat = cat;
        last_fail.bytes = bytes;
    }
    return p;
}

void *zn_malloc(ZnHostCat cat, size_t n) { return counted(cat, n, malloc(n)); }

void *zn_calloc(ZnHostCat cat, size_t count, size_t size) {
    /* an overflowing product is a failed request of SIZE_MAX bytes */
    size_t bytes = size && count > SIZE_MAX / size ? SIZE_MAX : count * size;
    return counted(cat, bytes, calloc(count, size));
}

void *zn_realloc(ZnHostCat cat, void *p, size_t n) { return counted(cat, n, realloc(p, n)); }

char *zn_strdup(ZnHostCat cat, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = counted(cat, n, malloc(n));
    if (d) memcpy(d, s, n);
    return d;
}

char *zn_strndup(ZnHostCat cat, const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = counted(cat, len + 1, malloc(len + 1));
    if (d) {
        memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

int zn_grow(ZnHostCat cat, void *pp, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 8;
    while (c < need) c *= 2;
    void **p = pp;
    void *q = zn_realloc(cat, *p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

void zn_bytes_put(ZnHostCat cat, ZnBytes *b, const void *src, size_t n) {
    if (b->failed) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        unsigned char *p = zn_realloc(cat, b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

ZnHostAllocStats zn_host_alloc_stats(ZnHostCat cat) {
    ZnHostAllocStats s = {atomic_load(&n_calls[cat]), atomic_load(&n_failed[cat]), atomic_load(&n_bytes[cat])};
    return s;
}

const char *zn_host_cat_name(ZnHostCat cat) { return cat >= 0 && cat < ZN_HOST_NCAT ? cat_name[cat] : "?"; }

int zn_nomem_at(const char *file, int line, ZnErr *e) {
    if (!last_fail.pending) return zn_err_at(file, line, e, ZN_E_NOMEM, ZN_NOMEM_MSG);
    last_fail.pending = 0;
    return zn_err_at(file, line, e, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu bytes for %s)", last_fail.bytes,
                     cat_name[last_fail.cat]);
}

void zn_free_each(void *const *p, size_t n) {
    for (size_t i = 0; i < n; i++) free(p[i]);
}
