/* err.c: filling ZnErr messages. */
#include "err.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int zn_err(ZnErr *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        zn_msg_escape(e->msg, sizeof e->msg);
        e->code = code;
    }
    return code;
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

static int is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

void zn_msg_escape(char *s, size_t cap) {
    if (!cap) return;
    size_t n = strlen(s), keep = 0, out = 0;
    /* how much of s fits once escaped */
    for (; keep < n; keep++) {
        size_t w = is_control((unsigned char)s[keep]) ? 4 : 1;
        if (out + w > cap - 1) break;
        out += w;
    }
    if (out == keep && keep == n) return;   /* nothing to escape */
    s[out] = 0;
    /* right to left: the output position never falls below the input's */
    static const char hex[] = "0123456789abcdef";
    for (size_t i = keep, o = out; i-- > 0;) {
        unsigned char c = (unsigned char)s[i];
        if (!is_control(c)) { s[--o] = (char)c; continue; }
        o -= 4;
        s[o] = '\\';
        s[o + 1] = 'x';
        s[o + 2] = hex[c >> 4];
        s[o + 3] = hex[c & 15];
    }
}
