/* swap.h: a rank's NVMe swap space (ZeRO-Infinity, spec Z-NVME-*).
 *
 * One directory per rank, <nvme_path>/zinc_swap/rank<R>/, created fresh at
 * open (an old one is removed first) and removed by zn_swap_close(s, 1) at a
 * clean exit. Inside it, named files each hold one swapped tensor (a
 * sub-group's fp32 master or Adam moment, a 16-bit parameter partition).
 *
 * I/O is asynchronous and O_DIRECT: io_uring through liburing, with
 * block_size requests and at most queue_depth in flight, or -- where
 * io_uring is unavailable (containers often forbid io_uring_setup) or
 * ZINC_AIO=threads forces it -- a pool of intra_op_parallelism threads doing
 * pread/pwrite, after one log line saying why. ZINC_AIO=uring forces io_uring
 * and fails if it cannot start.
 *
 * Buffers passed to read/write must come from zn_swap_buf_alloc (aligned
 * for O_DIRECT); their length is rounded up to ZN_SWAP_ALIGN bytes inside the
 * file, so a file holds align_up(bytes) bytes.
 *
 * Errors (ZN_E_IO) name the file, the byte offset and the system's reason:
 * an unwritable path or too little free space (statvfs against the bytes
 * announced at open) is reported by zn_swap_open, before any training step. */
#ifndef ZN_SWAP_H
#define ZN_SWAP_H
#include <stddef.h>
#include <stdio.h>
#include "core/err.h"
#include "core/config.h"

#define ZN_SWAP_ALIGN 4096

typedef struct ZnSwap ZnSwap;

typedef enum { ZN_AIO_AUTO = 0, ZN_AIO_URING, ZN_AIO_THREADS } ZnAioMode;

/* DeepSpeed's aio defaults: block_size 1 MiB, queue_depth 8,
   intra_op_parallelism 1, single_submit off, overlap_events on. */
void zn_aio_config_default(ZnAioConfig *a);

/* The I/O path ZINC_AIO asks for (unset or "auto": AUTO); another value is
   a usage error naming the variable. */
int zn_aio_mode_from_env(ZnAioMode *mode, ZnErr *err);

/* Opens rank's swap directory under nvme_path (created if missing), fresh.
 * need_bytes: the total the run will write there (checked against the free
 * space). log: where the one line naming the I/O path goes (NULL: none).
 * aio NULL: zn_aio_config_default. mode ZN_AIO_AUTO reads ZINC_AIO
 * (zn_aio_mode_from_env); ZN_AIO_URING / ZN_AIO_THREADS are used as given.
 * block_size is rounded up to a multiple of ZN_SWAP_ALIGN. */
int zn_swap_open(ZnSwap **out, const char *nvme_path, int rank, size_t need_bytes, const ZnAioConfig *aio,
                 ZnAioMode mode, FILE *log, ZnErr *err);
/* "io_uring" or "threads" */
const char *zn_swap_backend(const ZnSwap *s);
/* The directory (for messages and tests). */
const char *zn_swap_dir(const ZnSwap *s);
/* 1 when the files are opened with O_DIRECT, 0 when the file system
   refused it (tmpfs) and they are buffered. */
int zn_swap_direct(const ZnSwap *s);

/* Creates (truncates) file `name` sized for `bytes` and returns its id. */
int zn_swap_file(ZnSwap *s, const char *name, size_t bytes, int *id, ZnErr *err);

/* Queue a transfer of n bytes between buf and file id at byte offset off
 * (off a multiple of ZN_SWAP_ALIGN). The data is in place only after
 * zn_swap_wait. align_up(n) bytes move (a read fills buf up to there), so
 * buf must be ZN_SWAP_ALIGN-aligned with room for them; the range must lie
 * inside the file. Transfers queued between two waits may run in any
 * order: do not read a range written since the last wait. One thread
 * drives a ZnSwap (calls these, wait and close). */
int zn_swap_write(ZnSwap *s, int id, size_t off, const void *buf, size_t n, ZnErr *err);
int zn_swap_read(ZnSwap *s, int id, size_t off, void *buf, size_t n, ZnErr *err);
/* Waits for every queued transfer; the first failure is reported (file,
 * offset, reason) and the rest are still waited for. */
int zn_swap_wait(ZnSwap *s, ZnErr *err);

/* Counters since open: bytes read and written, requests issued. */
typedef struct { unsigned long long read_bytes, write_bytes; long requests; } ZnSwapStats;
ZnSwapStats zn_swap_stats(const ZnSwap *s);

/* Waits, closes the files and, with remove_files, deletes them and the
 * rank directory (and zinc_swap/ when it is left empty). NULL is a no-op. */
void zn_swap_close(ZnSwap *s, int remove_files);

/* n bytes (rounded up to ZN_SWAP_ALIGN) aligned to ZN_SWAP_ALIGN, zeroed;
 * free with zn_swap_buf_free. NULL + err on failure. */
void *zn_swap_buf_alloc(size_t n, ZnErr *err);
void zn_swap_buf_free(void *p);
#endif
