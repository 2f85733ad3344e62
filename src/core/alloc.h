/* alloc.h: zinc's host allocations. Every malloc/calloc/realloc/strdup of
 * src/ and sim/ goes through these with a category (who holds the memory),
 * so that a failure can say what it was for and the per-category counts
 * show where a run allocates (spec Z-ERR-002). Memory from them is freed
 * with free(). The device's own memory (device/device.h) has its own
 * accounting by tensor kind; this is the host side of the process. */
#ifndef ZN_ALLOC_H
#define ZN_ALLOC_H
#include <stddef.h>
#include "core/err.h"

typedef enum {
    ZN_HOST_CORE = 0,   /* config, layout, plan, file reading */
    ZN_HOST_ENGINE,     /* the engine's host scratch, data, the model */
    ZN_HOST_COMM,       /* communicators, collective buffers, the store */
    ZN_HOST_IO,         /* checkpoints, safetensors, traces, plots */
    ZN_HOST_APP,        /* runs, results, processes, the CLI */
    ZN_HOST_NCAT
} ZnHostCat;

void *zn_malloc(ZnHostCat cat, size_t n);
void *zn_calloc(ZnHostCat cat, size_t count, size_t size);
void *zn_realloc(ZnHostCat cat, void *p, size_t n);
char *zn_strdup(ZnHostCat cat, const char *s);
char *zn_strndup(ZnHostCat cat, const char *s, size_t n);   /* at most n bytes of s, then a NUL */
/* An array *pp of *cap elements of size bytes grown (doubling, from 8) to
 * hold at least need; 0, or -1 with the array as it was. pp is the
 * address of the array's pointer. */
int zn_grow(ZnHostCat cat, void *pp, int *cap, int need, size_t size);

/* Points p at n zeroed elements of its own type; true where that worked.
 * For a set of arrays made all or none: ZN_NEW_ARRAY(c, a, n) &&
 * ZN_NEW_ARRAY(c, b, n) && ... stops at the first failure, and the caller
 * frees what was made (free(NULL) is nothing). */
#define ZN_NEW_ARRAY(cat, p, n) (((p) = zn_calloc((cat), (n), sizeof *(p))) != NULL)

/* Bytes a writer builds in memory (a pickle, a safetensors header), grown
 * by doubling as they are appended. The first failed allocation sticks:
 * the bytes are then incomplete and later appends do nothing, so a writer
 * checks `failed` once at the end. Zeroed is empty; free(p) frees it. */
typedef struct {
    unsigned char *p;
    size_t n, cap;
    int failed;
} ZnBytes;
void zn_bytes_put(ZnHostCat cat, ZnBytes *b, const void *src, size_t n);

/* What a category has asked for since the process started: calls,
 * bytes requested, calls that failed (all threads; atomic counters). */
typedef struct { long calls, failed; unsigned long long bytes; } ZnHostAllocStats;
ZnHostAllocStats zn_host_alloc_stats(ZnHostCat cat);
const char *zn_host_cat_name(ZnHostCat cat);

/* Frees every pointer of a list (NULLs allowed): ZN_FREE_ALL(a, b, c). */
void zn_free_each(void *const *p, size_t n);
#define ZN_FREE_ALL(...) \
    zn_free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

#endif
