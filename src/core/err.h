/* err.h: errors are values. A function that can fail returns 0 on success or a
 * ZN_E_* code, and fills a ZnErr with what went wrong and where (JSON path,
 * file and byte offset, rank and step). Nothing in zinc calls abort() or exit()
 * on bad input; only main() turns an error into an exit status. */
#ifndef ZN_ERR_H
#define ZN_ERR_H
#include <stddef.h>
#include <stdio.h>

enum {
    ZN_OK = 0,
    ZN_E_USAGE = 2,     /* bad config, bad flag, bad model spec: exit status 2 */
    ZN_E_IO = 3,        /* file system */
    ZN_E_CORRUPT = 4,   /* a file that is not what it claims to be */
    ZN_E_COMM = 5,      /* a collective failed, or a peer rank failed */
    ZN_E_NOMEM = 6,     /* allocation failed, or simulated capacity exceeded */
    ZN_E_NUMERIC = 7,   /* e.g. loss scale at its minimum */
    ZN_E_INTERNAL = 8,  /* a broken invariant: a bug in zinc */
};

typedef struct ZnErr {
    int code;
    char msg[1024];
    const char *file;   /* the source file and line that wrote msg (zn_err's caller) */
    int line;
} ZnErr;

/* Sets e (if not NULL) and returns code, so callers can write
 * `return zn_err(e, ZN_E_USAGE, "...", ...);`. Records the caller's file and
 * line, which `--verbose` prints after the message. */
#define zn_err(e, code, ...) zn_err_at(__FILE__, __LINE__, (e), (code), __VA_ARGS__)
int zn_err_at(const char *file, int line, ZnErr *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* zn_err with the message after "SRC: " (the file a reader was reading):
 * readers of user files define `fail(x, ...)` over it. */
#define zn_err_src(e, code, src, ...) zn_err_in(__FILE__, __LINE__, (e), (code), (src), __VA_ARGS__)
int zn_err_in(const char *file, int line, ZnErr *e, int code, const char *src, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* The one message of a failed host allocation, and its error (ZN_E_NOMEM,
 * at the caller's file and line). When this thread's last allocation
 * through core/alloc.h failed and no error has named it yet, the message
 * says its size and category: "out of host memory (4096 bytes for io)".
 * Messages that add context splice the phrase in: "%s: " ZN_NOMEM_MSG
 * " while reading it". (Defined in core/alloc.c.) */
#define ZN_NOMEM_MSG "out of host memory"
#define zn_nomem(e) zn_nomem_at(__FILE__, __LINE__, (e))
int zn_nomem_at(const char *file, int line, ZnErr *e);
/* Prepends context ("rank 2, step 7: ") to an existing message; returns e->code. */
int zn_err_prefix(ZnErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The CLI's one way to report an error: "zinc: error: <what><msg>" on f,
 * and with verbose on, " (at FILE:LINE)" where the message was written
 * (spec Z-ERR-001). what: a context such as "baseline: ", or "". */
void zn_err_print(FILE *f, const char *what, const ZnErr *e);
void zn_err_set_verbose(int on);
/* Rewrites, in place, every control character of s (bytes below 0x20 and
 * 0x7f) and every byte that is not part of a valid UTF-8 sequence as \xNN,
 * keeping s within cap bytes (at most sizeof ZnErr.msg; what no longer fits
 * is dropped at the end). zn_err and zn_err_prefix apply it to every
 * message, so a message quoting hostile input (a key "a\nb", a terminal
 * escape sequence, a stray 0xff) stays one line of printable UTF-8 text
 * (spec Z-FUZZ-006). */
void zn_msg_escape(char *s, size_t cap);
/* Length of the valid UTF-8 sequence at p (n > 0 bytes available), or 0.
 * Rejects overlong forms, surrogates and code points above U+10FFFF, as
 * Rust's str::from_utf8 does. */
size_t zn_utf8_len(const unsigned char *p, size_t n);

#endif
