/* rendezvous.h: how a zinc process learns who it is and finds its peers
 * (spec Z-RDV-*).
 *
 * Identity comes from the environment the usual launchers set, first match
 * wins:
 *   zinc launch, torchrun, DeepSpeed's launcher:  RANK, WORLD_SIZE, LOCAL_RANK
 *                                                 (LOCAL_WORLD_SIZE optional)
 *   OpenMPI (mpirun):   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
 *                       OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
 *   Slurm (srun):       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *   MPICH / Hydra:      PMI_RANK, PMI_SIZE (local rank 0 unless MPI_LOCALRANKID)
 * The peers meet at a store: TCP at MASTER_ADDR:MASTER_PORT (rank 0 listens),
 * or a shared file (`--rendezvous file:PATH`: rank 0 listens on a free port
 * and writes its address to PATH, the others read it there). */
#ifndef ZN_RENDEZVOUS_H
#define ZN_RENDEZVOUS_H
#include "core/err.h"

typedef struct {
    int rank, world;           /* world 0: no launcher environment found */
    int local_rank, local_world;
    const char *source;        /* "torchrun", "openmpi", "slurm", "pmi" or "none" */
    char master_addr[256];     /* MASTER_ADDR, "" if unset */
    int master_port;           /* MASTER_PORT, 0 if unset */
} ZnProcEnv;

/* Reads the environment. A variable that is set but malformed (not an
 * integer, rank outside 0..world-1, ...) is ZN_E_USAGE naming it. */
int zn_proc_env(ZnProcEnv *pe, ZnErr *err);

/* The launcher variables zinc reads, for messages and the launcher. */
#define ZN_DEFAULT_MASTER_PORT 29500

#endif
