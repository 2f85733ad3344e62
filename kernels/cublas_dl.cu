/* cublas_dl.cu: loading cuBLAS on first use (see cublas_dl.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cublas_dl.h"

static ZnCublas api;
static int loaded;       /* 1 ok, -1 failed */
static char why[512];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;   /* ranks are threads */

static void load(void) {
    const char *path = getenv("ZINC_CUBLAS_LIB");
    const char *name = path && *path ? path : "libcublas.so.13";
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h && !(path && *path)) h = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, sizeof why, "cannot load %s (%s); the CUDA toolkit's lib64 or PyTorch's nvidia/cublas/lib "
                 "must be on LD_LIBRARY_PATH, or set ZINC_CUBLAS_LIB", name, dlerror());
        loaded = -1;
        return;
    }
    struct { const char *n; void **slot; } s[] = {
        {"cublasCreate_v2", (void **)&api.Create}, {"cublasDestroy_v2", (void **)&api.Destroy},
        {"cublasSetStream_v2", (void **)&api.SetStream}, {"cublasSetMathMode", (void **)&api.SetMathMode},
        {"cublasGetStatusString", (void **)&api.GetStatusString}, {"cublasSgemm_v2", (void **)&api.Sgemm},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        if (!(*s[i].slot = dlsym(h, s[i].n))) {
            snprintf(why, sizeof why, "%s has no %s", name, s[i].n);
            loaded = -1;
            return;
        }
    }
    loaded = 1;
}

const ZnCublas *zn_cublas(ZnErr *err) {
    pthread_mutex_lock(&mu);
    if (!loaded) load();
    int ok = loaded == 1;
    pthread_mutex_unlock(&mu);
    if (!ok) {
        if (err) zn_err(err, ZN_E_USAGE, "cuBLAS: %s", why);
        return NULL;
    }
    return &api;
}
