/* sumtree.h: the one summation tree (spec Z-SIM-002, Z-SIM-003). A reduction
 * over ranks is the fixed binary tree over rank index that comm.h describes;
 * every backend that reduces on the host calls these, so all of them sum in
 * one order with one implementation. */
#ifndef ZN_SUMTREE_H
#define ZN_SUMTREE_H
#include <stddef.h>
#include "comm/comm.h"

/* Host scratch the tree needs for `world` leaves (any dtype). */
size_t zn_tree_tiles_bytes(int world);
/* out[0..len) = the tree over elements [off, off+len) of sends[0..world);
 * tiles: zn_tree_tiles_bytes(world) bytes of host scratch. */
void zn_tree_reduce_host(const void *const *sends, int world, ZnDtype dt, ZnRedOp red, long off, long len,
                         void *out, void *tiles);
/* The same over whole buffers, allocating its own scratch. */
int zn_tree_reduce(const void *const *bufs, int n, ZnDtype dt, ZnRedOp op, long len, void *out, ZnErr *err);
#endif
