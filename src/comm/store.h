/* store.h: the rendezvous store (spec Z-RDV-004..008). Rank 0 listens; every
 * other rank connects to it, says who it is, and keeps the connection: the
 * store exchanges small blobs at start (the config hash, a NCCL unique id,
 * the addresses of the TCP communicator's mesh, comm_tcp.c).
 *
 * Where rank 0 listens:
 *   tcp://HOST:PORT   that address (what MASTER_ADDR/MASTER_PORT give);
 *   file:PATH         a free port; rank 0 writes "zinc-rendezvous v1 ADDR PORT"
 *                     to PATH (atomically), the others poll PATH until it
 *                     names a listening rank 0 (a shared file system serves
 *                     several nodes).
 * Every wait is bounded: joining by ZINC_RDV_TIMEOUT seconds (default 120),
 * a message by ZINC_COMM_TIMEOUT seconds (default 1800, torch.distributed's
 * 30 minutes); a closed connection
 * is reported at once, naming the peer. */
#ifndef ZN_STORE_H
#define ZN_STORE_H
#include <stddef.h>
#include "core/err.h"
#include "comm/rendezvous.h"

typedef struct {
    int file;                  /* 1: file:PATH, 0: tcp */
    char host[256];
    int port;
    char path[1024];
} ZnRdvSpec;

/* Parses --rendezvous: NULL or "env" (MASTER_ADDR:MASTER_PORT, defaults
 * 127.0.0.1:29500), "tcp://HOST:PORT" or "file:PATH". */
int zn_rdv_parse(const char *s, const ZnProcEnv *pe, ZnRdvSpec *out, ZnErr *err);

typedef struct ZnStore ZnStore;

ZnStore *zn_store_open(const ZnRdvSpec *spec, int rank, int world, ZnErr *err);
void zn_store_close(ZnStore *s);
int zn_store_rank(const ZnStore *s);
int zn_store_world(const ZnStore *s);

/* Point to point between rank 0 and a peer (rank 0 names the peer, any
 * other rank names 0). Exactly n bytes; bounded by ZINC_COMM_TIMEOUT. */
int zn_store_send(ZnStore *s, int peer, const void *buf, size_t n, ZnErr *err);
int zn_store_recv(ZnStore *s, int peer, void *buf, size_t n, ZnErr *err);

/* The IPv4 address of this end of the rank's store connection (rank 0: of
 * its connection to rank 1), "127.0.0.1" in a world of one: an address of
 * this host that the other ranks reach. The tcp mesh publishes it. */
void zn_store_local_ip(const ZnStore *s, char *buf, size_t cap);

/* Every rank's n-byte blob, in rank order, on every rank (out: world * n). */
int zn_store_allgather(ZnStore *s, const void *in, void *out, size_t n, ZnErr *err);

/* Monotonic seconds, and a positive number of seconds from the environment
 * variable name (dflt when unset, empty or not a positive number): the
 * clocks and ZINC_COMM_TIMEOUT-style settings the store and the tcp
 * transport share. */
double zn_comm_now_s(void);
double zn_comm_env_seconds(const char *name, double dflt);
#define ZN_COMM_TIMEOUT_DEFAULT 1800.0   /* torch.distributed's default_pg_timeout */
/* What closes every message a wait past ZINC_COMM_TIMEOUT writes ("timed
 * out after S s waiting for rank Q (ZINC_COMM_TIMEOUT)"), and the test for
 * it: a collective that timed out then says which it was (coll.c). */
#define ZN_COMM_TIMEOUT_MARK "(ZINC_COMM_TIMEOUT)"
int zn_comm_timed_out(const ZnErr *e);

/* 1 when the connected socket fd is connected to itself (Z-RDV-007). A
 * connect() to a port of this host where nothing listens yet can succeed
 * that way when the kernel picks that very port as the local one (TCP's
 * simultaneous open): the caller then holds the port its peer needs and
 * would read back its own bytes. Both the store and the tcp mesh check. */
int zn_comm_self_connected(int fd);

#endif
