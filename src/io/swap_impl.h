/* swap_impl.h: what swap.c shares with its two I/O backends (aio_uring.c,
 * aio_threads.c). Not part of the API: only src/io/swap*.c and aio_*.c
 * include it.
 *
 * swap.c keeps one queue of transfers per ZnSwap; worker threads take it
 * apart into requests of at most block_size bytes (zn_swap_take), do them,
 * and report each one back (zn_swap_done). Both calls need s->mu held. The
 * io_uring workers keep up to queue_depth requests in flight on their own
 * ring; the pread/pwrite workers do one at a time. */
#ifndef ZN_SWAP_IMPL_H
#define ZN_SWAP_IMPL_H
#include <pthread.h>
#include <liburing.h>
#include "io/swap.h"

/* one request: len bytes between buf and file at off */
typedef struct {
    int file, fd;   /* fd copied at take time: s->files may move under realloc */
    size_t off;
    char *buf;
    size_t len;
    int write;
} ZnSwapReq;

/* one queued zn_swap_read/write; `taken` bytes of it have been handed out */
typedef struct {
    int file;
    size_t off;
    char *buf;
    size_t len, taken;
    int write;
} ZnSwapXfer;

typedef struct {
    char *name, *path;
    int fd;
    size_t size;   /* bytes the file holds: align_up of what zn_swap_file was told */
} ZnSwapFileRec;

typedef struct ZnAioWorker {
    struct ZnSwap *s;
    pthread_t thread;
    int started;
    int has_ring;
    struct io_uring ring;
    ZnSwapReq *slots;   /* queue_depth requests in flight, indexed by user_data (len 0: free) */
    int *batch;         /* the slots prepared by one round, in submission order */
} ZnAioWorker;

struct ZnSwap {
    char *root;         /* <nvme_path>/zinc_swap */
    char *dir;          /* <root>/rank<R> */
    long block_size, queue_depth, threads;
    int single_submit, overlap_events;
    int uring;          /* 1: io_uring workers, 0: pread/pwrite workers */
    int sync_ready;     /* mu, work and idle are initialised */
    int direct;         /* files opened with O_DIRECT */

    ZnSwapFileRec *files;
    int nfiles, cap_files;

    pthread_mutex_t mu;
    pthread_cond_t work;   /* a request can be taken, or stop */
    pthread_cond_t idle;   /* pending reached 0 */
    ZnSwapXfer *q;
    int nq, cap_q, head;   /* q[head..nq) still has bytes to hand out */
    long pending;          /* requests queued or in flight, not yet done */
    int stop;
    int err_code;          /* first failure since the last wait */
    char err_msg[600];
    ZnSwapStats stats;

    ZnAioWorker *workers;
    int nworkers;
};

/* With s->mu held: the next request into *r (1), or 0 when none is left. */
int zn_swap_take(struct ZnSwap *s, ZnSwapReq *r);
/* With s->mu held: request r is over. errnum 0: all len bytes moved; an
 * errno value; or ZN_AIO_EOF: a read met the end of the file. */
#define ZN_AIO_EOF (-1)
/* a transfer the fault drill failed (core/fileio.h zn_fault_op) */
#define ZN_AIO_FAULT (-2)
void zn_swap_done(struct ZnSwap *s, const ZnSwapReq *r, int errnum);

/* Moves r's bytes from byte `done` on with pread/pwrite, retrying short
 * transfers and EINTR; 0, an errno value or ZN_AIO_EOF. */
int zn_aio_pio(const ZnSwapReq *r, size_t done);

/* The workers' thread functions (arg: a ZnAioWorker). */
void *zn_aio_uring_worker(void *arg);
void *zn_aio_threads_worker(void *arg);
#endif
