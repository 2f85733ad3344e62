/* comm_mpi.c: the MPI communicator (spec Z-PROC-003). Built with MPI when
 * the Makefile finds mpicc (ZN_HAVE_MPI); without it, `--backend mpi` is
 * refused with a message saying so.
 *
 * MPI moves the bytes; zinc does the arithmetic. A reduce-scatter is an
 * all-to-all of each owner's slices followed by the owner's own sum in the
 * simulator's fixed tree over rank index, so the result cannot depend on the
 * MPI library's reduction algorithm. An all-reduce is that reduce-scatter of
 * the even split followed by an all-gather. Before every collective the ranks
 * all-gather their sequence records (comm_seq.h): a rank that issues a
 * different collective is reported, on every rank, instead of hanging or
 * mixing up buffers. */
#include "comm/comm_proc.h"
#include "comm/comm_seq.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZN_HAVE_MPI
#include <mpi.h>

typedef struct {
    long calls;
    int broken;
    ZnErr broken_err;
    ZnSeqRec *recs;          /* [world] */
    char *scratch;
    size_t scratch_cap;
    int *cnt, *displ;        /* [world] element counts and offsets for the v-collectives */
    int *rcnt, *rdispl;
    MPI_Datatype type[9];    /* contiguous element types by size (1, 2, 4, 8 bytes) */
} MpiComm;

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

static int reserve(MpiComm *m, size_t need, ZnErr *err) {
    if (need <= m->scratch_cap) return 0;
    char *p = realloc(m->scratch, need);
    if (!p) return zn_err(err, ZN_E_NOMEM, ZN_NOMEM_MSG " (%zu bytes of collective scratch)", need);
    m->scratch = p;
    m->scratch_cap = need;
    return 0;
}

static int fail(MpiComm *m, ZnErr *err) {
    m->broken = 1;
    m->broken_err = *err;
    return err->code;
}

/* MPI counts are ints: a piece above INT_MAX elements is refused. */
static int to_int(long v, const char *tag, ZnErr *err, int *out) {
    if (v < 0 || v > INT_MAX)
        return zn_err(err, ZN_E_COMM, "collective '%s': %ld elements exceed MPI's int count", tag ? tag : "", v);
    *out = (int)v;
    return 0;
}

/* The sequence check: every rank sees every record and reaches the same
 * verdict (rank 0's record against each other rank's, in rank order). */
static int check_sequence(ZnComm *c, ZnCollOp op, ZnDtype dt, ZnRedOp red, int root, long count,
                          const long *counts, const char *tag, ZnErr *err) {
    MpiComm *m = c->impl;
    if (m->broken) {
        *err = m->broken_err;
        return err->code;
    }
    ZnSeqRec mine;
    long total = count;
    if (counts) { total = 0; for (int q = 0; q < c->world; q++) total += counts[q]; }
    zn_seq_fill(&mine, ++m->calls, op, dt, red, root, total, counts, c->world, tag);
    int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, m->recs, (int)sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(m, (mpi_fail(rc, "all-gather of sequence records", err), err));
    if (zn_seq_check_all(m->recs, c->world, err)) return fail(m, err);
    return 0;
}

static void count_bytes(ZnComm *c, ZnCollOp op, const long *counts, long count, int root, ZnDtype dt,
                        const char *tag) {
    long sent, rcvd;
    zn_comm_ring_bytes(op, c->rank, c->world, counts, count, root, dt, &sent, &rcvd);
    zn_comm_count(c, op, tag, sent, rcvd);
}

/* Each owner gets every rank's slice of its piece and sums them in the tree.
 * counts/off: the pieces (elements) of send; recv gets counts[me]. */
static int scatter_sum(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp red,
                       const char *tag, ZnErr *err) {
    MpiComm *m = c->impl;
    const int W = c->world, me = c->rank;
    size_t es = zn_dtype_size(dt);
    long off = 0;
    int rc;
    for (int q = 0; q < W; q++) {
        if ((rc = to_int(counts[q], tag, err, &m->cnt[q])) || (rc = to_int(off, tag, err, &m->displ[q])))
            return fail(m, err);
        off += counts[q];
    }
    for (int q = 0; q < W; q++) {   /* from every rank: its slice of my piece */
        m->rcnt[q] = m->cnt[me];
        if ((rc = to_int((long)q * counts[me], tag, err, &m->rdispl[q]))) return fail(m, err);
    }
    if ((rc = reserve(m, (size_t)W * (size_t)counts[me] * es + 1, err))) return fail(m, err);
    rc = MPI_Alltoallv(send, m->cnt, m->displ, m->type[es], m->scratch, m->rcnt, m->rdispl, m->type[es], MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(m, (mpi_fail(rc, "all-to-all", err), err));
    const void *bufs[64];
    const void **b = W <= 64 ? bufs : malloc((size_t)W * sizeof *b);
    if (!b) return fail(m, (zn_nomem(err), err));
    for (int q = 0; q < W; q++) b[q] = m->scratch + (size_t)q * (size_t)counts[me] * es;
    rc = zn_tree_reduce(b, W, dt, red, counts[me], recv, err);
    if (b != bufs) free(b);
    return rc ? fail(m, err) : 0;
}

static int gather_pieces(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                         ZnErr *err) {
    MpiComm *m = c->impl;
    size_t es = zn_dtype_size(dt);
    long off = 0;
    int rc;
    for (int q = 0; q < c->world; q++) {
        if ((rc = to_int(counts[q], tag, err, &m->cnt[q])) || (rc = to_int(off, tag, err, &m->displ[q])))
            return fail(m, err);
        off += counts[q];
    }
    /* comm.h allows send to alias this rank's place in recv: MPI's in-place form */
    char *mine = (char *)recv + (size_t)m->displ[c->rank] * es;
    if (send != mine) memmove(mine, send, (size_t)counts[c->rank] * es);
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, m->cnt, m->displ, m->type[es], MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(m, (mpi_fail(rc, "all-gather", err), err));
}

static int mpi_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, ZnRedOp op,
                              const char *tag, ZnErr *err) {
    int rc = check_sequence(c, ZN_OP_REDUCE_SCATTER, dt, op, 0, 0, counts, tag, err);
    if (!rc) rc = scatter_sum(c, send, recv, counts, dt, op, tag, err);
    if (!rc) count_bytes(c, ZN_OP_REDUCE_SCATTER, counts, 0, 0, dt, tag);
    return rc;
}

static int mpi_all_gather(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt, const char *tag,
                          ZnErr *err) {
    int rc = check_sequence(c, ZN_OP_ALL_GATHER, dt, ZN_SUM, 0, 0, counts, tag, err);
    if (!rc) rc = gather_pieces(c, send, recv, counts, dt, tag, err);
    if (!rc) count_bytes(c, ZN_OP_ALL_GATHER, counts, 0, 0, dt, tag);
    return rc;
}

/* The even split of comm.h, reduce-scattered and gathered back. */
static int mpi_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    MpiComm *m = c->impl;
    int rc = check_sequence(c, ZN_OP_ALL_REDUCE, dt, op, 0, count, NULL, tag, err);
    if (rc) return rc;
    const int W = c->world;
    long *counts = malloc((size_t)W * sizeof *counts);
    if (!counts) return fail(m, (zn_nomem(err), err));
    zn_comm_even_counts(count, W, counts);
    long off = 0;
    for (int q = 0; q < c->rank; q++) off += counts[q];
    size_t es = zn_dtype_size(dt);
    char *piece = (char *)buf + (size_t)off * es;
    /* the piece is reduced into a private buffer first: buf is still being sent */
    char *tmp = malloc((size_t)counts[c->rank] * es + 1);
    rc = tmp ? scatter_sum(c, buf, tmp, counts, dt, op, tag, err) : fail(m, (zn_nomem(err), err));
    if (!rc) {
        memcpy(piece, tmp, (size_t)counts[c->rank] * es);
        rc = gather_pieces(c, piece, buf, counts, dt, tag, err);
    }
    free(tmp);
    free(counts);
    if (!rc) count_bytes(c, ZN_OP_ALL_REDUCE, NULL, count, 0, dt, tag);
    return rc;
}

static int mpi_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    MpiComm *m = c->impl;
    if (root < 0 || root >= c->world)
        return zn_err(err, ZN_E_INTERNAL, "broadcast '%s': root %d outside 0..%d", tag ? tag : "", root, c->world - 1);
    int n = 0, rc = check_sequence(c, ZN_OP_BROADCAST, dt, ZN_SUM, root, count, NULL, tag, err);
    if (rc) return rc;
    if ((rc = to_int(count, tag, err, &n))) return fail(m, err);
    rc = MPI_Bcast(buf, n, m->type[zn_dtype_size(dt)], root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(m, (mpi_fail(rc, "broadcast", err), err));
    count_bytes(c, ZN_OP_BROADCAST, NULL, count, root, dt, tag);
    return 0;
}

static int mpi_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    MpiComm *m = c->impl;
    int rc = check_sequence(c, ZN_OP_BARRIER, ZN_U8, ZN_SUM, 0, 0, NULL, tag, err);
    if (rc) return rc;
    /* the record exchange already synchronised every rank; the barrier
       proper keeps MPI's own guarantee */
    rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(m, (mpi_fail(rc, "barrier", err), err));
    count_bytes(c, ZN_OP_BARRIER, NULL, 0, 0, ZN_U8, tag);
    return 0;
}

ZnComm *zn_comm_mpi_new(ZnErr *err) {
    int rank, world;
    if (zn_mpi_init(&rank, &world, err)) return NULL;
    ZnComm *c = calloc(1, sizeof *c);
    MpiComm *m = calloc(1, sizeof *m);
    if (m) {
        m->recs = calloc((size_t)world, sizeof *m->recs);
        m->cnt = calloc((size_t)world, sizeof(int));
        m->displ = calloc((size_t)world, sizeof(int));
        m->rcnt = calloc((size_t)world, sizeof(int));
        m->rdispl = calloc((size_t)world, sizeof(int));
    }
    if (!c || !m || !m->recs || !m->cnt || !m->displ || !m->rcnt || !m->rdispl) {
        c ? (c->impl = m, zn_comm_mpi_free(c)) : free(m);
        zn_nomem(err);
        return NULL;
    }
    for (int s = 1; s <= 8; s *= 2) {
        MPI_Type_contiguous(s, MPI_BYTE, &m->type[s]);
        MPI_Type_commit(&m->type[s]);
    }
    c->impl = m;
    c->rank = rank;
    c->world = world;
    c->all_reduce = mpi_all_reduce;
    c->reduce_scatter = mpi_reduce_scatter;
    c->all_gather = mpi_all_gather;
    c->broadcast = mpi_broadcast;
    c->barrier = mpi_barrier;
    return c;
}

void zn_comm_mpi_free(ZnComm *c) {
    if (!c) return;
    MpiComm *m = c->impl;
    if (m) {
        for (int s = 1; s <= 8; s *= 2)
            if (m->type[s] && m->type[s] != MPI_DATATYPE_NULL) MPI_Type_free(&m->type[s]);
        free(m->recs);
        free(m->scratch);
        free(m->cnt);
        free(m->displ);
        free(m->rcnt);
        free(m->rdispl);
        free(m);
    }
    free(c);
}

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
