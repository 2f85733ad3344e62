/* fuzz_safetensors.c: bytes -> zn_st_open, then every accessor (spec
 * Z-FUZZ-004, Z-ST-019). The reader takes a path and reads with pread, so
 * the bytes go into a memfd (an anonymous regular file) opened through
 * /proc/self/fd: the real code path, with no file on disk. After a
 * successful open every promise of Z-ST-020 is checked: each tensor found
 * by name, its bytes read in full, the metadata listed. */
#include "fuzz.h"
#include "io/safetensors.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_memfd_open("fuzz.safetensors");
    return 0;
}

static void check_open_file(const ZnStFile *f) {
    for (int i = 0; i < zn_st_count(f); i++) {
        const ZnStTensor *t = zn_st_tensor(f, i);
        if (!t || zn_st_find(f, t->name) != t) {
            dprintf(2, "fuzz: tensor %d not found by its name\n", i);
            abort();
        }
        size_t n = (size_t)(t->end - t->begin);
        void *buf = malloc(n ? n : 1);
        ZnErr err = {0};
        if (buf) fuzz_check_err(zn_st_read(f, t, buf, n, &err), &err, "safetensors read");
        free(buf);
    }
    for (int i = 0; i < zn_st_meta_count(f); i++) {
        const char *v = NULL, *k = zn_st_meta_at(f, i, &v);
        if (!k || !v || zn_st_meta(f, k) != v) {
            dprintf(2, "fuzz: metadata entry %d not found by its key\n", i);
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_memfd_put(data, size);
    ZnStFile *f = NULL;
    ZnErr err = {0};
    int rc = zn_st_open(&f, path, &err);
    fuzz_check_err(rc, &err, "safetensors open");
    if (!rc) check_open_file(f);
    zn_st_close(f);
    return 0;
}
