/* trace.c: trace buffers, the tracing communicator, the JSON writer. */
#include "io/trace.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double zn_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double zn_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void zn_trace_add(ZnTrace *t, const char *name, double start_s, double end_s, long bytes, long step) {
    if (!t) return;
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 256;
        ZnTraceEvent *ev = realloc(t->ev, (size_t)cap * sizeof *ev);
        if (!ev) return;   /* a trace is best effort: drop the event, never fail the run */
        t->ev = ev;
        t->cap = cap;
    }
    ZnTraceEvent *e = &t->ev[t->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ts_us = 1e6 * (start_s - t->t0);
    e->dur_us = 1e6 * (end_s - start_s);
    e->bytes = bytes;
    e->step = step;
}

void zn_trace_free(ZnTrace *t) {
    free(t->ev);
    memset(t, 0, sizeof *t);
}

/* ---- the tracing communicator: forward, then record */

static const char *op_name[ZN_OP_N] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier"};

static long sent_total(const ZnComm *c) {
    long s = 0;
    for (int i = 0; i < ZN_OP_N; i++) s += c->stats.bytes_sent[i];
    return s;
}

/* When a forwarded call began: wall clock, thread CPU time, bytes sent. */
typedef struct { double t0, c0; long sent0; } Mark;

static Mark mark(const ZnTraceComm *tc) { return (Mark){zn_now_s(), zn_thread_cpu_s(), sent_total(tc->inner)}; }

static void record(ZnTraceComm *tc, ZnCollOp op, const char *tag, Mark m) {
    tc->cpu_s += zn_thread_cpu_s() - m.c0;
    char name[32];
    snprintf(name, sizeof name, "%s:%s", op_name[op], tag ? tag : "");
    zn_trace_add(tc->trace, name, m.t0, zn_now_s(), sent_total(tc->inner) - m.sent0, tc->step ? *tc->step : 0);
    tc->comm.stats = tc->inner->stats;
}

static int t_all_reduce(ZnComm *c, void *buf, long count, ZnDtype dt, ZnRedOp op, const char *tag, ZnErr *err) {
    ZnTraceComm *tc = (ZnTraceComm *)c;
    Mark m = mark(tc);
    int rc = tc->inner->all_reduce(tc->inner, buf, count, dt, op, tag, err);
    record(tc, ZN_OP_ALL_REDUCE, tag, m);
    return rc;
}
static int t_reduce_scatter(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt,
                            ZnRedOp op, const char *tag, ZnErr *err) {
    ZnTraceComm *tc = (ZnTraceComm *)c;
    Mark m = mark(tc);
    int rc = tc->inner->reduce_scatter(tc->inner, send, recv, counts, dt, op, tag, err);
    record(tc, ZN_OP_REDUCE_SCATTER, tag, m);
    return rc;
}
static int t_all_gather(ZnComm *c, const void *send, void *recv, const long *counts, ZnDtype dt,
                        const char *tag, ZnErr *err) {
    ZnTraceComm *tc = (ZnTraceComm *)c;
    Mark m = mark(tc);
    int rc = tc->inner->all_gather(tc->inner, send, recv, counts, dt, tag, err);
    record(tc, ZN_OP_ALL_GATHER, tag, m);
    return rc;
}
static int t_broadcast(ZnComm *c, void *buf, long count, ZnDtype dt, int root, const char *tag, ZnErr *err) {
    ZnTraceComm *tc = (ZnTraceComm *)c;
    Mark m = mark(tc);
    int rc = tc->inner->broadcast(tc->inner, buf, count, dt, root, tag, err);
    record(tc, ZN_OP_BROADCAST, tag, m);
    return rc;
}
static int t_barrier(ZnComm *c, const char *tag, ZnErr *err) {
    ZnTraceComm *tc = (ZnTraceComm *)c;
    Mark m = mark(tc);
    int rc = tc->inner->barrier(tc->inner, tag, err);
    record(tc, ZN_OP_BARRIER, tag, m);
    return rc;
}

void zn_trace_comm_init(ZnTraceComm *tc, ZnComm *inner, ZnTrace *trace, const long *step) {
    memset(tc, 0, sizeof *tc);
    tc->inner = inner;
    tc->trace = trace;
    tc->step = step;
    tc->comm.rank = inner->rank;
    tc->comm.world = inner->world;
    tc->comm.impl = tc;
    tc->comm.all_reduce = t_all_reduce;
    tc->comm.reduce_scatter = t_reduce_scatter;
    tc->comm.all_gather = t_all_gather;
    tc->comm.broadcast = t_broadcast;
    tc->comm.barrier = t_barrier;
    tc->comm.stats = inner->stats;
}

/* ---- writer */

int zn_trace_write(const char *path, ZnTrace *const *traces, int n, ZnErr *err) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return zn_err(err, ZN_E_IO, "cannot write trace file '%s'", path);
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    int first = 1;
    for (int r = 0; r < n; r++) {   /* one track (thread) per rank, named */
        fprintf(f, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, \"args\": {\"name\": \"rank %d\"}}",
                first ? "" : ",\n", traces[r]->rank, traces[r]->rank);
        first = 0;
    }
    for (int r = 0; r < n; r++)
        for (int i = 0; i < traces[r]->n; i++) {
            const ZnTraceEvent *e = &traces[r]->ev[i];
            fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, "
                       "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"step\": %ld",
                    e->name, e->bytes >= 0 ? "comm" : "compute", traces[r]->rank, e->ts_us, e->dur_us, e->step);
            if (e->bytes >= 0) fprintf(f, ", \"bytes\": %ld", e->bytes);
            fprintf(f, "}}");
        }
    fprintf(f, "\n]}\n");
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return zn_err(err, ZN_E_IO, "writing trace file '%s' failed", path);
    }
    return 0;
}
