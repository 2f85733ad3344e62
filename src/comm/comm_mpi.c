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

typedef struct { int rank, world; } Mpi;

/* MPI counts are ints: a message goes in chunks of at most this many bytes.
 * Both sides cut the same byte stream the same way, so chunks pair up. */
#define CHUNK ((size_t)1 << 30)

/* Step k of W-1: send to rank + k while receiving from rank - k, so every
 * pair meets in the same step and no rank waits on a peer that waits on it. */
static int mpi_exchange(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                        ZnErr *err) {
    const Mpi *m = x;
    for (int k = 1; k < m->world; k++) {
        int to = (m->rank + k) % m->world, from = (m->rank - k + m->world) % m->world;
        for (size_t so = 0, ro = 0; so < nout[to] || ro < nin[from];) {
            size_t sn = nout[to] - so < CHUNK ? nout[to] - so : CHUNK, rn = nin[from] - ro < CHUNK ? nin[from] - ro : CHUNK;
            MPI_Request rq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            int rc = MPI_SUCCESS;
            if (rn) rc = MPI_Irecv((char *)in[from] + ro, (int)rn, MPI_BYTE, from, 0, MPI_COMM_WORLD, &rq[0]);
            if (sn && rc == MPI_SUCCESS)
                rc = MPI_Isend((const char *)out[to] + so, (int)sn, MPI_BYTE, to, 0, MPI_COMM_WORLD, &rq[1]);
            if (rc == MPI_SUCCESS) rc = MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
            if (rc != MPI_SUCCESS) return mpi_fail(rc, "exchange", err);
            so += sn;
            ro += rn;
        }
    }
    return 0;
}

static const ZnXportOps mpi_ops = {mpi_exchange, free};

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
