/* offload_param.c: stage-3 parameter partitions on NVMe (ZeRO-Infinity's
 * offload_param device "nvme", spec Z-OFF-013).
 *
 * Which partitions go to NVMe (DeepSpeed Init._partition_param and the
 * parameter swapper, reference offload-and-zeropp.md §A2.4): a partition of
 * at least max(1 MiB, aio block_size) bytes is swappable; zinc keeps
 * swappable partitions in host memory, in model order, while they fit in
 * offload_param.max_in_cpu elements, and puts the rest in one swap file
 * (each partition at an aligned offset, in the model dtype's bytes). The
 * others stay in host memory (E->off.phost, packed).
 *
 * A gather reads the partition into one of buffer_count aligned buffers
 * (each able to hold the largest swapped partition: DeepSpeed asserts
 * buffer_size covers it), widens it to floats on the host and sends it up.
 * After the optimizer step each updated sub-group is cast and written back.
 * Reads are synchronous: zinc does not prefetch NVMe partitions (DeepSpeed
 * reads ahead along the trace once it is complete). */
#include "engine/offload.h"
#include "core/alloc.h"
#include "io/swap.h"
#include <stdlib.h>
#include <string.h>

#define ZN_OFF_MIN_SWAP_BYTES (1L << 20)

static size_t align_up(size_t n) { return (n + ZN_SWAP_ALIGN - 1) / ZN_SWAP_ALIGN * ZN_SWAP_ALIGN; }

/* the bytes of n elements of the model dtype in a file */
static size_t dt_bytes(const ZnEngine *E, long n) { return (size_t)n * zn_dtype_size(E->dt); }

/* Packs n floats (grid values of the model dtype) into the dtype's bytes. */
static void pack(const ZnEngine *E, void *dst, const float *src, long n) {
    const ZnDevice *h = &E->off.tier_host;
    if (E->dt == ZN_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else h->k->pack16((ZnDevice *)h, E->dt, dst, src, n);
}

static void unpack(const ZnEngine *E, float *dst, const void *src, long n) {
    const ZnDevice *h = &E->off.tier_host;
    if (E->dt == ZN_F32) memcpy(dst, src, (size_t)n * sizeof(float));
    else h->k->unpack16((ZnDevice *)h, E->dt, dst, src, n);
}

int zn_offp_init(ZnEngine *E, const float *h, ZnErr *err) {
    const ZnLayout *L = &E->L;
    const ZnOffloadConfig *o = &E->cfg->zero.offload_param;
    const int np = L->nparams;
    E->off.pslot = zn_calloc(ZN_HOST_ENGINE, (size_t)np + 1, sizeof(long));
    E->off.pfile_off = zn_calloc(ZN_HOST_ENGINE, (size_t)np + 1, sizeof(size_t));
    if (!E->off.pslot || !E->off.pfile_off) return zn_nomem(err);
    const long min_bytes = ZN_OFF_MIN_SWAP_BYTES > E->cfg->aio.block_size ? ZN_OFF_MIN_SWAP_BYTES : E->cfg->aio.block_size;
    long in_cpu = 0, host_n = 0, maxpn = 0;
    size_t file = 0;
    for (int p = 0; p < np; p++) {
        long pn = L->s3_pn[p];
        int swappable = (long)dt_bytes(E, pn) >= min_bytes;
        if (swappable && (double)(in_cpu + pn) <= o->max_in_cpu) {
            in_cpu += pn;
            swappable = 0;
        }
        if (!swappable) {
            E->off.pslot[p] = host_n;
            host_n += pn;
            continue;
        }
        E->off.pslot[p] = -1;
        E->off.pfile_off[p] = file;
        file += align_up(dt_bytes(E, pn));
        if (pn > maxpn) maxpn = pn;
        if ((double)pn > o->buffer_size)
            return zn_err(err, ZN_E_USAGE, "zero_optimization.offload_param.buffer_size: %.0f elements cannot hold the "
                          "partition of '%s' (%ld elements); raise buffer_size", o->buffer_size, L->params[p].name, pn);
    }
    if (!(E->off.phost = zn_off_alloc(E, &E->off.tier_host, host_n, ZN_MEM_PARAMS16, 1, err))) return err->code;
    /* a dry run has no values (h NULL) and its host tier no memory (Z-DRY-004) */
    for (int p = 0; p < np && !E->dev->meta; p++)
        if (E->off.pslot[p] >= 0) memcpy(E->off.phost + E->off.pslot[p], h + L->s3_off[p], (size_t)L->s3_pn[p] * sizeof(float));
    if (file == 0) return 0;   /* everything fits in host memory */
    if (zn_mem_charge(&E->off.tier_nvme, file, ZN_MEM_PARAMS16, err)) return err->code;
    E->off.pfile_bytes = file;
    /* the buffers: DeepSpeed's buffer_count, each for the largest swapped partition */
    const int nbuf = (int)o->buffer_count;
    if (nbuf < 1)
        return zn_err(err, ZN_E_USAGE, "zero_optimization.offload_param.buffer_count: parameters on NVMe need at least one buffer");
    int rc = zn_off_bufs_init(E, &E->off.pbufs, nbuf, align_up(dt_bytes(E, maxpn)), err);
    if (rc) return rc;
    if (!(E->off.pread = zn_off_alloc(E, &E->off.tier_host, maxpn, ZN_MEM_BUCKETS, 0, err))) return err->code;
    if (E->dev->meta) return 0;
    /* the parameters' swap space: shared with the optimizer's at the same path */
    if (E->off.swap && !strcmp(o->nvme_path, E->cfg->zero.offload_optimizer.nvme_path) &&
        E->P.optim_tier == ZN_TIER_NVME) {
        E->off.pswap = E->off.swap;
    } else {
        ZnAioMode mode;
        FILE *log = E->world.rank == 0 && !E->hooks.quiet ? stdout : NULL;
        if ((rc = zn_aio_mode_from_env(&mode, err)) ||
            (rc = zn_swap_open(&E->off.pswap, o->nvme_path, E->world.rank, file, &E->cfg->aio, mode, log, err)))
            return rc;
    }
    if ((rc = zn_swap_file(E->off.pswap, "params.swp", file, &E->off.pfid, err))) return rc;
    /* the first contents, a buffer at a time */
    int b = 0;
    for (int p = 0; p < np && !rc; p++) {
        if (E->off.pslot[p] >= 0) continue;
        if (b == E->off.pbufs.n && (rc = zn_swap_wait(E->off.pswap, err))) break;
        if (b == E->off.pbufs.n) b = 0;
        pack(E, E->off.pbufs.buf[b], h + L->s3_off[p], L->s3_pn[p]);
        rc = zn_swap_write(E->off.pswap, E->off.pfid, E->off.pfile_off[p], E->off.pbufs.buf[b], dt_bytes(E, L->s3_pn[p]), err);
        b++;
    }
    int rc2 = zn_swap_wait(E->off.pswap, err);
    return rc ? rc : rc2;
}

void zn_offp_free(ZnEngine *E) {
    if (E->off.pswap && E->off.pswap != E->off.swap) zn_swap_close(E->off.pswap, 1);
    E->off.pswap = NULL;
    zn_off_bufs_free(E, &E->off.pbufs);
    if (E->off.pfile_bytes) zn_mem_uncharge(&E->off.tier_nvme, E->off.pfile_bytes, ZN_MEM_PARAMS16);
    E->off.pfile_bytes = 0;
    zn_dev_free(&E->off.tier_host, E->off.pread);
    zn_dev_free(&E->off.tier_host, E->off.phost);
    E->off.pread = E->off.phost = NULL;
    ZN_FREE_ALL(E->off.pslot, E->off.pfile_off);
    E->off.pslot = NULL;
    E->off.pfile_off = NULL;
}

const float *zn_offp_fetch(ZnEngine *E, int p, ZnErr *err) {
    const ZnLayout *L = &E->L;
    if (E->off.pslot[p] >= 0) return E->off.phost + E->off.pslot[p];
    /* a dry run reads nothing: its meta buffer stands for the partition,
       and the gather after it is counted as a real one (Z-DRY-003) */
    if (!E->off.pswap && E->dev->meta) return E->off.pread;
    if (!E->off.pswap) {
        zn_err(err, ZN_E_INTERNAL, "parameter '%s' is on NVMe but no swap space is open", L->params[p].name);
        return NULL;
    }
    int rc = zn_swap_read(E->off.pswap, E->off.pfid, E->off.pfile_off[p], E->off.pbufs.buf[0], dt_bytes(E, L->s3_pn[p]), err);
    if (!rc) rc = zn_swap_wait(E->off.pswap, err);
    if (rc) {
        zn_err_prefix(err, "rank %d: NVMe parameter '%s': ", E->world.rank, L->params[p].name);
        return NULL;
    }
    unpack(E, E->off.pread, E->off.pbufs.buf[0], L->s3_pn[p]);
    return E->off.pread;
}

int zn_offp_store(ZnEngine *E, long lo, long hi, const float *master, ZnDevice *md, ZnErr *err) {
    const ZnLayout *L = &E->L;
    int b = 0, rc = 0;
    for (int p = 0; p < L->nparams && !rc; p++) {
        long off = L->s3_off[p], pn = L->s3_pn[p];
        if (off < lo || off + pn > hi || pn == 0) continue;   /* sub-groups hold whole parameters */
        float *dst = E->off.pslot[p] >= 0 ? E->off.phost + E->off.pslot[p] : E->off.pread;
        /* the working copy: the master rounded to the model dtype */
        zn_off_copy(E, dst, &E->off.tier_host, master + (off - lo), md, pn, sizeof(float));
        E->off.tier_host.k->round_dt(&E->off.tier_host, E->dt, dst, pn);
        if (E->off.pslot[p] >= 0 || !E->off.pswap) continue;
        if (b == E->off.pbufs.n && (rc = zn_swap_wait(E->off.pswap, err))) break;
        if (b == E->off.pbufs.n) b = 0;
        pack(E, E->off.pbufs.buf[b], dst, pn);
        rc = zn_swap_write(E->off.pswap, E->off.pfid, E->off.pfile_off[p], E->off.pbufs.buf[b], dt_bytes(E, pn), err);
        b++;
    }
    if (E->off.pswap) {
        int rc2 = zn_swap_wait(E->off.pswap, err);
        if (!rc) rc = rc2;
    }
    return rc ? zn_err_prefix(err, "rank %d: NVMe parameter write-back: ", E->world.rank) : 0;
}

int zn_offp_read_all(ZnEngine *E, float *host, ZnErr *err) {
    const ZnLayout *L = &E->L;
    memset(host, 0, (size_t)E->part_n * sizeof(float));   /* padding between partitions, if any */
    for (int p = 0; p < L->nparams; p++) {
        const float *src = zn_offp_fetch(E, p, err);
        if (!src) return err->code;
        memcpy(host + L->s3_off[p], src, (size_t)L->s3_pn[p] * sizeof(float));
    }
    return 0;
}
