/* cuda.h: the CUDA engine's C API (spec Z-CUDA-*), implemented in kernels/: a ZnDevice whose
 * memory is GPU memory and whose kernel table runs on the GPU, and the
 * simulator's memory operations over GPU memory, so N ranks (threads) share
 * one GPU with the simulator's communicator. Plain C: gcc includes it.
 *
 * Threads: the CUDA runtime's current GPU is per thread; zn_device_cuda_init
 * selects `gpu` on the calling thread, and every later call on that device
 * (kernels, alloc, free, the memops of its rank) must come from a thread
 * that has the same current GPU (in zinc: the rank's own thread).
 *
 * Errors: CUDA and cuBLAS failures never abort. Calls that return a status
 * (init, alloc, the memops) return a ZnErr naming what failed. Kernels have
 * no status: the first failure is recorded in the device and later kernels
 * of that device do nothing; zn_cuda_check returns it. Results a kernel
 * returns to the host after a failure are NaN (losses, norms) or zero. */
#ifndef ZN_CUDA_H
#define ZN_CUDA_H
/* the zinc headers are C: under nvcc their declarations need C linkage */
#ifdef __cplusplus
/* C99's restrict (optim.h) is spelled __restrict__ in CUDA C++ */
#ifndef restrict
#define restrict __restrict__
#endif
extern "C" {
#endif
#include "device/device.h"
#include "comm/world.h"

/* The two kernel tables: exact (bitwise twins of zn_host_kernels, spec
 * Z-CUDA-003) and fast (cuBLAS GEMMs, spec Z-CUDA-005). */
extern const ZnKernels zn_cuda_kernels_exact;
extern const ZnKernels zn_cuda_kernels_fast;

/* Number of visible CUDA GPUs; 0 with err saying why when there are none
 * (no driver, no device, CUDA_VISIBLE_DEVICES empty, ...). */
int zn_cuda_device_count(ZnErr *err);

/* Makes d a CUDA device on GPU `gpu` (selected on the calling thread):
 * name "cuda", k = the exact or the fast table, the alloc/free hooks, and in
 * d->impl the rank's stream and cuBLAS handle. Capacity and meta start at 0
 * as with zn_device_host_init. Returns 0 or an error (d is then unusable and
 * needs no free). */
int zn_device_cuda_init(ZnDevice *d, int gpu, int exact, ZnErr *err);
/* Fast mode only: let cuBLAS use TF32 tensor cores (default off: fp32 GEMMs
 * within the tolerance of Z-CUDA-005; with TF32 that tolerance does not hold). */
void zn_device_cuda_allow_tf32(ZnDevice *d, int on);
/* Releases the stream, the cuBLAS handle and the scratch; allocations still
 * live are freed too (their accounting is given back). */
void zn_device_cuda_free(ZnDevice *d);
/* 0, or the first CUDA/cuBLAS error any kernel of d met (also synchronises
 * d's stream, so errors of kernels still running are caught). */
int zn_cuda_check(ZnDevice *d, ZnErr *err);

/* --- N ranks on one GPU: the simulator's memops over device memory --- */
typedef struct ZnCudaSim ZnCudaSim;
/* Per-rank state for a world of `world` ranks. */
ZnCudaSim *zn_cuda_sim_new(int world, ZnErr *err);
/* Fills ops to pass to zn_sim_world_set_memops. */
void zn_cuda_sim_memops(ZnCudaSim *s, ZnSimMemOps *ops);
/* Rank `rank` (on its own thread) tells which device its buffers live on;
 * its collectives then run on that device's stream. NULL detaches (before
 * the device is freed). */
int zn_cuda_sim_attach(ZnCudaSim *s, int rank, ZnDevice *d, ZnErr *err);
/* After zn_sim_world_free (or when no run uses it any more). */
void zn_cuda_sim_free(ZnCudaSim *s);

#ifdef __cplusplus
}
#endif
#endif
