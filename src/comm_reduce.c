/* comm_reduce.c: the simulator's reduction tree for process communicators,
 * so that every backend sums in one order with one implementation
 * (sim_reduce.c). */
#include "comm_proc.h"
#include "../sim/sim_world.h"
#include <stdlib.h>

int zn_tree_reduce(const void *const *bufs, int n, ZnDtype dt, ZnRedOp op, long len, void *out, ZnErr *err) {
    SimPost posts[64], *p = n <= 64 ? posts : calloc((size_t)n, sizeof *p);
    void *tiles = malloc(sim_tree_bytes(n));
    if (!p || !tiles) {
        if (p != posts) free(p);
        free(tiles);
        return zn_err(err, ZN_E_NOMEM, "out of host memory for a reduction over %d ranks", n);
    }
    for (int q = 0; q < n; q++) p[q] = (SimPost){.send = bufs[q]};
    sim_reduce_range(p, n, dt, op, 0, len, out, tiles);
    if (p != posts) free(p);
    free(tiles);
    return 0;
}
