/* zipread.c: torch.save's zip container, read in place (spec Z-DSCK-001).
 *
 * The layout (PKWARE APPNOTE 6.3): entries, each a local header and its
 * bytes; then the central directory, one record per entry; then, at the
 * end, the end-of-central-directory record (EOCD), preceded by a ZIP64
 * locator and record where counts or offsets outgrow 16/32 bits. The
 * central directory is the truth (sizes in a local header may be zero when
 * a data descriptor follows); the local header only says where the bytes
 * start (torch pads its extra field so storages start 64-byte aligned). */
#include "io/zipread.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/alloc.h"
#include "core/fileio.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define EOCD_LEN 22
#define LOC64_LEN 20
#define EOCD64_LEN 56
#define CENTRAL_LEN 46
#define LOCAL_LEN 30
/* a directory this large is no checkpoint's: refused before it is allocated */
#define MAX_DIRECTORY ((uint64_t)256 << 20)

static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t u32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t u64(const unsigned char *p) { return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32; }

/* ---------------------------------------------------------------- CRC-32 */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t zn_crc32(uint32_t crc, const void *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ------------------------------------------------------------ directory */

/* The EOCD: the last SIG_EOCD whose comment ends exactly at the file's end
 * (a comment may itself hold the signature's bytes). *at: its offset. */
static int find_eocd(ZnZip *z, unsigned char *rec, uint64_t *at, ZnErr *err) {
    const uint64_t size = z->file_size;
    if (size < EOCD_LEN)
        return zn_err(err, ZN_E_CORRUPT, "%s: not a zip archive (%llu bytes, shorter than an end record)", z->path,
                      (unsigned long long)size);
    const uint64_t span = size < EOCD_LEN + 65535 ? size : EOCD_LEN + 65535;
    unsigned char *tail = zn_malloc(ZN_HOST_IO, (size_t)span);
    if (!tail) return zn_nomem(err);
    int rc = zn_pread_full(z->fd, tail, (size_t)span, size - span, z->path, err);
    if (rc) {
        free(tail);
        return rc;
    }
    for (uint64_t i = span - EOCD_LEN + 1; i-- > 0;) {
        if (u32(tail + i) == SIG_EOCD && i + EOCD_LEN + u16(tail + i + 20) == span) {
            memcpy(rec, tail + i, EOCD_LEN);
            *at = size - span + i;
            free(tail);
            return 0;
        }
    }
    free(tail);
    return zn_err(err, ZN_E_CORRUPT,
                  "%s: not a zip archive (no end-of-central-directory record in its last %llu bytes)", z->path,
                  (unsigned long long)span);
}

/* The directory's place and count, from the EOCD or its ZIP64 record. */
static int directory_span(ZnZip *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count, uint64_t *end, ZnErr *err) {
    unsigned char r[EOCD_LEN] = {0};
    uint64_t at = 0;
    int rc = find_eocd(z, r, &at, err);
    if (rc) return rc;
    if (u16(r + 4) != 0 || u16(r + 6) != 0)
        return zn_err(err, ZN_E_CORRUPT, "%s: a split (multi-disk) zip archive at byte %llu; torch.save writes one file",
                      z->path, (unsigned long long)at);
    *count = u16(r + 10);
    *cd_size = u32(r + 12);
    *cd_off = u32(r + 16);
    *end = at;
    if (at >= LOC64_LEN) {
        unsigned char l[LOC64_LEN];
        if ((rc = zn_pread_full(z->fd, l, LOC64_LEN, at - LOC64_LEN, z->path, err))) return rc;
        if (u32(l) == SIG_LOC64) {   /* ZIP64: the record it points at holds the real figures */
            const uint64_t off64 = u64(l + 8);
            unsigned char e[EOCD64_LEN];
            const int fits = off64 <= at - LOC64_LEN && at - LOC64_LEN - off64 >= EOCD64_LEN;
            if (fits && (rc = zn_pread_full(z->fd, e, EOCD64_LEN, off64, z->path, err))) return rc;   /* an I/O error */
            if (!fits || u32(e) != SIG_EOCD64)
                return zn_err(err, ZN_E_CORRUPT, "%s: the ZIP64 locator at byte %llu points at no ZIP64 end record (%llu)",
                              z->path, (unsigned long long)(at - LOC64_LEN), (unsigned long long)off64);
            *count = u64(e + 32);
            *cd_size = u64(e + 40);
            *cd_off = u64(e + 48);
            *end = off64;
        }
    }
    if (*cd_off > *end || *cd_size > *end - *cd_off)
        return zn_err(err, ZN_E_CORRUPT,
                      "%s: the central directory (%llu bytes at byte %llu) runs past its end record at byte %llu", z->path,
                      (unsigned long long)*cd_size, (unsigned long long)*cd_off, (unsigned long long)*end);
    if (*cd_size > MAX_DIRECTORY || *count > *cd_size / CENTRAL_LEN)
        return zn_err(err, ZN_E_CORRUPT, "%s: %llu entries cannot fit a central directory of %llu bytes", z->path,
                      (unsigned long long)*count, (unsigned long long)*cd_size);
    return 0;
}

/* Sizes and offset from the ZIP64 extra field where the 32-bit fields say
 * 0xFFFFFFFF (in that order: size, compressed size, local header offset). */
static int zip64_fields(const unsigned char *x, size_t xn, uint64_t *usize, uint64_t *csize, uint64_t *loc) {
    for (size_t i = 0; i + 4 <= xn;) {
        const uint16_t id = u16(x + i), len = u16(x + i + 2);
        if (i + 4 + len > xn) return -1;
        if (id == 0x0001) {
            const unsigned char *f = x + i + 4;
            size_t k = 0;
            uint64_t *want[3] = {usize, csize, loc};
            for (int j = 0; j < 3; j++) {
                if (*want[j] != 0xFFFFFFFFu) continue;
                if (k + 8 > len) return -1;
                *want[j] = u64(f + k);
                k += 8;
            }
            return 0;
        }
        i += 4 + (size_t)len;
    }
    return *usize == 0xFFFFFFFFu || *csize == 0xFFFFFFFFu || *loc == 0xFFFFFFFFu ? -1 : 0;
}

/* One central record at cd[*pos]: the entry, its bytes located and
 * checked against the file. */
static int read_entry(ZnZip *z, const unsigned char *cd, uint64_t cd_size, uint64_t cd_off, uint64_t *pos,
                      uint64_t end, ZnZipEntry *e, ZnErr *err) {
    const uint64_t at = cd_off + *pos;
    const unsigned char *c = cd + *pos;
    if (cd_size - *pos < CENTRAL_LEN || u32(c) != SIG_CENTRAL)
        return zn_err(err, ZN_E_CORRUPT, "%s: no central directory record at byte %llu", z->path,
                      (unsigned long long)at);
    const uint16_t flags = u16(c + 8), method = u16(c + 10), nlen = u16(c + 28), xlen = u16(c + 30),
                   clen = u16(c + 32);
    if (cd_size - *pos - CENTRAL_LEN < (uint64_t)nlen + xlen + clen)
        return zn_err(err, ZN_E_CORRUPT, "%s: the central record at byte %llu runs past the directory", z->path,
                      (unsigned long long)at);
    const char *name = (const char *)c + CENTRAL_LEN;
    if (memchr(name, 0, nlen))
        return zn_err(err, ZN_E_CORRUPT, "%s: the entry name at byte %llu holds a NUL byte", z->path,
                      (unsigned long long)(at + CENTRAL_LEN));
    if (!(e->name = zn_malloc(ZN_HOST_IO, (size_t)nlen + 1))) return zn_nomem(err);
    memcpy(e->name, name, nlen);
    e->name[nlen] = 0;
    if (flags & 1)
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' (central record at byte %llu) is encrypted", z->path, e->name,
                      (unsigned long long)at);
    if (method != 0)
        return zn_err(err, ZN_E_CORRUPT,
                      "%s: entry '%s' (central record at byte %llu) is compressed (method %u); torch.save stores "
                      "entries uncompressed",
                      z->path, e->name, (unsigned long long)at, (unsigned)method);
    uint64_t usize = u32(c + 24), csize = u32(c + 20), loc = u32(c + 42);
    if (zip64_fields(c + CENTRAL_LEN + nlen, xlen, &usize, &csize, &loc))
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' (central record at byte %llu) has a broken ZIP64 field",
                      z->path, e->name, (unsigned long long)at);
    if (usize != csize)
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' is stored yet records %llu bytes stored and %llu uncompressed",
                      z->path, e->name, (unsigned long long)csize, (unsigned long long)usize);
    unsigned char l[LOCAL_LEN];
    const int fits = loc <= end && end - loc >= LOCAL_LEN;
    int rc;
    if (fits && (rc = zn_pread_full(z->fd, l, LOCAL_LEN, loc, z->path, err))) return rc;   /* an I/O error */
    if (!fits || u32(l) != SIG_LOCAL)
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s': no local header at byte %llu", z->path, e->name,
                      (unsigned long long)loc);
    e->offset = loc + LOCAL_LEN + u16(l + 26) + u16(l + 28);
    e->size = usize;
    e->crc32 = u32(c + 16);
    if (e->offset > end || e->size > end - e->offset)
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' (%llu bytes at byte %llu) runs past byte %llu, where the "
                      "directory starts: the file is truncated or damaged",
                      z->path, e->name, (unsigned long long)e->size, (unsigned long long)e->offset,
                      (unsigned long long)end);
    *pos += CENTRAL_LEN + (uint64_t)nlen + xlen + clen;
    return 0;
}

int zn_zip_open(ZnZip *z, const char *path, ZnErr *err) {
    memset(z, 0, sizeof *z);
    z->fd = -1;
    if (!(z->path = zn_malloc(ZN_HOST_IO, strlen(path) + 1))) return zn_nomem(err);
    strcpy(z->path, path);
    int rc = zn_open_read(path, &z->fd, &z->file_size, err);
    uint64_t cd_off = 0, cd_size = 0, count = 0, end = 0;
    if (!rc) rc = directory_span(z, &cd_off, &cd_size, &count, &end, err);
    unsigned char *cd = NULL;
    if (!rc && !(cd = zn_malloc(ZN_HOST_IO, (size_t)cd_size + 1))) rc = zn_nomem(err);
    if (!rc) rc = zn_pread_full(z->fd, cd, (size_t)cd_size, cd_off, path, err);
    if (!rc && !(z->e = zn_calloc(ZN_HOST_IO, (size_t)count + 1, sizeof *z->e))) rc = zn_nomem(err);
    uint64_t pos = 0;
    for (uint64_t i = 0; !rc && i < count; i++) {
        rc = read_entry(z, cd, cd_size, cd_off, &pos, cd_off, &z->e[i], err);
        z->n = (int)i + 1;   /* its name is freed with the rest */
    }
    free(cd);
    if (rc) zn_zip_close(z);
    return rc;
}

void zn_zip_close(ZnZip *z) {
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    if (z->fd >= 0) close(z->fd);
    memset(z, 0, sizeof *z);
    z->fd = -1;
}

const ZnZipEntry *zn_zip_find(const ZnZip *z, const char *name) {
    for (int i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name)) return &z->e[i];
    return NULL;
}

int zn_zip_read(const ZnZip *z, const ZnZipEntry *e, uint64_t off, void *buf, uint64_t n, ZnErr *err) {
    if (off > e->size || n > e->size - off)
        return zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' has %llu bytes; bytes %llu..%llu were asked for", z->path,
                      e->name, (unsigned long long)e->size, (unsigned long long)off, (unsigned long long)(off + n));
    return zn_pread_full(z->fd, buf, (size_t)n, e->offset + off, z->path, err);
}

int zn_zip_check_crc(const ZnZip *z, const ZnZipEntry *e, ZnErr *err) {
    enum { CHUNK = 1 << 20 };
    unsigned char *b = zn_malloc(ZN_HOST_IO, CHUNK);
    if (!b) return zn_nomem(err);
    uint32_t crc = 0;
    int rc = 0;
    for (uint64_t off = 0; off < e->size && !rc; off += CHUNK) {
        const uint64_t n = e->size - off < CHUNK ? e->size - off : CHUNK;
        if (!(rc = zn_zip_read(z, e, off, b, n, err))) crc = zn_crc32(crc, b, (size_t)n);
    }
    free(b);
    if (!rc && crc != e->crc32)
        rc = zn_err(err, ZN_E_CORRUPT, "%s: entry '%s' (%llu bytes at byte %llu) has CRC-32 %08x, its directory says %08x",
                    z->path, e->name, (unsigned long long)e->size, (unsigned long long)e->offset, crc, e->crc32);
    return rc;
}
