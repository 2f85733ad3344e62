/* world.h: an in-process world of N ranks, the interface sim/ implements
 * (the simulator). N ranks run as threads of one process; each has a
 * ZnComm whose collectives rendezvous on pthread mutexes, condition variables
 * and barriers (which helgrind and DRD understand). Results follow the fixed
 * order of comm.h, so they never depend on thread timing.
 *
 * Failure: when a rank's function returns an error, or a rank returns while
 * others wait in a collective, every pending and later collective on the other
 * ranks returns ZN_E_COMM with "rank R failed: <its message>" (or "rank R
 * exited before joining <op> '<tag>'"): no hang.
 *
 * Sequence check (spec Z-SIM-006): every collective carries (op, dtype, total
 * count, tag); if the ranks of one rendezvous disagree, each gets ZN_E_COMM
 * naming both records, e.g. "collective mismatch at call #12: rank 0
 * all_gather fp32 n=4096 'param_gather' vs rank 1 reduce_scatter fp32 n=64
 * 'grad_reduce'". */
#ifndef ZN_WORLD_H
#define ZN_WORLD_H
#include "comm/comm.h"
#include "comm/sumtree.h"

typedef struct ZnSimWorld ZnSimWorld;

ZnSimWorld *zn_sim_world_new(int world, ZnErr *err);
void zn_sim_world_free(ZnSimWorld *w);
ZnComm *zn_sim_comm(ZnSimWorld *w, int rank);

/* Memory operations of the collectives (spec Z-CUDA-006). By default the
 * simulator's buffers are host memory and a collective moves them with
 * memcpy and reduces them with the host tree of comm/sumtree.c. A backend whose
 * buffers live elsewhere (kernels/: N ranks on one GPU) supplies these; the
 * order of the tree, the rounding, the protocol and the byte counters stay
 * the simulator's. Every function runs on the thread of `rank` and returns 0
 * or an error code with err filled.
 *   ready:   rank is about to post its buffers: work it has queued on them
 *            must be complete before peers read them (CUDA: synchronise the
 *            rank's stream). NULL: nothing to wait for.
 *   copy:    dst <- src, bytes > 0, no overlap; complete on return.
 *   reduce:  out[0..len) = the tree reduction (Z-SIM-002/003) in dt of
 *            elements [off, off+len) of sends[0..world); complete on return.
 *   scratch: the rank's private staging of at least bytes, in the same kind
 *            of memory as `like` (a buffer the result is copied into); valid
 *            until the next scratch call of that rank.
 * A NULL copy, reduce or scratch uses the host default. */
typedef struct {
    int (*ready)(void *ctx, int rank, ZnErr *err);
    int (*copy)(void *ctx, int rank, void *dst, const void *src, size_t bytes, ZnErr *err);
    int (*reduce)(void *ctx, int rank, const void *const *sends, int world, ZnDtype dt, ZnRedOp red,
                  long off, long len, void *out, ZnErr *err);
    int (*scratch)(void *ctx, int rank, size_t bytes, const void *like, void **out, ZnErr *err);
    void *ctx;
} ZnSimMemOps;

/* Installs ops (copied) for every later collective; NULL restores the host
 * default. Call it outside zn_sim_run. */
void zn_sim_world_set_memops(ZnSimWorld *w, const ZnSimMemOps *ops);

/* (A memops that meets host buffers reduces with zn_tree_reduce_host, sumtree.h.) */

typedef int (*ZnRankFn)(int rank, ZnComm *comm, void *arg, ZnErr *err);

/* Runs fn on every rank (one thread each; world 1 runs on the calling
 * thread), joins them, returns 0 if all succeeded; else the error of the
 * lowest-numbered rank that failed first-hand (not the ranks that only saw
 * a peer's failure), prefixed "rank R: ". */
int zn_sim_run(ZnSimWorld *w, ZnRankFn fn, void *arg, ZnErr *err);

#endif
