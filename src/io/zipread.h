/* zipread.h: the zip container of torch.save files, read in place (spec
 * Z-DSCK-001). torch.save writes a zip whose entries are stored, not
 * compressed: data.pkl, the storages data/<key>, a few small records. This
 * reader maps the central directory, checks every entry against the file,
 * and reads entries (or slices of them) with pread: nothing is loaded that a
 * caller does not ask for. It refuses what torch never writes (compressed
 * or encrypted entries, split archives) with an error naming the file, the
 * entry and the byte offset. */
#ifndef ZN_ZIPREAD_H
#define ZN_ZIPREAD_H
#include <stdint.h>
#include "core/err.h"

typedef struct {
    char *name;          /* NUL-ended; no NUL inside */
    uint64_t offset;     /* of the entry's bytes in the file (past its local header) */
    uint64_t size;       /* stored, so compressed size = uncompressed size */
    uint32_t crc32;      /* as the central directory records it */
} ZnZipEntry;

typedef struct {
    char *path;
    int fd;
    uint64_t file_size;
    int n;
    ZnZipEntry *e;       /* in central-directory order */
} ZnZip;

/* Opens path and reads its directory. ZN_E_IO where the file cannot be
 * read, ZN_E_CORRUPT where it is not a zip torch could have written. */
int zn_zip_open(ZnZip *z, const char *path, ZnErr *err);
void zn_zip_close(ZnZip *z);
/* The entry called name, or NULL. */
const ZnZipEntry *zn_zip_find(const ZnZip *z, const char *name);
/* n bytes of entry e from byte off of it into buf; a range past the
 * entry's end is ZN_E_CORRUPT naming the entry. */
int zn_zip_read(const ZnZip *z, const ZnZipEntry *e, uint64_t off, void *buf, uint64_t n, ZnErr *err);
/* Reads all of e in chunks and compares its CRC-32 with the directory's
 * (the check `zinc ckpt inspect` makes of every file). */
int zn_zip_check_crc(const ZnZip *z, const ZnZipEntry *e, ZnErr *err);
/* The CRC-32 (ISO-HDLC, zip's) of n bytes, continuing from crc (0 to start). */
uint32_t zn_crc32(uint32_t crc, const void *p, size_t n);

#endif
