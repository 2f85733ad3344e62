/* offload.h: ZeRO-Offload and ZeRO-Infinity inside the engine (spec Z-OFF-*).
 * Engine-private (engine.c and checkpoint code through engine.h).
 *
 * Three tiers hold a rank's states: the device (E->dev), host memory
 * (E->off.tier_host) and NVMe (E->off.tier_nvme: accounting only, the bytes are in
 * swap files, io/swap.h). The plan (plan.h) says where the optimizer state,
 * the gradient partition and the stage-3 parameter partition live.
 *
 * The optimizer state is cut into groups: one for stages 1/2, DeepSpeed's
 * sub-groups at stage 3. A group's fp32 master and Adam moments live in one
 * tier; with ratio < 1 the first groups stay on the device. A group on NVMe
 * whose states are smaller than max(1 MiB, aio block_size) stays in host
 * memory, as DeepSpeed keeps its "in-memory fp32 partitions".
 *
 * Every kernel a tier runs is the host/device twin of the device's (the
 * host Adam is the device Adam), and every copy between tiers moves bits
 * unchanged: an offloaded run computes the bits of the run without it. */
#ifndef ZN_OFFLOAD_H
#define ZN_OFFLOAD_H
#include "core/err.h"
#include "core/plan.h"
#include "device/device.h"

typedef struct ZnEngine ZnEngine;   /* engine.h, which holds a ZnOffload */

/* Host buffers for NVMe swap I/O (zn_off_bufs_init) */
typedef struct {
    void **buf;
    int n;                  /* charged (and, unless a dry run, allocated) */
    size_t bytes;           /* each */
} ZnSwapBufs;

/* The offload state of a rank's engine (E->off): the tiers besides the
   device and what moves between them. */
typedef struct {
    ZnDevice tier_host;     /* host memory the offloaded states take (accounted like the device) */
    ZnDevice tier_nvme;     /* NVMe: accounting only, the swap files hold the bytes */
    ZnDevice *gdev;         /* where grad_part (and canonical levels) live: dev or &tier_host */
    ZnDevice *pdev;         /* where param_part lives (stage 3): dev or &tier_host */
    float *hstage, *dstage; /* chunk staging on the host and on the device */
    float *pstage;          /* device: a host param partition on its way to the gather */
    ZnSwapBufs swapbufs;    /* NVMe: offload_optimizer.buffer_count host buffers */
    struct ZnSwap *swap;
    /* stage-3 parameters on NVMe (offload_param.c): a partition is in
       phost at pslot[p], or (pslot -1) in the swap file at pfile_off[p] */
    long *pslot;
    size_t *pfile_off, pfile_bytes;
    float *phost, *pread;
    ZnSwapBufs pbufs;       /* offload_param.buffer_count host buffers */
    int pfid;
    struct ZnSwap *pswap;   /* swap when both offloads share a path */
    unsigned long long h2d_bytes, d2h_bytes;   /* since init, at the bytes a real run moves */
} ZnOffload;

typedef struct ZnOptGroup {
    long lo, hi;            /* storage: partition elements [lo, hi) */
    long slo, shi;          /* stepped: the sub-group's parameters (within [lo, hi)) */
    ZnTier tier;            /* device, host or NVMe */
    float *st[3];           /* master, exp_avg, exp_avg_sq (device or host memory; NULL on NVMe) */
    int fid;                /* NVMe: the swap file (three regions, each aligned) */
    size_t region;          /* NVMe: bytes of one region */
} ZnOptGroup;

/* Sets up the tiers and where grads and params live (before any allocation). */
int zn_off_init(ZnEngine *E, ZnErr *err);
/* n floats on tier d; as_dtype: charged at the model dtype's size. */
float *zn_off_alloc(ZnEngine *E, ZnDevice *d, long n, ZnMemCat cat, int as_dtype, ZnErr *err);
/* The optimizer groups, masters initialised from init (part_n floats on
   tier init_dev), moments zero; NVMe groups written to their files. */
int zn_off_groups_init(ZnEngine *E, const float *init, ZnDevice *init_dev, ZnErr *err);
void zn_off_free(ZnEngine *E);
/* count swap buffers of bytes each (the optimizer's or the parameters'),
   charged to the host tier; zn_off_bufs_free gives back those b->n counts. */
int zn_off_bufs_init(ZnEngine *E, ZnSwapBufs *b, int count, size_t bytes, ZnErr *err);
void zn_off_bufs_free(ZnEngine *E, ZnSwapBufs *b);

/* n floats from src on tier sd to dst on tier dd; transfers between the
   device and the host are counted at es bytes an element (the 16-bit
   working copy moves 2 bytes an element, gradients and states 4). */
void zn_off_copy(ZnEngine *E, float *dst, ZnDevice *dd, const float *src, ZnDevice *sd, long n, size_t es);

/* A reduced gradient slice (device) entering the host gradient partition:
   dst = round(src), or dst = round(dst + src) with add. */
void zn_off_put_grad(ZnEngine *E, float *dst, const float *src, long n, int add);

/* The optimizer over every group, in group order, gradient multiplied by
   mul; then the working copy (work on tier wdev, NULL: none) = round(master). */
int zn_off_step(ZnEngine *E, const ZnAdamParams *hp, float mul, float *work, ZnDevice *wdev, ZnErr *err);
/* work = round(master) over the partition (a resume's publish). */
int zn_off_cast_work(ZnEngine *E, float *work, ZnDevice *wdev, ZnErr *err);

/* State which (0 master, 1 exp_avg, 2 exp_avg_sq) of the whole partition
   to and from host memory; in_place: the state as one host buffer, or NULL. */
int zn_off_state_read(ZnEngine *E, int which, float *host, ZnErr *err);
int zn_off_state_write(ZnEngine *E, int which, const float *host, ZnErr *err);
float *zn_off_state_in_place(const ZnEngine *E, int which);
/* master[i] += delta (the planted fault of Z-REP-001); the working copy follows */
int zn_off_add_master(ZnEngine *E, long i, float delta, float *work, ZnDevice *wdev, ZnErr *err);

/* Stage-3 parameters on NVMe (offload_param.c). */
int zn_offp_init(ZnEngine *E, const float *h, ZnErr *err);   /* h: the rounded partition, host */
void zn_offp_free(ZnEngine *E);
/* param p's partition as host floats (valid until the next fetch); NULL + err */
const float *zn_offp_fetch(ZnEngine *E, int p, ZnErr *err);
/* the working copy of the parameters inside [lo, hi) from master (element lo
   at master[0], tier md): rounded, then written to host or NVMe */
int zn_offp_store(ZnEngine *E, long lo, long hi, const float *master, ZnDevice *md, ZnErr *err);
int zn_offp_read_all(ZnEngine *E, float *host, ZnErr *err);

#include "engine/engine.h"
#endif
