/* run_report.c: the report lines of a run (run_report.h): memory, offload
 * traffic, time breakdown, comm volume and inter-node bytes, the step line,
 * the CSV/JSON-lines log and the digest. run.c drives the ranks and calls
 * these with what it measured; nothing here changes the run. */
#include "app/run_report.h"
#include "core/layout.h"
#include "core/plan.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* DeepSpeed's "CPU Virtual Memory" line: the machine's used memory (total
 * less available, psutil's virtual_memory), in GB and percent. */
static void cpu_memory_line(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char line[256];
    long total = -1, avail = -1, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %ld kB", &v) == 1) total = v;
        else if (sscanf(line, "MemAvailable: %ld kB", &v) == 1) avail = v;
    }
    fclose(f);
    if (total <= 0 || avail < 0) return;
    const double used = (double)(total - avail) * 1024.0;
    printf("[zinc] [rank 0] CPU Virtual Memory:  used = %.2f GB, percent = %.1f%%\n", used / (1024.0 * 1024.0 * 1024.0),
           100.0 * (double)(total - avail) / (double)total);
}

/* An offload tier's bytes by category (Z-OFF-007): what the rank's offloaded
 * states take in host memory and on NVMe. */
static void tier_line(const char *tier, const ZnMemStats *m) {
    printf("[zinc] [rank 0] %s bytes by category:", tier);
    for (int c = 0; c < ZN_MEM_NCAT; c++) printf(" %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->cur[c]);
    printf(" | total=%ld peak=%ld\n", m->cur_total, m->peak_total);
}

/* DeepSpeed's see_memory_usage lines (Z-REP-002), rank 0, then the
 * per-category split zinc adds; the peak window restarts after each report
 * as DeepSpeed resets the CUDA peak. */
void zn_report_memory(const ZnRunOpts *o, ZnEngine *E, const char *what) {
    if (E->world.rank != 0 || !o->memory_report) return;
    ZnMemStats *m = &E->dev->mem;
    const double GB = 1024.0 * 1024.0 * 1024.0;
    printf("[zinc] [rank 0] see_memory_usage: Engine %s\n", what);
    printf("[zinc] [rank 0] MA %.2f GB         Max_MA %.2f GB         CA %.2f GB         Max_CA %.0f GB\n",
           m->cur_total / GB, m->win_peak_total / GB, m->cur_total / GB, m->win_peak_total / GB);
    printf("[zinc] [rank 0] bytes by category:");
    for (int c = 0; c < ZN_MEM_NCAT; c++) printf(" %s=%ld", zn_mem_cat_name((ZnMemCat)c), m->cur[c]);
    printf(" | MA=%ld Max_MA=%ld", m->cur_total, m->win_peak_total);
    if (E->P.gather_per_layer) {   /* stage 3's gathered parameters since the last report (Z-S3-006) */
        printf(" | gathered params peak %ld now %ld elements", E->fetch.live_peak, E->fetch.n_avail);
        E->fetch.live_peak = E->fetch.n_avail;
    }
    printf("\n");
    cpu_memory_line();
    if (E->P.optim_tier != ZN_TIER_DEVICE || E->P.param_tier != ZN_TIER_DEVICE) {   /* Z-OFF-007 */
        tier_line("host", &E->off.tier_host.mem);
        tier_line("nvme", &E->off.tier_nvme.mem);
    }
}

/* Bytes an offloaded rank moved so far: H2D, D2H, NVMe read, NVMe write. */
void zn_report_moved(const ZnEngine *E, unsigned long long m[4]) {
    m[0] = E->off.h2d_bytes;
    m[1] = E->off.d2h_bytes;
    zn_engine_nvme_stats(E, &m[2], &m[3]);
}

/* The offload traffic of the steps since `before` (Z-OFF-009), rank 0. */
void zn_report_offload(const ZnEngine *E, const char *what, const unsigned long long before[4], long steps) {
    if (E->P.optim_tier == ZN_TIER_DEVICE && E->P.param_tier == ZN_TIER_DEVICE) return;
    unsigned long long m[4];
    zn_report_moved(E, m);
    const double s = (double)steps;
    printf("[zinc] offload %s rank %d: device->host %.0f B/step, host->device %.0f B/step, nvme read %.0f B/step, "
           "nvme write %.0f B/step (optimizer on %s, parameters on %s)\n",
           what, E->world.rank, (double)(m[1] - before[1]) / s, (double)(m[0] - before[0]) / s,
           (double)(m[2] - before[2]) / s, (double)(m[3] - before[3]) / s,
           E->P.optim_tier == ZN_TIER_NVME ? "nvme" : E->P.optim_tier == ZN_TIER_HOST ? "cpu" : "device",
           E->P.param_tier == ZN_TIER_HOST ? "cpu" : E->P.param_tier == ZN_TIER_NVME ? "nvme" : "device");
}

void zn_report_time(const ZnEngine *E) {
    const double ga = (double)E->cfg->grad_accum;
    printf("[Rank %d] time (ms) | fwd_microstep: %.2f | bwd_microstep: %.2f | bwd_inner_microstep: %.2f | "
           "bwd_allreduce_microstep: %.2f | step_microstep: %.2f\n",
           E->world.rank, E->t_fwd / ga, E->t_bwd / ga, (E->t_bwd - E->t_reduce) / ga, E->t_reduce / ga, E->t_step);
    fflush(stdout);
}

/* Gradient and parameter bytes per step against the ZeRO paper (Z-REP-005). */
double zn_run_zero_volume(const ZnRunOpts *o, long *psi, long *nbuckets) {
    ZnLayout L;
    ZnErr e;
    if (zn_config_layout(&o->cfg, &o->model, o->world.size, &L, &e)) return -1;
    const ZnPlan *P = &o->cfg.plan;
    const int N = o->world.size;
    *psi = L.aligned_numel;   /* every rank's partition times N: Ψ with the padding */
    if (nbuckets) *nbuckets = L.nbuckets;
    zn_layout_free(&L);
    return P->comm_volume_psi * (double)*psi * (N - 1) / N;
}

void zn_report_comm(const ZnRunOpts *o, int rank, const ZnCommStats *a, const ZnCommStats *b, long steps,
                    const char *what, const long *ga, const long *gb, const long *ia, const long *ib) {
    long c, g0, g1, p0, p1, r;
    zn_comm_tag_totals(a, "grad_reduce", &c, &g0, &r);
    zn_comm_tag_totals(b, "grad_reduce", &c, &g1, &r);
    zn_comm_tag_totals(a, "param_gather", &c, &p0, &r);
    zn_comm_tag_totals(b, "param_gather", &c, &p1, &r);
    long psi = 0;
    double vol = zn_run_zero_volume(o, &psi, NULL);
    const ZnPlan *P = &o->cfg.plan;
    const double es = (double)zn_dtype_size(o->cfg.model_dtype), N = o->world.size;
    const double total = (double)(g1 - g0 + p1 - p0) / steps;
    /* the measured volume in the paper's unit psi(N-1)/N */
    const double unit = N > 1 ? (double)psi * (N - 1) / N * es : 0.0;
    char phases[160] = "";
    if (P->gather_per_layer)   /* stage 3: where the gathers happened (Z-S3-006) */
        snprintf(phases, sizeof phases, " (forward %.0f, backward %.0f, after the step %.0f)",
                 (double)(gb[0] - ga[0]) / steps, (double)(gb[1] - ga[1]) / steps, (double)(gb[2] - ga[2]) / steps);
    printf("[zinc] comm %s rank %d: grad_reduce %.0f B/step, param_gather %.0f B/step%s, total %.0f B/step = "
           "%.2fpsi(N-1)/N; ZeRO paper %dpsi(N-1)/N = %.0f B/step (psi=%ld with padding, %.0f B/element)\n",
           what, rank, (double)(g1 - g0) / steps, (double)(p1 - p0) / steps, phases, total,
           unit > 0 ? total / unit : 0.0, P->comm_volume_psi, vol * es, psi, es);
    if (o->world.per_node < o->world.size) {   /* more than one node: what crossed (Z-GRP-003) */
        const long gi = zn_comm_tag_inter(b, "grad_reduce") - zn_comm_tag_inter(a, "grad_reduce");
        const long pi = zn_comm_tag_inter(b, "param_gather") - zn_comm_tag_inter(a, "param_gather");
        printf("[zinc] comm %s rank %d inter-node: grad_reduce %.0f B/step, param_gather %.0f B/step (forward %.0f, "
               "backward %.0f, after the step %.0f)\n", what, rank, (double)gi / steps, (double)pi / steps,
               (double)(ib[0] - ia[0]) / steps, (double)(ib[1] - ia[1]) / steps, (double)(ib[2] - ia[2]) / steps);
        if (o->proc_comm) {   /* what the transport really sent, beside the ring's model (Z-NODE-008) */
            const long wi = b->wire_inter - a->wire_inter, wo = b->wire_intra - a->wire_intra,
                       wm = b->wire_msgs_inter - a->wire_msgs_inter;
            printf("[zinc] comm %s rank %d on the wire: to other nodes %.0f B/step in %.0f messages, to its own node "
                   "%.0f B/step (%ld B in %ld messages and %ld B in %ld steps: the transport's direct exchange, each "
                   "piece to each peer, sequence records included)\n", what, rank, (double)wi / steps,
                   (double)wm / steps, (double)wo / steps, wi, wm, wo, steps);
        }
    }
}

/* The ZeRO++ paper's figure (Z-GRP-003): the bytes one node sends to the
 * others per step, summed over its ranks, by phase, in units of M, the
 * model's 16-bit bytes (2 per element, padding included). */
void zn_report_node_inter(const ZnRunOpts *o, const ZnRunResult *res) {
    double ph[4] = {0};
    const double ran = (double)(o->steps - res->first_step);   /* the steps this run took (a resumed run's are fewer) */
    for (int r = 0; r < o->world.per_node; r++)   /* node 0; every node sends alike */
        for (int j = 0; j < 4; j++) ph[j] += (double)res->inter[4 * r + j] / ran;
    long psi = 0;
    zn_run_zero_volume(o, &psi, NULL);
    const double M = 2.0 * (double)psi, tot = ph[0] + ph[1] + ph[2] + ph[3];
    printf("[zinc] comm inter-node: node 0 sends %.0f B/step = %.4fM (forward gather %.4fM, backward gather "
           "%.4fM, after the step %.4fM, gradient reduction %.4fM; M = %.0f B, the 16-bit model)\n",
           tot, tot / M, ph[0] / M, ph[1] / M, ph[2] / M, ph[3] / M, M);
}

void zn_report_step(FILE *out, const ZnRunOpts *o, long t, const ZnStepResult *sr, long skipped_steps, double ms,
                    long samples_before, double mean_step_s) {
    char scale[48] = "";
    if (o->cfg.model_dtype == ZN_F16) snprintf(scale, sizeof scale, " scale=%g", sr->loss_scale);
    /* a token model's throughput and the time left (Z-CLI-011), as llm.c and nanoGPT print */
    char tok[80] = "";
    if (o->model.kind == ZN_MODEL_GPT2 && ms > 0)
        snprintf(tok, sizeof tok, " tokens_per_s=%.0f eta_s=%.0f",
                 (double)(sr->samples - samples_before) * o->model.seq_len / (ms * 1e-3),
                 mean_step_s * (double)(o->steps - t - 1));
    fprintf(out, "step=%ld loss=%.6f lr=%g grad_norm=%.6f%s skipped=%ld samples=%ld time_ms=%.2f%s\n", t + 1, sr->loss,
            sr->lr, sr->grad_norm, scale, skipped_steps, sr->samples, ms, tok);
}

void zn_report_log_header(FILE *log, int jsonl) {
    if (jsonl) return;   /* JSON lines name their fields in every row */
    fprintf(log, "step,loss,lr,grad_norm,loss_scale,skipped,samples,step_time_ms");
    for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(log, ",peak_%s", zn_mem_cat_name((ZnMemCat)c));
    fprintf(log, "\n");
}

void zn_report_log_row(FILE *log, int jsonl, long t, const ZnStepResult *sr, double ms, const ZnMemStats *mem) {
    if (!jsonl) {
        fprintf(log, "%ld,%.9g,%.9g,%.9g,%g,%d,%ld,%.3f", t + 1, sr->loss, sr->lr, sr->grad_norm, sr->loss_scale,
                sr->skipped, sr->samples, ms);
        for (int c = 0; c < ZN_MEM_NCAT; c++) fprintf(log, ",%ld", mem->peak[c]);
        fprintf(log, "\n");
        return;
    }
    fprintf(log, "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, "
                 "\"loss_scale\": %g, \"skipped\": %d, \"samples\": %ld, \"step_time_ms\": %.3f, "
                 "\"peak_memory\": {",
            t + 1, isfinite(sr->loss) ? sr->loss : -1.0, sr->lr, sr->grad_norm, sr->loss_scale, sr->skipped,
            sr->samples, ms);
    for (int c = 0; c < ZN_MEM_NCAT; c++)
        fprintf(log, "%s\"%s\": %ld", c ? ", " : "", zn_mem_cat_name((ZnMemCat)c), mem->peak[c]);
    fprintf(log, "}}\n");
}

void zn_report_digest(FILE *out, uint64_t digest) { fprintf(out, "digest=%016llx\n", (unsigned long long)digest); }
