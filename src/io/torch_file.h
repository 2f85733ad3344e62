/* torch_file.h: one torch.save file, opened without running anything (spec
 * Z-DSCK-003). The zip (zipread.h) holds ARCHIVE/data.pkl, a pickle
 * (pickle.h) whose tensors are calls to torch._utils._rebuild_tensor_v2
 * over persistent ids naming storages ARCHIVE/data/KEY. zn_pt_tensor turns
 * such a call into a ZnPtTensor (element type, shape, stride, offset, the
 * storage's zip entry), checked against the storage's bytes; zn_pt_read
 * reads a run of its elements with pread. No storage is read until a
 * caller asks for it. */
#ifndef ZN_TORCH_FILE_H
#define ZN_TORCH_FILE_H
#include <stdint.h>
#include "core/dtype.h"
#include "core/err.h"
#include "io/pickle.h"
#include "io/zipread.h"

#define ZN_PT_MAX_DIMS 8

/* The element types of torch's typed storages. */
typedef enum {
    ZN_PT_F32 = 0, ZN_PT_F16, ZN_PT_BF16, ZN_PT_F64,
    ZN_PT_I64, ZN_PT_I32, ZN_PT_I16, ZN_PT_I8, ZN_PT_U8, ZN_PT_BOOL, ZN_PT_TYPE_N
} ZnPtType;

typedef struct {
    ZnPtType type;
    int ndim;
    int64_t shape[ZN_PT_MAX_DIMS];
    int64_t stride[ZN_PT_MAX_DIMS];
    uint64_t numel;               /* the product of shape (1 for a scalar) */
    uint64_t offset;              /* storage offset, in elements */
    const ZnZipEntry *storage;    /* ARCHIVE/data/KEY */
    int contiguous;               /* row-major strides (sizes of 1 and empty tensors aside) */
} ZnPtTensor;

typedef struct {
    ZnZip zip;
    char *archive;                /* the folder every entry sits in: "archive" or the file's stem */
    ZnPickle pk;
    ZnPy *root;                   /* data.pkl's value */
} ZnPt;

/* Opens path, checks it says little-endian, loads data.pkl. ZN_E_IO when
 * the file cannot be read, ZN_E_CORRUPT when it is not a torch.save file. */
int zn_pt_open(ZnPt *f, const char *path, ZnErr *err);
void zn_pt_close(ZnPt *f);
/* v as a tensor: a _rebuild_tensor_v2 call, or one wrapped by
 * _rebuild_parameter or _rebuild_from_type_v2. what names the value in
 * messages ("optimizer_state_dict.fp32_flat_groups[0]"). ZN_E_CORRUPT
 * when v is no tensor or reaches past its storage. */
int zn_pt_tensor(const ZnPt *f, const ZnPy *v, const char *what, ZnPtTensor *t, ZnErr *err);
/* Elements [first, first+n) of a contiguous tensor into dst, raw. */
int zn_pt_read(const ZnPt *f, const ZnPtTensor *t, uint64_t first, uint64_t n, void *dst, ZnErr *err);

/* The same run announced to the kernel, to be read soon (WILLNEED). */
void zn_pt_advise(const ZnPt *f, const ZnPtTensor *t, uint64_t first, uint64_t n);

size_t zn_pt_type_size(ZnPtType t);
const char *zn_pt_type_name(ZnPtType t);   /* torch's: "float32", "bfloat16", "int64", ... */
/* The ZnDtype of a floating type (F32, F16, BF16, F64), or ZN_DTYPE_N. */
ZnDtype zn_pt_float_dtype(ZnPtType t);

#endif
