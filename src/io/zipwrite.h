/* zipwrite.h: the zip container of a torch.save file, written as torch
 * writes it (spec Z-DSCK-009): every entry stored uncompressed, its bytes
 * aligned to 64 in the file (torch pads the local header's extra field),
 * the central directory and end record after them, ZIP64 records where a
 * size, an offset or the count needs them. The file goes through the atomic
 * writer (core/fileio.h): complete under its name, or not there. */
#ifndef ZN_ZIPWRITE_H
#define ZN_ZIPWRITE_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "core/fileio.h"

typedef struct {
    char *name;
    uint64_t size, local;   /* bytes, and where its local header starts */
    uint32_t crc;
} ZnZipWEntry;

typedef struct {
    ZnWriter *w;
    char *path;
    uint64_t at;            /* bytes written so far */
    ZnZipWEntry *e;
    int n, cap;
    uint64_t zip64_at;      /* sizes and offsets from here on take ZIP64 fields (0xFFFFFFFF; tests lower it) */
} ZnZipW;

/* One run of an entry's bytes: len bytes at p, or len zero bytes (p NULL). */
typedef struct {
    const void *p;
    size_t len;
} ZnZipPart;

int zn_zipw_open(ZnZipW *z, const char *path, ZnErr *err);
/* Entry name made of the parts, in order. */
int zn_zipw_add(ZnZipW *z, const char *name, const ZnZipPart *parts, int nparts, ZnErr *err);
/* The directory and end records; then the file is renamed into place. */
int zn_zipw_commit(ZnZipW *z, ZnErr *err);
/* Drops the file (nothing is left under its name); z may be half-built. */
void zn_zipw_abort(ZnZipW *z);

#endif
