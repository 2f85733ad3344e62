/* comm_tcp.c: the TCP transport (spec Z-PROC-002). A star through rank 0
 * over the rendezvous store's connections: in one exchange every rank sends
 * rank 0 a header (bytes for each rank) and the bytes; rank 0 routes them
 * and sends each rank what it receives, in source rank order. The
 * collectives on top are comm/coll.c's. Simple; meant for tests and small
 * runs, not speed (rank 0 moves every byte). */
#include "comm/comm_proc.h"
#include "core/alloc.h"
#include "comm/coll.h"
#include "comm/comm_seq.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    ZnStore *store;
    int rank, world;
    int64_t *hdr;            /* [world][world + 1]: magic, then bytes from rank s to each rank */
    size_t *at;              /* rank 0: [world] where rank s's bytes start in scratch */
    char *scratch;           /* rank 0: every peer's bytes, to route */
    size_t scratch_cap;
} Tcp;

typedef struct {
    uint32_t magic, ok;
    int64_t payload;         /* bytes that follow, or the error message's length */
} Reply;

/* Rank 0 tells every peer the exchange failed (the same message everywhere).
 * A peer that already had this exchange's reply reads it as the reply to its
 * next one, so every survivor names the rank that failed (Z-FAULT-001). */
static void send_error(Tcp *t, const ZnErr *e) {
    Reply rp = {ZN_SEQ_MAGIC, 0, (int64_t)strlen(e->msg)};
    ZnErr ignore;
    for (int q = 1; q < t->world; q++)
        if (!zn_store_send(t->store, q, &rp, sizeof rp, &ignore))
            zn_store_send(t->store, q, e->msg, (size_t)rp.payload, &ignore);
}

static int peer_exchange(Tcp *t, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                         ZnErr *err) {
    const int W = t->world, me = t->rank;
    int64_t *h = t->hdr;
    h[0] = ZN_SEQ_MAGIC;
    for (int q = 0; q < W; q++) h[1 + q] = q == me ? 0 : (int64_t)nout[q];
    int rc = zn_store_send(t->store, 0, h, (size_t)(W + 1) * sizeof *h, err);
    for (int q = 0; q < W && !rc; q++)
        if (q != me && nout[q]) rc = zn_store_send(t->store, 0, out[q], nout[q], err);
    Reply rp;
    if (rc || (rc = zn_store_recv(t->store, 0, &rp, sizeof rp, err))) return rc;
    if (rp.magic != ZN_SEQ_MAGIC || rp.payload < 0) return zn_err(err, ZN_E_COMM, "rank 0 sent a malformed reply");
    if (!rp.ok) {
        char msg[sizeof err->msg] = "";
        size_t n = (size_t)rp.payload < sizeof msg - 1 ? (size_t)rp.payload : sizeof msg - 1;
        if ((rc = zn_store_recv(t->store, 0, msg, n, err))) return rc;
        return zn_err(err, ZN_E_COMM, "%s", msg);
    }
    size_t want = 0;
    for (int q = 0; q < W; q++) want += q == me ? 0 : nin[q];
    if ((size_t)rp.payload != want)
        return zn_err(err, ZN_E_COMM, "rank 0 sent %lld bytes, expected %zu", (long long)rp.payload, want);
    for (int q = 0; q < W && !rc; q++)
        if (q != me && nin[q]) rc = zn_store_recv(t->store, 0, in[q], nin[q], err);
    return rc;
}

/* Rank 0: every peer's header and bytes, then each peer its bytes. */
static int root_gather(Tcp *t, const size_t *nin, ZnErr *err) {
    const int W = t->world;
    size_t used = 0;
    for (int s = 1; s < W; s++) {
        int64_t *h = t->hdr + (size_t)s * (size_t)(W + 1);
        int rc = zn_store_recv(t->store, s, h, (size_t)(W + 1) * sizeof *h, err);
        if (rc) return rc;
        size_t total = 0;
        int bad = h[0] != ZN_SEQ_MAGIC || h[1] != (int64_t)nin[s] || h[1 + s] != 0;
        for (int d = 0; d < W; d++) {
            bad |= h[1 + d] < 0;
            total += (size_t)h[1 + d];
        }
        /* the stream cannot be trusted past a bad header */
        if (bad) return zn_err(err, ZN_E_COMM, "rank %d sent a malformed exchange header", s);
        if (used + total + 1 > t->scratch_cap) {
            char *p = zn_realloc(ZN_HOST_COMM, t->scratch, used + total + 1);
            if (!p) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu bytes of collective scratch)", used + total + 1);
            t->scratch = p;
            t->scratch_cap = used + total + 1;
        }
        t->at[s] = used;
        if (total && (rc = zn_store_recv(t->store, s, t->scratch + used, total, err))) return rc;
        used += total;
    }
    return 0;
}

static int root_exchange(Tcp *t, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                         ZnErr *err) {
    const int W = t->world;
    int rc = root_gather(t, nin, err);
    for (int d = 1; d < W && !rc; d++) {
        Reply rp = {ZN_SEQ_MAGIC, 1, (int64_t)nout[d]};
        for (int s = 1; s < W; s++) rp.payload += s == d ? 0 : t->hdr[(size_t)s * (size_t)(W + 1) + 1 + (size_t)d];
        rc = zn_store_send(t->store, d, &rp, sizeof rp, err);
        if (!rc && nout[d]) rc = zn_store_send(t->store, d, out[d], nout[d], err);
        for (int s = 1; s < W && !rc; s++) {
            const int64_t *h = t->hdr + (size_t)s * (size_t)(W + 1);
            size_t pos = t->at[s];
            for (int q = 0; q < d; q++) pos += (size_t)h[1 + q];
            if (s != d && h[1 + d]) rc = zn_store_send(t->store, d, t->scratch + pos, (size_t)h[1 + d], err);
        }
    }
    if (rc) {
        send_error(t, err);
        return rc;
    }
    for (int s = 1; s < W; s++)   /* rank 0's own: the first part of every peer's bytes */
        if (nin[s]) memcpy(in[s], t->scratch + t->at[s], nin[s]);
    return 0;
}

static int tcp_exchange(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                        ZnErr *err) {
    Tcp *t = x;
    return t->rank ? peer_exchange(t, out, nout, in, nin, err) : root_exchange(t, out, nout, in, nin, err);
}

static void tcp_free(void *x) {
    Tcp *t = x;
    free(t->hdr);
    free(t->at);
    free(t->scratch);
    free(t);
}

static const ZnXportOps tcp_ops = {tcp_exchange, tcp_free};

ZnComm *zn_comm_tcp_new(ZnStore *s, ZnErr *err) {
    Tcp *t = zn_calloc(ZN_HOST_COMM, 1, sizeof *t);
    int W = zn_store_world(s);
    if (t) {
        t->store = s;
        t->rank = zn_store_rank(s);
        t->world = W;
        t->hdr = zn_calloc(ZN_HOST_COMM, (size_t)W * (size_t)(W + 1), sizeof *t->hdr);
        t->at = zn_calloc(ZN_HOST_COMM, (size_t)W, sizeof *t->at);
    }
    if (!t || !t->hdr || !t->at) {
        if (t) tcp_free(t);
        zn_nomem(err);
        return NULL;
    }
    return zn_coll_proc_new(t->rank, W, t, &tcp_ops, err);
}

void zn_comm_tcp_free(ZnComm *c) { zn_coll_proc_free(c); }
