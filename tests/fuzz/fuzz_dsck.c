/* fuzz_dsck.c: bytes -> DeepSpeed checkpoint readers (spec Z-FUZZ-011,
 * Z-DSCK-001, Z-DSCK-002). The bytes are run as a pickle
 * (zn_pickle_load, then zn_py_repr over what it built) and, through a memfd
 * opened as /proc/self/fd (the reader's own pread path), as a torch.save
 * zip (zn_zip_open, every entry's CRC checked, each data.pkl entry read and
 * run as a pickle), and as a torch.save file (zn_pt_open, every call in
 * its pickle tried as a tensor, the first elements of each read: Z-DSCK-003).
 * Every error must be a clean one (fuzz_check_err); a
 * crash, leak or sanitizer report is a defect. */
#include "fuzz.h"
#include "io/pickle.h"
#include "io/torch_file.h"
#include "io/zipread.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_memfd_open("fuzz.pt");
    return 0;
}

static void run_pickle(const uint8_t *p, size_t n, const char *where) {
    ZnPickle pk;
    ZnPy *root;
    ZnErr err = {0};
    int rc = zn_pickle_load(p, n, where, &pk, &root, &err);
    fuzz_check_err(rc, &err, "pickle");
    if (rc) return;
    static char buf[1 << 14];
    zn_py_repr(root, buf, sizeof buf);
    zn_pickle_free(&pk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_pickle(data, size, "input");
    const char *path = fuzz_memfd_put(data, size);
    ZnZip z;
    ZnErr err = {0};
    int rc = zn_zip_open(&z, path, &err);
    fuzz_check_err(rc, &err, "zip open");
    if (rc) return 0;
    for (int i = 0; i < z.n; i++) {
        const ZnZipEntry *e = &z.e[i];
        fuzz_check_err(zn_zip_check_crc(&z, e, &err), &err, "zip crc");
        const size_t nl = strlen(e->name);
        if (nl < 8 || strcmp(e->name + nl - 8, "data.pkl") || e->size > (1u << 20)) continue;
        uint8_t *b = malloc(e->size + 1);
        if (!b) continue;
        rc = zn_zip_read(&z, e, 0, b, e->size, &err);
        fuzz_check_err(rc, &err, "zip read");
        if (!rc) run_pickle(b, e->size, e->name);
        free(b);
    }
    zn_zip_close(&z);
    ZnPt f;
    rc = zn_pt_open(&f, path, &err);
    fuzz_check_err(rc, &err, "torch open");
    if (rc) return 0;
    for (long i = 0; i < f.pk.n; i++) {
        if (f.pk.all[i]->kind != ZN_PY_CALL) continue;
        ZnPtTensor t;
        rc = zn_pt_tensor(&f, f.pk.all[i], "t", &t, &err);
        fuzz_check_err(rc, &err, "tensor");
        if (rc || !t.contiguous) continue;
        static uint64_t buf[64];
        const uint64_t n = t.numel < 64 ? t.numel : 64;
        fuzz_check_err(zn_pt_read(&f, &t, 0, n, buf, &err), &err, "tensor read");
    }
    zn_pt_close(&f);
    return 0;
}
