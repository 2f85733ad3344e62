/* aio_threads.c: the fallback I/O backend of the NVMe swap (spec
 * Z-NVME-004): intra_op_parallelism threads, each taking one block_size
 * request at a time off the swap's queue and doing it with pread/pwrite.
 * Also the synchronous helper the io_uring backend uses to finish a short
 * transfer. */
#include <errno.h>
#include <unistd.h>
#include "io/swap_impl.h"

int zn_aio_pio(const ZnSwapReq *r, size_t done) {
    int fd = r->fd;
    while (done < r->len) {
        ssize_t k = r->write ? pwrite(fd, r->buf + done, r->len - done, (off_t)(r->off + done))
                             : pread(fd, r->buf + done, r->len - done, (off_t)(r->off + done));
        if (k < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        /* a read of 0 bytes is the end of the file: the file shrank under us */
        if (k == 0) return r->write ? EIO : ZN_AIO_EOF;
        done += (size_t)k;   /* short: go on from where it stopped */
    }
    return 0;
}

void *zn_aio_threads_worker(void *arg) {
    ZnAioWorker *w = arg;
    ZnSwap *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        ZnSwapReq r;
        if (!zn_swap_take(s, &r)) {
            if (s->stop) break;
            pthread_cond_wait(&s->work, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        int e = zn_aio_pio(&r, 0);
        pthread_mutex_lock(&s->mu);
        zn_swap_done(s, &r, e);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
