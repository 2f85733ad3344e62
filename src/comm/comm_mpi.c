/* comm_mpi.c: the MPI transport (spec Z-PROC-003). Built with MPI when the
 * Makefile finds mpicc (ZN_HAVE_MPI); without it, `--backend mpi` is
 * refused with a message saying so.
 *
 * MPI only moves bytes: an exchange is pairwise point-to-point messages, and
 * the collectives on top are comm/coll.c's, so reductions are summed in the
 * simulator's tree over rank index whatever MPI's own algorithms would do,
 * and the sequence records are checked before every collective. */
#include "comm/comm_proc.h"
#include "core/alloc.h"
#include "comm/coll.h"
#include "comm/store.h"
#include <stdlib.h>

#ifdef ZN_HAVE_MPI
#include <mpi.h>

int zn_mpi_available(void) { return 1; }

static int mpi_fail(int code, const char *what, ZnErr *err) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(code, s, &n);
    return zn_err(err, ZN_E_COMM, "MPI %s failed: %.*s", what, n, s);
}

int zn_mpi_init(int *rank, int *world, ZnErr *err) {
    int inited = 0, rc;
    MPI_Initialized(&inited);
    if (!inited && (rc = MPI_Init(NULL, NULL)) != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init", err);
    /* errors come back as codes: zinc reports them, never MPI's abort */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    return 0;
}

void zn_mpi_finalize(void) {
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (inited && !fin) MPI_Finalize();
}

typedef struct {
    int rank, world;
    MPI_Request *rq;         /* every message of one exchange, posted at once */
    int *peer;               /* [rq_cap] each message's peer, negative (-1 - rank) for a send */
    int *done;               /* [rq_cap] MPI_Testsome's indices */
    size_t rq_cap;
    double timeout_s;        /* ZINC_COMM_TIMEOUT: the longest an exchange may take */
} Mpi;

/* MPI counts are ints: a message goes in chunks of at most this many bytes.
 * Both sides cut the same byte stream the same way, and MPI keeps messages
 * of one pair and tag in order, so the chunks pair up. */
#define CHUNK ((size_t)1 << 30)

static size_t chunks(size_t n) { return (n + CHUNK - 1) / CHUNK; }

/* Waits for the exchange's n messages, bounded as tcp's are (Z-RDV-009):
 * an exchange not done within timeout_s seconds is an error naming the
 * peer of the first message still open (MPI_Waitall would wait for a frozen
 * peer for ever). The rank then leaves without MPI_Finalize, and mpirun
 * stops the job. */
static int wait_all(Mpi *m, int n, ZnErr *err) {
    int open = n;
    double deadline = zn_comm_now_s() + m->timeout_s;
    while (open > 0) {
        int k = 0;
        int rc = MPI_Testsome(n, m->rq, &k, m->done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return mpi_fail(rc, "exchange", err);
        if (k == MPI_UNDEFINED) break;
        if (k > 0) {
            open -= k;
            continue;
        }
        if (zn_comm_now_s() < deadline) continue;
        int q = 0;
        while (q < n - 1 && m->rq[q] == MPI_REQUEST_NULL) q++;
        const int peer = m->peer[q] < 0 ? -1 - m->peer[q] : m->peer[q];
        return zn_err(err, ZN_E_COMM, "timed out after %.0f s %s rank %d " ZN_COMM_TIMEOUT_MARK, m->timeout_s,
                      m->peer[q] < 0 ? "sending to" : "waiting for", peer);
    }
    return 0;
}

/* Every receive and every send of the exchange posted at once, then one
 * wait: each pair's bytes move as soon as both sides are there, and no rank
 * waits on a step of a schedule (a pairwise schedule of W-1 blocking steps
 * measured 2-3x slower, each step a rendezvous of two ranks). */
static int mpi_exchange(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                        ZnErr *err) {
    Mpi *m = x;
    size_t need = 0;
    for (int q = 0; q < m->world; q++)
        if (q != m->rank) need += chunks(nout[q]) + chunks(nin[q]);
    if (need > m->rq_cap) {
        MPI_Request *r = zn_realloc(ZN_HOST_COMM, m->rq, need * sizeof *r);
        if (r) m->rq = r;
        int *p = r ? zn_realloc(ZN_HOST_COMM, m->peer, need * sizeof *p) : NULL;
        if (p) m->peer = p;
        int *d = p ? zn_realloc(ZN_HOST_COMM, m->done, need * sizeof *d) : NULL;
        if (d) m->done = d;
        if (!d) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu MPI requests)", need);
        m->rq_cap = need;
    }
    int n = 0, rc = MPI_SUCCESS;
    /* receives first, so a send finds its receive posted (no unexpected-message copy) */
    for (int k = 1; k < m->world && rc == MPI_SUCCESS; k++) {
        int from = (m->rank - k + m->world) % m->world;
        for (size_t o = 0; o < nin[from] && rc == MPI_SUCCESS; o += CHUNK) {
            size_t c = nin[from] - o < CHUNK ? nin[from] - o : CHUNK;
            m->peer[n] = from;
            rc = MPI_Irecv((char *)in[from] + o, (int)c, MPI_BYTE, from, 0, MPI_COMM_WORLD, &m->rq[n++]);
        }
    }
    for (int k = 1; k < m->world && rc == MPI_SUCCESS; k++) {
        int to = (m->rank + k) % m->world;
        for (size_t o = 0; o < nout[to] && rc == MPI_SUCCESS; o += CHUNK) {
            size_t c = nout[to] - o < CHUNK ? nout[to] - o : CHUNK;
            m->peer[n] = -1 - to;
            rc = MPI_Isend((const char *)out[to] + o, (int)c, MPI_BYTE, to, 0, MPI_COMM_WORLD, &m->rq[n++]);
        }
    }
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "exchange", err);
    return wait_all(m, n, err);
}

static void mpi_free(void *x) {
    Mpi *m = x;
    ZN_FREE_ALL(m->rq, m->peer, m->done, m);
}

static void mpi_set_timeout(void *x, double s) { ((Mpi *)x)->timeout_s = s; }

static const ZnXportOps mpi_ops = {mpi_exchange, mpi_free, mpi_set_timeout};

ZnComm *zn_comm_mpi_new(ZnErr *err) {
    int rank, world;
    if (zn_mpi_init(&rank, &world, err)) return NULL;
    Mpi *m = zn_calloc(ZN_HOST_COMM, 1, sizeof *m);
    if (!m) {
        zn_nomem(err);
        return NULL;
    }
    m->rank = rank;
    m->world = world;
    m->timeout_s = zn_comm_env_seconds("ZINC_COMM_TIMEOUT", ZN_COMM_TIMEOUT_DEFAULT);
    return zn_coll_proc_new(rank, world, m, &mpi_ops, err);
}

void zn_comm_mpi_free(ZnComm *c) { zn_coll_proc_free(c); }

#else /* no MPI in this build */

int zn_mpi_available(void) { return 0; }

int zn_mpi_init(int *rank, int *world, ZnErr *err) {
    *rank = 0;
    *world = 1;
    return zn_err(err, ZN_E_USAGE, "--backend mpi: this zinc was built without MPI (mpicc was not found at build "
                  "time; install libopenmpi-dev and rebuild), or use --backend tcp");
}

void zn_mpi_finalize(void) {}

ZnComm *zn_comm_mpi_new(ZnErr *err) {
    int r, w;
    zn_mpi_init(&r, &w, err);
    return NULL;
}

void zn_comm_mpi_free(ZnComm *c) { (void)c; }

#endif
