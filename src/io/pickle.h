/* pickle.h: the pickles torch.save and DeepSpeed write, read as plain data
 * (spec Z-DSCK-002). A small machine runs the opcodes of pickle protocols
 * 2 and 3 (what torch.save writes) and builds a tree of values: None,
 * bools, integers, floats, strings, bytes, lists, tuples, dicts, and, for
 * what Python would construct, a call record (the callable's name, its
 * arguments, the state BUILD gives it) that nothing ever runs. A global is
 * accepted only from an allow-list of the names DeepSpeed's checkpoints
 * hold (collections.OrderedDict becomes a dict); any other global is
 * refused with an error naming it. */
#ifndef ZN_PICKLE_H
#define ZN_PICKLE_H
#include <stddef.h>
#include "core/err.h"

typedef enum {
    ZN_PY_NONE = 0,
    ZN_PY_BOOL,
    ZN_PY_INT,      /* i (LONG1 integers beyond 64 bits are refused) */
    ZN_PY_FLOAT,    /* f */
    ZN_PY_STR,      /* s, len (UTF-8 as the pickle holds it) */
    ZN_PY_BYTES,    /* s, len */
    ZN_PY_LIST,     /* item[0..n) */
    ZN_PY_TUPLE,    /* item[0..n) */
    ZN_PY_DICT,     /* item[2k] the k-th key, item[2k+1] its value, in insertion order */
    ZN_PY_GLOBAL,   /* s: "module name" */
    ZN_PY_CALL,     /* item[0] the callable (a GLOBAL), item[1] its argument tuple, item[2] BUILD's state or NULL */
    ZN_PY_PERSID,   /* item[0]: the persistent id (torch: ('storage', type, key, location, numel)) */
} ZnPyKind;

typedef struct ZnPy {
    ZnPyKind kind;
    long long i;
    double f;
    char *s;
    size_t len;
    struct ZnPy **item;
    int n, cap;
    struct ZnPy *attrs;   /* a dict's BUILD state: an OrderedDict's attributes (torch's _metadata) */
} ZnPy;

/* Every value of one pickle, freed together (values may be shared: the
 * memo hands one value out many times). */
typedef struct {
    ZnPy **all;
    long n, cap;
} ZnPickle;

/* Runs the pickle p[0..n) into *root. where names it in messages ("FILE:
 * ENTRY"); errors give the byte offset of the opcode at fault. ZN_E_CORRUPT
 * for anything torch would not write or a global off the allow-list. */
int zn_pickle_load(const unsigned char *p, size_t n, const char *where, ZnPickle *pk, ZnPy **root, ZnErr *err);
void zn_pickle_free(ZnPickle *pk);
/* d's value for the string key, or NULL (d not a dict, or no such key). */
const ZnPy *zn_py_get(const ZnPy *d, const char *key);
/* Python's repr of v, as far as cap allows (cycles and depths past 64 print
 * "..."); for tests and `ckpt inspect`. Returns buf. */
char *zn_py_repr(const ZnPy *v, char *buf, size_t cap);

#endif
