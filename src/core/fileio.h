/* fileio.h: crash-safe file writing, bounded reading, and the I/O fault hook.
 *
 * Nothing zinc writes is ever half-written (spec Z-FILE-001..003): data goes to
 * "<path>.tmp.<pid>", is fsynced, renamed over <path>, and the directory is
 * fsynced. On a failure before the rename the temporary is removed and <path>
 * is untouched. A process killed mid-write leaves <path> old (or absent) and
 * possibly a stale "<path>.tmp.<pid>", which no reader ever opens.
 *
 * Every error message names the file (the final path, not the temporary) and
 * the operation that failed. */
#ifndef ZN_FILEIO_H
#define ZN_FILEIO_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

/* ---- atomic writing ------------------------------------------------------ */

/* Streaming writer for large files. Usage: open, write..., commit (or abort).
 * After a write error the writer refuses further writes and commit; call
 * zn_writer_abort. Small writes are coalesced in a 64 KiB buffer. */
typedef struct ZnWriter ZnWriter;
int zn_writer_open(ZnWriter **w, const char *path, ZnErr *err);
int zn_writer_write(ZnWriter *w, const void *buf, size_t n, ZnErr *err);
/* Flush, fsync, close, rename over the path, fsync the directory. Frees w
 * whatever happens. A failure before the rename removes the temporary and
 * leaves the path as it was; a failure of the final directory fsync is
 * reported but the path already holds the new content (Z-FILE-002). */
int zn_writer_commit(ZnWriter *w, ZnErr *err);
void zn_writer_abort(ZnWriter *w);   /* removes the temporary, frees w; NULL ok */

/* The whole-buffer form of the writer above. */
int zn_write_file_atomic(const char *path, const void *buf, size_t n, ZnErr *err);

/* ---- reading ------------------------------------------------------------- */

/* Reads a whole regular file of at most max_size bytes into a malloc'd,
 * NUL-terminated copy (*buf; *n excludes the NUL). A larger file is
 * ZN_E_CORRUPT, a missing one ZN_E_IO; both name the file. */
int zn_read_file(const char *path, size_t max_size, char **buf, size_t *n, ZnErr *err);
/* Opens a regular file for reading; *size is its length. */
int zn_open_read(const char *path, int *fd, uint64_t *size, ZnErr *err);
/* Reads exactly n bytes at offset off. A file that ends early (it shrank after
 * it was opened) is ZN_E_CORRUPT; path is for messages only. */
int zn_pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, ZnErr *err);

/* ---- directories --------------------------------------------------------- */

/* Creates path and its missing parents (mode 0755); existing directories are
 * fine, an existing non-directory is an error. New directories are made
 * durable by fsyncing their parent. */
int zn_mkdir_p(const char *path, ZnErr *err);
/* fsync of a directory, so that a rename or create inside it survives a crash. */
int zn_fsync_dir(const char *dir, ZnErr *err);

/* ---- fault injection (tests) --------------------------------------------- */

/* Every I/O system call made through this file counts as one op, in one
 * process-wide counter: open (of a file or a directory), read, write, fsync,
 * rename, mkdir. (close and unlink do not count: cleanup must always run.)
 * With fail_at = N > 0 the N-th op after this call fails with EIO and the
 * message "injected I/O fault at op N"; with sticky every op from N on fails.
 * With crash, op N calls _exit(ZN_FAULT_CRASH_STATUS) instead; a write that
 * crashes first writes half its bytes (a torn write). fail_at <= 0 turns
 * injection off. Each call resets the counter. Thread-safe. */
#define ZN_FAULT_CRASH_STATUS 77
void zn_fault_set(long fail_at, int sticky, int crash);
long zn_fault_ops(void);   /* ops counted since the last zn_fault_set */
/* Reads ZINC_FAULT="op=N[,sticky][,crash]" from the environment now and
 * applies it as zn_fault_set would (unset or empty: injection off). Called
 * automatically before the first op unless zn_fault_set or this function ran
 * first; main() calls it to turn a malformed value into a usage error. A
 * malformed value is ZN_E_USAGE here, and makes every op fail if it is only
 * met at the first op. */
int zn_fault_from_env(ZnErr *err);
/* One op that is not a system call of this file: a transfer of the NVMe
 * swap (Z-NVME-008), counted when it completes. Returns 1 where the op is
 * to fail (a malformed ZINC_FAULT included), 0 to go ahead; a crash op
 * exits as the others do. */
int zn_fault_op(void);

#endif
