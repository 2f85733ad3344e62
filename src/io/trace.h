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

/* The tracer: a watch on a communicator (comm.h) that records one event per
 * collective (name "<op>:<tag>", bytes this rank sent, from the
 * communicator's counters) and adds up the thread CPU time spent inside
 * them. `*step` is read at each call to label the event; trace may be NULL
 * (then it only measures CPU time). */
typedef struct {
    ZnCommWatch watch;   /* first: what comm->watch points at */
    ZnTrace *trace;
    const long *step;
    double cpu_s;        /* this rank's thread CPU time spent inside collectives */
    double t0, c0;       /* the current call's start: wall clock, thread CPU time */
    long sent0;          /* and the bytes sent before it */
} ZnTraceWatch;
void zn_trace_watch_init(ZnTraceWatch *tw, ZnTrace *trace, const long *step);

/* Whether the trace can be written at path: its temporary file is made and
 * removed again, before the run, so a path that cannot be written costs no
 * training (ZN_E_IO naming it and the system's reason, as zn_trace_write). */
int zn_trace_check(const char *path, ZnErr *err);
/* Writes all ranks' traces as one JSON file (atomically: temp + rename). */
int zn_trace_write(const char *path, ZnTrace *const *traces, int n, ZnErr *err);

#endif
