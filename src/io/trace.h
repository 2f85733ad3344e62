/* trace.h: per-rank event traces in Chrome's trace-event format (opens in
 * chrome://tracing and Perfetto): the engine's forward, backward and
 * optimizer step, and every collective with its bytes, one track per rank
 * (spec Z-REP-004). A ZnTrace belongs to one rank; no locking. */
#ifndef ZN_TRACE_H
#define ZN_TRACE_H
#include "comm/comm.h"

typedef struct {
    char name[32];
    double ts_us, dur_us;
    long bytes;          /* collectives: bytes the rank sent; -1 otherwise */
    long step;
} ZnTraceEvent;

typedef struct {
    int rank;
    int n, cap;
    ZnTraceEvent *ev;
    double t0;           /* run start, seconds (shared by all ranks) */
} ZnTrace;

double zn_now_s(void);
double zn_thread_cpu_s(void);   /* CPU time of the calling thread */
void zn_trace_add(ZnTrace *t, const char *name, double start_s, double end_s, long bytes, long step);
void zn_trace_free(ZnTrace *t);

/* A communicator that forwards to `inner` and records one event per call
 * (name "<op>:<tag>", bytes sent from inner's counters). `*step` is read at
 * each call to label the event. The wrapper's stats mirror inner's. */
typedef struct {
    ZnComm comm;         /* first: a ZnTraceComm* is a ZnComm* */
    ZnComm *inner;
    ZnTrace *trace;      /* may be NULL: then the wrapper only times */
    const long *step;
    double cpu_s;        /* this rank's thread CPU time spent inside collectives */
} ZnTraceComm;
void zn_trace_comm_init(ZnTraceComm *tc, ZnComm *inner, ZnTrace *trace, const long *step);

/* Writes all ranks' traces as one JSON file (atomically: temp + rename). */
int zn_trace_write(const char *path, ZnTrace *const *traces, int n, ZnErr *err);

#endif
