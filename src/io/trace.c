/* trace.c: trace buffers, the tracer (a communicator watch), the JSON writer. */
#include "io/trace.h"
#include "core/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
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
        ZnTraceEvent *ev = zn_realloc(ZN_HOST_IO, t->ev, (size_t)cap * sizeof *ev);
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

/* ---- the tracer: a watch on the collective layer */

static const char *op_name[ZN_OP_N] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier", "all_to_all"};

static long sent_total(const ZnComm *c) {
    long s = 0;
    for (int i = 0; i < ZN_OP_N; i++) s += c->stats.bytes_sent[i];
    return s;
}

static void watch_begin(ZnCommWatch *w, const ZnComm *c) {
    ZnTraceWatch *tw = (ZnTraceWatch *)w;
    tw->t0 = zn_now_s();
    tw->c0 = zn_thread_cpu_s();
    tw->sent0 = sent_total(c);
}

static void watch_end(ZnCommWatch *w, const ZnComm *c, ZnCollOp op, const char *tag) {
    ZnTraceWatch *tw = (ZnTraceWatch *)w;
    tw->cpu_s += zn_thread_cpu_s() - tw->c0;
    char name[32];
    snprintf(name, sizeof name, "%s:%s", op_name[op], tag ? tag : "");
    zn_trace_add(tw->trace, name, tw->t0, zn_now_s(), sent_total(c) - tw->sent0, tw->step ? *tw->step : 0);
}

void zn_trace_watch_init(ZnTraceWatch *tw, ZnTrace *trace, const long *step) {
    memset(tw, 0, sizeof *tw);
    tw->watch.begin = watch_begin;
    tw->watch.end = watch_end;
    tw->trace = trace;
    tw->step = step;
}

/* ---- writer */

/* The trace's temporary file beside path, opened for writing. */
static FILE *open_tmp(const char *path, char *tmp, size_t n, ZnErr *err) {
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) zn_err(err, ZN_E_IO, "cannot write trace file '%s': %s", path, strerror(errno));
    return f;
}

int zn_trace_check(const char *path, ZnErr *err) {
    char tmp[4096];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err);
    if (!f) return err->code;
    fclose(f);
    remove(tmp);
    return 0;
}

int zn_trace_write(const char *path, ZnTrace *const *traces, int n, ZnErr *err) {
    char tmp[4096];
    FILE *f = open_tmp(path, tmp, sizeof tmp, err);
    if (!f) return err->code;
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
