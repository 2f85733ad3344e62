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
    return e->code;
}
