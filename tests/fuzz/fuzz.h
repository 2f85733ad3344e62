/* fuzz.h: what the harnesses in tests/fuzz/ share (spec Z-FUZZ-*).
 *
 * Each fuzz_TARGET.c defines LLVMFuzzerInitialize and LLVMFuzzerTestOneInput.
 * `make fuzz` links it with clang's libFuzzer; `make fuzz-replay` links it
 * with replay_main.c (gcc, ASan/UBSan), which feeds it every file of the
 * target's corpus tests/fuzz/TARGET/. A harness treats its bytes as hostile
 * input to one reader, frees everything it was given, and turns a broken
 * promise of err.h (an error without its code or message, a message that is
 * not one printable line of UTF-8) into an abort, which both drivers report. */
#ifndef ZN_FUZZ_H
#define ZN_FUZZ_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/err.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* zinc prints warnings (a config's unknown keys) on stdio's stderr; a
 * fuzzer's millions of inputs would flood the terminal with them. glibc
 * lets a program assign stderr, so they go to /dev/null, while sanitizer
 * reports (written to file descriptor 2 itself) and libFuzzer's own lines
 * (its own stream) still show. */
static inline void fuzz_quiet(void) {
    FILE *null = fopen("/dev/null", "w");
    if (null) stderr = null;
}

/* rc is what a reader returned with err: 0, or a ZN_E_* code that err holds
 * too, with a message that is one line of printable UTF-8 text (what main()
 * prints after "zinc: error: "). */
static inline void fuzz_check_err(int rc, const ZnErr *err, const char *what) {
    if (rc == 0) return;
    const char *bad = NULL;
    if (rc != err->code) bad = "returned code differs from err->code";
    else if (rc < ZN_E_USAGE || rc > ZN_E_INTERNAL) bad = "not a ZN_E_* code";
    else if (!err->msg[0]) bad = "empty message";
    const unsigned char *m = (const unsigned char *)err->msg;
    for (size_t i = 0, n = strlen(err->msg), k; !bad && i < n; i += k) {
        k = zn_utf8_len(m + i, n - i);
        if (m[i] < 0x20 || m[i] == 0x7f) bad = "control character in the message";
        else if (!k) bad = "the message is not UTF-8";
    }
    if (!bad) return;
    dprintf(2, "fuzz: %s: %s (rc %d, code %d): %s\n", what, bad, rc, err->code, err->msg);
    abort();
}

/* For readers that take a path and pread: the input goes into a memfd (an
 * anonymous regular file) opened through /proc/self/fd, the real code path
 * with no file on disk. fuzz_memfd_open once (LLVMFuzzerInitialize), then
 * fuzz_memfd_put for each input; both return the path. */
#include <sys/mman.h>
#include <unistd.h>
static inline char *fuzz_memfd_path(void) {
    static char path[64];
    return path;
}
static inline int *fuzz_memfd(void) {
    static int fd = -1;
    return &fd;
}
static inline const char *fuzz_memfd_open(const char *name) {
    if ((*fuzz_memfd() = memfd_create(name, MFD_CLOEXEC)) < 0) {
        perror("memfd_create");
        exit(1);
    }
    snprintf(fuzz_memfd_path(), 64, "/proc/self/fd/%d", *fuzz_memfd());
    return fuzz_memfd_path();
}
static inline const char *fuzz_memfd_put(const uint8_t *data, size_t size) {
    const int fd = *fuzz_memfd();
    if (ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("memfd write");
        exit(1);
    }
    return fuzz_memfd_path();
}

#endif
