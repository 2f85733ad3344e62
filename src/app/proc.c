/* proc.c: joining a multi-process run (spec Z-PROC-001, Z-PROC-005). */
#include "app/proc.h"
#include "core/alloc.h"
#include "comm/comm_proc.h"
#include "comm/coll.h"
#include <stdio.h>
#include <stdlib.h>
#if ZN_HAVE_CUDA
#include "device/cuda.h"
#endif
#include <string.h>

int zn_backend_parse(const char *s, ZnBackend *b, ZnErr *err) {
    if (!strcmp(s, "sim")) *b = ZN_BACKEND_SIM;
    else if (!strcmp(s, "cuda")) *b = ZN_BACKEND_CUDA;
    else if (!strcmp(s, "nccl")) *b = ZN_BACKEND_NCCL;
    else if (!strcmp(s, "tcp")) *b = ZN_BACKEND_TCP;
    else if (!strcmp(s, "mpi")) *b = ZN_BACKEND_MPI;
    else return zn_err(err, ZN_E_USAGE, "--backend: expected sim, cuda, tcp, mpi or nccl, got '%s'", s);
#if !ZN_HAVE_CUDA
    if (*b == ZN_BACKEND_CUDA || *b == ZN_BACKEND_NCCL)
        return zn_err(err, ZN_E_USAGE, "--backend %s: this zinc was built without CUDA (nvcc was not found at build "
                      "time)", s);
#endif
    return 0;
}

const char *zn_backend_name(ZnBackend b) {
    static const char *n[] = {"sim", "tcp", "mpi", "cuda", "nccl"};
    return (unsigned)b <= ZN_BACKEND_NCCL ? n[b] : "?";
}

uint64_t zn_fnv_str(uint64_t h, const char *s) {
    static const unsigned char sep = 0xff;   /* so ("ab","c") and ("a","bc") differ */
    h = zn_fnv1a64(h, s ? s : "", s ? strlen(s) : 0);
    return zn_fnv1a64(h, &sep, 1);
}

int zn_proc_per_node(const ZnProcEnv *pe, int world, int rank) {
    int n = pe->local_world;
    if (n < 1 || world % n || pe->local_rank != rank % n) return 0;
    return n;
}

int zn_proc_start(ZnBackend b, const char *rendezvous, int want_world, ZnProc *p, ZnErr *err) {
    memset(p, 0, sizeof *p);
    p->backend = b;
    ZnProcEnv pe;
    int rc = zn_proc_env(&pe, err);
    if (rc) return rc;
    /* nccl boots over MPI when MPI's launcher started it, else over the store */
    int over_mpi = b == ZN_BACKEND_MPI ||
                   (b == ZN_BACKEND_NCCL && zn_mpi_available() && !rendezvous &&
                    (!strcmp(pe.source, "openmpi") || !strcmp(pe.source, "pmi")));
    if (over_mpi) {
        if (rendezvous)
            return zn_err(err, ZN_E_USAGE, "--rendezvous: MPI finds its peers itself (mpirun, srun); "
                          "the flag applies to --backend tcp and nccl");
        if (!(p->comm = zn_comm_mpi_new(err))) return err->code;
        p->world = zn_world(p->comm->world.size, p->comm->world.rank, zn_proc_per_node(&pe, p->comm->world.size,
                                                                                p->comm->world.rank));
        p->comm->world = p->world;
        p->local_rank = pe.world ? pe.local_rank : 0;
        p->source = "mpi";
    } else {
        if (!pe.world)
            return zn_err(err, ZN_E_USAGE, "--backend %s: no launcher environment (RANK and WORLD_SIZE, "
                          "OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS or PMI_*); start the ranks with "
                          "zinc launch, torchrun, srun or mpirun", zn_backend_name(b));
        ZnRdvSpec spec;
        if ((rc = zn_rdv_parse(rendezvous, &pe, &spec, err))) return rc;
        p->world = zn_world(pe.world, pe.rank, zn_proc_per_node(&pe, pe.world, pe.rank));
        p->local_rank = pe.local_rank;
        p->source = pe.source;
        if (!(p->store = zn_store_open(&spec, pe.rank, pe.world, err))) return err->code;
        if (!(p->comm = zn_comm_tcp_new(p->store, err))) {
            zn_proc_end(p, 0);
            return err->code;
        }
        p->comm->world = p->world;
    }
    if (b == ZN_BACKEND_NCCL) {   /* the host communicator only boots NCCL */
        p->boot = p->comm;
        p->comm = NULL;
    }
    if ((rc = zn_world_check(&p->world, err))) {   /* the launcher's numbers, whatever they were */
        zn_proc_end(p, 0);
        return rc;
    }
    if (want_world > 0 && want_world != p->world.size) {
        zn_err(err, ZN_E_USAGE, "--world-size %d, but the launcher started %d ranks (%s)", want_world, p->world.size,
               p->source);
        zn_proc_end(p, 0);
        return ZN_E_USAGE;
    }
    return 0;
}

void zn_proc_config_timeout(ZnProc *p, double seconds) {
    const char *env = getenv("ZINC_COMM_TIMEOUT");
    if (seconds <= 0 || (env && *env)) return;
    char v[40];
    snprintf(v, sizeof v, "%.17g", seconds);
    setenv("ZINC_COMM_TIMEOUT", v, 1);
    zn_coll_set_timeout(p->comm, seconds);
}

/* What each rank hands the others before NCCL starts: rank 0's id, and
 * whether this rank got as far as NCCL (its error when it did not). */
#define NCCL_HELLO_MSG 383
typedef struct {
    unsigned char id[ZN_NCCL_ID_BYTES];
    unsigned char failed;
    char msg[NCCL_HELLO_MSG];
} NcclHello;

int zn_proc_nccl_hello(ZnComm *boot, int rc, const ZnErr *mine, unsigned char id[ZN_NCCL_ID_BYTES], ZnErr *err) {
    const int W = boot->world.size, me = boot->world.rank;
    NcclHello h, *all = zn_calloc(ZN_HOST_APP, (size_t)W, sizeof h);
    long *counts = zn_calloc(ZN_HOST_APP, (size_t)W, sizeof *counts);
    memset(&h, 0, sizeof h);
    memcpy(h.id, id, ZN_NCCL_ID_BYTES);
    h.failed = rc != 0;
    if (rc) memcpy(h.msg, mine->msg, strnlen(mine->msg, sizeof h.msg - 1));   /* its start: the rest stays 0 */
    if (!all || !counts) {   /* this rank cannot join: its peers time out at the exchange */
        free(all);
        free(counts);
        return rc ? (*err = *mine, rc) : zn_nomem(err);
    }
    for (int q = 0; q < W; q++) counts[q] = sizeof h;
    ZnErr e2 = {0};
    int rx = boot->all_gather(boot, &h, all, counts, ZN_U8, "nccl_id", &e2);
    if (rc) *err = *mine;   /* a rank's own failure is the one it reports */
    else if (rx) {
        *err = e2;
        rc = rx;
    } else {
        memcpy(id, all[0].id, ZN_NCCL_ID_BYTES);
        /* NCCL's init waits for every rank: one that will not come must
           stop the others here, not leave them in ncclCommInitRank */
        for (int q = 0; q < W && !rc; q++)
            if (q != me && all[q].failed)
                rc = zn_err(err, ZN_E_COMM, "rank %d: rank %d failed before NCCL started: %s", me, q, all[q].msg);
    }
    free(all);
    free(counts);
    return rc;
}

int zn_proc_nccl(ZnProc *p, int exact, ZnErr *err) {
#if ZN_HAVE_CUDA
    unsigned char id[ZN_NCCL_ID_BYTES] = {0};
    ZnErr mine = {0};
    int rc = 0;
    p->dev = zn_calloc(ZN_HOST_APP, 1, sizeof *p->dev);
    if (!p->dev) rc = zn_nomem(&mine);
    /* each process binds to GPU LOCAL_RANK */
    if (!rc && (rc = zn_device_cuda_init(p->dev, p->local_rank, exact, &mine))) {
        free(p->dev);
        p->dev = NULL;
    }
    if (!rc && p->world.rank == 0) rc = zn_nccl_unique_id(id, &mine);
    /* every rank joins the exchange, even after a local failure, so none waits */
    rc = zn_proc_nccl_hello(p->boot, rc, &mine, id, err);
    if (!rc && !(p->comm = zn_comm_nccl_new(p->dev, p->world.rank, p->world.size, id, exact, err))) rc = err->code;
    if (!rc) p->comm->world = p->world;
    return rc;
#else
    (void)p, (void)exact;
    return zn_err(err, ZN_E_USAGE, "--backend nccl: this zinc was built without CUDA");
#endif
}

/* The first "key=value" word in which rank q's summary a differs from
 * rank 0's b, as "stage: rank 1 has 3, rank 0 has 2"; empty when the
 * summaries agree (then the config texts differ). */
static void first_difference(int q, const char *a, const char *b, char *out, size_t cap) {
    out[0] = 0;
    while (*a || *b) {
        int la = (int)strcspn(a, " "), lb = (int)strcspn(b, " ");
        if (la != lb || memcmp(a, b, (size_t)la)) {
            const char *ea = memchr(a, '=', (size_t)la), *eb = memchr(b, '=', (size_t)lb);
            int ka = ea ? (int)(ea - a) + 1 : 0, kb = eb ? (int)(eb - b) + 1 : 0;
            /* the setting's name from whichever side has the word; a side
               whose summary ended has "(none)" */
            const char *name = la ? a : b;
            int ln = la ? (ka > 0 ? ka - 1 : la) : (kb > 0 ? kb - 1 : lb);
            snprintf(out, cap, "%.*s: rank %d has %.*s, rank 0 has %.*s", ln, name, q, la ? la - ka : 6,
                     la ? a + ka : "(none)", lb ? lb - kb : 6, lb ? b + kb : "(none)");
            return;
        }
        a += la + (a[la] == ' ');
        b += lb + (b[lb] == ' ');
    }
}

int zn_proc_check_config(ZnProc *p, const ZnConfigId *id, ZnErr *err) {
    ZnComm *c = p->boot ? p->boot : p->comm;
    ZnConfigId mine = *id, *all = zn_calloc(ZN_HOST_APP, (size_t)p->world.size, sizeof *all);
    mine.summary[ZN_CONFIG_SUMMARY - 1] = 0;
    long *counts = zn_calloc(ZN_HOST_APP, (size_t)p->world.size, sizeof *counts);
    int rc = 0;
    if (!all || !counts) rc = zn_nomem(err);
    for (int q = 0; q < p->world.size && !rc; q++) counts[q] = (long)sizeof mine;
    if (!rc) rc = c->all_gather(c, &mine, all, counts, ZN_U8, "config_hash", err);
    for (int q = 1; q < p->world.size && !rc; q++) {
        if (all[q].hash == all[0].hash) continue;
        all[q].summary[ZN_CONFIG_SUMMARY - 1] = 0;   /* a peer's bytes are not trusted */
        char what[200];
        first_difference(q, all[q].summary, all[0].summary, what, sizeof what);
        rc = zn_err(err, ZN_E_USAGE, "rank %d runs a different configuration than rank 0 (%s; config hash %016llx "
                    "vs %016llx): every rank needs the same config file, model and training flags", q,
                    what[0] ? what : "the config files differ", (unsigned long long)all[q].hash,
                    (unsigned long long)all[0].hash);
    }
    free(all);
    free(counts);
    return rc;
}

void zn_proc_end(ZnProc *p, int ok) {
#if ZN_HAVE_CUDA
    if (p->backend == ZN_BACKEND_NCCL) {
        zn_comm_nccl_free(p->comm);
        p->comm = p->boot;
        if (p->dev) zn_device_cuda_free(p->dev);
        free(p->dev);
    }
#endif
    if (!p->store) {   /* MPI */
        zn_comm_mpi_free(p->comm);
        if (ok) zn_mpi_finalize();
    } else {
        zn_comm_tcp_free(p->comm);
        zn_store_close(p->store);
    }
    memset(p, 0, sizeof *p);
}
