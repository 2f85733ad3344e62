/* err.c: filling ZnErr messages. */
#include "core/err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* set once by the CLI before any thread starts, read when printing */
static int verbose;

void zn_err_set_verbose(int on) { verbose = on; }

/* e's message from fmt, after "SRC: " where src is given */
static void vset(ZnErr *e, const char *file, int line, int code, const char *src, const char *fmt, va_list ap) {
    int k = src ? snprintf(e->msg, sizeof e->msg, "%s: ", src) : 0;
    if (k < 0 || (size_t)k >= sizeof e->msg) k = 0;
    vsnprintf(e->msg + k, sizeof e->msg - (size_t)k, fmt, ap);
    zn_msg_escape(e->msg, sizeof e->msg);
    e->code = code;
    e->file = file;
    e->line = line;
}

int zn_err_at(const char *file, int line, ZnErr *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vset(e, file, line, code, NULL, fmt, ap);
        va_end(ap);
    }
    return code;
}

int zn_err_in(const char *file, int line, ZnErr *e, int code, const char *src, const char *fmt, ...) {
    if (!e) return code;
    va_list ap;
    va_start(ap, fmt);
    vset(e, file, line, code, src, fmt, ap);
    va_end(ap);
    return code;
}

void zn_err_print(FILE *f, const char *what, const ZnErr *e) {
    if (verbose && e->file) fprintf(f, "zinc: error: %s%s (at %s:%d)\n", what, e->msg, e->file, e->line);
    else fprintf(f, "zinc: error: %s%s\n", what, e->msg);
}

int zn_err_prefix(ZnErr *e, const char *fmt, ...) {
    if (!e) return ZN_E_INTERNAL;
    char pre[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    /* prefix, then as much of the old message as still fits */
    size_t np = strlen(pre), no = strnlen(old, sizeof old - 1);
    if (np > sizeof e->msg - 1) np = sizeof e->msg - 1;
    if (no > sizeof e->msg - 1 - np) no = sizeof e->msg - 1 - np;
    memcpy(e->msg, pre, np);
    memcpy(e->msg + np, old, no);
    e->msg[np + no] = 0;
    zn_msg_escape(e->msg, sizeof e->msg);
    return e->code;
}

size_t zn_utf8_len(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;         /* overlong */
        if (c == 0xED) hi = 0x9F;         /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;         /* overlong */
        if (c == 0xF4) hi = 0x8F;         /* above U+10FFFF */
    } else return 0;
    if (n < len) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return len;
}

void zn_msg_escape(char *s, size_t cap) {
    char out[sizeof ((ZnErr *)0)->msg];
    if (cap > sizeof out) cap = sizeof out;
    if (!cap) return;
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        /* k: the bytes of one printable character kept as they are; 0: escape one byte */
        size_t k = p[i] < 0x20 || p[i] == 0x7f ? 0 : zn_utf8_len(p + i, n - i);
        if (o + (k ? k : 4) > cap - 1) break;   /* what no longer fits is cut, never half a character */
        if (k) {
            memcpy(out + o, p + i, k);
            o += k, i += k;
        } else {
            snprintf(out + o, 5, "\\x%02x", p[i++]);
            o += 4;
        }
    }
    out[o] = 0;
    memcpy(s, out, o + 1);
}
