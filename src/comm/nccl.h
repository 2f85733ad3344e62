/* nccl.h: the NCCL communicator's C API (spec Z-NCCL-*), implemented in kernels/comm_nccl.cu. One process per
 * GPU; buffers are the rank's CUDA device memory. NCCL itself is loaded at
 * run time (dlopen), so these link everywhere nvcc builds zinc. */
#ifndef ZN_NCCL_H
#define ZN_NCCL_H
#ifdef __cplusplus
extern "C" {
#endif
#include "comm/comm.h"
#include "device/device.h"

#define ZN_NCCL_ID_BYTES 128

/* Rank 0 makes the id; the ranks share it through the rendezvous (the TCP
 * store, or MPI under mpirun) before zn_comm_nccl_new. */
int zn_nccl_unique_id(unsigned char id[ZN_NCCL_ID_BYTES], ZnErr *err);
/* A communicator on dev's stream (dev: a CUDA device, zn_device_cuda_init).
 * exact: reductions in the simulator's tree (Z-NCCL-002). */
ZnComm *zn_comm_nccl_new(ZnDevice *dev, int rank, int world, const unsigned char id[ZN_NCCL_ID_BYTES], int exact,
                         ZnErr *err);
void zn_comm_nccl_free(ZnComm *c);

/* out[0..len) = the simulator's tree over the world device buffers
 * sends[0..world) (a host array of device pointers), on dev's stream
 * (kernels/sim_memops.cu). */
int zn_cuda_tree_reduce(ZnDevice *dev, const void *const *sends, int world, ZnDtype dt, ZnRedOp red, long len,
                        void *out, ZnErr *err);

#ifdef __cplusplus
}
#endif
#endif
