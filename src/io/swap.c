/* swap.c: a rank's NVMe swap space (spec Z-NVME-*): its directory, its
 * files, the queue of transfers the backends (aio_uring.c, aio_threads.c)
 * work through, and the choice between them. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "core/alloc.h"
#include "core/fileio.h"
#include "io/swap_impl.h"

/* A kernel's io_uring accepts at most 32768 entries; the cap here only
   keeps the per-worker slot arrays sane (a larger depth is refused). */
#define MAX_QUEUE_DEPTH 65536
#define MAX_THREADS 256
#define MAX_BLOCK (1L << 30)

static size_t align_up(size_t n) { return (n + ZN_SWAP_ALIGN - 1) / ZN_SWAP_ALIGN * ZN_SWAP_ALIGN; }

/* strerror is not thread-safe; the workers format errors concurrently */
static const char *why(int e, char *buf, size_t cap) {
    if (e == ZN_AIO_EOF) return "unexpected end of file";
    if (e == ZN_AIO_FAULT) return "injected I/O fault";
    return strerror_r(e, buf, cap);
}

void zn_aio_config_default(ZnAioConfig *a) {
    memset(a, 0, sizeof *a);
    a->block_size = 1048576;
    a->queue_depth = 8;
    a->intra_op_parallelism = 1;
    a->single_submit = 0;
    a->overlap_events = 1;
}

int zn_aio_mode_from_env(ZnAioMode *mode, ZnErr *err) {
    const char *v = getenv("ZINC_AIO");
    if (!v || !*v || !strcmp(v, "auto")) *mode = ZN_AIO_AUTO;
    else if (!strcmp(v, "uring")) *mode = ZN_AIO_URING;
    else if (!strcmp(v, "threads")) *mode = ZN_AIO_THREADS;
    else return zn_err(err, ZN_E_USAGE, "ZINC_AIO=%s: expected auto, uring or threads", v);
    return ZN_OK;
}

/* "1.2 GB", "3.4 MB", "512 bytes" */
static const char *human(char *b, size_t cap, unsigned long long n) {
    if (n >= 1000000000ULL) snprintf(b, cap, "%.1f GB", (double)n / 1e9);
    else if (n >= 1000000ULL) snprintf(b, cap, "%.1f MB", (double)n / 1e6);
    else snprintf(b, cap, "%llu bytes", n);
    return b;
}

static int rm_entry(const char *p, const struct stat *sb, int type, struct FTW *f) {
    (void)sb, (void)type, (void)f;
    return remove(p) ? -1 : 0;
}
/* rm -rf path (not following symbolic links); 0 or an errno value */
static int rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st)) return errno == ENOENT || errno == ENOTDIR ? 0 : errno;   /* nothing there */
    errno = 0;
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS)) return errno ? errno : EIO;
    return 0;
}

/* mkdir -p path; on failure *bad is the component that could not be made */
static int mkdir_p(char *path, char **bad) {
    size_t len = strlen(path);
    for (size_t i = 1; i <= len; i++) {
        if (i < len && (path[i] != '/' || path[i - 1] == '/')) continue;
        char save = path[i];
        path[i] = 0;
        int e = 0;
        if (mkdir(path, 0755) && errno != EEXIST) e = errno;
        struct stat st;
        /* a peer's close may rmdir an empty component between our mkdir and
           this stat: that is ENOENT, which the caller tries again */
        if (!e && stat(path, &st)) e = errno;
        else if (!e && !S_ISDIR(st.st_mode)) e = ENOTDIR;
        if (e) *bad = zn_strdup(ZN_HOST_IO, path);
        path[i] = save;
        if (e) return e;
    }
    return 0;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = zn_malloc(ZN_HOST_IO, n);
    if (p) snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* Stops and frees everything s holds, whatever state open left it in. */
static void teardown(ZnSwap *s, int remove_files) {
    if (s->sync_ready) {
        pthread_mutex_lock(&s->mu);
        while (s->pending > 0 && s->nworkers > 0) pthread_cond_wait(&s->idle, &s->mu);
        s->stop = 1;
        pthread_cond_broadcast(&s->work);
        pthread_mutex_unlock(&s->mu);
    }
    for (int i = 0; i < s->nworkers; i++) {
        ZnAioWorker *w = &s->workers[i];
        if (w->started) pthread_join(w->thread, NULL);
        if (w->has_ring) io_uring_queue_exit(&w->ring);
        ZN_FREE_ALL(w->slots, w->batch);
    }
    free(s->workers);
    for (int i = 0; i < s->nfiles; i++) {
        close(s->files[i].fd);
        if (remove_files) unlink(s->files[i].path);
        ZN_FREE_ALL(s->files[i].name, s->files[i].path);
    }
    if (remove_files && s->dir) {
        rm_tree(s->dir);   /* anything else left in it goes too */
        if (s->root) rmdir(s->root);   /* fails, as it should, while another rank's dir is there */
    }
    if (s->sync_ready) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->work);
        pthread_cond_destroy(&s->idle);
    }
    ZN_FREE_ALL(s->files, s->q, s->root, s->dir, s);
}

/* Creates the rank directory fresh and probes it: writable, O_DIRECT
 * accepted (*odirect_errno 0) or refused (the errno), free space. */
static int make_dir(ZnSwap *s, const char *nvme_path, size_t need, int *odirect_errno, ZnErr *err) {
    char eb[128], h1[32], h2[32];
    struct stat st;
    if (stat(nvme_path, &st) == 0 && !S_ISDIR(st.st_mode))
        return zn_err(err, ZN_E_IO, "nvme_path %s is not a directory", nvme_path);
    int e = rm_tree(s->dir);
    if (e) return zn_err(err, ZN_E_IO, "cannot remove the old %s: %s", s->dir, why(e, eb, sizeof eb));
    char *bad = NULL;
    /* ranks of one process open and close side by side: another rank's
       close may remove an empty zinc_swap/ between our mkdirs, so an
       ENOENT is tried again */
    for (int tries = 0; (e = mkdir_p(s->dir, &bad)) == ENOENT && tries < 10; tries++) free(bad), bad = NULL;
    if (e) {
        char at[300] = "";
        if (bad && strcmp(bad, s->dir)) snprintf(at, sizeof at, " (at %s)", bad);
        free(bad);
        return zn_err(err, ZN_E_IO, "cannot create %s: %s%s", s->dir, why(e, eb, sizeof eb), at);
    }
    /* writability and O_DIRECT in one probe: tmpfs, for one, refuses
       O_DIRECT with EINVAL, and then the files are opened without it */
    char *probe = join(s->dir, ".probe");
    if (!probe) return zn_nomem(err);
    *odirect_errno = 0;
    int fd = open(probe, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
    if (fd < 0 && errno == EINVAL) {
        *odirect_errno = EINVAL;
        fd = open(probe, O_RDWR | O_CREAT | O_TRUNC, 0600);
    }
    if (fd < 0) {
        int rc = zn_err(err, ZN_E_IO, "cannot write in %s: %s", s->dir, why(errno, eb, sizeof eb));
        free(probe);
        return rc;
    }
    close(fd);
    unlink(probe);
    free(probe);
    s->direct = *odirect_errno == 0;
    struct statvfs vfs;
    if (statvfs(s->dir, &vfs)) return zn_err(err, ZN_E_IO, "statvfs %s: %s", s->dir, why(errno, eb, sizeof eb));
    unsigned long long avail = (unsigned long long)vfs.f_bavail * vfs.f_frsize;
    /* f_blocks 0: a file system that keeps no count (ramfs), nothing to check */
    if (vfs.f_blocks > 0 && (unsigned long long)need > avail)
        return zn_err(err, ZN_E_IO, "nvme_path %s: %s free, the swap needs %s", nvme_path,
                      human(h1, sizeof h1, avail), human(h2, sizeof h2, need));
    return ZN_OK;
}

/* The workers: io_uring rings when the mode allows and they start, else
   pread/pwrite; *why_threads says why the fallback was taken. */
static int start_workers(ZnSwap *s, ZnAioMode mode, int from_env, char *why_threads, size_t cap, ZnErr *err) {
    char eb[128];
    s->workers = zn_calloc(ZN_HOST_IO, (size_t)s->threads, sizeof *s->workers);
    if (!s->workers) return zn_nomem(err);
    s->nworkers = (int)s->threads;
    s->uring = mode != ZN_AIO_THREADS;
    for (int i = 0; i < s->nworkers && s->uring; i++) {
        ZnAioWorker *w = &s->workers[i];
        int rc = io_uring_queue_init((unsigned)s->queue_depth, &w->ring, 0);
        if (rc == 0) {
            w->has_ring = 1;
            continue;
        }
        if (mode == ZN_AIO_URING)
            return zn_err(err, ZN_E_IO, "nvme swap: io_uring was asked for (%s) but cannot start "
                          "(io_uring_queue_init: %s)", from_env ? "ZINC_AIO=uring" : "ZN_AIO_URING",
                          why(-rc, eb, sizeof eb));
        snprintf(why_threads, cap, "io_uring unavailable (io_uring_queue_init: %s)", why(-rc, eb, sizeof eb));
        for (int j = 0; j < i; j++) io_uring_queue_exit(&s->workers[j].ring), s->workers[j].has_ring = 0;
        s->uring = 0;
    }
    if (pthread_mutex_init(&s->mu, NULL) == 0) {
        pthread_cond_init(&s->work, NULL);
        pthread_cond_init(&s->idle, NULL);
        s->sync_ready = 1;
    }
    if (!s->sync_ready) return zn_err(err, ZN_E_INTERNAL, "nvme swap: pthread_mutex_init failed");
    for (int i = 0; i < s->nworkers; i++) {
        ZnAioWorker *w = &s->workers[i];
        w->s = s;
        if (s->uring) {
            w->slots = zn_calloc(ZN_HOST_IO, (size_t)s->queue_depth, sizeof *w->slots);
            w->batch = zn_calloc(ZN_HOST_IO, (size_t)s->queue_depth, sizeof *w->batch);
            if (!w->slots || !w->batch) return zn_nomem(err);
        }
        int e = pthread_create(&w->thread, NULL, s->uring ? zn_aio_uring_worker : zn_aio_threads_worker, w);
        if (e) return zn_err(err, ZN_E_NOMEM, "nvme swap: cannot start an I/O thread: %s", why(e, eb, sizeof eb));
        w->started = 1;
    }
    return ZN_OK;
}

int zn_swap_open(ZnSwap **out, const char *nvme_path, int rank, size_t need_bytes, const ZnAioConfig *aio,
                 ZnAioMode mode, FILE *log, ZnErr *err) {
    *out = NULL;
    ZnAioConfig def;
    if (!aio) zn_aio_config_default(&def), aio = &def;
    if (!nvme_path || !*nvme_path) return zn_err(err, ZN_E_USAGE, "nvme swap: nvme_path is empty");
    if (rank < 0) return zn_err(err, ZN_E_USAGE, "nvme swap: rank %d", rank);
    if (aio->block_size <= 0 || aio->block_size > MAX_BLOCK)
        return zn_err(err, ZN_E_USAGE, "aio.block_size %ld: expected 1 to %ld bytes", aio->block_size, MAX_BLOCK);
    if (aio->queue_depth <= 0 || aio->queue_depth > MAX_QUEUE_DEPTH)
        return zn_err(err, ZN_E_USAGE, "aio.queue_depth %ld: expected 1 to %d", aio->queue_depth, MAX_QUEUE_DEPTH);
    if (aio->intra_op_parallelism <= 0 || aio->intra_op_parallelism > MAX_THREADS)
        return zn_err(err, ZN_E_USAGE, "aio.intra_op_parallelism %ld: expected 1 to %d", aio->intra_op_parallelism,
                      MAX_THREADS);
    /* the caller's explicit choice wins; AUTO defers to ZINC_AIO */
    int from_env = 0;
    if (mode == ZN_AIO_AUTO) {
        int rc = zn_aio_mode_from_env(&mode, err);
        if (rc) return rc;
        from_env = mode != ZN_AIO_AUTO;
    }

    ZnSwap *s = zn_calloc(ZN_HOST_IO, 1, sizeof *s);
    if (!s) return zn_nomem(err);
    /* O_DIRECT wants every request aligned, so a block is a whole number of
       ZN_SWAP_ALIGN units */
    s->block_size = (long)align_up((size_t)aio->block_size);
    s->queue_depth = aio->queue_depth;
    s->threads = aio->intra_op_parallelism;
    s->single_submit = aio->single_submit != 0;
    s->overlap_events = aio->overlap_events != 0;
    char rank_name[32];
    snprintf(rank_name, sizeof rank_name, "rank%d", rank);
    s->root = join(nvme_path, "zinc_swap");
    s->dir = s->root ? join(s->root, rank_name) : NULL;
    if (!s->dir) {
        teardown(s, 0);
        return zn_nomem(err);
    }
    int odirect_errno = 0;
    int rc = make_dir(s, nvme_path, need_bytes, &odirect_errno, err);
    char why_threads[256] = "";
    if (!rc) rc = start_workers(s, mode, from_env, why_threads, sizeof why_threads, err);
    if (rc) {
        teardown(s, 1);
        return rc;
    }
    if (log) {
        char eb[128], path[320], io[200];
        if (s->uring)
            snprintf(path, sizeof path, "io_uring, queue_depth %ld, block_size %ld, %ld thread%s", s->queue_depth,
                     s->block_size, s->threads, s->threads == 1 ? "" : "s");
        else
            snprintf(path, sizeof path, "%s; using %ld pread/pwrite thread%s",
                     *why_threads ? why_threads : from_env ? "ZINC_AIO=threads" : "threads asked for", s->threads,
                     s->threads == 1 ? "" : "s");
        if (s->direct) snprintf(io, sizeof io, "O_DIRECT");
        else snprintf(io, sizeof io, "buffered (O_DIRECT refused by the file system: %s)",
                      why(odirect_errno, eb, sizeof eb));
        fprintf(log, "[zinc] nvme swap: %s, %s, in %s\n", path, io, s->dir);
    }
    *out = s;
    return ZN_OK;
}

const char *zn_swap_backend(const ZnSwap *s) { return s->uring ? "io_uring" : "threads"; }
const char *zn_swap_dir(const ZnSwap *s) { return s->dir; }
int zn_swap_direct(const ZnSwap *s) { return s->direct; }

static int valid_name(const char *name) {
    size_t n = strlen(name);
    return n > 0 && n <= 200 && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

int zn_swap_file(ZnSwap *s, const char *name, size_t bytes, int *id, ZnErr *err) {
    char eb[128], hb[32];
    if (!name || !valid_name(name))
        return zn_err(err, ZN_E_USAGE, "nvme swap: bad file name \"%s\" (1 to 200 bytes, no '/')", name ? name : "");
    int i = 0;
    while (i < s->nfiles && strcmp(s->files[i].name, name)) i++;
    if (i == s->nfiles) {
        ZnSwapFileRec f = {0};
        f.name = zn_strdup(ZN_HOST_IO, name);
        f.path = join(s->dir, name);
        if (!f.name || !f.path) {
            int rc = zn_nomem(err);
            ZN_FREE_ALL(f.name, f.path);
            return rc;
        }
        int fd = open(f.path, O_RDWR | O_CREAT | O_TRUNC | (s->direct ? O_DIRECT : 0), 0600);
        if (fd < 0) {
            int rc = zn_err(err, ZN_E_IO, "nvme swap: cannot create %s: %s", f.path, why(errno, eb, sizeof eb));
            ZN_FREE_ALL(f.name, f.path);
            return rc;
        }
        f.fd = fd;
        pthread_mutex_lock(&s->mu);   /* the workers look up paths for messages */
        if (s->nfiles == s->cap_files) {
            int cap = s->cap_files ? 2 * s->cap_files : 16;
            ZnSwapFileRec *nf = zn_realloc(ZN_HOST_IO, s->files, (size_t)cap * sizeof *nf);
            if (nf) s->files = nf, s->cap_files = cap;
        }
        int ok = s->nfiles < s->cap_files;
        if (ok) s->files[s->nfiles++] = f;
        pthread_mutex_unlock(&s->mu);
        if (!ok) {
            close(fd);
            unlink(f.path);
            ZN_FREE_ALL(f.name, f.path);
            return zn_nomem(err);
        }
    } else if (ftruncate(s->files[i].fd, 0)) {
        return zn_err(err, ZN_E_IO, "nvme swap: cannot truncate %s: %s", s->files[i].path, why(errno, eb, sizeof eb));
    }
    ZnSwapFileRec *f = &s->files[i];
    f->size = align_up(bytes);
    /* reserve the blocks now, so that a full disk fails here and not in
       the middle of a step; a file system without fallocate gets a sparse
       file instead */
    if (f->size && fallocate(f->fd, 0, 0, (off_t)f->size)) {
        int e = errno;
        if ((e != EOPNOTSUPP && e != ENOSYS) || ftruncate(f->fd, (off_t)f->size)) {
            if (e == EOPNOTSUPP || e == ENOSYS) e = errno;
            f->size = 0;
            return zn_err(err, ZN_E_IO, "nvme swap: cannot reserve %s for %s: %s", human(hb, sizeof hb, align_up(bytes)),
                          f->path, why(e, eb, sizeof eb));
        }
    }
    *id = i;
    return ZN_OK;
}

static int queue(ZnSwap *s, int id, size_t off, void *buf, size_t n, int write, ZnErr *err) {
    const char *op = write ? "write" : "read";
    if (id < 0 || id >= s->nfiles) return zn_err(err, ZN_E_USAGE, "nvme swap: %s: no file %d", op, id);
    ZnSwapFileRec *f = &s->files[id];
    if ((uintptr_t)buf % ZN_SWAP_ALIGN || off % ZN_SWAP_ALIGN)
        return zn_err(err, ZN_E_USAGE, "nvme swap: %s of %s at byte %zu: buffer and offset must be %d-byte aligned",
                      op, f->path, off, ZN_SWAP_ALIGN);
    size_t len = align_up(n);
    if (off > f->size || len > f->size - off)
        return zn_err(err, ZN_E_USAGE, "nvme swap: %s of %zu bytes at byte %zu is past the end of %s (%zu bytes)", op, n,
                      off, f->path, f->size);
    if (n == 0) return ZN_OK;
    pthread_mutex_lock(&s->mu);
    if (s->pending == 0) s->nq = s->head = 0;   /* everything before is done: reuse the queue */
    if (s->nq == s->cap_q) {
        int cap = s->cap_q ? 2 * s->cap_q : 64;
        ZnSwapXfer *nq = zn_realloc(ZN_HOST_IO, s->q, (size_t)cap * sizeof *nq);
        if (!nq) {
            pthread_mutex_unlock(&s->mu);
            return zn_nomem(err);
        }
        s->q = nq, s->cap_q = cap;
    }
    s->q[s->nq++] = (ZnSwapXfer){.file = id, .off = off, .buf = buf, .len = len, .taken = 0, .write = write};
    s->pending += (long)((len + (size_t)s->block_size - 1) / (size_t)s->block_size);
    pthread_cond_broadcast(&s->work);
    pthread_mutex_unlock(&s->mu);
    return ZN_OK;
}

int zn_swap_write(ZnSwap *s, int id, size_t off, const void *buf, size_t n, ZnErr *err) {
    return queue(s, id, off, (void *)buf, n, 1, err);   /* a write only reads buf */
}
int zn_swap_read(ZnSwap *s, int id, size_t off, void *buf, size_t n, ZnErr *err) {
    return queue(s, id, off, buf, n, 0, err);
}

int zn_swap_take(ZnSwap *s, ZnSwapReq *r) {
    while (s->head < s->nq) {
        ZnSwapXfer *x = &s->q[s->head];
        if (x->taken == x->len) {
            s->head++;
            continue;
        }
        size_t len = x->len - x->taken;
        if (len > (size_t)s->block_size) len = (size_t)s->block_size;
        *r = (ZnSwapReq){.file = x->file, .fd = s->files[x->file].fd, .off = x->off + x->taken,
                         .buf = x->buf + x->taken, .len = len, .write = x->write};
        x->taken += len;
        s->stats.requests++;
        return 1;
    }
    return 0;
}

void zn_swap_done(ZnSwap *s, const ZnSwapReq *r, int errnum) {
    if (!errnum && zn_fault_op()) errnum = ZN_AIO_FAULT;   /* the fault drill counts each transfer (Z-FILE-005) */
    if (!errnum) {
        if (r->write) s->stats.write_bytes += r->len;
        else s->stats.read_bytes += r->len;
    } else if (!s->err_code) {
        char eb[128];
        s->err_code = ZN_E_IO;
        snprintf(s->err_msg, sizeof s->err_msg, "nvme swap: %s of %s at byte %zu (%zu bytes) failed: %s",
                 r->write ? "write" : "read", s->files[r->file].path, r->off, r->len, why(errnum, eb, sizeof eb));
    }
    if (--s->pending == 0) pthread_cond_broadcast(&s->idle);
}

int zn_swap_wait(ZnSwap *s, ZnErr *err) {
    pthread_mutex_lock(&s->mu);
    while (s->pending > 0) pthread_cond_wait(&s->idle, &s->mu);
    int code = s->err_code;
    char msg[sizeof s->err_msg];
    memcpy(msg, s->err_msg, sizeof msg);
    s->err_code = 0;
    s->nq = s->head = 0;
    pthread_mutex_unlock(&s->mu);
    return code ? zn_err(err, code, "%s", msg) : ZN_OK;
}

ZnSwapStats zn_swap_stats(const ZnSwap *s) {
    ZnSwap *m = (ZnSwap *)s;   /* locking is not a change of state */
    pthread_mutex_lock(&m->mu);
    ZnSwapStats st = s->stats;
    pthread_mutex_unlock(&m->mu);
    return st;
}

void zn_swap_close(ZnSwap *s, int remove_files) {
    if (s) teardown(s, remove_files);
}

void *zn_swap_buf_alloc(size_t n, ZnErr *err) {
    size_t len = n ? align_up(n) : ZN_SWAP_ALIGN;
    void *p = NULL;
    /* posix_memalign, not zn_malloc: O_DIRECT needs the buffer aligned to
       the device's block, which malloc does not promise */
    if (posix_memalign(&p, ZN_SWAP_ALIGN, len)) {
        char hb[32];
        zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%s for an nvme swap buffer)", human(hb, sizeof hb, len));
        return NULL;
    }
    memset(p, 0, len);
    return p;
}

void zn_swap_buf_free(void *p) { free(p); }
