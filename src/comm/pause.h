/* pause.h: a frozen rank at a chosen collective, for fault drills.
 *
 * ZINC_COMM_PAUSE=R:TAG:N makes rank R of a process backend (tcp, mpi)
 * stop itself with SIGSTOP as it enters its N-th collective of TAG
 * ("param_gather", "grad_reduce", "norm", "ckpt", ...), after one line on
 * stderr naming the call and its pid. Its peers then wait inside that very
 * call, so a drill can freeze a rank, a node or a link at a phase of the
 * step it picks (Z-NODE-009), where a signal from outside lands wherever
 * the rank happens to be. */
#ifndef ZN_PAUSE_H
#define ZN_PAUSE_H
#include "comm/comm.h"

typedef struct {
    int rank;                       /* -1: no pause */
    char tag[ZN_COMM_TAG_LEN];
    long call;                      /* 1-based, counting this rank's calls of tag */
} ZnPause;

/* Reads ZINC_COMM_PAUSE (unset or empty: no pause); ZN_E_USAGE where it is
 * not RANK:TAG:N with RANK >= 0 and N >= 1. */
int zn_pause_from_env(ZnPause *p, ZnErr *err);

/* Stops the process if c's rank enters p's call: OP 'TAG' with `done`
 * calls of TAG completed before it. */
void zn_pause_check(const ZnPause *p, const ZnComm *c, ZnCollOp op, const char *tag, long done);

#endif
