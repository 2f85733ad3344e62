/* proc.h: a zinc process that is one rank of a multi-process run (spec
 * Z-PROC-*): who it is (rendezvous.h), its communicator (comm_proc.h), and
 * the check that every rank runs the same configuration. */
#ifndef ZN_PROC_H
#define ZN_PROC_H
#include <stdint.h>
#include "core/hash.h"
#include "comm/comm.h"
#include "comm/nccl.h"
#include "device/device.h"
#include "comm/rendezvous.h"
#include "comm/store.h"

/* sim: N simulated ranks on the host; cuda: N simulated ranks on one GPU;
 * tcp, mpi: one host rank per process; nccl: one GPU rank per process. */
typedef enum { ZN_BACKEND_SIM = 0, ZN_BACKEND_TCP, ZN_BACKEND_MPI, ZN_BACKEND_CUDA, ZN_BACKEND_NCCL } ZnBackend;

typedef struct {
    ZnBackend backend;
    ZnWorld world;           /* size, this rank, ranks per node (the communicator's too) */
    int local_rank;          /* the launcher's LOCAL_RANK: which GPU of the node */
    const char *source;      /* where the identity came from ("openmpi", "torchrun", ...) */
    ZnStore *store;          /* tcp, and nccl outside MPI */
    ZnComm *comm;            /* the training communicator */
    ZnComm *boot;            /* nccl: the host communicator that shares the id and checks configs */
    ZnDevice *dev;           /* nccl: this rank's GPU (LOCAL_RANK) */
} ZnProc;

/* Ranks per node from the launcher's environment (LOCAL_WORLD_SIZE,
 * OMPI_COMM_WORLD_LOCAL_SIZE): used when it divides the world and this
 * rank's local rank agrees with consecutive placement (core/topo.h);
 * otherwise 0: one node (spec Z-WORLD-001). */
int zn_proc_per_node(const ZnProcEnv *pe, int world, int rank);

/* "sim", "cuda", "tcp", "mpi" or "nccl"; anything else is ZN_E_USAGE. */
int zn_backend_parse(const char *s, ZnBackend *b, ZnErr *err);
const char *zn_backend_name(ZnBackend b);

/* Joins the run: identity from MPI or the launcher's environment, then the
 * rendezvous (tcp) and the communicator. want_world > 0 (from --world-size)
 * must equal the launcher's world size. */
int zn_proc_start(ZnBackend b, const char *rendezvous, int want_world, ZnProc *p, ZnErr *err);
/* The config's zinc.comm_timeout (seconds > 0), where neither --comm-timeout
 * nor ZINC_COMM_TIMEOUT set the bound (Z-RDV-009): the communicator made
 * so far takes it, and ZINC_COMM_TIMEOUT carries it to the ones made later
 * (nccl's). */
void zn_proc_config_timeout(ZnProc *p, double seconds);
/* nccl: makes this rank's CUDA device on GPU LOCAL_RANK and the NCCL
 * communicator on it (the unique id travels over the boot communicator). */
int zn_proc_nccl(ZnProc *p, int exact, ZnErr *err);
/* Collective over boot, before NCCL starts: every rank says whether it got
 * that far (rc, and mine when it did not) and rank 0 hands out the NCCL id
 * (id: rank 0's on rank 0, rank 0's on return everywhere). A rank whose peer
 * failed gets ZN_E_COMM "rank R: rank Q failed before NCCL started: <Q's
 * error>" instead of waiting in NCCL's init for it (Z-NCCL-003); a rank that
 * failed returns its own error. */
int zn_proc_nccl_hello(ZnComm *boot, int rc, const ZnErr *mine, unsigned char id[ZN_NCCL_ID_BYTES], ZnErr *err);
/* A rank's configuration as the ranks compare it: the hash of everything
 * that must agree, and a readable summary ("key=value" words) that names
 * what differs. */
#define ZN_CONFIG_SUMMARY 248
typedef struct {
    uint64_t hash;
    char summary[ZN_CONFIG_SUMMARY];
} ZnConfigId;
/* Collective: every rank's configuration hash must equal rank 0's; a
 * mismatch is ZN_E_USAGE naming the first differing rank and the first
 * setting that differs ("stage 2 vs 3"), on every rank, before any
 * training (Z-PROC-005). */
int zn_proc_check_config(ZnProc *p, const ZnConfigId *id, ZnErr *err);
/* Leaves the run. ok 0 (this rank failed): MPI is not finalized, since
 * MPI_Finalize would wait for peers that wait for this rank; the process
 * exits non-zero and the launcher stops the rest. */
void zn_proc_end(ZnProc *p, int ok);

/* FNV-1a 64 of a string, chained from h (start with ZN_FNV_INIT). */
uint64_t zn_fnv_str(uint64_t h, const char *s);

#endif
