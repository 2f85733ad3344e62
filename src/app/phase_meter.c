/* phase_meter.c: one step's figures by phase (phase_meter.h, spec Z-DRY-008). */
#include "app/phase_meter.h"
#include "engine/engine.h"
#include <string.h>

const char *zn_phase_name(int ph) {
    static const char *const names[ZN_PH_N] = {"forward", "backward", "step"};
    return ph >= 0 && ph < ZN_PH_N ? names[ph] : "?";
}

const char *zn_tier_name(int t) {
    static const char *const names[ZN_NTIERS] = {"device", "host", "nvme"};
    return t >= 0 && t < ZN_NTIERS ? names[t] : "?";
}

static ZnMemStats *tier_mem(ZnEngine *E, int t) {
    return t == ZN_TIER_DEVICE ? &E->dev->mem : t == ZN_TIER_HOST ? &E->off.tier_host.mem : &E->off.tier_nvme.mem;
}

void zn_comm_stats_add_delta(ZnCommStats *dst, const ZnCommStats *now, const ZnCommStats *before) {
    for (int op = 0; op < ZN_OP_N; op++) {
        dst->calls[op] += now->calls[op] - before->calls[op];
        dst->bytes_sent[op] += now->bytes_sent[op] - before->bytes_sent[op];
        dst->bytes_recv[op] += now->bytes_recv[op] - before->bytes_recv[op];
        dst->bytes_inter[op] += now->bytes_inter[op] - before->bytes_inter[op];
    }
    dst->wire_inter += now->wire_inter - before->wire_inter;
    dst->wire_intra += now->wire_intra - before->wire_intra;
    dst->wire_msgs_inter += now->wire_msgs_inter - before->wire_msgs_inter;
    for (int i = 0; i < now->ntags; i++) {
        long calls = now->tags[i].calls, sent = now->tags[i].bytes_sent, recv = now->tags[i].bytes_recv,
             inter = now->tags[i].bytes_inter;
        for (int j = 0; j < before->ntags; j++)
            if (!strcmp(before->tags[j].tag, now->tags[i].tag)) {
                calls -= before->tags[j].calls;
                sent -= before->tags[j].bytes_sent;
                recv -= before->tags[j].bytes_recv;
                inter -= before->tags[j].bytes_inter;
            }
        if (!calls) continue;   /* the tag did not occur in the stretch */
        int k = 0;
        while (k < dst->ntags && strcmp(dst->tags[k].tag, now->tags[i].tag)) k++;
        if (k == dst->ntags) {
            if (k == ZN_COMM_MAX_TAGS) continue;   /* the source table holds no more tags than this */
            memset(&dst->tags[k], 0, sizeof dst->tags[k]);
            memcpy(dst->tags[k].tag, now->tags[i].tag, sizeof dst->tags[k].tag);
            dst->ntags++;
        }
        dst->tags[k].calls += calls;
        dst->tags[k].bytes_sent += sent;
        dst->tags[k].bytes_recv += recv;
        dst->tags[k].bytes_inter += inter;
    }
}

static void add_work(ZnWork *dst, const ZnWork *now, const ZnWork *before) {
    dst->flops += now->flops - before->flops;
    dst->mem_elems += now->mem_elems - before->mem_elems;
    dst->opt_elems += now->opt_elems - before->opt_elems;
    dst->h2d_bytes += now->h2d_bytes - before->h2d_bytes;
    dst->d2h_bytes += now->d2h_bytes - before->d2h_bytes;
    dst->kernels += now->kernels - before->kernels;
}

/* where the counters stand, and a new peak window on every tier */
static void mark(ZnPhaseMeter *pm, ZnEngine *E) {
    pm->comm0 = E->comm->stats;
    pm->dev0 = E->dev->work;
    pm->host0 = E->off.tier_host.work;
    pm->h2d0 = (double)E->off.h2d_bytes;
    pm->d2h0 = (double)E->off.d2h_bytes;
    for (int t = 0; t < ZN_NTIERS; t++) zn_mem_reset_window(tier_mem(E, t));
}

static void close_stretch(ZnPhaseMeter *pm, ZnEngine *E) {
    ZnPhaseStats *s = &pm->ph[pm->cur];
    const int first = !s->seen;
    s->seen = 1;
    for (int t = 0; t < ZN_NTIERS; t++) {
        const ZnMemStats *m = tier_mem(E, t);
        if (first || m->win_peak_total > s->peak[t]) {
            s->peak[t] = m->win_peak_total;
            memcpy(s->at_peak[t], m->win_at_peak, sizeof s->at_peak[t]);
        }
    }
    add_work(&s->dev, &E->dev->work, &pm->dev0);
    add_work(&s->host, &E->off.tier_host.work, &pm->host0);
    s->h2d += (double)E->off.h2d_bytes - pm->h2d0;
    s->d2h += (double)E->off.d2h_bytes - pm->d2h0;
    zn_comm_stats_add_delta(&s->comm, &E->comm->stats, &pm->comm0);
    mark(pm, E);
}

void zn_phase_meter_start(ZnPhaseMeter *pm, ZnEngine *E) {
    int *out = pm->phase_out;
    memset(pm, 0, sizeof *pm);
    pm->phase_out = out;
    pm->cur = ZN_PH_FORWARD;   /* the first micro-batch's activations are allocated before its first point */
    if (out) *out = pm->cur;
    mark(pm, E);
}

/* the phase each point opens: after the backward the boundary's reduction
   follows (or the next micro-step's set-up), both counted to the backward */
static int opens(const char *what) {
    if (!strcmp(what, "before forward") || !strcmp(what, "after forward")) return ZN_PH_FORWARD;
    if (!strcmp(what, "before backward") || !strcmp(what, "after backward")) return ZN_PH_BACKWARD;
    return ZN_PH_STEP;   /* "before step", "after step" */
}

void zn_phase_meter_point(void *ctx, ZnEngine *E, const char *what) {
    ZnPhaseMeter *pm = ctx;
    close_stretch(pm, E);
    pm->cur = opens(what);
    if (pm->phase_out) *pm->phase_out = pm->cur;
}

void zn_phase_meter_finish(ZnPhaseMeter *pm, ZnEngine *E) { close_stretch(pm, E); }
