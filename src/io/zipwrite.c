/* zipwrite.c: torch.save's zip, written (spec Z-DSCK-009). The CRC of an
 * entry is computed over its parts before its local header is written, so
 * the headers hold final values and the file is written front to back. */
#include "io/zipwrite.h"
#include <stdlib.h>
#include <string.h>
#include "core/alloc.h"
#include "io/zipread.h"

enum { ALIGN = 64, LOCAL_LEN = 30, CENTRAL_LEN = 46 };

static void le16(unsigned char *b, uint32_t v) { b[0] = (unsigned char)v; b[1] = (unsigned char)(v >> 8); }
static void le32(unsigned char *b, uint32_t v) { le16(b, v & 0xFFFF); le16(b + 2, v >> 16); }
static void le64(unsigned char *b, uint64_t v) { le32(b, (uint32_t)v); le32(b + 4, (uint32_t)(v >> 32)); }

static int put(ZnZipW *z, const void *p, size_t n, ZnErr *err) {
    int rc = zn_writer_write(z->w, p, n, err);
    if (!rc) z->at += n;
    return rc;
}
static int zeros(ZnZipW *z, size_t n, ZnErr *err) {
    static const unsigned char zero[4096];
    int rc = 0;
    while (n && !rc) {
        size_t k = n < sizeof zero ? n : sizeof zero;
        rc = put(z, zero, k, err);
        n -= k;
    }
    return rc;
}

int zn_zipw_open(ZnZipW *z, const char *path, ZnErr *err) {
    memset(z, 0, sizeof *z);
    z->zip64_at = 0xFFFFFFFFu;
    if (!(z->path = zn_malloc(ZN_HOST_IO, strlen(path) + 1))) return zn_nomem(err);
    strcpy(z->path, path);
    int rc = zn_writer_open(&z->w, path, err);
    if (rc) zn_zipw_abort(z);
    return rc;
}

void zn_zipw_abort(ZnZipW *z) {
    zn_writer_abort(z->w);
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z->path);
    memset(z, 0, sizeof *z);
}

int zn_zipw_add(ZnZipW *z, const char *name, const ZnZipPart *parts, int nparts, ZnErr *err) {
    if (zn_grow(ZN_HOST_IO, &z->e, &z->cap, z->n + 1, sizeof *z->e)) return zn_nomem(err);
    ZnZipWEntry *e = &z->e[z->n];
    memset(e, 0, sizeof *e);
    if (!(e->name = zn_malloc(ZN_HOST_IO, strlen(name) + 1))) return zn_nomem(err);
    strcpy(e->name, name);
    z->n++;
    static const unsigned char zero[4096];
    for (int i = 0; i < nparts; i++) {
        e->size += parts[i].len;
        if (parts[i].p) e->crc = zn_crc32(e->crc, parts[i].p, parts[i].len);
        else
            for (size_t left = parts[i].len; left;) {
                size_t k = left < sizeof zero ? left : sizeof zero;
                e->crc = zn_crc32(e->crc, zero, k);
                left -= k;
            }
    }
    e->local = z->at;
    const size_t nlen = strlen(name);
    const int big = e->size >= z->zip64_at;
    /* extra: ZIP64 sizes where needed, then torch's "FB" padding that puts
       the entry's first byte on a multiple of 64 */
    unsigned char x[20 + 4 + ALIGN];
    size_t xn = 0;
    if (big) {
        le16(x, 0x0001);
        le16(x + 2, 16);
        le64(x + 4, e->size);
        le64(x + 12, e->size);
        xn = 20;
    }
    uint64_t data_at = z->at + LOCAL_LEN + nlen + xn + 4;
    size_t pad = (size_t)((ALIGN - data_at % ALIGN) % ALIGN);
    le16(x + xn, 0x4246);   /* "FB" */
    le16(x + xn + 2, (uint32_t)pad);
    memset(x + xn + 4, 'Z', pad);
    xn += 4 + pad;
    unsigned char h[LOCAL_LEN];
    le32(h, 0x04034b50);
    le16(h + 4, big ? 45 : 20);   /* version needed */
    le16(h + 6, 0);               /* flags */
    le16(h + 8, 0);               /* stored */
    le16(h + 10, 0);              /* time */
    le16(h + 12, 0x21);           /* 1980-01-01 */
    le32(h + 14, e->crc);
    le32(h + 18, big ? 0xFFFFFFFFu : (uint32_t)e->size);
    le32(h + 22, big ? 0xFFFFFFFFu : (uint32_t)e->size);
    le16(h + 26, (uint32_t)nlen);
    le16(h + 28, (uint32_t)xn);
    int rc = put(z, h, LOCAL_LEN, err);
    if (!rc) rc = put(z, name, nlen, err);
    if (!rc) rc = put(z, x, xn, err);
    for (int i = 0; i < nparts && !rc; i++)
        rc = parts[i].p ? put(z, parts[i].p, parts[i].len, err) : zeros(z, parts[i].len, err);
    return rc;
}

static int central(ZnZipW *z, const ZnZipWEntry *e, ZnErr *err) {
    const int big_size = e->size >= z->zip64_at, big_off = e->local >= z->zip64_at;
    unsigned char x[4 + 24];
    size_t xn = 0;
    if (big_size || big_off) {   /* in the order the format lists them: size, compressed size, offset */
        size_t k = 4;
        if (big_size) { le64(x + k, e->size); le64(x + k + 8, e->size); k += 16; }
        if (big_off) { le64(x + k, e->local); k += 8; }
        le16(x, 0x0001);
        le16(x + 2, (uint32_t)(k - 4));
        xn = k;
    }
    const size_t nlen = strlen(e->name);
    unsigned char h[CENTRAL_LEN] = {0};
    le32(h, 0x02014b50);
    le16(h + 4, 45);   /* made by */
    le16(h + 6, xn ? 45 : 20);
    le16(h + 14, 0x21);
    le32(h + 16, e->crc);
    le32(h + 20, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
    le32(h + 24, big_size ? 0xFFFFFFFFu : (uint32_t)e->size);
    le16(h + 28, (uint32_t)nlen);
    le16(h + 30, (uint32_t)xn);
    le32(h + 42, big_off ? 0xFFFFFFFFu : (uint32_t)e->local);
    int rc = put(z, h, CENTRAL_LEN, err);
    if (!rc) rc = put(z, e->name, nlen, err);
    if (!rc && xn) rc = put(z, x, xn, err);
    return rc;
}

int zn_zipw_commit(ZnZipW *z, ZnErr *err) {
    const uint64_t cd_off = z->at;
    int rc = 0;
    for (int i = 0; i < z->n && !rc; i++) rc = central(z, &z->e[i], err);
    const uint64_t cd_size = z->at - cd_off, count = (uint64_t)z->n;
    const int big = cd_off >= z->zip64_at || cd_size >= z->zip64_at || count >= 0xFFFF;
    if (!rc && big) {   /* the ZIP64 end record and its locator */
        const uint64_t rec_at = z->at;
        unsigned char r[56] = {0}, l[20] = {0};
        le32(r, 0x06064b50);
        le64(r + 4, 44);   /* the record's size past this field */
        le16(r + 12, 45);
        le16(r + 14, 45);
        le64(r + 24, count);
        le64(r + 32, count);
        le64(r + 40, cd_size);
        le64(r + 48, cd_off);
        le32(l, 0x07064b50);
        le64(l + 8, rec_at);
        le32(l + 16, 1);   /* disks */
        rc = put(z, r, sizeof r, err);
        if (!rc) rc = put(z, l, sizeof l, err);
    }
    unsigned char e[22] = {0};
    le32(e, 0x06054b50);
    le16(e + 8, big ? 0xFFFF : (uint32_t)count);
    le16(e + 10, big ? 0xFFFF : (uint32_t)count);
    le32(e + 12, big ? 0xFFFFFFFFu : (uint32_t)cd_size);
    le32(e + 16, big ? 0xFFFFFFFFu : (uint32_t)cd_off);
    if (!rc) rc = put(z, e, sizeof e, err);
    if (!rc) {
        rc = zn_writer_commit(z->w, err);   /* frees the writer whatever happens */
        z->w = NULL;
    }
    zn_zipw_abort(z);
    return rc;
}
