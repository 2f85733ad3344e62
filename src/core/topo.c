/* topo.c: checking a world (core/topo.h). */
#include "core/topo.h"

int zn_world_check(const ZnWorld *w, ZnErr *err) {
    if (w->size < 1) return zn_err(err, ZN_E_USAGE, "world size %d: a world has at least one rank", w->size);
    if (w->rank < 0 || w->rank >= w->size)
        return zn_err(err, ZN_E_USAGE, "rank %d is not a rank of a world of %d", w->rank, w->size);
    if (w->per_node < 1 || w->size % w->per_node)
        return zn_err(err, ZN_E_USAGE, "%d ranks per node do not divide a world of %d ranks into whole nodes",
                      w->per_node, w->size);
    return 0;
}

int zn_group_check(const ZnWorld *w, ZnGroup g, ZnErr *err) {
    if (g.size < 1 || g.stride < 1)
        return zn_err(err, ZN_E_USAGE, "a group of %d ranks with stride %d: both must be at least 1", g.size,
                      g.stride);
    if ((long)g.size * g.stride > w->size || w->size % (g.size * g.stride))
        return zn_err(err, ZN_E_USAGE, "groups of %d ranks with stride %d do not divide a world of %d ranks",
                      g.size, g.stride, w->size);
    return 0;
}
