/* comm_proc.h: communicators for ranks in separate processes (spec Z-PROC-*).
 *
 *   tcp  a full mesh of TCP connections, one per pair of ranks, set up at
 *        creation through the rendezvous store (comm_tcp.c); an exchange
 *        moves every peer's bytes at once, straight from and into the
 *        caller's buffers (on one host, large ones read straight from the
 *        sender's memory). No dependency beyond sockets: for laptops, tests
 *        and `zinc launch` without MPI.
 *   mpi  MPI point-to-point messages, every one of an exchange posted at
 *        once (comm_mpi.c), built when mpicc is found; for mpirun and srun.
 * Both give bitwise the simulator's results: reductions are summed by the
 * receiving rank in the simulator's fixed tree over rank index (with the
 * same per-add rounding for 16-bit types), never in the transport's order.
 * Both count bytes under the simulator's ring model (comm.h), and both check
 * the collective sequence before every call (comm_seq.h). */
#ifndef ZN_COMM_PROC_H
#define ZN_COMM_PROC_H
#include "comm/comm.h"
#include "comm/store.h"
#include "comm/sumtree.h"

ZnComm *zn_comm_tcp_new(ZnStore *s, ZnErr *err);
void zn_comm_tcp_free(ZnComm *c);
/* The node this process runs on as the mesh publishes it (Z-PROC-008):
 * ranks read each other's memory only where it is the same. */
uint64_t zn_comm_tcp_node_id(void);

/* MPI: 1 if this build has it. zn_mpi_init calls MPI_Init (once) and fills
 * rank/world; zn_comm_mpi_new wraps MPI_COMM_WORLD. */
int zn_mpi_available(void);
int zn_mpi_init(int *rank, int *world, ZnErr *err);
void zn_mpi_finalize(void);
ZnComm *zn_comm_mpi_new(ZnErr *err);
void zn_comm_mpi_free(ZnComm *c);

#endif
