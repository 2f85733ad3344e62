/* pickle_write.h: pickles as torch.save writes them (protocol 2), for the
 * DeepSpeed checkpoints zinc writes (spec Z-DSCK-009). The writer emits
 * opcodes into a growing buffer in the order a caller builds the value:
 * containers are opened and closed around their items, a tensor is a
 * _rebuild_tensor_v2 call over a storage key, a DeepSpeed object (its loss
 * scaler, fragment_address) is NEWOBJ + BUILD of its attribute dict, as
 * Python's pickler writes them. No memo: every value is written where it
 * stands. The first failed allocation sticks; zn_pw_finish reports it. */
#ifndef ZN_PICKLE_WRITE_H
#define ZN_PICKLE_WRITE_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "core/alloc.h"

typedef ZnBytes ZnPw;   /* the pickle's bytes so far */

void zn_pw_begin(ZnPw *w);                   /* PROTO 2 */
int zn_pw_finish(ZnPw *w, ZnErr *err);       /* STOP; ZN_E_NOMEM if any write failed (w is freed then) */
void zn_pw_free(ZnPw *w);

void zn_pw_none(ZnPw *w);
void zn_pw_bool(ZnPw *w, int v);
void zn_pw_int(ZnPw *w, long long v);
void zn_pw_float(ZnPw *w, double v);
void zn_pw_str(ZnPw *w, const char *s);
/* A string key and its value, in a dict being written. */
void zn_pw_kv_int(ZnPw *w, const char *key, long long v);
void zn_pw_kv_float(ZnPw *w, const char *key, double v);
void zn_pw_kv_bool(ZnPw *w, const char *key, int v);
/* A dict: open, then key and value pairs, then close. An OrderedDict is
 * collections.OrderedDict() filled the same way. */
void zn_pw_dict(ZnPw *w);
void zn_pw_ordered_dict(ZnPw *w);
void zn_pw_dict_end(ZnPw *w);
void zn_pw_list(ZnPw *w);
void zn_pw_list_end(ZnPw *w);
void zn_pw_tuple(ZnPw *w);
void zn_pw_tuple_end(ZnPw *w);
/* torch.Size(shape) */
void zn_pw_size(ZnPw *w, int ndim, const int64_t *shape);
/* A contiguous tensor of shape over storage `key` (ARCHIVE/data/KEY) of
 * storage_numel elements of torch storage type `storage` ("FloatStorage",
 * "BFloat16Storage", "HalfStorage"), starting at element 0. */
void zn_pw_tensor(ZnPw *w, const char *storage, long key, uint64_t storage_numel, int ndim, const int64_t *shape);
/* An object of class "module name" made by NEWOBJ and given its attributes
 * by BUILD: open, then the attribute dict's pairs, then close. */
void zn_pw_object(ZnPw *w, const char *cls);
void zn_pw_object_end(ZnPw *w);
/* cls(arg): an enum member by value (ZeroStageEnum(2)). */
void zn_pw_enum(ZnPw *w, const char *cls, long long arg);
/* A global as a value ("torch float16": a dtype). */
void zn_pw_global(ZnPw *w, const char *name);

#endif
