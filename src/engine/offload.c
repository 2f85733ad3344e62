/* offload.c: the optimizer state, the gradient partition and the stage-3
 * parameter partition on the host and on NVMe (spec Z-OFF-*, offload.h).
 *
 * Data flow with the optimizer offloaded (DeepSpeed stage_1_and_2.py and
 * stage3.py with offload_optimizer, reference offload-and-zeropp.md §A2):
 *   stages 2/3  each reduced gradient slice goes down to the host gradient
 *               partition as its bucket is reduced (D2H, 4 B/element)
 *   stage 1     the reduced partition goes down at the step (D2H, 4 B)
 *   the step    host Adam per group, in group order; NVMe groups are read
 *               into host buffers first and written back after
 *   after it    the updated working copy goes up (H2D, model dtype bytes)
 * The host kernels are the device kernels' twins and copies move bits
 * unchanged, so the run's bits are those of the run without offload. */
#include "engine/offload.h"
#include "core/alloc.h"
#include "engine/decay.h"
#include "io/swap.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Staging goes in chunks: Adam, the add and the rounding are element-wise,
   so cutting a range changes no bit, and a staging buffer stays small. */
#define ZN_OFF_CHUNK (1L << 20)

/* DeepSpeed swaps a sub-group only from this size (MIN_AIO_BYTES) */
#define ZN_OFF_MIN_SWAP_BYTES (1L << 20)

static long lmin(long a, long b) { return a < b ? a : b; }
static long lmax(long a, long b) { return a > b ? a : b; }
static size_t align_up(size_t n) { return (n + ZN_SWAP_ALIGN - 1) / ZN_SWAP_ALIGN * ZN_SWAP_ALIGN; }

float *zn_off_alloc(ZnEngine *E, ZnDevice *d, long n, ZnMemCat cat, int as_dtype, ZnErr *err) {
    size_t m = (size_t)(n > 0 ? n : 1);
    size_t es = as_dtype ? zn_dtype_size(E->dt) : sizeof(float);
    return (float *)zn_dev_alloc_as(d, m * sizeof(float), m * es, cat, err);
}

void zn_off_copy(ZnEngine *E, float *dst, ZnDevice *dd, const float *src, ZnDevice *sd, long n, size_t es) {
    if (n <= 0) return;
    size_t bytes = (size_t)n * sizeof(float);
    if (dd == sd) {
        dd->k->copy(dd, dst, src, bytes);
    } else if (sd == E->dev) {   /* device to host */
        /* a dry run's host tier is meta tokens: no memory to write, but the
           bytes a real run moves are counted all the same (Z-DRY-004) */
        if (!dd->meta) E->k->download(E->dev, dst, src, bytes);
        E->off.d2h_bytes += (unsigned long long)n * es;
    } else if (dd == E->dev) {   /* host to device */
        E->k->upload(E->dev, dst, src, bytes);
        E->off.h2d_bytes += (unsigned long long)n * es;
    } else if (!dd->meta) {      /* host to host (two host tiers: never today) */
        memcpy(dst, src, bytes);
    }
}

int zn_off_init(ZnEngine *E, ZnErr *err) {
    zn_device_host_init(&E->off.tier_host);
    E->off.tier_host.name = "cpu";
    E->off.tier_host.meta = E->dev->meta;   /* a dry run counts the host too */
    /* and its host kernels do nothing either: they would read meta tokens */
    if (E->dev->meta) E->off.tier_host.k = E->dev->k;
    zn_device_host_init(&E->off.tier_nvme);
    E->off.tier_nvme.name = "nvme";
    E->off.tier_nvme.meta = 1;              /* the files hold the bytes */
    E->off.gdev = E->P.grads_on_host ? &E->off.tier_host : E->dev;
    E->off.pdev = E->P.param_tier != ZN_TIER_DEVICE ? &E->off.tier_host : E->dev;   /* NVMe: through host buffers */
    (void)err;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* the groups */

static ZnDevice *group_mem(ZnEngine *E, const ZnOptGroup *g) {
    return g->tier == ZN_TIER_DEVICE ? E->dev : &E->off.tier_host;   /* NVMe groups are worked on in host buffers */
}

/* fp32 stage 0 steps the model weights themselves: its master is flat_params */
static int master_aliased(const ZnEngine *E) { return E->P.optim == ZN_HOLD_FULL && E->dt == ZN_F32; }

/* the groups' ranges: DeepSpeed's sub-groups at stage 3, else one */
static int make_groups(ZnEngine *E, ZnErr *err) {
    const ZnLayout *L = &E->L;
    int n = E->P.step_per_subgroup ? L->nsubgroups : 1;
    E->og = zn_calloc(ZN_HOST_ENGINE, (size_t)n + 1, sizeof *E->og);
    if (!E->og) return zn_nomem(err);
    if (!E->P.step_per_subgroup) {
        E->og[0] = (ZnOptGroup){.lo = 0, .hi = E->part_n, .slo = 0, .shi = E->part_n, .fid = -1};
        E->nog = 1;
        return 0;
    }
    int k = 0;
    for (int s = 0; s < L->nsubgroups; s++) {
        int p0 = L->subgroup_first[s], p1 = L->subgroup_first[s + 1];
        if (p1 <= p0) continue;
        long slo = L->s3_off[p0], shi = L->s3_off[p1 - 1] + L->s3_pn[p1 - 1];
        E->og[k++] = (ZnOptGroup){.lo = slo, .hi = shi, .slo = slo, .shi = shi, .fid = -1};
    }
    if (k == 0) E->og[k++] = (ZnOptGroup){.lo = 0, .hi = E->part_n, .slo = 0, .shi = 0, .fid = -1};
    /* storage covers the whole partition: a gap or tail (never today) joins
       the group before it, and is stored but not stepped, as before */
    E->og[0].lo = 0;
    for (int i = 1; i < k; i++) E->og[i].lo = E->og[i - 1].hi;
    E->og[k - 1].hi = E->part_n;
    E->nog = k;
    return 0;
}

/* DeepSpeed's Twin-Flow split: group i is offloaded iff i >= int((1 - ratio) * S) */
static ZnTier group_tier(const ZnEngine *E, int i) {
    ZnTier t = E->P.optim_tier;
    if (t == ZN_TIER_DEVICE) return t;
    if (i < (int)((1.0 - E->P.optim_ratio) * (double)E->nog)) return ZN_TIER_DEVICE;
    if (t == ZN_TIER_NVME) {
        long bytes = (E->og[i].hi - E->og[i].lo) * (long)sizeof(float);
        if (bytes < lmax(ZN_OFF_MIN_SWAP_BYTES, E->cfg->aio.block_size)) return ZN_TIER_HOST;
    }
    return t;
}

/* O_DIRECT wants ZN_SWAP_ALIGN-aligned buffers: the swap layer's own,
   charged to the host tier like any other host memory (a dry run's only
   charged) */
int zn_off_bufs_init(ZnEngine *E, ZnSwapBufs *b, int count, size_t bytes, ZnErr *err) {
    b->bytes = bytes;
    b->buf = zn_calloc(ZN_HOST_ENGINE, (size_t)count, sizeof(void *));
    if (!b->buf) return zn_nomem(err);
    for (int i = 0; i < count; i++) {
        if (zn_mem_charge(&E->off.tier_host, bytes, ZN_MEM_BUCKETS, err)) return err->code;
        if (!E->dev->meta && !(b->buf[i] = zn_swap_buf_alloc(bytes, err))) {
            zn_mem_uncharge(&E->off.tier_host, bytes, ZN_MEM_BUCKETS);
            return err->code;
        }
        b->n++;
    }
    return 0;
}

void zn_off_bufs_free(ZnEngine *E, ZnSwapBufs *b) {
    for (int i = 0; i < b->n; i++) {
        zn_swap_buf_free(b->buf[i]);
        zn_mem_uncharge(&E->off.tier_host, b->bytes, ZN_MEM_BUCKETS);
    }
    b->n = 0;
    free(b->buf);
    b->buf = NULL;
}

static int nvme_sets(const ZnEngine *E) {
    const ZnOffloadConfig *o = &E->cfg->zero.offload_optimizer;
    return 1 + (o->pipeline_read != 0) + (o->pipeline_write != 0);
}

/* The swap files and the host buffers of the NVMe groups. */
static int nvme_init(ZnEngine *E, ZnErr *err) {
    const ZnOffloadConfig *o = &E->cfg->zero.offload_optimizer;
    long maxn = 0;
    size_t need = 0;
    int any = 0;
    for (int i = 0; i < E->nog; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier != ZN_TIER_NVME) continue;
        any = 1;
        g->region = align_up((size_t)(g->hi - g->lo) * sizeof(float));
        need += 3 * g->region;
        maxn = lmax(maxn, g->hi - g->lo);
    }
    if (!any) return 0;
    const int want = 3 * nvme_sets(E);   /* master and two moments per group in flight */
    if (o->buffer_count < want)
        return zn_err(err, ZN_E_USAGE, "zero_optimization.offload_optimizer.buffer_count: %ld buffers cannot hold "
                      "%d sub-groups' fp32 master and Adam moments (%d needed with pipeline_read=%d, pipeline_write=%d);"
                      " raise buffer_count", o->buffer_count, want / 3, want, o->pipeline_read, o->pipeline_write);
    /* DeepSpeed's SwapBufferManager: buffer_count buffers of the largest
       sub-group, fp32, on the host */
    int rc = zn_off_bufs_init(E, &E->off.swapbufs, (int)o->buffer_count, align_up((size_t)maxn * sizeof(float)), err);
    if (rc) return rc;
    for (int i = 0; i < E->nog; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier != ZN_TIER_NVME) continue;
        for (int s = 0; s < 3; s++)
            if (zn_mem_charge(&E->off.tier_nvme, g->region, s == 0 ? ZN_MEM_MASTER32 : s == 1 ? ZN_MEM_EXP_AVG
                              : ZN_MEM_EXP_AVG_SQ, err)) return err->code;
    }
    if (E->dev->meta) return 0;   /* a dry run writes no file */
    ZnAioMode mode;
    if ((rc = zn_aio_mode_from_env(&mode, err))) return rc;
    FILE *log = E->world.rank == 0 && !E->hooks.quiet ? stdout : NULL;
    if ((rc = zn_swap_open(&E->off.swap, o->nvme_path, E->world.rank, need, &E->cfg->aio, mode, log, err))) return rc;
    for (int i = 0; i < E->nog && !rc; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier != ZN_TIER_NVME) continue;
        char name[64];
        snprintf(name, sizeof name, "optimizer_subgroup%d.swp", i);
        rc = zn_swap_file(E->off.swap, name, 3 * g->region, &g->fid, err);
    }
    return rc;
}

/* NVMe: queue the reads or writes of group g's three states from or to
   buffer set `set` (buffers 3*set .. 3*set+2). */
static int nvme_io(ZnEngine *E, const ZnOptGroup *g, int set, int write, ZnErr *err) {
    size_t n = (size_t)(g->hi - g->lo) * sizeof(float);
    for (int s = 0; s < 3; s++) {
        float *buf = E->off.swapbufs.buf[3 * set + s];
        int rc = write ? zn_swap_write(E->off.swap, g->fid, (size_t)s * g->region, buf, n, err)
                       : zn_swap_read(E->off.swap, g->fid, (size_t)s * g->region, buf, n, err);
        if (rc) return zn_err_prefix(err, "optimizer sub-group %d: ", (int)(g - E->og));
    }
    return 0;
}

int zn_off_groups_init(ZnEngine *E, const float *init, ZnDevice *init_dev, ZnErr *err) {
    int rc = make_groups(E, err);
    if (rc) return rc;
    for (int i = 0; i < E->nog; i++) E->og[i].tier = group_tier(E, i);
    static const ZnMemCat cats[3] = {ZN_MEM_MASTER32, ZN_MEM_EXP_AVG, ZN_MEM_EXP_AVG_SQ};
    for (int i = 0; i < E->nog; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier == ZN_TIER_NVME) continue;
        ZnDevice *d = group_mem(E, g);
        for (int s = 0; s < 3; s++) {
            if (s == 0 && master_aliased(E)) { g->st[0] = (float *)init; continue; }
            if (!(g->st[s] = zn_off_alloc(E, d, g->hi - g->lo, cats[s], 0, err))) return err->code;
        }
        if (!master_aliased(E)) zn_off_copy(E, g->st[0], d, init + g->lo, init_dev, g->hi - g->lo, sizeof(float));
    }
    if ((rc = nvme_init(E, err))) return rc;
    /* staging: a host chunk when a host group's gradient is on the device
       (stage 1) or a received slice goes to the host (stages 2/3); a device
       chunk when a device group's gradient is on the host (ratio < 1) */
    int need_h = E->P.grads_on_host, need_d = 0;
    for (int i = 0; i < E->nog; i++) {
        ZnDevice *d = group_mem(E, &E->og[i]);
        if (d != E->off.gdev && d != E->dev) need_h = 1;
        if (d != E->off.gdev && d == E->dev) need_d = 1;
    }
    if (need_h && !(E->off.hstage = zn_off_alloc(E, &E->off.tier_host, ZN_OFF_CHUNK, ZN_MEM_BUCKETS, 0, err))) return err->code;
    if (need_d && !(E->off.dstage = zn_off_alloc(E, E->dev, ZN_OFF_CHUNK, ZN_MEM_BUCKETS, 0, err))) return err->code;
    /* the NVMe groups' first contents: the masters, and zero moments */
    for (int i = 0; i < E->nog && E->off.swap; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier != ZN_TIER_NVME) continue;
        zn_off_copy(E, E->off.swapbufs.buf[0], &E->off.tier_host, init + g->lo, init_dev, g->hi - g->lo, sizeof(float));
        memset(E->off.swapbufs.buf[1], 0, E->off.swapbufs.bytes);
        memset(E->off.swapbufs.buf[2], 0, E->off.swapbufs.bytes);
        if ((rc = nvme_io(E, g, 0, 1, err)) || (rc = zn_swap_wait(E->off.swap, err))) return rc;
    }
    return 0;
}

void zn_off_free(ZnEngine *E) {
    zn_offp_free(E);   /* before the optimizer's swap space, which it may share */
    for (int i = 0; i < E->nog && E->og; i++) {
        ZnOptGroup *g = &E->og[i];
        ZnDevice *d = group_mem(E, g);
        for (int s = 0; s < 3; s++)
            if (g->st[s] && !(s == 0 && master_aliased(E))) zn_dev_free(d, g->st[s]);
    }
    free(E->og);
    E->og = NULL;
    zn_off_bufs_free(E, &E->off.swapbufs);
    zn_dev_free(&E->off.tier_host, E->off.hstage);
    if (E->dev) zn_dev_free(E->dev, E->off.dstage);
    zn_swap_close(E->off.swap, 1);   /* the swap files go at exit (Z-NVME) */
    E->off.swap = NULL;
}

/* ---------------------------------------------------------------------- */
/* gradients entering the host partition */

void zn_off_put_grad(ZnEngine *E, float *dst, const float *src, long n, int add) {
    ZnDevice *h = &E->off.tier_host;
    for (long c0 = 0; c0 < n; c0 += ZN_OFF_CHUNK) {
        long c = lmin(ZN_OFF_CHUNK, n - c0);
        if (add) {
            zn_off_copy(E, E->off.hstage, h, src + c0, E->dev, c, sizeof(float));
            h->k->add(h, E->dt, dst + c0, E->off.hstage, c);
        } else {
            zn_off_copy(E, dst + c0, h, src + c0, E->dev, c, sizeof(float));
            h->k->round_dt(h, E->dt, dst + c0, c);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* the step */

/* Adam over [c0, c1) of group g, whose states st (tier d) start at element
   g->lo; grad: element c0 at grad[0], on d; work: element i at work[i], on
   d, or NULL. One call per weight-decay range (Z-OPT-020). */
static void adam_span(ZnEngine *E, ZnDevice *d, const ZnOptGroup *g, float *const st[3], long c0, long c1,
                      const float *grad, const ZnAdamParams *hp, float mul, float *work) {
    for (int i = 0; i < E->ndecay; i++) {
        long a = lmax(E->decay[i].lo, c0), b = lmin(E->decay[i].hi, c1);
        if (b <= a) continue;
        ZnAdamParams h = *hp;
        if (!E->decay[i].decay) h.weight_decay = 0.0;
        long o = a - g->lo;
        d->k->adam(d, b - a, st[0] + o, grad + (a - c0), st[1] + o, st[2] + o, &h, E->opt_step, mul,
                   work ? work + a : NULL, E->dt);
    }
}

/* The working copy of [c0, c1) from a master on another tier: copy, then
   round where the working copy lives (the fused Adam's round, apart). */
static void work_from_master(ZnEngine *E, float *work, ZnDevice *wdev, const float *master, ZnDevice *md,
                             long c0, long c1) {
    zn_off_copy(E, work + c0, wdev, master, md, c1 - c0, zn_dtype_size(E->dt));
    wdev->k->round_dt(wdev, E->dt, work + c0, c1 - c0);
}

static void step_group(ZnEngine *E, const ZnOptGroup *g, float *const st[3], const ZnAdamParams *hp, float mul,
                       float *work, ZnDevice *wdev) {
    ZnDevice *d = group_mem(E, g);
    float *wk = wdev == d ? work : NULL;   /* fused: Adam writes the working copy */
    if (E->off.gdev == d) {   /* the gradient is where the states are: one pass */
        adam_span(E, d, g, st, g->slo, g->shi, E->grad_part + g->slo, hp, mul, wk);
        if (work && !wk) work_from_master(E, work, wdev, st[0] + (g->slo - g->lo), d, g->slo, g->shi);
        return;
    }
    float *stage = d == E->dev ? E->off.dstage : E->off.hstage;
    for (long c0 = g->slo; c0 < g->shi; c0 += ZN_OFF_CHUNK) {
        long c1 = lmin(c0 + ZN_OFF_CHUNK, g->shi);
        zn_off_copy(E, stage, d, E->grad_part + c0, E->off.gdev, c1 - c0, sizeof(float));
        adam_span(E, d, g, st, c0, c1, stage, hp, mul, wk);
        if (work && !wk) work_from_master(E, work, wdev, st[0] + (c0 - g->lo), d, c0, c1);
    }
}

/* The buffers of set `set` as a group's states. */
static void set_states(ZnEngine *E, int set, float *st[3]) {
    for (int s = 0; s < 3; s++) st[s] = E->off.swapbufs.buf[3 * set + s];
}

/* the next NVMe group after i, or -1 */
static int next_nvme(const ZnEngine *E, int i) {
    for (int j = i + 1; j < E->nog; j++) if (E->og[j].tier == ZN_TIER_NVME) return j;
    return -1;
}

int zn_off_step(ZnEngine *E, const ZnAdamParams *hp, float mul, float *work, ZnDevice *wdev, ZnErr *err) {
    const ZnOffloadConfig *o = &E->cfg->zero.offload_optimizer;
    const int nsets = nvme_sets(E);
    int rc = 0, set = 0, k = 0;   /* k: NVMe groups stepped so far */
    int queued = -1;              /* the NVMe group whose reads are queued (pipeline_read) */
    for (int i = 0; i < E->nog && !rc; i++) {
        ZnOptGroup *g = &E->og[i];
        if (g->tier != ZN_TIER_NVME) {
            step_group(E, g, g->st, hp, mul, work, wdev);
            if (E->off.pslot && (rc = zn_offp_store(E, g->lo, g->hi, g->st[0], group_mem(E, g), err))) break;
            continue;
        }
        if (!E->off.swap) continue;   /* a dry run: no data */
        set = k % nsets;
        /* the group's states into its buffers (already queued when pipelined);
           the wait also completes the previous group's writes */
        if (queued != i && (rc = nvme_io(E, g, set, 0, err))) break;
        if ((rc = zn_swap_wait(E->off.swap, err))) break;
        /* DeepSpeed's pipeline_read: the next group's reads overlap this step */
        int nx = o->pipeline_read ? next_nvme(E, i) : -1;
        if (nx >= 0 && (rc = nvme_io(E, &E->og[nx], (k + 1) % nsets, 0, err))) break;
        queued = nx;
        float *st[3];
        set_states(E, set, st);
        step_group(E, g, st, hp, mul, work, wdev);
        if (E->off.pslot && (rc = zn_offp_store(E, g->lo, g->hi, st[0], &E->off.tier_host, err))) break;
        if ((rc = nvme_io(E, g, set, 1, err))) break;
        /* pipeline_write: the writes complete at the next wait */
        if (!o->pipeline_write && (rc = zn_swap_wait(E->off.swap, err))) break;
        k++;
    }
    if (E->off.swap) {
        int rc2 = zn_swap_wait(E->off.swap, err);
        if (!rc) rc = rc2;
    }
    return rc ? zn_err_prefix(err, "rank %d: NVMe optimizer swap: ", E->world.rank) : 0;
}

/* ---------------------------------------------------------------------- */
/* whole-partition access (checkpoints, resume, reports) */

/* Group g's states in host-visible memory: in place, or read from NVMe into
   buffer set 0. */
static int group_load(ZnEngine *E, const ZnOptGroup *g, float *st[3], ZnErr *err) {
    if (g->tier != ZN_TIER_NVME) {
        for (int s = 0; s < 3; s++) st[s] = g->st[s];
        return 0;
    }
    if (!E->off.swap) return zn_err(err, ZN_E_USAGE, "a dry run holds no optimizer state to read");
    set_states(E, 0, st);
    int rc = nvme_io(E, g, 0, 0, err);
    return rc ? rc : zn_swap_wait(E->off.swap, err);
}

static int group_store(ZnEngine *E, const ZnOptGroup *g, ZnErr *err) {
    if (g->tier != ZN_TIER_NVME) return 0;
    int rc = nvme_io(E, g, 0, 1, err);
    return rc ? rc : zn_swap_wait(E->off.swap, err);
}

/* State `which` of every group to the host array `to` (the partition's
 * layout), or, with `to` NULL, from the host array `from` into the groups
 * (NVMe groups written back to their files). */
static int state_move(ZnEngine *E, int which, float *to, const float *from, ZnErr *err) {
    for (int i = 0; i < E->nog; i++) {
        const ZnOptGroup *g = &E->og[i];
        float *st[3];
        int rc = group_load(E, g, st, err);
        if (rc) return rc;
        ZnDevice *d = group_mem(E, g);
        const size_t bytes = (size_t)(g->hi - g->lo) * sizeof(float);
        if (to) {
            d->k->download(d, to + g->lo, st[which], bytes);
            if (d == E->dev) E->off.d2h_bytes += bytes;
            continue;
        }
        if (st[which] != from + g->lo) {   /* a state read in place is there already */
            d->k->upload(d, st[which], from + g->lo, bytes);
            if (d == E->dev) E->off.h2d_bytes += bytes;
        }
        if ((rc = group_store(E, g, err))) return rc;
    }
    return 0;
}

int zn_off_state_read(ZnEngine *E, int which, float *host, ZnErr *err) { return state_move(E, which, host, NULL, err); }

int zn_off_state_write(ZnEngine *E, int which, const float *host, ZnErr *err) {
    return state_move(E, which, NULL, host, err);
}

float *zn_off_state_in_place(const ZnEngine *E, int which) {
    if (E->nog != 1 || E->og[0].tier == ZN_TIER_NVME) return NULL;
    const ZnDevice *d = E->og[0].tier == ZN_TIER_DEVICE ? E->dev : &E->off.tier_host;
    return d->host_addressable && !d->meta ? E->og[0].st[which] : NULL;
}

int zn_off_cast_work(ZnEngine *E, float *work, ZnDevice *wdev, ZnErr *err) {
    for (int i = 0; i < E->nog; i++) {
        const ZnOptGroup *g = &E->og[i];
        float *st[3];
        int rc = group_load(E, g, st, err);
        if (rc) return rc;
        if (E->off.pslot) rc = zn_offp_store(E, g->lo, g->hi, st[0], group_mem(E, g), err);
        else if (work) work_from_master(E, work, wdev, st[0], group_mem(E, g), g->lo, g->hi);
        if (rc) return rc;
    }
    return 0;
}

int zn_off_add_master(ZnEngine *E, long i, float delta, float *work, ZnDevice *wdev, ZnErr *err) {
    for (int j = 0; j < E->nog; j++) {
        const ZnOptGroup *g = &E->og[j];
        if (i < g->lo || i >= g->hi) continue;
        float *st[3], x;
        int rc = group_load(E, g, st, err);
        if (rc) return rc;
        ZnDevice *d = group_mem(E, g);
        d->k->download(d, &x, st[0] + (i - g->lo), sizeof x);
        x = x + delta;
        d->k->upload(d, st[0] + (i - g->lo), &x, sizeof x);
        if (E->off.pslot) rc = zn_offp_store(E, g->lo, g->hi, st[0], d, err);
        else if (work) work_from_master(E, work, wdev, st[0] + (i - g->lo), d, i, i + 1);
        return rc ? rc : group_store(E, g, err);
    }
    return 0;
}
