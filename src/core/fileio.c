/* fileio.c: atomic file replacement (temp + fsync + rename + dir fsync),
 * bounded reads, and the process-wide I/O fault hook the crash tests use.
 * Every system call that can fail in a way a test wants to provoke goes
 * through gate() first, which counts it and may fail or "crash" it. */
#include "core/fileio.h"
#include "core/alloc.h"
#include "core/covmark.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* fault injection                                                          */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded;          /* ZINC_FAULT read, or zn_fault_set called */
static long g_ops;            /* ops counted since the last configuration */
static long g_fail_at;        /* <= 0: off */
static int g_sticky, g_crash;
static char g_bad_env[96];    /* non-empty: ZINC_FAULT was malformed (its value) */

enum { GATE_CRASH = -1 };

/* "op=N[,sticky][,crash]" -> fields; returns 0 if well formed. */
static int parse_fault(const char *s, long *at, int *sticky, int *crash) {
    *at = 0;
    *sticky = *crash = 0;
    if (strncmp(s, "op=", 3) != 0) return -1;
    char *end;
    errno = 0;
    long n = strtol(s + 3, &end, 10);
    if (errno || end == s + 3 || n <= 0 || (s[3] < '0' || s[3] > '9')) return -1;
    while (*end == ',') {
        const char *w = end + 1;
        size_t len = strcspn(w, ",");
        if (len == 6 && !strncmp(w, "sticky", 6)) *sticky = 1;
        else if (len == 5 && !strncmp(w, "crash", 5)) *crash = 1;
        else return -1;
        end = (char *)w + len;
    }
    if (*end) return -1;
    *at = n;
    return 0;
}

static void set_locked(long fail_at, int sticky, int crash) {
    g_loaded = 1;
    g_ops = 0;
    g_fail_at = fail_at;
    g_sticky = sticky;
    g_crash = crash;
    g_bad_env[0] = 0;
}

/* Applies ZINC_FAULT; the caller holds g_mu. Returns 0 or -1 if malformed. */
static int load_env_locked(void) {
    const char *s = getenv("ZINC_FAULT");
    set_locked(0, 0, 0);
    if (!s || !*s) return 0;
    long at;
    int sticky, crash;
    if (parse_fault(s, &at, &sticky, &crash)) {
        snprintf(g_bad_env, sizeof g_bad_env, "%s", s);
        return -1;
    }
    set_locked(at, sticky, crash);
    return 0;
}

void zn_fault_set(long fail_at, int sticky, int crash) {
    zn_cov_faults(fail_at > 0);   /* the coverage build's rows leave such runs out */
    pthread_mutex_lock(&g_mu);
    set_locked(fail_at, sticky, crash);
    pthread_mutex_unlock(&g_mu);
}

long zn_fault_ops(void) {
    pthread_mutex_lock(&g_mu);
    long n = g_ops;
    pthread_mutex_unlock(&g_mu);
    return n;
}

int zn_fault_from_env(ZnErr *err) {
    pthread_mutex_lock(&g_mu);
    int bad = load_env_locked();
    char val[sizeof g_bad_env];
    memcpy(val, g_bad_env, sizeof val);
    pthread_mutex_unlock(&g_mu);
    if (bad) return zn_err(err, ZN_E_USAGE, "ZINC_FAULT='%s' is not op=N[,sticky][,crash]", val);
    return ZN_OK;
}

/* Counts one op on path. Returns 0 to go ahead, an error code (err filled),
 * or GATE_CRASH: the caller must crash (after a torn write, for writes). */
static int gate(const char *path, const char *what, ZnErr *err) {
    pthread_mutex_lock(&g_mu);
    if (!g_loaded) load_env_locked();
    long op = ++g_ops;
    int hit = g_fail_at > 0 && (op == g_fail_at || (g_sticky && op > g_fail_at));
    int crash = hit && g_crash;
    char bad[sizeof g_bad_env];
    memcpy(bad, g_bad_env, sizeof bad);
    pthread_mutex_unlock(&g_mu);
    if (bad[0]) return zn_err(err, ZN_E_USAGE, "ZINC_FAULT='%s' is not op=N[,sticky][,crash]", bad);
    if (crash) return GATE_CRASH;
    if (hit) return zn_err(err, ZN_E_IO, "%s: %s: injected I/O fault at op %ld", path, what, op);
    return 0;
}

/* A simulated power cut: no atexit handlers, no stdio flush, nothing undone. */
static void crash_now(void) { _exit(ZN_FAULT_CRASH_STATUS); }

/* gate() for ops that have no partial form. */
static int gate_op(const char *path, const char *what, ZnErr *err) {
    int g = gate(path, what, err);
    if (g == GATE_CRASH) crash_now();
    return g;
}

int zn_fault_op(void) {
    ZnErr err;   /* the caller words its own message */
    return gate_op("", "", &err) != 0;
}

static int sys_err(ZnErr *err, const char *path, const char *what, int e) {
    return zn_err(err, ZN_E_IO, "%s: %s failed: %s", path, what, strerror(e));
}

/* ------------------------------------------------------------------------ */
/* low-level helpers                                                        */

/* write(2) until all n bytes are out; each system call is one op. */
static int write_all(int fd, const void *buf, size_t n, const char *path, ZnErr *err) {
    const unsigned char *p = buf;
    while (n > 0) {
        /* cap each call: Linux writes at most ~2 GiB per call anyway */
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        int g = gate(path, "write", err);
        if (g == GATE_CRASH) {
            /* torn write: part of the data reaches the file, then power is cut */
            if (write(fd, p, chunk / 2) < 0) { /* nothing to do: we crash anyway */ }
            crash_now();
        }
        if (g) return g;
        ssize_t k = write(fd, p, chunk);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sys_err(err, path, "write", errno);
        if (k == 0) return sys_err(err, path, "write", EIO);
        p += k;
        n -= (size_t)k;
    }
    return ZN_OK;
}

int zn_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, ZnErr *err) {
    unsigned char *p = buf;
    uint64_t start = off;
    while (n > 0) {
        if (off > (uint64_t)INT64_MAX) return sys_err(err, path, "read", EOVERFLOW);
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        int rc = gate_op(path, "read", err);
        if (rc) return rc;
        ssize_t k = pread(fd, p, chunk, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sys_err(err, path, "read", errno);
        if (k == 0)
            return zn_err(err, ZN_E_CORRUPT, "%s: file ends at byte %llu, expected %zu more bytes from byte %llu",
                          path, (unsigned long long)off, n, (unsigned long long)start);
        p += k;
        off += (uint64_t)k;
        n -= (size_t)k;
    }
    return ZN_OK;
}

int zn_open_read(const char *path, int *fd, uint64_t *size, ZnErr *err) {
    *fd = -1;
    *size = 0;
    int rc = gate_op(path, "open", err);
    if (rc) return rc;
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return sys_err(err, path, "open", errno);
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return sys_err(err, path, "stat", e);
    }
    /* directories, pipes and devices have no meaningful size: refuse them */
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return zn_err(err, ZN_E_IO, "%s: not a regular file", path);
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return ZN_OK;
}

int zn_read_file(const char *path, size_t max_size, char **buf, size_t *n, ZnErr *err) {
    *buf = NULL;
    *n = 0;
    int fd;
    uint64_t size;
    int rc = zn_open_read(path, &fd, &size, err);
    if (rc) return rc;
    if (size > (uint64_t)max_size) {
        close(fd);
        return zn_err(err, ZN_E_CORRUPT, "%s: file is %llu bytes, more than the %zu-byte limit",
                      path, (unsigned long long)size, max_size);
    }
    char *b = zn_malloc(ZN_HOST_CORE, (size_t)size + 1);
    if (!b) {
        close(fd);
        return zn_err(err, ZN_E_NOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
    }
    rc = zn_pread_full(fd, b, (size_t)size, 0, path, err);
    close(fd);
    if (rc) {
        free(b);
        return rc;
    }
    b[size] = 0;
    *buf = b;
    *n = (size_t)size;
    return ZN_OK;
}

/* "a/b/c" -> "a/b"; "c" -> "."; "/c" -> "/". Returns malloc'd or NULL. */
static char *parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return zn_strdup(ZN_HOST_CORE, ".");
    if (slash == path) return zn_strdup(ZN_HOST_CORE, "/");
    return zn_strndup(ZN_HOST_CORE, path, (size_t)(slash - path));
}

int zn_fsync_dir(const char *dir, ZnErr *err) {
    int rc = gate_op(dir, "open directory", err);
    if (rc) return rc;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sys_err(err, dir, "open directory", errno);
    rc = gate_op(dir, "fsync directory", err);
    if (rc) {
        close(fd);
        return rc;
    }
    /* some file systems cannot fsync a directory (EINVAL): nothing more can
     * be done there, and the rename itself already happened */
    if (fsync(fd) != 0 && errno != EINVAL) {
        int e = errno;
        close(fd);
        return sys_err(err, dir, "fsync directory", e);
    }
    close(fd);
    return ZN_OK;
}

int zn_mkdir_p(const char *path, ZnErr *err) {
    size_t len = strlen(path);
    if (len == 0) return zn_err(err, ZN_E_USAGE, "empty directory path");
    char *p = zn_strdup(ZN_HOST_CORE, path);
    if (!p) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    int rc = ZN_OK;
    /* walk every prefix ending before a '/', then the whole path */
    for (size_t i = 1; i <= len && rc == ZN_OK; i++) {
        if (i < len && p[i] != '/') continue;
        if (i < len && p[i - 1] == '/') continue;   /* "a//b" */
        char save = p[i];
        p[i] = 0;
        rc = gate_op(p, "mkdir", err);
        if (rc == ZN_OK) {
            if (mkdir(p, 0755) == 0) {
                char *parent = parent_dir(p);
                rc = parent ? zn_fsync_dir(parent, err) : zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
                free(parent);
            } else if (errno == EEXIST) {
                struct stat st;
                if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
                    rc = zn_err(err, ZN_E_IO, "%s: exists and is not a directory", p);
            } else {
                rc = sys_err(err, p, "mkdir", errno);
            }
        }
        p[i] = save;
    }
    free(p);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* the atomic writer                                                        */

#define WBUF_SIZE ((size_t)64 << 10)

struct ZnWriter {
    int fd;
    int failed;          /* a write failed: only abort is allowed */
    char *path, *tmp;
    size_t len;          /* bytes in buf */
    uint64_t written;    /* bytes handed to the kernel */
    uint64_t started;    /* bytes whose writeback has been started */
    unsigned char buf[WBUF_SIZE];
};

static void writer_free(ZnWriter *w) {
    free(w->path);
    free(w->tmp);
    free(w);
}

int zn_writer_open(ZnWriter **out, const char *path, ZnErr *err) {
    *out = NULL;
    size_t plen = strlen(path);
    if (plen == 0 || path[plen - 1] == '/') return zn_err(err, ZN_E_USAGE, "'%s' is not a file path", path);
    ZnWriter *w = zn_calloc(ZN_HOST_CORE, 1, sizeof *w);
    if (!w) return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->path = zn_strdup(ZN_HOST_CORE, path);
    size_t tlen = plen + 32;
    w->tmp = zn_malloc(ZN_HOST_CORE, tlen);
    if (!w->path || !w->tmp) {
        writer_free(w);
        return zn_err(err, ZN_E_NOMEM, "%s: out of memory", path);
    }
    snprintf(w->tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    /* O_EXCL: never write through a planted symlink. A leftover with our pid
     * comes from an earlier process that crashed (pids repeat in containers):
     * it is garbage, so remove it and try once more. */
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = gate_op(path, "open", err);
        if (rc) {
            writer_free(w);
            return rc;
        }
        w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (w->fd >= 0) break;
        if (errno != EEXIST || attempt == 1) {
            int e = errno;
            rc = zn_err(err, ZN_E_IO, "%s: cannot create temporary %s: %s", path, w->tmp, strerror(e));
            writer_free(w);
            return rc;
        }
        unlink(w->tmp);
    }
    *out = w;
    return ZN_OK;
}

/* Bytes written: every WRITEBACK_RUN of them, the kernel is told to start
 * writing them to the disk (sync_file_range, which does not wait), so that
 * a large file's disk writes overlap the work that produces the rest, and
 * the fsync at commit waits for the tail only. */
#define WRITEBACK_RUN ((uint64_t)16 << 20)
static void writer_wrote(ZnWriter *w, size_t n) {
    w->written += n;
    if (w->written - w->started < WRITEBACK_RUN) return;
    sync_file_range(w->fd, (off_t)w->started, (off_t)(w->written - w->started), SYNC_FILE_RANGE_WRITE);
    w->started = w->written;
}

static int writer_flush(ZnWriter *w, ZnErr *err) {
    if (w->len == 0) return ZN_OK;
    int rc = write_all(w->fd, w->buf, w->len, w->path, err);
    if (!rc) writer_wrote(w, w->len);
    w->len = 0;
    return rc;
}

int zn_writer_write(ZnWriter *w, const void *buf, size_t n, ZnErr *err) {
    if (w->failed) return zn_err(err, ZN_E_IO, "%s: write after an earlier failed write", w->path);
    if (n == 0) return ZN_OK;
    int rc = ZN_OK;
    if (n >= WBUF_SIZE) {
        /* large: bypass the buffer, keeping the byte order */
        rc = writer_flush(w, err);
        if (!rc) rc = write_all(w->fd, buf, n, w->path, err);
        if (!rc) writer_wrote(w, n);
    } else {
        if (w->len + n > WBUF_SIZE) rc = writer_flush(w, err);
        if (!rc) {
            memcpy(w->buf + w->len, buf, n);
            w->len += n;
        }
    }
    if (rc) w->failed = 1;
    return rc;
}

void zn_writer_abort(ZnWriter *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    unlink(w->tmp);
    writer_free(w);
}

int zn_writer_commit(ZnWriter *w, ZnErr *err) {
    if (w->failed) {
        int rc = zn_err(err, ZN_E_IO, "%s: commit after an earlier failed write", w->path);
        zn_writer_abort(w);
        return rc;
    }
    int rc = writer_flush(w, err);
    /* the data must be on disk before the rename makes it visible, or a power
     * cut could leave the new name pointing at an empty or partial file */
    if (!rc) rc = gate_op(w->path, "fsync", err);
    if (!rc && fsync(w->fd) != 0) rc = sys_err(err, w->path, "fsync", errno);
    if (!rc) {
        int fd = w->fd;
        w->fd = -1;
        if (close(fd) != 0) rc = sys_err(err, w->path, "close", errno);
    }
    if (!rc) rc = gate_op(w->path, "rename", err);
    if (!rc && rename(w->tmp, w->path) != 0) rc = sys_err(err, w->path, "rename", errno);
    if (rc) {
        zn_writer_abort(w);
        return rc;
    }
    /* the rename is done: the path holds the new content. The directory fsync
     * makes the rename itself durable; if it fails we say so, but there is
     * nothing to undo. */
    char *dir = parent_dir(w->path);
    if (!dir) rc = zn_err(err, ZN_E_NOMEM, "%s: out of memory", w->path);
    else rc = zn_fsync_dir(dir, err);
    if (rc) zn_err_prefix(err, "%s: renamed into place, but not yet durable: ", w->path);
    free(dir);
    writer_free(w);
    return rc;
}

int zn_write_file_atomic(const char *path, const void *buf, size_t n, ZnErr *err) {
    ZnWriter *w;
    int rc = zn_writer_open(&w, path, err);
    if (rc) return rc;
    rc = zn_writer_write(w, buf, n, err);
    if (rc) {
        zn_writer_abort(w);
        return rc;
    }
    return zn_writer_commit(w, err);
}
