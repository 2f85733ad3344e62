/* sim.h: the simulator. N ranks run as threads of one process; each has a
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
#ifndef ZN_SIM_H
#define ZN_SIM_H
#include "../src/comm.h"

typedef struct ZnSimWorld ZnSimWorld;

ZnSimWorld *zn_sim_world_new(int world, ZnErr *err);
void zn_sim_world_free(ZnSimWorld *w);
ZnComm *zn_sim_comm(ZnSimWorld *w, int rank);

typedef int (*ZnRankFn)(int rank, ZnComm *comm, void *arg, ZnErr *err);

/* Runs fn on every rank (one thread each; world 1 runs on the calling
 * thread), joins them, returns 0 if all succeeded; else the error of the
 * lowest-numbered rank that failed first-hand (not the ranks that only saw
 * a peer's failure), prefixed "rank R: ". */
int zn_sim_run(ZnSimWorld *w, ZnRankFn fn, void *arg, ZnErr *err);

#endif
