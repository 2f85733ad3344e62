/* proc.c: joining a multi-process run (spec Z-PROC-001, Z-PROC-005). */
#include "proc.h"
#include "comm_proc.h"
#include <stdlib.h>
#include <string.h>

int zn_backend_parse(const char *s, ZnBackend *b, ZnErr *err) {
    if (!strcmp(s, "sim")) *b = ZN_BACKEND_SIM;
    else if (!strcmp(s, "tcp")) *b = ZN_BACKEND_TCP;
    else if (!strcmp(s, "mpi")) *b = ZN_BACKEND_MPI;
    else return zn_err(err, ZN_E_USAGE, "--backend: expected sim, tcp or mpi, got '%s'", s);
    return 0;
}

const char *zn_backend_name(ZnBackend b) {
    return b == ZN_BACKEND_TCP ? "tcp" : b == ZN_BACKEND_MPI ? "mpi" : "sim";
}

uint64_t zn_fnv_str(uint64_t h, const char *s) {
    for (; s && *s; s++) { h ^= (unsigned char)*s; h *= 0x100000001b3ull; }
    h ^= 0xff;   /* a separator, so ("ab","c") and ("a","bc") differ */
    return h * 0x100000001b3ull;
}

int zn_proc_start(ZnBackend b, const char *rendezvous, int want_world, ZnProc *p, ZnErr *err) {
    memset(p, 0, sizeof *p);
    p->backend = b;
    ZnProcEnv pe;
    int rc = zn_proc_env(&pe, err);
    if (rc) return rc;
    if (b == ZN_BACKEND_MPI) {
        if (rendezvous)
            return zn_err(err, ZN_E_USAGE, "--rendezvous: MPI finds its peers itself (mpirun, srun); "
                          "the flag applies to --backend tcp");
        if (!(p->comm = zn_comm_mpi_new(err))) return err->code;
        p->rank = p->comm->rank;
        p->world = p->comm->world;
        p->local_rank = pe.world ? pe.local_rank : 0;
        p->source = "mpi";
    } else {
        if (!pe.world)
            return zn_err(err, ZN_E_USAGE, "--backend %s: no launcher environment (RANK and WORLD_SIZE, "
                          "OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS or PMI_*); start the ranks with "
                          "zinc launch, torchrun, srun or mpirun", zn_backend_name(b));
        ZnRdvSpec spec;
        if ((rc = zn_rdv_parse(rendezvous, &pe, &spec, err))) return rc;
        p->rank = pe.rank;
        p->world = pe.world;
        p->local_rank = pe.local_rank;
        p->source = pe.source;
        if (!(p->store = zn_store_open(&spec, pe.rank, pe.world, err))) return err->code;
        if (!(p->comm = zn_comm_tcp_new(p->store, err))) {
            zn_proc_end(p, 0);
            return err->code;
        }
    }
    if (want_world > 0 && want_world != p->world) {
        zn_err(err, ZN_E_USAGE, "--world-size %d, but the launcher started %d ranks (%s)", want_world, p->world,
               p->source);
        zn_proc_end(p, 0);
        return ZN_E_USAGE;
    }
    return 0;
}

int zn_proc_check_config(ZnProc *p, uint64_t hash, ZnErr *err) {
    uint64_t *all = calloc((size_t)p->world, sizeof *all);
    long *counts = calloc((size_t)p->world, sizeof *counts);
    int rc = 0;
    if (!all || !counts) rc = zn_err(err, ZN_E_NOMEM, "out of host memory");
    for (int q = 0; q < p->world && !rc; q++) counts[q] = 1;
    if (!rc) rc = p->comm->all_gather(p->comm, &hash, all, counts, ZN_U64, "config_hash", err);
    for (int q = 1; q < p->world && !rc; q++)
        if (all[q] != all[0])
            rc = zn_err(err, ZN_E_USAGE, "rank %d runs a different configuration than rank 0 (config hash %016llx "
                        "vs %016llx): every rank needs the same config file, model and training flags", q,
                        (unsigned long long)all[q], (unsigned long long)all[0]);
    free(all);
    free(counts);
    return rc;
}

void zn_proc_end(ZnProc *p, int ok) {
    if (p->backend == ZN_BACKEND_MPI) {
        zn_comm_mpi_free(p->comm);
        if (ok) zn_mpi_finalize();
    } else {
        zn_comm_tcp_free(p->comm);
        zn_store_close(p->store);
    }
    memset(p, 0, sizeof *p);
}
