/* test_swap.c: the NVMe swap layer (io/swap.h, spec Z-NVME-*): bytes
 * written come back bit for bit through both backends and every aio
 * setting, the directory is fresh and goes away, and every failure is a
 * message naming what and where.
 *
 * The swap directories live under a mkdtemp in /tmp (ext4 on the CI
 * machines, so O_DIRECT is accepted); the case of a file system refusing
 * O_DIRECT uses /dev/shm where tmpfs still refuses it, else a ramfs
 * mounted for the test (skipped where mount is not allowed). */
#include "testutil.h"
#include <pthread.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <errno.h>
#include "io/swap.h"

static char base[64];

static void fill(unsigned char *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (unsigned char)x;
    }
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static size_t align_up(size_t n) { return (n + ZN_SWAP_ALIGN - 1) / ZN_SWAP_ALIGN * ZN_SWAP_ALIGN; }

/* io_uring can be forbidden (containers, seccomp): its cases are then
 * skipped with a note, and the rest still run. Valgrind 3.19 runs io_uring
 * (io_uring_setup/enter are wrapped); memcheck does not see the kernel
 * fill a read buffer through the ring, which is harmless here because
 * zn_swap_buf_alloc zeroes every buffer, so both paths run under it. */
static int uring_ok = -1;
static int have_uring(void) {
    if (uring_ok < 0) {
        uring_ok = 0;
        ZnSwap *s = NULL;
        ZnErr err = {0};
        if (zn_swap_open(&s, base, 99, 0, NULL, ZN_AIO_URING, NULL, &err) == 0) uring_ok = 1;
        else fprintf(stderr, "test_swap: io_uring cannot start here, its cases are skipped: %s\n", err.msg);
        zn_swap_close(s, 1);
    }
    return uring_ok;
}

static int group_setup(void **state) {
    (void)state;
    snprintf(base, sizeof base, "/tmp/zinc_test_swap.XXXXXX");
    if (!mkdtemp(base)) return -1;
    unsetenv("ZINC_AIO");
    return 0;
}
static int group_teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "%s/ramfs", base);
    umount(cmd);   /* in case a failed test left it mounted */
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    return system(cmd) ? -1 : 0;
}

/* Writes files of the given sizes, waits, reads them back into fresh
 * buffers, waits, and compares every byte; checks the counters. */
static void round_trip(ZnSwap *s, const size_t *sizes, int nf, long block) {
    ZnErr err = {0};
    unsigned char *out[8], *in[8];
    int id[8];
    unsigned long long bytes = 0;
    long reqs = 0;
    ZnSwapStats before = zn_swap_stats(s);
    for (int i = 0; i < nf; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d.fp32", i);
        out[i] = zn_swap_buf_alloc(sizes[i], &err);
        in[i] = zn_swap_buf_alloc(sizes[i], &err);
        assert_non_null(out[i]);
        assert_non_null(in[i]);
        fill(out[i], sizes[i], (unsigned)(i + 1));
        if (zn_swap_file(s, name, sizes[i], &id[i], &err)) fail_msg("%s", err.msg);
        if (zn_swap_write(s, id[i], 0, out[i], sizes[i], &err)) fail_msg("%s", err.msg);
        bytes += align_up(sizes[i]);
        reqs += (long)((align_up(sizes[i]) + (size_t)block - 1) / (size_t)block);
    }
    if (zn_swap_wait(s, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < nf; i++)
        if (zn_swap_read(s, id[i], 0, in[i], sizes[i], &err)) fail_msg("%s", err.msg);
    if (zn_swap_wait(s, &err)) fail_msg("%s", err.msg);
    for (int i = 0; i < nf; i++) {
        assert_memory_equal(in[i], out[i], sizes[i]);
        zn_swap_buf_free(out[i]);
        zn_swap_buf_free(in[i]);
    }
    ZnSwapStats st = zn_swap_stats(s);
    assert_int_equal(st.write_bytes - before.write_bytes, bytes);
    assert_int_equal(st.read_bytes - before.read_bytes, bytes);
    assert_int_equal(st.requests - before.requests, 2 * reqs);
}

/* spec: Z-NVME-003 */
static void test_round_trip_every_setting(void **state) {
    (void)state;
    /* sizes that are not multiples of the block nor of 4096, one tiny */
    const size_t sizes[6] = {1, 4095, 4097, 200003, (1u << 20) + 123, 3 * 65536};
    int configs = 0;
    for (int mode = ZN_AIO_URING; mode <= ZN_AIO_THREADS; mode++) {
        if (mode == ZN_AIO_URING && !have_uring()) continue;
        for (int qd = 1; qd <= 8; qd += 7)
            for (int single = 0; single <= 1; single++)
                for (int overlap = 0; overlap <= 1; overlap++)
                    for (int th = 1; th <= 3; th += 2) {
                        ZnAioConfig aio;
                        zn_aio_config_default(&aio);
                        aio.block_size = 65536;   /* many requests per file */
                        aio.queue_depth = qd;
                        aio.single_submit = single;
                        aio.overlap_events = overlap;
                        aio.intra_op_parallelism = th;
                        ZnSwap *s = NULL;
                        ZnErr err = {0};
                        if (zn_swap_open(&s, base, 0, 8u << 20, &aio, (ZnAioMode)mode, NULL, &err))
                            fail_msg("%s", err.msg);
                        assert_string_equal(zn_swap_backend(s), mode == ZN_AIO_URING ? "io_uring" : "threads");
                        round_trip(s, sizes, 6, 65536);
                        /* a second pass over the same files: rewritten in place */
                        round_trip(s, sizes, 6, 65536);
                        zn_swap_close(s, 1);
                        configs++;
                    }
    }
    assert_true(configs >= 16);
}

/* spec: Z-NVME-003 */
static void test_default_blocks_and_many_files(void **state) {
    (void)state;
    ZnSwap *s = NULL;
    ZnErr err = {0};
    if (zn_swap_open(&s, base, 1, 64u << 20, NULL, ZN_AIO_AUTO, NULL, &err)) fail_msg("%s", err.msg);
    /* 3.5 MiB in 1 MiB blocks: 4 requests each way */
    size_t big = (7u << 20) / 2;
    round_trip(s, &big, 1, 1 << 20);
    ZnSwapStats st = zn_swap_stats(s);
    assert_int_equal(st.requests, 8);
    /* 40 small files queued at once, then read back in reverse order */
    enum { NF = 40 };
    unsigned char *out[NF], *in[NF];
    int id[NF];
    for (int i = 0; i < NF; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%02d", i);
        size_t n = 1000 + 3000 * (size_t)i;
        out[i] = zn_swap_buf_alloc(n, &err);
        in[i] = zn_swap_buf_alloc(n, &err);
        fill(out[i], n, 100u + (unsigned)i);
        if (zn_swap_file(s, name, n, &id[i], &err)) fail_msg("%s", err.msg);
        assert_int_equal(zn_swap_write(s, id[i], 0, out[i], n, &err), 0);
    }
    assert_int_equal(zn_swap_wait(s, &err), 0);
    for (int i = NF - 1; i >= 0; i--) assert_int_equal(zn_swap_read(s, id[i], 0, in[i], 1000 + 3000 * (size_t)i, &err), 0);
    assert_int_equal(zn_swap_wait(s, &err), 0);
    for (int i = 0; i < NF; i++) {
        assert_memory_equal(in[i], out[i], 1000 + 3000 * (size_t)i);
        zn_swap_buf_free(in[i]);
        zn_swap_buf_free(out[i]);
    }
    zn_swap_close(s, 1);
}

/* spec: Z-NVME-001 */
/* spec: Z-NVME-002 */
static void test_directory_fresh_and_removed(void **state) {
    (void)state;
    char stale[128], path[1024];
    snprintf(stale, sizeof stale, "%s/zinc_swap/rank3", base);
    snprintf(path, sizeof path, "mkdir -p %s/sub && echo old > %s/sub/old && echo old > %s/x.fp32", stale, stale, stale);
    assert_int_equal(system(path), 0);
    ZnSwap *s3 = NULL, *s4 = NULL;
    ZnErr err = {0};
    if (zn_swap_open(&s3, base, 3, 1 << 20, NULL, ZN_AIO_THREADS, NULL, &err)) fail_msg("%s", err.msg);
    assert_string_equal(zn_swap_dir(s3), stale);
    snprintf(path, sizeof path, "%s/sub", stale);
    assert_false(exists(path));   /* the old directory went first */
    snprintf(path, sizeof path, "%s/x.fp32", stale);
    assert_false(exists(path));
    int id;
    assert_int_equal(zn_swap_file(s3, "x.fp32", 10000, &id, &err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 12288);   /* 10000 rounded up to 4096 */
    assert_true(st.st_blocks * 512 >= 12288);   /* reserved, not sparse */
    /* the same name again: the same file, resized */
    int id2;
    assert_int_equal(zn_swap_file(s3, "x.fp32", 5000, &id2, &err), 0);
    assert_int_equal(id2, id);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 8192);
    assert_int_equal(zn_swap_file(s3, "../evil", 10, &id, &err), ZN_E_USAGE);
    assert_int_equal(zn_swap_file(s3, "", 10, &id, &err), ZN_E_USAGE);

    if (zn_swap_open(&s4, base, 4, 1 << 20, NULL, ZN_AIO_AUTO, NULL, &err)) fail_msg("%s", err.msg);
    assert_int_equal(zn_swap_file(s4, "y", 1, &id, &err), 0);
    zn_swap_close(s3, 1);
    assert_false(exists(stale));
    snprintf(path, sizeof path, "%s/zinc_swap", base);
    assert_true(exists(path));   /* rank 4 is still there */
    char keep[300];
    snprintf(keep, sizeof keep, "%s/y", zn_swap_dir(s4));
    zn_swap_close(s4, 0);   /* close without removing: the files stay */
    assert_true(exists(keep));
    if (zn_swap_open(&s4, base, 4, 1 << 20, NULL, ZN_AIO_AUTO, NULL, &err)) fail_msg("%s", err.msg);
    assert_false(exists(keep));   /* reopened fresh */
    zn_swap_close(s4, 1);
    assert_false(exists(path));   /* zinc_swap/ went with its last rank */
    zn_swap_close(NULL, 1);
}

/* Simulated ranks live in one process: they open, use and close their
 * swap directories at the same time, and one rank's close removing an
 * empty zinc_swap/ must not break another's open. */
static void *rank_loop(void *arg) {
    int rank = (int)(intptr_t)arg;
    for (int it = 0; it < 15; it++) {
        ZnSwap *s = NULL;
        ZnErr err = {0};
        if (zn_swap_open(&s, base, rank, 1 << 20, NULL, it % 2 ? ZN_AIO_THREADS : ZN_AIO_AUTO, NULL, &err))
            return strdup(err.msg);
        size_t n = 5000 + (size_t)rank * 100 + (size_t)it;
        unsigned char *a = zn_swap_buf_alloc(n, &err), *b = zn_swap_buf_alloc(n, &err);
        fill(a, n, (unsigned)(rank * 100 + it));
        int id, rc = zn_swap_file(s, "m", n, &id, &err) || zn_swap_write(s, id, 0, a, n, &err) ||
                     zn_swap_wait(s, &err) || zn_swap_read(s, id, 0, b, n, &err) || zn_swap_wait(s, &err);
        int same = !rc && memcmp(a, b, n) == 0;
        zn_swap_buf_free(a);
        zn_swap_buf_free(b);
        zn_swap_close(s, 1);
        if (!same) return strdup(rc ? err.msg : "bytes differ");
    }
    return NULL;
}

/* spec: Z-NVME-002 */
static void test_ranks_side_by_side(void **state) {
    (void)state;
    pthread_t t[4];
    for (int r = 0; r < 4; r++) assert_int_equal(pthread_create(&t[r], NULL, rank_loop, (void *)(intptr_t)r), 0);
    for (int r = 0; r < 4; r++) {
        void *msg;
        pthread_join(t[r], &msg);
        if (msg) fail_msg("rank %d: %s", r, (char *)msg);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/zinc_swap", base);
    assert_false(exists(path));
}

/* spec: Z-NVME-004 */
static void test_fallback_log_line(void **state) {
    (void)state;
    ZnAioConfig aio;
    zn_aio_config_default(&aio);
    /* more entries than any kernel's io_uring takes (32768): io_uring_queue_init fails */
    aio.queue_depth = 40000;
    FILE *log = tmpfile();
    ZnSwap *s = NULL;
    ZnErr err = {0};
    if (zn_swap_open(&s, base, 0, 1 << 20, &aio, ZN_AIO_AUTO, log, &err)) fail_msg("%s", err.msg);
    assert_string_equal(zn_swap_backend(s), "threads");
    size_t n = 300000;
    round_trip(s, &n, 1, 1 << 20);
    zn_swap_close(s, 1);
    char *text = zt_slurp(log, NULL);
    assert_str_contains(text, "[zinc] nvme swap: io_uring unavailable (io_uring_queue_init: ");
    assert_str_contains(text, "); using 1 pread/pwrite thread, O_DIRECT, in /tmp/");
    assert_non_null(strchr(text, '\n'));
    assert_int_equal(strchr(text, '\n')[1], 0);   /* one line */
    free(text);
    /* forced: a clear failure instead, and nothing left behind */
    assert_int_equal(zn_swap_open(&s, base, 0, 1 << 20, &aio, ZN_AIO_URING, NULL, &err), ZN_E_IO);
    assert_null(s);
    assert_str_contains(err.msg, "io_uring was asked for (ZN_AIO_URING) but cannot start (io_uring_queue_init: ");
    setenv("ZINC_AIO", "uring", 1);
    assert_int_equal(zn_swap_open(&s, base, 0, 1 << 20, &aio, ZN_AIO_AUTO, NULL, &err), ZN_E_IO);
    unsetenv("ZINC_AIO");
    assert_str_contains(err.msg, "io_uring was asked for (ZINC_AIO=uring) but cannot start (io_uring_queue_init: ");
    char path[128];
    snprintf(path, sizeof path, "%s/zinc_swap", base);
    assert_false(exists(path));
    /* threads asked for: the line says so, with the thread count */
    aio.queue_depth = 8;
    aio.intra_op_parallelism = 3;
    setenv("ZINC_AIO", "threads", 1);
    log = tmpfile();
    if (zn_swap_open(&s, base, 0, 1 << 20, &aio, ZN_AIO_AUTO, log, &err)) fail_msg("%s", err.msg);
    unsetenv("ZINC_AIO");
    zn_swap_close(s, 1);
    text = zt_slurp(log, NULL);
    assert_str_contains(text, "[zinc] nvme swap: ZINC_AIO=threads; using 3 pread/pwrite threads, O_DIRECT");
    free(text);
    if (have_uring()) {
        log = tmpfile();
        if (zn_swap_open(&s, base, 0, 1 << 20, NULL, ZN_AIO_AUTO, log, &err)) fail_msg("%s", err.msg);
        zn_swap_close(s, 1);
        text = zt_slurp(log, NULL);
        assert_str_contains(text, "[zinc] nvme swap: io_uring, queue_depth 8, block_size 1048576, 1 thread, O_DIRECT");
        free(text);
    }
}

/* spec: Z-NVME-005 */
static void test_zinc_aio_env(void **state) {
    (void)state;
    ZnAioMode m = ZN_AIO_THREADS;
    ZnErr err = {0};
    unsetenv("ZINC_AIO");
    assert_int_equal(zn_aio_mode_from_env(&m, &err), 0);
    assert_int_equal(m, ZN_AIO_AUTO);
    const char *vals[] = {"auto", "", "uring", "threads"};
    const ZnAioMode want[] = {ZN_AIO_AUTO, ZN_AIO_AUTO, ZN_AIO_URING, ZN_AIO_THREADS};
    for (int i = 0; i < 4; i++) {
        setenv("ZINC_AIO", vals[i], 1);
        assert_int_equal(zn_aio_mode_from_env(&m, &err), 0);
        assert_int_equal(m, want[i]);
    }
    setenv("ZINC_AIO", "libaio", 1);
    assert_int_equal(zn_aio_mode_from_env(&m, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "ZINC_AIO=libaio: expected auto, uring or threads");
    ZnSwap *s = NULL;
    assert_int_equal(zn_swap_open(&s, base, 0, 0, NULL, ZN_AIO_AUTO, NULL, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "ZINC_AIO");
    /* an explicit mode wins over the variable */
    if (zn_swap_open(&s, base, 0, 0, NULL, ZN_AIO_THREADS, NULL, &err)) fail_msg("%s", err.msg);
    assert_string_equal(zn_swap_backend(s), "threads");
    zn_swap_close(s, 1);
    setenv("ZINC_AIO", "threads", 1);
    if (zn_swap_open(&s, base, 0, 0, NULL, ZN_AIO_AUTO, NULL, &err)) fail_msg("%s", err.msg);
    assert_string_equal(zn_swap_backend(s), "threads");
    zn_swap_close(s, 1);
    if (have_uring()) {
        setenv("ZINC_AIO", "uring", 1);
        if (zn_swap_open(&s, base, 0, 0, NULL, ZN_AIO_AUTO, NULL, &err)) fail_msg("%s", err.msg);
        assert_string_equal(zn_swap_backend(s), "io_uring");
        zn_swap_close(s, 1);
    }
    unsetenv("ZINC_AIO");
}

/* spec: Z-NVME-006 */
static void test_alignment_and_padding(void **state) {
    (void)state;
    ZnErr err = {0};
    unsigned char *b = zn_swap_buf_alloc(5000, &err);
    assert_non_null(b);
    assert_int_equal((uintptr_t)b % ZN_SWAP_ALIGN, 0);
    for (int i = 0; i < 8192; i++) assert_int_equal(b[i], 0);   /* zeroed up to the rounded length */
    ZnSwap *s = NULL;
    for (int mode = ZN_AIO_URING; mode <= ZN_AIO_THREADS; mode++) {
        if (mode == ZN_AIO_URING && !have_uring()) continue;
        if (zn_swap_open(&s, base, 0, 1 << 20, NULL, (ZnAioMode)mode, NULL, &err)) fail_msg("%s", err.msg);
        assert_int_equal(zn_swap_direct(s), 1);
        int id;
        assert_int_equal(zn_swap_file(s, "p", 20000, &id, &err), 0);   /* holds 20480 bytes */
        fill(b, 8192, 7);
        /* a write of 5000 bytes moves 8192: the buffer's padding goes too */
        assert_int_equal(zn_swap_write(s, id, 4096, b, 5000, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), 0);
        unsigned char *r = zn_swap_buf_alloc(8192, &err);
        assert_int_equal(zn_swap_read(s, id, 4096, r, 8192, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), 0);
        assert_memory_equal(r, b, 8192);
        zn_swap_buf_free(r);
        /* misaligned buffer or offset, a range past the end, a bad id */
        assert_int_equal(zn_swap_write(s, id, 0, b + 1, 100, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, "4096-byte aligned");
        assert_int_equal(zn_swap_read(s, id, 100, b, 100, &err), ZN_E_USAGE);
        assert_int_equal(zn_swap_write(s, id, 16384, b, 4097, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, "past the end of");
        assert_str_contains(err.msg, "/p (20480 bytes)");
        assert_int_equal(zn_swap_write(s, 7, 0, b, 1, &err), ZN_E_USAGE);
        /* the last aligned unit is fine */
        assert_int_equal(zn_swap_write(s, id, 16384, b, 4096, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), 0);
        zn_swap_close(s, 1);
    }
    zn_swap_buf_free(b);
}

/* A file system that refuses O_DIRECT with EINVAL: tmpfs did before Linux
 * 6.6; ramfs still does, and root can mount one (CI runs as root). *dir
 * gets the mount point; 0 when there is none to be had. */
static int no_direct_fs(char *dir, size_t cap, int *mounted) {
    *mounted = 0;
    struct statfs fs;
    if (statfs("/dev/shm", &fs) == 0 && fs.f_type == 0x01021994 /* TMPFS_MAGIC */ && access("/dev/shm", W_OK) == 0) {
        snprintf(dir, cap, "/dev/shm/zinc_test_swap.XXXXXX");
        if (mkdtemp(dir)) {
            char probe[160];
            snprintf(probe, sizeof probe, "%s/p", dir);
            int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
            if (fd >= 0) close(fd), unlink(probe);
            if (fd < 0 && errno == EINVAL) return 1;
            rmdir(dir);
        }
    }
    snprintf(dir, cap, "%s/ramfs", base);
    if (mkdir(dir, 0755) || mount("none", dir, "ramfs", 0, NULL)) return 0;
    *mounted = 1;
    return 1;
}

/* spec: Z-NVME-006 */
static void test_fs_without_o_direct(void **state) {
    (void)state;
    char dir[96];
    int mounted;
    if (!no_direct_fs(dir, sizeof dir, &mounted)) {
        fprintf(stderr, "test_swap: no file system refusing O_DIRECT to be had here (ramfs mount: %s), skipped\n",
                strerror(errno));
        skip();
    }
    for (int mode = ZN_AIO_URING; mode <= ZN_AIO_THREADS; mode++) {
        if (mode == ZN_AIO_URING && !have_uring()) continue;
        FILE *log = tmpfile();
        ZnSwap *s = NULL;
        ZnErr err = {0};
        if (zn_swap_open(&s, dir, 0, 1 << 20, NULL, (ZnAioMode)mode, log, &err)) fail_msg("%s", err.msg);
        assert_int_equal(zn_swap_direct(s), 0);
        size_t sizes[2] = {12345, 1 << 20};
        round_trip(s, sizes, 2, 1 << 20);
        zn_swap_close(s, 1);
        char *text = zt_slurp(log, NULL);
        char want[200];
        snprintf(want, sizeof want, ", buffered (O_DIRECT refused by the file system: Invalid argument), in %s/", dir);
        assert_str_contains(text, want);
        free(text);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/zinc_swap", dir);
    assert_false(exists(path));   /* close removed everything */
    if (mounted) assert_int_equal(umount(dir), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* spec: Z-NVME-007 */
static void test_open_errors(void **state) {
    (void)state;
    ZnSwap *s = NULL;
    ZnErr err = {0};
    char file[96], path[128];
    snprintf(file, sizeof file, "%s/plain", base);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    /* root ignores chmod, so the unwritable path is one under a file */
    snprintf(path, sizeof path, "%s/under", file);
    assert_int_equal(zn_swap_open(&s, path, 0, 0, NULL, ZN_AIO_AUTO, NULL, &err), ZN_E_IO);
    assert_null(s);
    char want[512];
    snprintf(want, sizeof want, "cannot create %s/zinc_swap/rank0: Not a directory (at %s)", path, file);
    assert_str_contains(err.msg, want);
    /* a file given as the path */
    assert_int_equal(zn_swap_open(&s, file, 0, 0, NULL, ZN_AIO_AUTO, NULL, &err), ZN_E_IO);
    snprintf(want, sizeof want, "nvme_path %s is not a directory", file);
    assert_str_contains(err.msg, want);
    /* too little space: checked before anything is written, and the
       directory it made is gone again */
    assert_int_equal(zn_swap_open(&s, base, 0, (size_t)1 << 62, NULL, ZN_AIO_AUTO, NULL, &err), ZN_E_IO);
    snprintf(want, sizeof want, "nvme_path %s: ", base);
    assert_str_contains(err.msg, want);
    assert_str_contains(err.msg, " GB free, the swap needs 4611686018.4 GB");
    snprintf(path, sizeof path, "%s/zinc_swap", base);
    assert_false(exists(path));
    /* bad aio settings */
    ZnAioConfig aio;
    zn_aio_config_default(&aio);
    aio.queue_depth = 0;
    assert_int_equal(zn_swap_open(&s, base, 0, 0, &aio, ZN_AIO_AUTO, NULL, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "aio.queue_depth 0");
    unlink(file);
}

/* spec: Z-NVME-007 every setting and argument out of range: ZN_E_USAGE
 * naming it, nothing created */
static void test_usage_errors(void **state) {
    (void)state;
    ZnSwap *s = NULL;
    ZnErr err = {0};
    assert_int_equal(zn_swap_open(&s, NULL, 0, 0, NULL, ZN_AIO_THREADS, NULL, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nvme swap: nvme_path is empty");
    assert_int_equal(zn_swap_open(&s, "", 0, 0, NULL, ZN_AIO_THREADS, NULL, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nvme swap: nvme_path is empty");
    assert_int_equal(zn_swap_open(&s, base, -1, 0, NULL, ZN_AIO_THREADS, NULL, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nvme swap: rank -1");
    static const struct { long block, depth, threads; const char *want; } AIO[] = {
        {0, 8, 1, "aio.block_size 0: expected 1 to 1073741824 bytes"},
        {(1L << 30) + 1, 8, 1, "aio.block_size 1073741825: expected 1 to 1073741824 bytes"},
        {4096, 65537, 1, "aio.queue_depth 65537: expected 1 to 65536"},
        {4096, 8, 0, "aio.intra_op_parallelism 0: expected 1 to 256"},
        {4096, 8, 257, "aio.intra_op_parallelism 257: expected 1 to 256"},
    };
    for (size_t k = 0; k < sizeof AIO / sizeof *AIO; k++) {
        ZnAioConfig aio;
        zn_aio_config_default(&aio);
        aio.block_size = AIO[k].block;
        aio.queue_depth = AIO[k].depth;
        aio.intra_op_parallelism = AIO[k].threads;
        assert_int_equal(zn_swap_open(&s, base, 0, 0, &aio, ZN_AIO_THREADS, NULL, &err), ZN_E_USAGE);
        assert_string_equal(err.msg, AIO[k].want);
        assert_null(s);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/zinc_swap", base);
    assert_false(exists(path));
    /* file names and ranges */
    if (zn_swap_open(&s, base, 0, 1 << 20, NULL, ZN_AIO_THREADS, NULL, &err)) fail_msg("%s", err.msg);
    int id;
    char long_name[202];
    memset(long_name, 'n', 201);
    long_name[201] = 0;
    const char *BAD[] = {NULL, ".", "..", "a/b", long_name};
    for (size_t k = 0; k < sizeof BAD / sizeof *BAD; k++) {
        assert_int_equal(zn_swap_file(s, BAD[k], 10, &id, &err), ZN_E_USAGE);
        char want[300];
        snprintf(want, sizeof want, "nvme swap: bad file name \"%s\" (1 to 200 bytes, no '/')", BAD[k] ? BAD[k] : "");
        assert_string_equal(err.msg, want);
    }
    long_name[200] = 0;   /* 200 bytes: allowed */
    assert_int_equal(zn_swap_file(s, long_name, 8192, &id, &err), 0);
    unsigned char *b = zn_swap_buf_alloc(0, &err);   /* 0 bytes: one aligned block all the same */
    assert_non_null(b);
    assert_int_equal(zn_swap_write(s, id, 0, b, 0, &err), 0);   /* nothing to move */
    assert_int_equal(zn_swap_read(s, -1, 0, b, 1, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "nvme swap: read: no file -1");
    assert_int_equal(zn_swap_read(s, id, 12288, b, 0, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "nvme swap: read of 0 bytes at byte 12288 is past the end of ");
    assert_str_contains(err.msg, " (8192 bytes)");
    /* a file made again is truncated and resized */
    int id2;
    assert_int_equal(zn_swap_file(s, long_name, 4096, &id2, &err), 0);
    assert_int_equal(id2, id);
    assert_int_equal(zn_swap_wait(s, &err), 0);
    zn_swap_buf_free(b);
    zn_swap_close(s, 1);
    assert_false(exists(path));
}

/* spec: Z-NVME-008 */
static void test_io_error_names_file_and_offset(void **state) {
    (void)state;
    for (int mode = ZN_AIO_URING; mode <= ZN_AIO_THREADS; mode++) {
        if (mode == ZN_AIO_URING && !have_uring()) continue;
        ZnSwap *s = NULL;
        ZnErr err = {0};
        if (zn_swap_open(&s, base, 2, 8 << 20, NULL, (ZnAioMode)mode, NULL, &err)) fail_msg("%s", err.msg);
        int a, b;
        assert_int_equal(zn_swap_file(s, "a", 3 << 20, &a, &err), 0);
        assert_int_equal(zn_swap_file(s, "b", 1 << 20, &b, &err), 0);
        unsigned char *buf = zn_swap_buf_alloc(3 << 20, &err), *good = zn_swap_buf_alloc(1 << 20, &err);
        fill(good, 1 << 20, 9);
        assert_int_equal(zn_swap_write(s, b, 0, good, 1 << 20, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), 0);
        /* the file shrinks behind the swap's back: a read past its end */
        char path[256];
        snprintf(path, sizeof path, "%s/a", zn_swap_dir(s));
        assert_int_equal(truncate(path, 1 << 20), 0);
        memset(good, 0, 1 << 20);
        assert_int_equal(zn_swap_read(s, a, 0, buf, 3 << 20, &err), 0);
        assert_int_equal(zn_swap_read(s, b, 0, good, 1 << 20, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), ZN_E_IO);
        char want[400];
        snprintf(want, sizeof want, "nvme swap: read of %s at byte ", path);
        assert_str_contains(err.msg, want);
        assert_str_contains(err.msg, "(1048576 bytes) failed: unexpected end of file");
        assert_true(strstr(err.msg, "at byte 1048576 ") || strstr(err.msg, "at byte 2097152 "));
        /* the rest was still waited for and done */
        unsigned char *ref = zn_swap_buf_alloc(1 << 20, &err);
        fill(ref, 1 << 20, 9);
        assert_memory_equal(good, ref, 1 << 20);
        /* the error is reported once; the swap goes on working */
        assert_int_equal(zn_swap_wait(s, &err), 0);
        assert_int_equal(zn_swap_read(s, a, 0, buf, 1 << 20, &err), 0);
        assert_int_equal(zn_swap_wait(s, &err), 0);
        zn_swap_buf_free(buf);
        zn_swap_buf_free(good);
        zn_swap_buf_free(ref);
        zn_swap_close(s, 1);
    }
}

ZT_MAIN_GROUP(group_setup, group_teardown,
    cmocka_unit_test(test_round_trip_every_setting),
    cmocka_unit_test(test_default_blocks_and_many_files),
    cmocka_unit_test(test_directory_fresh_and_removed),
    cmocka_unit_test(test_ranks_side_by_side),
    cmocka_unit_test(test_fallback_log_line),
    cmocka_unit_test(test_zinc_aio_env),
    cmocka_unit_test(test_alignment_and_padding),
    cmocka_unit_test(test_fs_without_o_direct),
    cmocka_unit_test(test_open_errors),
    cmocka_unit_test(test_usage_errors),
    cmocka_unit_test(test_io_error_names_file_and_offset))
