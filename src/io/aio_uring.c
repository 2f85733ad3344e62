/* aio_uring.c: the io_uring backend of the NVMe swap (spec Z-NVME-003),
 * DeepSpeed's async_io loop (csrc/aio/common/deepspeed_aio_common.cpp) on
 * io_uring instead of libaio. Each worker thread owns one ring of
 * queue_depth entries and takes block_size requests off the swap's queue:
 *   overlap_events=1: keep queue_depth requests in flight, refilling as
 *                     completions arrive (reap at least one, then refill);
 *   overlap_events=0: submit up to queue_depth, wait for all, repeat;
 *   single_submit=1:  one io_uring_enter per request, else one per round. */
#include <errno.h>
#include <sched.h>
#include "io/swap_impl.h"

/* Submits the n SQEs prepared since the last submit. 0, or an errno value
 * for a failure that retrying does not cure; *sent counts what went. */
static int submit_n(struct io_uring *ring, int n, int *sent) {
    while (n > 0) {
        int k = io_uring_submit(ring);
        if (k > 0) {
            n -= k;
            *sent += k;
        } else if (k == -EINTR || k == -EAGAIN || k == -EBUSY) {
            sched_yield();   /* the kernel is short of something for a moment */
        } else {
            return k < 0 ? -k : EIO;   /* 0 submitted with n waiting: should not happen */
        }
    }
    return 0;
}

/* Finishes a completed request whose result is res: an error, or a short
 * transfer completed synchronously (the rest of it with pread/pwrite). */
static int completion_status(const ZnSwapReq *r, int res) {
    if (res == -EINTR || res == -EAGAIN) return zn_aio_pio(r, 0);   /* retry it */
    if (res < 0) return -res;
    if ((size_t)res < r->len) return zn_aio_pio(r, (size_t)res);
    return 0;
}

/* Waits for at least min completions (then takes whatever else has
 * arrived) and reports them to the swap. Returns how many were reaped. */
static void report(ZnAioWorker *w, const int *slot, const int *status, int k) {
    ZnSwap *s = w->s;
    pthread_mutex_lock(&s->mu);
    for (int j = 0; j < k; j++) {
        zn_swap_done(s, &w->slots[slot[j]], status[j]);
        w->slots[slot[j]].len = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

static int reap(ZnAioWorker *w, int min) {
    /* reported in groups of 64 so that the lock is taken once per group */
    int n = 0, k = 0, status[64], slot[64];
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = n < min ? io_uring_wait_cqe(&w->ring, &cqe) : io_uring_peek_cqe(&w->ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) break;   /* peek: nothing more (-EAGAIN) */
        int i = (int)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&w->ring, cqe);
        slot[k] = i;
        status[k] = completion_status(&w->slots[i], res);
        k++, n++;
        if (k == 64) report(w, slot, status, k), k = 0;
        if (n >= min && !io_uring_cq_ready(&w->ring)) break;
    }
    report(w, slot, status, k);
    return n;
}

/* A submit failed for good (the ring is unusable): wait for what was
 * submitted, drop the ring (its unsubmitted entries die with it, so they
 * can never run later), do the unsubmitted requests with pread/pwrite, and
 * go on as a pread/pwrite worker. */
static void *give_up_ring(ZnAioWorker *w, int inflight, int nbatch, int sent) {
    ZnSwap *s = w->s;
    while (inflight > 0) inflight -= reap(w, 1);
    io_uring_queue_exit(&w->ring);
    w->has_ring = 0;
    for (int j = sent; j < nbatch; j++) {
        ZnSwapReq *r = &w->slots[w->batch[j]];
        int e = zn_aio_pio(r, 0);
        pthread_mutex_lock(&s->mu);
        zn_swap_done(s, r, e);
        pthread_mutex_unlock(&s->mu);
        r->len = 0;
    }
    return zn_aio_threads_worker(w);
}

void *zn_aio_uring_worker(void *arg) {
    ZnAioWorker *w = arg;
    ZnSwap *s = w->s;
    int qd = (int)s->queue_depth, inflight = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int room = s->overlap_events ? qd - inflight : (inflight ? 0 : qd);
        int nbatch = 0, free_i = 0;
        while (nbatch < room) {
            while (w->slots[free_i].len) free_i++;   /* room > 0 means a free slot exists */
            if (!zn_swap_take(s, &w->slots[free_i])) break;
            w->batch[nbatch++] = free_i;
        }
        if (!nbatch && !inflight) {
            if (s->stop) {
                pthread_mutex_unlock(&s->mu);
                break;
            }
            pthread_cond_wait(&s->work, &s->mu);
            pthread_mutex_unlock(&s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);

        int sent = 0, e = 0;
        for (int j = 0; j < nbatch && !e; j++) {
            ZnSwapReq *r = &w->slots[w->batch[j]];
            /* never NULL: at most queue_depth entries are in flight on a
               ring of queue_depth entries */
            struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
            if (!sqe) {
                e = EBUSY;   /* cannot happen; if it does, the ring is not to be trusted */
                break;
            }
            int fd = r->fd;
            if (r->write) io_uring_prep_write(sqe, fd, r->buf, (unsigned)r->len, r->off);
            else io_uring_prep_read(sqe, fd, r->buf, (unsigned)r->len, r->off);
            io_uring_sqe_set_data64(sqe, (__u64)w->batch[j]);
            if (s->single_submit) e = submit_n(&w->ring, 1, &sent);
        }
        if (!e && !s->single_submit) e = submit_n(&w->ring, nbatch, &sent);
        inflight += sent;
        if (e) return give_up_ring(w, inflight, nbatch, sent);
        inflight -= reap(w, s->overlap_events ? 1 : inflight);
    }
    return NULL;
}
