/* comm_reduce.c: the simulator's reduction tree for process communicators,
 * so that every backend sums in one order with one implementation
 * (sim/sim_reduce.c). */
#include "comm_proc.h"
#include "../sim/sim.h"
#include <stdlib.h>

int zn_tree_reduce(const void *const *bufs, int n, ZnDtype dt, ZnRedOp op, long len, void *out, ZnErr *err) {
    void *tiles = malloc(zn_sim_reduce_tiles_bytes(n));
    if (!tiles) return zn_err(err, ZN_E_NOMEM, "out of host memory for a reduction over %d ranks", n);
    zn_sim_reduce_host(bufs, n, dt, op, 0, len, out, tiles);
    free(tiles);
    return 0;
}
