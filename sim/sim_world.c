/* sim_world.c: the simulated world: rank threads, the rendezvous every
 * collective goes through, and failure propagation (spec Z-SIM-008, 009).
 *
 * Only a pthread mutex and one condition variable order the ranks: helgrind,
 * DRD and TSan all understand them, so every data race in a collective is a
 * real one. A sync is a generation counter: the last rank to arrive bumps it
 * and broadcasts; the others wait until it changes. */
#include <stdlib.h>
#include <string.h>
#include "sim_world.h"
#include "core/alloc.h"
#include "core/covmark.h"

/* ---------------------------------------------------------------- world */

static void rank_init(ZnSimWorld *w, int r) {
    SimRank *rk = &w->ranks[r];
    rk->w = w;
    rk->rank = r;
    sim_comm_init(rk);
}

ZnSimWorld *zn_sim_world_new(int world, ZnErr *err) {
    if (world < 1 || world > ZN_SIM_MAX_WORLD) {
        zn_err(err, ZN_E_USAGE, "sim world size %d out of range 1..%d", world, ZN_SIM_MAX_WORLD);
        return NULL;
    }
    ZnSimWorld *w = zn_calloc(ZN_HOST_COMM, 1, sizeof *w);
    if (!w) goto nomem;
    w->world = world;
    w->ranks = zn_calloc(ZN_HOST_COMM, (size_t)world, sizeof *w->ranks);
    w->posts = zn_calloc(ZN_HOST_COMM, (size_t)world, sizeof *w->posts);
    if (!w->ranks || !w->posts) goto nomem;
    for (int r = 0; r < world; r++)
        if (!(w->ranks[r].sends = zn_calloc(ZN_HOST_COMM, (size_t)world, sizeof *w->ranks[r].sends))) goto nomem;
    /* default attributes: a plain mutex; the sim never locks it twice */
    if (pthread_mutex_init(&w->mu, NULL) != 0) goto nomem;
    if (pthread_cond_init(&w->cv, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        goto nomem;
    }
    w->exit_seen_rank = -1;
    for (int r = 0; r < world; r++) rank_init(w, r);
    return w;
nomem:
    if (w) {
        for (int r = 0; w->ranks && r < world; r++) free(w->ranks[r].sends);
        free(w->ranks);
        free(w->posts);
        free(w);
    }
    zn_err(err, ZN_E_NOMEM, "sim world of %d ranks: out of memory", world);
    return NULL;
}

void zn_sim_world_free(ZnSimWorld *w) {
    if (!w) return;
    for (int r = 0; r < w->world; r++) {
        free(w->ranks[r].tree_buf);
        free(w->ranks[r].out_buf);
        free(w->ranks[r].sends);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->ranks);
    free(w->posts);
    free(w);
}

ZnComm *zn_sim_comm(ZnSimWorld *w, int rank) {
    if (!w || rank < 0 || rank >= w->world) return NULL;
    return &w->ranks[rank].comm;
}

int sim_reserve(void **buf, size_t *cap, size_t need, ZnErr *err) {
    if (need <= *cap) return 0;
    void *p = zn_realloc(ZN_HOST_COMM, *buf, need);
    if (!p) return zn_err(err, ZN_E_NOMEM, "sim: cannot allocate %zu bytes of scratch", need);
    *buf = p;
    *cap = need;
    return 0;
}

/* --------------------------------------------------------- memory ops */

void zn_sim_world_set_memops(ZnSimWorld *w, const ZnSimMemOps *ops) {
    if (!w) return;
    if (ops) w->ops = *ops;
    else memset(&w->ops, 0, sizeof w->ops);
}

int sim_mem_ready(SimRank *rk, ZnErr *err) {
    const ZnSimMemOps *o = &rk->w->ops;
    return o->ready ? o->ready(o->ctx, rk->rank, err) : 0;
}

int sim_mem_copy(SimRank *rk, void *dst, const void *src, size_t bytes, ZnErr *err) {
    const ZnSimMemOps *o = &rk->w->ops;
    if (bytes == 0) return 0;
    if (o->copy) return o->copy(o->ctx, rk->rank, dst, src, bytes, err);
    memcpy(dst, src, bytes);
    return 0;
}

/* Peers' records are stable between the first and the final sync of a
 * collective, so the send pointers can be gathered from them here. */
int sim_mem_reduce(SimRank *rk, ZnGroup g, ZnDtype dt, ZnRedOp red, long off, long len, void *out, ZnErr *err) {
    const ZnSimWorld *w = rk->w;
    if (len <= 0) return 0;
    for (int j = 0; j < g.size; j++) rk->sends[j] = w->posts[zn_group_member(&rk->comm.world, g, j)].send;
    if (w->ops.reduce) return w->ops.reduce(w->ops.ctx, rk->rank, rk->sends, g.size, dt, red, off, len, out, err);
    zn_tree_reduce_host(rk->sends, g.size, dt, red, off, len, out, rk->tree_buf);
    return 0;
}

int sim_mem_scratch(SimRank *rk, size_t bytes, const void *like, void **out, ZnErr *err) {
    const ZnSimMemOps *o = &rk->w->ops;
    if (o->scratch) return o->scratch(o->ctx, rk->rank, bytes, like, out, err);
    int rc = sim_reserve(&rk->out_buf, &rk->out_cap, bytes, err);
    *out = rk->out_buf;
    return rc;
}

/* ----------------------------------------------------------- rendezvous */

/* The lowest rank in state s, or -1. Caller holds w->mu. */
static int lowest_in_state(const ZnSimWorld *w, SimRankState s) {
    for (int r = 0; r < w->world; r++)
        if (w->ranks[r].state == s) return r;
    return -1;
}

/* The rank to blame for a collective (call #call) that can never complete:
 * the lowest finished rank that never made that call (it has fewer calls),
 * preferring one that returned 0. A rank that joined the call, got the error
 * and then returned is a victim, not the cause. Caller holds w->mu. */
static int lowest_exited(const ZnSimWorld *w, long call) {
    static const SimRankState order[] = {SIM_DONE_OK, SIM_FAILED_PEER};
    for (int pass = 0; pass < 3; pass++)
        for (int r = 0; r < w->world; r++) {
            const SimRank *q = &w->ranks[r];
            if (pass < 2 ? q->state == order[pass] && q->calls < call
                         : q->state == SIM_DONE_OK || q->state == SIM_FAILED_PEER)
                return r;
        }
    return -1;
}

static int fail_with(ZnErr *err, const ZnErr *e) {
    if (err) *err = *e;
    return e->code;
}

/* Why rk cannot complete a sync, or 0 if it still may. A failure names the
 * lowest failed rank so the message does not depend on which rank happened
 * to fail first in time. Caller holds w->mu. */
static int sim_broken(ZnSimWorld *w, SimRank *rk, const SimPost *p, ZnErr *err) {
    ZnErr e = {0};
    const char *tag = p->tag ? p->tag : "";
    if (!w->in_run) {
        zn_err(&e, ZN_E_USAGE, "%s '%s' called outside zn_sim_run", zn_coll_op_name(p->op), tag);
        return fail_with(err, &e);
    }
    if (w->mismatch) return fail_with(err, &w->mismatch_err);
    if (w->nfinished == 0) return 0; /* the common case, O(1) */
    int r = lowest_in_state(w, SIM_FAILED);
    if (r >= 0) {
        rk->peer_err = 1;
        zn_err(&e, ZN_E_COMM, "rank %d failed: %s", r, w->ranks[r].err.msg);
        return fail_with(err, &e);
    }
    r = lowest_exited(w, p->call);
    rk->peer_err = 1;
    zn_err(&e, ZN_E_COMM, "rank %d exited before joining %s '%s' (call #%ld)", r,
           zn_coll_op_name(p->op), tag, p->call);
    if (w->exit_seen_rank < 0) { /* kept in case the rank swallows it */
        w->exit_seen_rank = rk->rank;
        w->exit_seen_err = e;
    }
    return fail_with(err, &e);
}

/* Last arrival: start the next generation and wake the waiters. */
static void sync_complete(ZnSimWorld *w) {
    w->arrived = 0;
    w->gen++;
    pthread_cond_broadcast(&w->cv);
}

int sim_sync_enter(SimRank *rk, const SimPost *p, ZnErr *err) {
    ZnSimWorld *w = rk->w;
    /* Safe without the lock: peers read posts[rank] only between this sync
       and the final sync of the same call, and the mutex orders the write
       before their reads. */
    w->posts[rk->rank] = *p;
    pthread_mutex_lock(&w->mu);
    int rc = sim_broken(w, rk, p, err);
    if (!rc) {
        long gen = w->gen;
        if (++w->arrived == w->world) {
            sync_complete(w);
        } else {
            while (gen == w->gen) {
                pthread_cond_wait(&w->cv, &w->mu);
                /* a completed generation wins over a failure noticed late */
                if (gen == w->gen && (rc = sim_broken(w, rk, p, err))) break;
            }
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void sim_sync(SimRank *rk) {
    ZnSimWorld *w = rk->w;
    pthread_mutex_lock(&w->mu);
    long gen = w->gen;
    if (++w->arrived == w->world) sync_complete(w);
    else
        while (gen == w->gen) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

void sim_set_mismatch(ZnSimWorld *w, const ZnErr *e) {
    pthread_mutex_lock(&w->mu);
    if (!w->mismatch) {
        w->mismatch = 1;
        w->mismatch_err = *e;
    }
    pthread_mutex_unlock(&w->mu);
}

/* ------------------------------------------------------------------ run */

/* Marks rk finished and wakes every waiter, so a peer blocked in a
 * collective this rank will never join fails instead of hanging. */
static void rank_finish(SimRank *rk, int rc) {
    ZnSimWorld *w = rk->w;
    pthread_mutex_lock(&w->mu);
    rk->rc = rc;
    if (rc != 0 && rk->err.code == 0) zn_err(&rk->err, rc, "returned error %d without a message", rc);
    if (rc == 0) rk->state = SIM_DONE_OK;
    else rk->state = rk->peer_err ? SIM_FAILED_PEER : SIM_FAILED;
    w->nfinished++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void rank_body(SimRank *rk) {
    int rc = rk->w->fn(rk->rank, &rk->comm, rk->w->arg, &rk->err);
    rank_finish(rk, rc);
}

static void *rank_thread(void *p) {
    rank_body(p);
    return NULL;
}

/* Resets every per-run field; refuses a nested or concurrent run. */
static int run_begin(ZnSimWorld *w, ZnRankFn fn, void *arg, ZnErr *err) {
    pthread_mutex_lock(&w->mu);
    if (w->in_run) {
        pthread_mutex_unlock(&w->mu);
        return zn_err(err, ZN_E_USAGE, "zn_sim_run: this world is already running");
    }
    w->in_run = 1;
    w->arrived = 0;
    w->nfinished = 0;
    w->mismatch = 0;
    w->exit_seen_rank = -1;
    w->fn = fn;
    w->arg = arg;
    for (int r = 0; r < w->world; r++) {
        SimRank *rk = &w->ranks[r];
        rk->calls = 0;
        rk->peer_err = 0;
        rk->rc = 0;
        memset(&rk->err, 0, sizeof rk->err);
        rk->state = SIM_RUNNING;
    }
    pthread_mutex_unlock(&w->mu);
    return 0;
}

/* Starts ranks 1..world-1 (rank 0 runs on the caller). If a thread cannot be
 * started, that rank and the rest are marked failed, so the started ones
 * fail their first collective instead of waiting forever. Returns the number
 * of ranks that run (the first without a thread). */
static int start_threads(ZnSimWorld *w) {
    for (int r = 1; r < w->world; r++) {
        int e = pthread_create(&w->ranks[r].thread, NULL, rank_thread, &w->ranks[r]);
        if (e == 0) continue;
        pthread_mutex_lock(&w->mu);
        for (int q = r; q < w->world; q++) {
            SimRank *rk = &w->ranks[q];
            rk->rc = zn_err(&rk->err, ZN_E_NOMEM, "could not start its thread (pthread_create: %s)",
                            strerror(e));
            rk->state = SIM_FAILED;
            w->nfinished++;
        }
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
        return r;
    }
    return w->world;
}

/* The run's result (Z-SIM-008): the lowest rank that failed first-hand; else
 * the lowest that failed because of a peer (an "exited" report); else an
 * "exited" report that a rank swallowed; else success. */
static int run_end(ZnSimWorld *w, ZnErr *err) {
    pthread_mutex_lock(&w->mu);
    int r = lowest_in_state(w, SIM_FAILED);
    if (r < 0) r = lowest_in_state(w, SIM_FAILED_PEER);
    int rc = 0;
    if (r >= 0) {
        ZnErr *e = &w->ranks[r].err;
        rc = zn_err(err, w->ranks[r].rc, "rank %d: %s", r, e->msg);
    } else if (w->exit_seen_rank >= 0) {
        rc = zn_err(err, ZN_E_COMM, "rank %d: %s", w->exit_seen_rank, w->exit_seen_err.msg);
    }
    for (int q = 0; q < w->world; q++) w->ranks[q].state = SIM_IDLE;
    w->in_run = 0;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int zn_sim_run(ZnSimWorld *w, ZnRankFn fn, void *arg, ZnErr *err) {
    if (!w || !fn) return zn_err(err, ZN_E_USAGE, "zn_sim_run: no world or no rank function");
    int rc = run_begin(w, fn, arg, err);
    if (rc) return rc;
    zn_cov_world(1);   /* the coverage build: this world's counts go to its plan (core/covmark.h) */
    int started = start_threads(w);
    rank_body(&w->ranks[0]);
    for (int r = 1; r < started; r++) pthread_join(w->ranks[r].thread, NULL);
    zn_cov_world(0);
    return run_end(w, err);
}
