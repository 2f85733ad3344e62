/* plan_report.c: the report of a dry run (plan_report.h, spec Z-CAP-*). */
#include "app/plan_report.h"
#include "comm/comm_seq.h"
#include "core/alloc.h"
#include "core/json_track.h"
#include "io/plan_svg.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_MICRO (1L << 20)

const char *zn_plan_point_name(int overflow) {
    return overflow == 0 ? "init" : overflow > 0 && overflow <= ZN_PH_N ? zn_phase_name(overflow - 1) : "none";
}

long zn_plan_device_peak(const ZnDryRun *r) {
    long peak = r->init[ZN_DRY_DEVICE].peak_total;
    for (int ph = 0; ph < ZN_PH_N; ph++)
        if (r->ph[ph].seen && r->ph[ph].peak[ZN_TIER_DEVICE] > peak) peak = r->ph[ph].peak[ZN_TIER_DEVICE];
    return peak;
}

/* the first point whose peak passes capacity, -1 if none */
static int first_overflow(const ZnDryRun *r, long capacity) {
    if (r->init[ZN_DRY_DEVICE].peak_total > capacity) return 0;
    for (int ph = 0; ph < ZN_PH_N; ph++)
        if (r->ph[ph].seen && r->ph[ph].peak[ZN_TIER_DEVICE] > capacity) return 1 + ph;
    return -1;
}

/* the device peak of o's dry run at micro-batch mb (*peak), in a copy of o */
/* Options to change and a dry run to fill, on the heap (a ZnDryRun is
 * large); 0, or ZN_E_NOMEM with both NULL. */
static int scratch_new(ZnRunOpts **u, ZnDryRun **r, ZnErr *err) {
    *u = zn_malloc(ZN_HOST_APP, sizeof **u);
    *r = zn_malloc(ZN_HOST_APP, sizeof **r);
    if (*u && *r) return 0;
    ZN_FREE_ALL(*u, *r);
    *u = NULL;
    *r = NULL;
    return zn_nomem(err);
}

static int peak_at(const ZnRunOpts *o, long mb, ZnRunOpts *tmp, ZnDryRun *dr, long *peak, ZnErr *err) {
    *tmp = *o;
    tmp->cfg.micro_batch = mb;
    tmp->cfg.train_batch_size = mb * o->cfg.grad_accum * o->world.size;
    tmp->device_memory = 0;
    int rc = zn_dry_run(tmp, 1, dr, err);
    if (!rc) *peak = zn_plan_device_peak(dr);
    return rc;
}

int zn_plan_fit(const ZnRunOpts *o, const ZnDryRun *r, long capacity, ZnPlanFit *fit, ZnErr *err) {
    memset(fit, 0, sizeof *fit);
    fit->capacity = capacity;
    fit->overflow = first_overflow(r, capacity);
    fit->peak = zn_plan_device_peak(r);
    /* the peak grows with the micro-batch (activations): double, then halve */
    ZnRunOpts *tmp;
    ZnDryRun *dr;
    int rc = scratch_new(&tmp, &dr, err);
    if (rc) return rc;
    long lo = 0, lo_peak = 0, hi = 1, peak = 0;   /* lo fits (0: nothing known), hi to try */
    for (;;) {
        if ((rc = peak_at(o, hi, tmp, dr, &peak, err))) goto out;
        if (peak > capacity) break;
        lo = hi, lo_peak = peak;
        if (hi == MAX_MICRO) goto done;
        hi = hi * 2 > MAX_MICRO ? MAX_MICRO : hi * 2;
    }
    while (hi - lo > 1) {   /* lo fits (or is 0), hi does not */
        long mid = lo + (hi - lo) / 2;
        if ((rc = peak_at(o, mid, tmp, dr, &peak, err))) goto out;
        if (peak > capacity) hi = mid;
        else lo = mid, lo_peak = peak;
    }
done:
    fit->max_micro = lo;
    fit->max_micro_peak = lo_peak;
out:
    free(tmp);
    free(dr);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* the text */

/* bytes as a person reads them: GiB from 1 GiB, else MiB, else KiB (powers
   of 1024, named so: "GB" would say 10^9, 7% less) */
static const char *human(double b, char *buf, size_t n) {
    if (b >= GIB) snprintf(buf, n, "%.2f GiB", b / GIB);
    else if (b >= 1024.0 * 1024.0) snprintf(buf, n, "%.2f MiB", b / (1024.0 * 1024.0));
    else snprintf(buf, n, "%.2f KiB", b / 1024.0);
    return buf;
}

/* one tier in one phase: its peak, and the categories then, in GiB */
static void phase_tier_line(FILE *f, int rank, int ph, int t, const ZnPhaseStats *s) {
    char h[32];
    fprintf(f, "[zinc] dry run [rank %d] %s peak %s %s:", rank, zn_phase_name(ph), zn_tier_name(t),
            human((double)s->peak[t], h, sizeof h));
    int any = 0;
    for (int c = 0; c < ZN_MEM_NCAT; c++)
        if (s->at_peak[t][c]) {
            fprintf(f, "%s %s %s", any ? "," : "", zn_mem_cat_name((ZnMemCat)c),
                    human((double)s->at_peak[t][c], h, sizeof h));
            any = 1;
        }
    fprintf(f, "%s\n", any ? "" : " nothing");
}

static void print_phases(FILE *f, const ZnDryRun *r) {
    for (int ph = 0; ph < ZN_PH_N; ph++) {
        if (!r->ph[ph].seen) continue;
        for (int t = 0; t < ZN_NTIERS; t++)
            if (t == ZN_TIER_DEVICE || r->ph[ph].peak[t]) phase_tier_line(f, r->rank, ph, t, &r->ph[ph]);
    }
}

/* the nodes the link lines assume: "a node of 8", "one node of 64" */
static const char *node_words(const ZnWorld *w, char *buf, size_t n) {
    if (w->per_node < w->size) snprintf(buf, n, "a node of %d", w->per_node);
    else snprintf(buf, n, "one node of %d", w->size);
    return buf;
}

/* the step's collectives by kind, then by link class: a rank's bytes by
   link are its node's mean, what the step time prices (rank 0's own would
   show no byte crossing: its ring neighbour shares its node) */
static void print_calls(FILE *f, const ZnDryRun *r) {
    const int P = r->world.per_node, N = r->world.size;
    char nw[48];
    node_words(&r->world, nw, sizeof nw);
    double intra = 0, inter = 0, node = 0;
    for (int k = 0; k < r->calls.n; k++) {
        const ZnMetaClass *c = &r->calls.cls[k];
        double ci, cx;
        zn_meta_link_bytes(c, P, N, &ci, &cx);
        fprintf(f, "[zinc] dry run [rank %d] step collective: %s %s %s, group of %d (stride %d): %ld calls, "
                   "%.0f bytes sent; a rank of %s: %.0f within it, %.0f to other nodes; node egress %.0f\n",
                r->rank, zn_phase_name(c->phase), zn_coll_op_name(c->op), c->tag[0] ? c->tag : "-", c->grp.size,
                c->grp.stride, c->calls, c->sent, nw, ci, cx, c->node_inter);
        intra += ci, inter += cx, node += c->node_inter;
    }
    fprintf(f, "[zinc] dry run [rank %d] step bytes by link, a rank of %s: intra-node %.0f, inter-node %.0f; "
               "node egress %.0f (%.2f GiB per node)\n",
            r->rank, nw, intra, inter, node, node / GIB);
    if (r->world.per_node < r->world.size) {
        /* ZeRO++'s unit: M, the model's bytes in 16 bits (2 per padded element) */
        double ph[ZN_PH_N] = {0}, M = 2.0 * (double)r->padded;
        for (int k = 0; k < r->calls.n; k++) ph[r->calls.cls[k].phase] += r->calls.cls[k].node_inter;
        fprintf(f, "[zinc] dry run [rank %d] node egress per step in units of M (%.0f bytes): forward %.4fM, "
                   "backward %.4fM, step %.4fM, total %.4fM\n",
                r->rank, M, ph[0] / M, ph[1] / M, ph[2] / M, node / M);
    }
    if (r->calls.dropped)
        fprintf(f, "[zinc] dry run [rank %d] %d calls of more than %d kinds are left out of the above\n", r->rank,
                r->calls.dropped, ZN_META_MAX_CLASSES);
}

static void print_fit(FILE *f, const ZnPlanFit *fit) {
    char a[32], b[32];
    human((double)fit->capacity, a, sizeof a);
    human((double)fit->peak, b, sizeof b);
    if (fit->overflow < 0)
        fprintf(f, "[zinc] plan: device memory %s holds the run (peak %s)\n", a, b);
    else
        fprintf(f, "[zinc] plan: device memory %s overflows first in %s (peak %s)\n", a,
                zn_plan_point_name(fit->overflow), b);
    if (fit->max_micro > 0)
        fprintf(f, "[zinc] plan: largest micro-batch that fits: %ld (device peak %s)\n", fit->max_micro,
                human((double)fit->max_micro_peak, a, sizeof a));
    else
        fprintf(f, "[zinc] plan: largest micro-batch that fits: none (micro-batch 1 does not fit)\n");
}

static void print_time(FILE *f, const ZnMachine *m, int dflt, const ZnStepTime *t) {
    /* the GEMM rate the run is priced at: an fp32 model's is named */
    const char *fp32 = t->device_flops != m->device_flops ? " in fp32" : "";
    fprintf(f, "[zinc] plan: machine %s (%d GPUs per node, %.4g TFLOP/s%s, intra %.4g GB/s, inter %.4g GB/s per GPU)%s\n",
            m->name, m->gpus_per_node, t->device_flops / 1e12, fp32, m->intra.beta / 1e9, m->inter.beta / 1e9,
            dflt ? ", the default: --machine NAME|FILE.json for another" : "");
    for (int ph = 0; ph < ZN_PH_N; ph++)
        fprintf(f, "[zinc] plan: %-8s compute %.4g s, communication %.4g s (intra %.4g, inter %.4g, latency %.4g, "
                   "copies %.4g, nvme %.4g; %.4g may overlap), exposed %.4g s, phase %.4g s\n",
                zn_phase_name(ph), t->compute[ph], t->comm[ph], t->intra[ph], t->inter[ph], t->latency[ph],
                t->copies[ph], t->nvme[ph], t->overlap[ph], t->exposed[ph], t->total[ph]);
    fprintf(f, "[zinc] plan: step %.4g s predicted: %.4g samples/s", t->step_s, t->samples_per_s);
    if (t->tokens_per_s > 0) fprintf(f, ", %.4g tokens/s", t->tokens_per_s);
    fprintf(f, ", %.4g TFLOP/s per GPU\n", t->tflops_per_gpu);
}

/* ---------------------------------------------------------------------- */
/* the JSON */

static cJSON *cats(const long *v) {
    cJSON *o = cJSON_CreateObject();
    for (int c = 0; c < ZN_MEM_NCAT; c++) cJSON_AddNumberToObject(o, zn_mem_cat_name((ZnMemCat)c), (double)v[c]);
    return o;
}

static cJSON *json_doc(const ZnRunOpts *o, const ZnDryRun *r, const ZnPlanOpts *po, const ZnPlanFit *fit,
                       const ZnStepTime *t) {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "rank", r->rank);
    cJSON_AddNumberToObject(d, "world_size", r->world.size);
    cJSON_AddNumberToObject(d, "ranks_per_node", r->world.per_node);
    cJSON_AddNumberToObject(d, "stage", o->cfg.zero.stage);
    cJSON_AddNumberToObject(d, "micro_batch", (double)o->cfg.micro_batch);
    cJSON_AddNumberToObject(d, "grad_accum", (double)o->cfg.grad_accum);
    cJSON_AddNumberToObject(d, "parameters", (double)r->numel);
    cJSON_AddNumberToObject(d, "padded", (double)r->padded);
    cJSON_AddNumberToObject(d, "partition", (double)r->part_n);
    cJSON *init = zn_json_add(d, "init", cJSON_CreateObject());
    for (int tr = 0; tr < ZN_NTIERS; tr++) {
        cJSON *x = zn_json_add(init, zn_tier_name(tr), cJSON_CreateObject());
        cJSON_AddNumberToObject(x, "total", (double)r->init[tr].cur_total);
        cJSON_AddNumberToObject(x, "peak", (double)r->init[tr].peak_total);
        zn_json_add(x, "by_category", cats(r->init[tr].cur));
    }
    cJSON *ph = zn_json_add(d, "phases", cJSON_CreateObject());
    for (int p = 0; p < ZN_PH_N && r->stepped; p++) {
        const ZnPhaseStats *s = &r->ph[p];
        cJSON *x = zn_json_add(ph, zn_phase_name(p), cJSON_CreateObject());
        for (int tr = 0; tr < ZN_NTIERS; tr++) {
            cJSON *y = zn_json_add(x, zn_tier_name(tr), cJSON_CreateObject());
            cJSON_AddNumberToObject(y, "peak", (double)s->peak[tr]);
            zn_json_add(y, "at_peak", cats(s->at_peak[tr]));
        }
        cJSON_AddNumberToObject(x, "flops", s->dev.flops);
        cJSON_AddNumberToObject(x, "h2d_bytes", s->h2d);
        cJSON_AddNumberToObject(x, "d2h_bytes", s->d2h);
    }
    cJSON *cl = zn_json_add(d, "collectives", cJSON_CreateArray());
    double intra = 0, inter = 0, node = 0;
    for (int k = 0; k < r->calls.n; k++) {
        const ZnMetaClass *c = &r->calls.cls[k];
        double ci, cx;   /* a rank's by link, as the text prints them */
        zn_meta_link_bytes(c, r->world.per_node, r->world.size, &ci, &cx);
        cJSON *x = zn_json_add(cl, NULL, cJSON_CreateObject());
        cJSON_AddStringToObject(x, "phase", zn_phase_name(c->phase));
        cJSON_AddStringToObject(x, "op", zn_coll_op_name(c->op));
        cJSON_AddStringToObject(x, "tag", c->tag);
        cJSON_AddNumberToObject(x, "group_size", c->grp.size);
        cJSON_AddNumberToObject(x, "group_stride", c->grp.stride);
        cJSON_AddNumberToObject(x, "calls", (double)c->calls);
        cJSON_AddNumberToObject(x, "bytes_sent", c->sent);
        cJSON_AddNumberToObject(x, "bytes_inter_node", c->inter);
        cJSON_AddNumberToObject(x, "node_bytes_sent", c->node_sent);
        cJSON_AddNumberToObject(x, "node_egress", c->node_inter);
        cJSON_AddNumberToObject(x, "intra_node", ci);
        cJSON_AddNumberToObject(x, "inter_node", cx);
        intra += ci, inter += cx, node += c->node_inter;
    }
    cJSON *lk = zn_json_add(d, "link_bytes", cJSON_CreateObject());
    cJSON_AddNumberToObject(lk, "intra_node", intra);
    cJSON_AddNumberToObject(lk, "inter_node", inter);
    cJSON_AddNumberToObject(lk, "node_egress", node);
    cJSON_AddNumberToObject(d, "nvme_read_bytes", r->nvme_read);
    cJSON_AddNumberToObject(d, "nvme_write_bytes", r->nvme_write);
    cJSON_AddNumberToObject(d, "device_peak", (double)zn_plan_device_peak(r));
    if (fit) {
        cJSON *x = zn_json_add(d, "fit", cJSON_CreateObject());
        cJSON_AddNumberToObject(x, "device_memory", (double)fit->capacity);
        if (fit->overflow < 0) cJSON_AddNullToObject(x, "overflow");
        else cJSON_AddStringToObject(x, "overflow", zn_plan_point_name(fit->overflow));
        cJSON_AddNumberToObject(x, "largest_micro_batch", (double)fit->max_micro);
        cJSON_AddNumberToObject(x, "largest_micro_batch_peak", (double)fit->max_micro_peak);
    }
    if (t) {
        cJSON *x = zn_json_add(d, "time", cJSON_CreateObject());
        cJSON_AddStringToObject(x, "machine", po->machine->name);
        cJSON_AddBoolToObject(x, "default_machine", po->default_machine);
        cJSON *y = zn_json_add(x, "phases", cJSON_CreateObject());
        for (int p = 0; p < ZN_PH_N; p++) {
            cJSON *z = zn_json_add(y, zn_phase_name(p), cJSON_CreateObject());
            cJSON_AddNumberToObject(z, "compute_s", t->compute[p]);
            cJSON_AddNumberToObject(z, "comm_s", t->comm[p]);
            cJSON_AddNumberToObject(z, "overlap_s", t->overlap[p]);
            cJSON_AddNumberToObject(z, "exposed_s", t->exposed[p]);
            cJSON_AddNumberToObject(z, "total_s", t->total[p]);
        }
        cJSON_AddNumberToObject(x, "step_s", t->step_s);
        cJSON_AddNumberToObject(x, "samples_per_s", t->samples_per_s);
        cJSON_AddNumberToObject(x, "tokens_per_s", t->tokens_per_s);
        cJSON_AddNumberToObject(x, "tflops_per_gpu", t->tflops_per_gpu);
    }
    return d;
}

/* ---------------------------------------------------------------------- */
/* the picture */

static int save_svg(const ZnRunOpts *o, const ZnDryRun *r, long capacity, const ZnStepTime *t, const char *path,
                    ZnErr *err) {
    ZnPlanSvg p;
    memset(&p, 0, sizeof p);
    char title[256];
    snprintf(title, sizeof title, "%.120s, stage %d, %d ranks (%d per node), micro-batch %ld: rank %d",
             o->model_spec, o->cfg.zero.stage, r->world.size, r->world.per_node,
             o->cfg.micro_batch, r->rank);
    p.title = title;
    p.ncat = ZN_MEM_NCAT;
    for (int c = 0; c < ZN_MEM_NCAT; c++) p.cat[c] = zn_mem_cat_name((ZnMemCat)c);
    p.nphase = ZN_PH_N;
    for (int ph = 0; ph < ZN_PH_N; ph++) {
        p.phase[ph] = zn_phase_name(ph);
        for (int c = 0; c < ZN_MEM_NCAT; c++) p.mem[ph][c] = (double)r->ph[ph].at_peak[ZN_TIER_DEVICE][c];
        if (t) {
            p.compute[ph] = t->compute[ph];
            p.comm[ph] = t->comm[ph];
            p.exposed[ph] = t->exposed[ph];
        }
    }
    p.capacity = (double)capacity;
    p.timed = t != NULL;
    return zn_plan_svg_save(path, &p, err);
}

int zn_plan_run(const ZnRunOpts *o, const ZnPlanOpts *po, FILE *out, ZnErr *err) {
    ZnRunOpts *u;
    ZnDryRun *r;
    int rc = scratch_new(&u, &r, err);
    if (rc) return rc;
    *u = *o;
    u->device_memory = 0;   /* uncapped: the report says where the capacity is passed */
    const int step = o->steps > 0;
    if ((rc = zn_dry_run(u, step, r, err))) goto out;
    ZnPlanFit fit, *pfit = NULL;
    if (po->capacity > 0 && step) {
        if ((rc = zn_plan_fit(u, r, po->capacity, &fit, err))) goto out;
        pfit = &fit;
    }
    ZnStepTime t, *pt = NULL;
    if (po->machine && step) {
        if ((rc = zn_step_time(o, r, po->machine, &t, err))) goto out;
        pt = &t;
    }
    if (po->json) {
        zn_json_track();
        cJSON *d = json_doc(o, r, po, pfit, pt);
        char *s = d && !zn_json_failed() ? zn_json_print(d, 1) : NULL;
        cJSON_Delete(d);
        if (!s) {
            rc = zn_nomem(err);
            goto out;
        }
        fprintf(out, "%s\n", s);
        cJSON_free(s);
    } else {
        zn_dry_run_print(out, o, r);
        if (step) {
            print_phases(out, r);
            print_calls(out, r);
        }
        if (pfit) print_fit(out, pfit);
        if (pt) print_time(out, po->machine, po->default_machine, pt);
        else if (step && po->default_machine)
            fprintf(out, "[zinc] plan: no step time: the run's nodes are not %s's; give --machine\n", "dgx-h100");
    }
    if (po->svg_path && (rc = save_svg(o, r, po->capacity, pt, po->svg_path, err))) goto out;
out:
    free(u);
    free(r);
    return rc;
}
