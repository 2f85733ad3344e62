/* topo.h: the world every layer reads (spec Z-WORLD-001): how many ranks
 * the run has, which one this is, and how they sit on nodes. A
 * communicator carries its rank's ZnWorld (ZnComm.world); the engine, the
 * checkpoints and the reports read it from there. Nodes hold consecutive
 * ranks, as torchrun, mpirun --map-by node's default block order and
 * Slurm's block distribution place them: ranks r and s share a node when
 * r / per_node == s / per_node. (ZeRO++'s hpZ and MiCS group ranks by node.) */
#ifndef ZN_TOPO_H
#define ZN_TOPO_H
#include "core/err.h"

typedef struct {
    int size;       /* ranks in the run, >= 1 */
    int rank;       /* this rank, 0..size-1 */
    int per_node;   /* ranks per node, >= 1, divides size; size for one node */
} ZnWorld;

/* The world of `size` ranks seen from `rank`, per_node ranks to a node
 * (per_node <= 0: all on one node). */
static inline ZnWorld zn_world(int size, int rank, int per_node) {
    ZnWorld w = {size, rank, per_node > 0 ? per_node : size};
    return w;
}
static inline int zn_world_nodes(const ZnWorld *w) { return w->size / w->per_node; }
static inline int zn_world_node(const ZnWorld *w) { return w->rank / w->per_node; }
static inline int zn_world_local_rank(const ZnWorld *w) { return w->rank % w->per_node; }

/* A group of ranks (ZeRO++, MiCS; spec Z-GRP-001): the world cut into
 * blocks of size*stride consecutive ranks; in each block, the ranks with the
 * same offset modulo stride form a group of `size` members. stride 1 gives
 * groups of consecutive ranks (a node, an hpZ group, a MiCS shard group);
 * stride per_node gives the ranks of one local rank across nodes. Member j
 * of rank r's group is base + j*stride with base = r - r % (size*stride) +
 * r % stride. {size 0} stands for the whole world. */
typedef struct { int size, stride; } ZnGroup;

static inline ZnGroup zn_group(int size, int stride) {
    ZnGroup g = {size, stride};
    return g;
}
static inline ZnGroup zn_group_resolve(const ZnWorld *w, ZnGroup g) {
    return g.size > 0 ? g : zn_group(w->size, 1);
}
/* This rank's index in its group. */
static inline int zn_group_index(const ZnWorld *w, ZnGroup g) {
    return (w->rank % (g.size * g.stride)) / g.stride;
}
/* The world rank of member j of this rank's group. */
static inline int zn_group_member(const ZnWorld *w, ZnGroup g, int j) {
    int block = g.size * g.stride;
    return w->rank - w->rank % block + w->rank % g.stride + j * g.stride;
}
/* ZN_E_USAGE unless g (resolved) cuts w into whole groups. */
int zn_group_check(const ZnWorld *w, ZnGroup g, ZnErr *err);

/* ZN_E_USAGE naming what is wrong: a size below 1, a rank outside
 * 0..size-1, a per_node that does not divide size. */
int zn_world_check(const ZnWorld *w, ZnErr *err);

#endif
