/* test_coll.c: the collective layer of the process backends (src/comm/
 * coll.c) over a scripted transport, and a process's set-up (src/app/
 * proc.c): backend names, ranks per node, zn_proc_start's refusals and a
 * world of one, the configuration check across simulated ranks. The
 * scripted transport plays the peers: it answers every exchange with this
 * rank's own bytes, and can fail an exchange or alter a peer's sequence
 * record on demand. */
#include "testutil.h"
#include "app/proc.h"
#include "comm/coll.h"
#include "comm/comm_proc.h"
#include "comm/comm_seq.h"
#include <signal.h>
#include <sys/wait.h>

/* Requests too large to exist fail as out of memory here (the default of
 * glibc and valgrind) instead of stopping the process under ASan. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- a scripted transport ---- */

typedef struct {
    int rank;
    int calls;               /* exchanges so far */
    int fail_at;             /* this exchange fails (0: none) */
    int tamper_at;           /* in this exchange a peer's record differs (0: none) */
    int frees;
} Fake;

static int fake_exchange(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                         ZnErr *err) {
    Fake *f = x;
    f->calls++;
    if (f->calls == f->fail_at) return zn_err(err, ZN_E_COMM, "fake: link to rank %d is down", 1 - f->rank);
    int peer = 1 - f->rank;   /* worlds of two */
    size_t n = nout[peer] < nin[peer] ? nout[peer] : nin[peer];
    if (n) memcpy(in[peer], out[peer], n);
    if (nin[peer] > n) memset((char *)in[peer] + n, 0, nin[peer] - n);
    if (f->calls == f->tamper_at)
        zn_seq_fill(in[peer], f->calls, ZN_OP_REDUCE_SCATTER, ZN_BF16, ZN_SUM, 0, 64, NULL, 2, "grad_reduce");
    return 0;
}

static void fake_free(void *x) { ((Fake *)x)->frees++; }

static const ZnXportOps fake_ops = {fake_exchange, fake_free};

static ZnComm *fake_comm(Fake *f, int rank) {
    memset(f, 0, sizeof *f);
    f->rank = rank;
    ZnErr err;
    ZnComm *c = zn_coll_proc_new(rank, 2, f, &fake_ops, &err);
    if (!c) fail_msg("zn_coll_proc_new: %s", err.msg);
    return c;
}

static long total_calls(const ZnComm *c) {
    long n = 0;
    for (int op = 0; op < ZN_OP_N; op++) n += c->stats.calls[op];
    return n;
}

#define BAD(expr, text)                                        \
    do {                                                       \
        ZnErr e_ = {0};                                        \
        assert_int_equal((expr), ZN_E_USAGE);                  \
        assert_string_equal(e_.msg, (text));                   \
    } while (0)

/* spec: Z-SIM-013 every argument is checked before the call is posted: a
 * bad call is ZN_E_USAGE on this rank alone, names the call and its tag
 * ('' for none), moves nothing and counts nothing */
static void test_coll_argument_checks(void **st) {
    (void)st;
    Fake f;
    ZnComm *c = fake_comm(&f, 0);
    float a[8] = {0};
    long two[2] = {2, 2}, neg[2] = {2, -1};
    BAD(c->all_reduce(c, a, 4, ZN_U8, ZN_SUM, "t", &e_), "all_reduce 't': dtype u8 cannot be reduced (fp32, fp16, "
                                                        "bf16, fp64 can)");
    BAD(c->all_reduce(c, a, 4, ZN_U64, ZN_SUM, NULL, &e_), "all_reduce '': dtype u64 cannot be reduced (fp32, fp16, "
                                                          "bf16, fp64 can)");
    BAD(c->all_reduce(c, a, 4, ZN_F32, (ZnRedOp)7, "t", &e_), "all_reduce 't': unknown reduction op 7");
    BAD(c->all_reduce(c, a, -1, ZN_F32, ZN_SUM, "t", &e_), "all_reduce 't': negative count -1");
    BAD(c->all_reduce(c, NULL, 4, ZN_F64, ZN_MAX, "t", &e_), "all_reduce 't': the buffer is NULL for 4 elements");
    BAD(c->reduce_scatter(c, a, a + 4, two, ZN_U8, ZN_SUM, "t", &e_), "reduce_scatter 't': dtype u8 cannot be "
                                                                      "reduced (fp32, fp16, bf16, fp64 can)");
    BAD(c->reduce_scatter(c, a, a + 4, NULL, ZN_F32, ZN_SUM, "t", &e_), "reduce_scatter 't': counts is NULL");
    BAD(c->reduce_scatter(c, a, a + 4, neg, ZN_F32, ZN_SUM, "t", &e_), "reduce_scatter 't': counts[1] = -1 is "
                                                                       "negative");
    BAD(c->reduce_scatter(c, NULL, a + 4, two, ZN_F32, ZN_SUM, "t", &e_), "reduce_scatter 't': send buffer is NULL "
                                                                          "for 4 elements");
    BAD(c->reduce_scatter(c, a, NULL, two, ZN_F32, ZN_SUM, "t", &e_), "reduce_scatter 't': recv buffer is NULL for "
                                                                      "2 elements");
    BAD(c->reduce_scatter(c, a, a + 1, two, ZN_F32, ZN_SUM, "t", &e_), "reduce_scatter 't': send and recv overlap "
        "other than in place (the rank's piece must sit at its own offset)");
    BAD(c->all_gather(c, a, a + 4, two, (ZnDtype)99, "t", &e_), "all_gather 't': unknown dtype 99");
    BAD(c->all_gather(c, a, a + 4, NULL, ZN_F32, "t", &e_), "all_gather 't': counts is NULL");
    BAD(c->all_gather(c, a, a + 4, neg, ZN_F32, NULL, &e_), "all_gather '': counts[1] = -1 is negative");
    BAD(c->all_gather(c, NULL, a + 4, two, ZN_F32, "t", &e_), "all_gather 't': send buffer is NULL for 2 elements");
    BAD(c->all_gather(c, a, NULL, two, ZN_F32, "t", &e_), "all_gather 't': recv buffer is NULL for 4 elements");
    BAD(c->all_gather(c, a + 1, a, two, ZN_F32, "t", &e_), "all_gather 't': send and recv overlap other than in "
                                                          "place (the rank's piece must sit at its own offset)");
    BAD(c->broadcast(c, a, 3, (ZnDtype)99, 0, "t", &e_), "broadcast 't': unknown dtype 99");
    BAD(c->broadcast(c, NULL, 3, ZN_U8, 0, "t", &e_), "broadcast 't': the buffer is NULL for 3 elements");
    BAD(c->broadcast(c, a, 3, ZN_U8, -1, "t", &e_), "broadcast 't': root -1 is not a rank of a world of 2");
    BAD(c->broadcast(c, a, 3, ZN_U8, 2, NULL, &e_), "broadcast '': root 2 is not a rank of a world of 2");
    assert_int_equal(f.calls, 0);   /* nothing was posted */
    assert_int_equal(total_calls(c), 0);
    zn_coll_proc_free(c);
    assert_int_equal(f.frees, 1);
}

/* spec: Z-SIM-010 the one overlap allowed is in place (the rank's piece at
 * its own offset); buffers that merely touch do not overlap; Z-SIM-013 a
 * NULL buffer is fine when it holds no elements */
static void test_coll_in_place_rules(void **st) {
    (void)st;
    ZnErr err = {0};
    for (int rank = 0; rank < 2; rank++) {
        Fake f;
        ZnComm *c = fake_comm(&f, rank);
        float a[12] = {0};
        long cnt[2] = {2, 3};
        long off = rank ? 2 : 0, mine = cnt[rank];
        /* in place: recv = send + offset, send = recv + offset */
        assert_int_equal(c->reduce_scatter(c, a, a + off, cnt, ZN_F32, ZN_SUM, "rs", &err), 0);
        assert_int_equal(c->all_gather(c, a + off, a, cnt, ZN_F32, "ag", &err), 0);
        /* touching, not overlapping: recv just after send, just before it */
        assert_int_equal(c->reduce_scatter(c, a, a + 5, cnt, ZN_F32, ZN_SUM, "rs", &err), 0);
        assert_int_equal(c->reduce_scatter(c, a + mine, a, cnt, ZN_F32, ZN_SUM, "rs", &err), 0);
        /* the other rank's offset is not in place */
        ZnErr e = {0};
        assert_int_equal(c->reduce_scatter(c, a, a + (rank ? 0 : 2), cnt, ZN_F32, ZN_SUM, "rs", &e), ZN_E_USAGE);
        assert_str_contains(e.msg, "send and recv overlap other than in place");
        /* nothing to move: NULL buffers */
        long none[2] = {0, 0};
        assert_int_equal(c->all_reduce(c, NULL, 0, ZN_F32, ZN_SUM, "ar0", &err), 0);
        assert_int_equal(c->all_gather(c, NULL, NULL, none, ZN_U8, "ag0", &err), 0);
        assert_int_equal(c->broadcast(c, NULL, 0, ZN_U64, 1, "bc0", &err), 0);
        assert_int_equal(c->stats.calls[ZN_OP_REDUCE_SCATTER], 3);
        assert_int_equal(c->stats.calls[ZN_OP_ALL_GATHER], 2);
        assert_int_equal(c->stats.calls[ZN_OP_ALL_REDUCE], 1);
        assert_int_equal(c->stats.calls[ZN_OP_BROADCAST], 1);
        zn_coll_proc_free(c);
    }
}

/* spec: Z-SEQ-001 a record that differs from rank 0's is ZN_E_COMM in the
 * simulator's words, on either side of the comparison, before any data
 * moves; after a mismatch every later collective fails with the same
 * message without touching the transport */
static void test_coll_sequence_mismatch(void **st) {
    (void)st;
    ZnErr err = {0};
    Fake f;
    ZnComm *c = fake_comm(&f, 0);
    assert_int_equal(c->barrier(c, "first", &err), 0);   /* call #1 agrees */
    f.tamper_at = f.calls + 1;
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(c->all_reduce(c, buf, 8, ZN_F32, ZN_SUM, "ar", &err), ZN_E_COMM);
    assert_string_equal(err.msg, "collective mismatch at call #2: rank 0 all_reduce fp32 n=8 'ar' vs rank 1 "
                                 "reduce_scatter bf16 n=64 'grad_reduce'");
    for (int i = 0; i < 8; i++) assert_true(buf[i] == (float)(i + 1));   /* untouched */
    int calls = f.calls;
    ZnErr later = {0};
    assert_int_equal(c->barrier(c, "later", &later), ZN_E_COMM);
    assert_string_equal(later.msg, err.msg);
    assert_int_equal(f.calls, calls);
    assert_int_equal(c->stats.calls[ZN_OP_ALL_REDUCE], 0);
    assert_int_equal(c->stats.calls[ZN_OP_BARRIER], 1);
    zn_coll_proc_free(c);

    /* rank 1 compares rank 0's record with its own */
    c = fake_comm(&f, 1);
    f.tamper_at = 1;
    long cnt[2] = {3, 3};
    assert_int_equal(c->all_gather(c, buf + 3, buf, cnt, ZN_F32, "param_gather", &err), ZN_E_COMM);
    assert_string_equal(err.msg, "collective mismatch at call #1: rank 0 reduce_scatter bf16 n=64 'grad_reduce' vs "
                                 "rank 1 all_gather fp32 n=6 'param_gather'");
    zn_coll_proc_free(c);
}

/* spec: Z-SIM-009 after a failure every later collective of that rank fails
 * at once, the same way; Z-SIM-005 only a collective that succeeded is
 * counted. The transport's error comes back as it is, whichever exchange
 * of the call fails (the records, the slices, the gather) */
static void test_coll_transport_failures(void **st) {
    (void)st;
    float buf[8] = {0};
    long cnt[2] = {4, 4};
    for (int op = 0; op < ZN_OP_N; op++) {
        int last = op == ZN_OP_ALL_REDUCE ? 3 : op == ZN_OP_BARRIER ? 1 : 2;
        for (int at = 1; at <= last; at++) {
            Fake f;
            ZnComm *c = fake_comm(&f, 0);
            f.fail_at = at;
            ZnErr err = {0};
            int rc = op == ZN_OP_ALL_REDUCE       ? c->all_reduce(c, buf, 8, ZN_F16, ZN_SUM, "x", &err)
                     : op == ZN_OP_REDUCE_SCATTER ? c->reduce_scatter(c, buf, buf + 4, cnt, ZN_BF16, ZN_MAX, "x", &err)
                     : op == ZN_OP_ALL_GATHER     ? c->all_gather(c, buf, buf + 4, cnt, ZN_U8, "x", &err)
                     : op == ZN_OP_BROADCAST      ? c->broadcast(c, buf, 8, ZN_F32, 1, "x", &err)
                     : op == ZN_OP_ALL_TO_ALL     ? zn_group_all_to_all(c, zn_group(0, 0), buf, buf + 4, 2, ZN_F32, "x", &err)
                                                  : c->barrier(c, "x", &err);
            assert_int_equal(rc, ZN_E_COMM);
            assert_string_equal(err.msg, "fake: link to rank 1 is down");
            assert_int_equal(f.calls, at);
            ZnErr later = {0};
            assert_int_equal(c->all_reduce(c, buf, 8, ZN_F32, ZN_SUM, "y", &later), ZN_E_COMM);
            assert_string_equal(later.msg, err.msg);
            assert_int_equal(f.calls, at);
            assert_int_equal(total_calls(c), 0);
            zn_coll_proc_free(c);
        }
    }
}

static int stateless_frees;
static int stateless_exchange(void *x, const void *const *out, const size_t *nout, void *const *in,
                              const size_t *nin, ZnErr *err) {
    (void)x, (void)out, (void)nout, (void)in, (void)nin, (void)err;
    return 0;   /* a world of one: nothing to move */
}
static void stateless_free(void *x) {
    (void)x;
    stateless_frees++;
}

/* spec: Z-ERR-002 a communicator that cannot get its memory fails with an
 * out-of-memory error naming the request's size and category, and still
 * releases the transport it was given; Z-SIM-011 in a world of one the
 * collectives are copies (a transport with no state of its own is not
 * freed) */
static void test_coll_new_and_free(void **st) {
    (void)st;
    Fake f;
    memset(&f, 0, sizeof f);
    ZnErr err = {0};
    assert_null(zn_coll_proc_new(0, -1, &f, &fake_ops, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
    assert_string_equal(err.msg, "out of host memory (18446744073709551615 bytes for comm)");
    assert_int_equal(f.frees, 1);
    zn_coll_proc_free(NULL);

    static const ZnXportOps stateless = {stateless_exchange, stateless_free};
    ZnComm *c = zn_coll_proc_new(0, 1, NULL, &stateless, &err);
    assert_non_null(c);
    float x[3] = {1, 2, 3}, y[3] = {0};
    long one[1] = {3};
    assert_int_equal(c->all_reduce(c, x, 3, ZN_F32, ZN_SUM, "ar", &err), 0);
    assert_int_equal(c->reduce_scatter(c, x, y, one, ZN_F32, ZN_SUM, "rs", &err), 0);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(c->stats.bytes_sent[ZN_OP_ALL_REDUCE], 0);
    zn_coll_proc_free(c);
    assert_int_equal(stateless_frees, 0);

    /* the store, likewise */
    ZnRdvSpec spec;
    memset(&spec, 0, sizeof spec);
    snprintf(spec.host, sizeof spec.host, "127.0.0.1");
    spec.port = 1;
    assert_null(zn_store_open(&spec, 0, -1, &err));
    assert_int_equal(err.code, ZN_E_NOMEM);
    assert_string_equal(err.msg, "out of host memory (18446744073709551615 bytes for comm)");
}

/* spec: Z-NODE-008 a process backend counts what it hands its transport,
 * by the node it goes to, each message's sequence record included */
static void test_coll_wire_bytes(void **st) {
    (void)st;
    Fake f;
    ZnComm *c = fake_comm(&f, 0);
    float buf[8] = {0}, mine[4] = {0};
    long cnt[2] = {4, 4};
    ZnErr err = {0};
    assert_int_equal(c->all_gather(c, mine, buf, cnt, ZN_F32, "g", &err), 0);   /* one node of two */
    assert_int_equal(c->stats.wire_inter, 0);
    assert_int_equal(c->stats.wire_intra, (long)sizeof(ZnSeqRec) + 16);
    c->world.per_node = 1;   /* now each rank its own node */
    assert_int_equal(c->all_gather(c, mine, buf, cnt, ZN_F32, "g", &err), 0);
    assert_int_equal(c->all_reduce(c, buf, 8, ZN_F32, ZN_SUM, "r", &err), 0);   /* two exchanges of 4 floats */
    assert_int_equal(c->stats.wire_inter, 2 * (long)sizeof(ZnSeqRec) + 16 + 2 * 16);
    assert_int_equal(c->stats.wire_msgs_inter, 5);   /* records 2, all_gather 1, all_reduce 2 */
    assert_int_equal(c->stats.wire_intra, (long)sizeof(ZnSeqRec) + 16);
    zn_coll_proc_free(c);
}

/* spec: Z-NODE-009 ZINC_COMM_PAUSE=R:TAG:N: rank R stops itself (SIGSTOP)
 * as it enters its N-th collective of TAG, after one line; malformed, the
 * communicator is refused and its transport freed */
static void test_coll_pause(void **st) {
    (void)st;
    static const char *bad[] = {"x:r:1", "0::1", "0:r:0", "0:r:", "-1:r:1", "0:r:1x", "0", ":r:1", NULL};
    for (int i = 0; bad[i]; i++) {
        Fake f;
        memset(&f, 0, sizeof f);
        setenv("ZINC_COMM_PAUSE", bad[i], 1);
        ZnErr err = {0};
        assert_null(zn_coll_proc_new(0, 2, &f, &fake_ops, &err));
        assert_int_equal(err.code, ZN_E_USAGE);
        char want[96];
        snprintf(want, sizeof want, "ZINC_COMM_PAUSE='%s' is not RANK:TAG:N (N counting from 1)", bad[i]);
        assert_string_equal(err.msg, want);
        assert_int_equal(f.frees, 1);
    }
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    setenv("ZINC_COMM_PAUSE", "0:r:2", 1);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {   /* the rank: stops before its second 'r', goes on when continued */
        dup2(fd[1], 2);
        Fake f;
        ZnComm *c = fake_comm(&f, 0);
        float buf[2] = {0};
        ZnErr err = {0};
        int rc = c->all_reduce(c, buf, 2, ZN_F32, ZN_SUM, "other", &err) ||
                 c->all_reduce(c, buf, 2, ZN_F32, ZN_SUM, "r", &err) || c->all_reduce(c, buf, 2, ZN_F32, ZN_SUM, "r", &err);
        _exit(rc ? 100 : (int)total_calls(c));
    }
    close(fd[1]);
    unsetenv("ZINC_COMM_PAUSE");
    int status = 0;
    assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
    assert_true(WIFSTOPPED(status));
    char line[160] = {0}, want[160];
    assert_true(read(fd[0], line, sizeof line - 1) > 0);
    snprintf(want, sizeof want, "rank 0: stopping before all_reduce 'r' (call 2), pid %ld (ZINC_COMM_PAUSE)\n", (long)pid);
    assert_string_equal(line, want);
    kill(pid, SIGCONT);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);   /* continued, it made the call */
    close(fd[0]);
}

/* ---- process set-up ---- */

static const char *launcher_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MASTER_ADDR",
    "MASTER_PORT", NULL};

static void env_only(const char *const *pairs) {
    for (int i = 0; launcher_vars[i]; i++) unsetenv(launcher_vars[i]);
    for (int i = 0; pairs && pairs[i]; i += 2) setenv(pairs[i], pairs[i + 1], 1);
}

static int proc_empty(const ZnProc *p) {
    ZnProc zero;
    memset(&zero, 0, sizeof zero);
    return !memcmp(p, &zero, sizeof zero);
}

/* spec: Z-PROC-001 the backend names, and nothing else */
static void test_backend_names(void **st) {
    (void)st;
    ZnBackend b;
    ZnErr err = {0};
    const char *names[] = {"sim", "tcp", "mpi", "cuda", "nccl"};
    for (int i = 0; i < 5; i++) {
        assert_string_equal(zn_backend_name((ZnBackend)i), names[i]);
        int rc = zn_backend_parse(names[i], &b, &err);
#if ZN_HAVE_CUDA
        assert_int_equal(rc, 0);
        assert_int_equal(b, (ZnBackend)i);
#else
        if (i < 3) {
            assert_int_equal(rc, 0);
            assert_int_equal(b, (ZnBackend)i);
        } else {
            assert_int_equal(rc, ZN_E_USAGE);
            char want[200];
            snprintf(want, sizeof want, "--backend %s: this zinc was built without CUDA (nvcc was not found at build "
                     "time)", names[i]);
            assert_string_equal(err.msg, want);
        }
#endif
    }
    assert_int_equal(zn_backend_parse("gloo", &b, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--backend: expected sim, cuda, tcp, mpi or nccl, got 'gloo'");
    assert_string_equal(zn_backend_name((ZnBackend)5), "?");
    assert_string_equal(zn_backend_name((ZnBackend)-1), "?");
}

/* spec: Z-WORLD-001 ranks per node come from the launcher only when they
 * divide the world and the local rank agrees with consecutive placement */
static void test_proc_per_node(void **st) {
    (void)st;
    ZnProcEnv pe;
    memset(&pe, 0, sizeof pe);
    assert_int_equal(zn_proc_per_node(&pe, 4, 3), 0);   /* not given */
    pe.local_world = 2;
    pe.local_rank = 1;
    assert_int_equal(zn_proc_per_node(&pe, 4, 3), 2);
    assert_int_equal(zn_proc_per_node(&pe, 3, 1), 0);   /* 2 does not divide 3 */
    assert_int_equal(zn_proc_per_node(&pe, 4, 2), 0);   /* rank 2 would be local rank 0 */
}

/* spec: Z-RDV-002 no launcher environment, or a malformed one, is refused
 * saying what is looked for; Z-RDV-004 the flag's forms, and --rendezvous
 * is refused with MPI; Z-PROC-001 --world-size must equal the launcher's;
 * nothing is left behind by a refused start */
static void test_proc_start_refusals(void **st) {
    (void)st;
    ZnProc p;
    ZnErr err = {0};
    env_only(NULL);
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, NULL, 0, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--backend tcp: no launcher environment (RANK and WORLD_SIZE, OMPI_COMM_WORLD_*, "
                                 "SLURM_PROCID/SLURM_NTASKS or PMI_*); start the ranks with zinc launch, torchrun, "
                                 "srun or mpirun");
    assert_true(proc_empty(&p) || p.backend == ZN_BACKEND_TCP);
    const char *bad_rank[] = {"RANK", "x", "WORLD_SIZE", "2", NULL};
    env_only(bad_rank);
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, NULL, 0, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "environment variable RANK='x': expected an integer in 0..2147483646");
    assert_int_equal(zn_proc_start(ZN_BACKEND_MPI, "env", 0, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "environment variable RANK='x': expected an integer in 0..2147483646");
    const char *one[] = {"RANK", "0", "WORLD_SIZE", "1", NULL};
    env_only(one);
    assert_int_equal(zn_proc_start(ZN_BACKEND_MPI, "env", 0, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--rendezvous: MPI finds its peers itself (mpirun, srun); the flag applies to "
                                 "--backend tcp and nccl");
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, "udp://x", 0, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--rendezvous 'udp://x': expected env, tcp://HOST:PORT or file:PATH");
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, NULL, 3, &p, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--world-size 3, but the launcher started 1 ranks (torchrun)");
    assert_true(proc_empty(&p));
    /* the store cannot publish rank 0's address: the start fails with it */
    const char *two[] = {"RANK", "0", "WORLD_SIZE", "2", NULL};
    env_only(two);
    assert_int_not_equal(zn_proc_start(ZN_BACKEND_TCP, "file:/nonexistent-zinc-test-dir/rdv", 0, &p, &err), 0);
    assert_str_contains(err.msg, "/nonexistent-zinc-test-dir/rdv");
    assert_null(p.store);
    assert_null(p.comm);
    env_only(NULL);
}

/* spec: Z-PROC-001 a tcp rank of a world of one (the launcher's numbers,
 * its ranks per node) runs collectives and checks its configuration alone;
 * Z-RDV-001 OpenMPI's variables identify a tcp rank too */
static void test_proc_start_world_of_one(void **st) {
    (void)st;
    ZnProc p;
    ZnErr err = {0};
    const char *torchrun[] = {"RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "1", NULL};
    env_only(torchrun);
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, NULL, 1, &p, &err), 0);
    assert_int_equal(p.backend, ZN_BACKEND_TCP);
    assert_int_equal(p.world.size, 1);
    assert_int_equal(p.world.rank, 0);
    assert_int_equal(p.world.per_node, 1);
    assert_string_equal(p.source, "torchrun");
    assert_non_null(p.store);
    assert_non_null(p.comm);
    assert_null(p.boot);
    assert_int_equal(p.comm->world.size, 1);
    float x[5] = {1, -2, 3, -4, 5}, y[5];
    memcpy(y, x, sizeof x);
    assert_int_equal(p.comm->all_reduce(p.comm, x, 5, ZN_F32, ZN_SUM, "ar", &err), 0);
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(p.comm->stats.calls[ZN_OP_ALL_REDUCE], 1);
    ZnConfigId id = {0x1234, "stage=2"};
    assert_int_equal(zn_proc_check_config(&p, &id, &err), 0);
    zn_proc_end(&p, 1);
    assert_true(proc_empty(&p));

    char path[128];
    snprintf(path, sizeof path, "file:/tmp/zinc-test-coll-%d-rdv", (int)getpid());
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "1", NULL};
    env_only(ompi);
    assert_int_equal(zn_proc_start(ZN_BACKEND_TCP, path, 0, &p, &err), 0);
    assert_string_equal(p.source, "openmpi");
    assert_int_equal(p.local_rank, 0);
    zn_proc_end(&p, 0);
    unlink(path + 5);
    env_only(NULL);
}

/* spec: Z-PROC-001 nccl outside MPI boots over the store: the host
 * communicator checks the configuration, the NCCL communicator comes from
 * zn_proc_nccl, which needs the GPU of the rank's LOCAL_RANK (a build
 * without CUDA says so) */
static void test_proc_nccl_boot(void **st) {
    (void)st;
    ZnErr err = {0};
#if ZN_HAVE_CUDA
    ZnProc p;
    const char *one[] = {"RANK", "0", "WORLD_SIZE", "1", NULL};
    env_only(one);
    assert_int_equal(zn_proc_start(ZN_BACKEND_NCCL, "tcp://127.0.0.1:1", 0, &p, &err), 0);
    assert_non_null(p.boot);
    assert_null(p.comm);
    ZnConfigId id = {7, "stage=1"};
    assert_int_equal(zn_proc_check_config(&p, &id, &err), 0);
    /* a GPU no machine has: refused whether or not this one has GPUs */
    p.local_rank = 4095;
    assert_int_equal(zn_proc_nccl(&p, 1, &err), ZN_E_USAGE);
    assert_str_contains(err.msg, "--backend cuda: ");
    assert_null(p.dev);
    assert_null(p.comm);
    zn_proc_end(&p, 0);
    /* torchrun's variables, no flag: the store at MASTER_ADDR:MASTER_PORT
       (a world of one listens nowhere), not MPI */
    assert_int_equal(zn_proc_start(ZN_BACKEND_NCCL, NULL, 0, &p, &err), 0);
    assert_string_equal(p.source, "torchrun");
    assert_non_null(p.store);
    assert_non_null(p.boot);
    zn_proc_end(&p, 0);
    env_only(NULL);
#else
    ZnProc p;
    memset(&p, 0, sizeof p);
    assert_int_equal(zn_proc_nccl(&p, 1, &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "--backend nccl: this zinc was built without CUDA");
#endif
}

/* ---- the configuration check on simulated ranks ---- */

typedef struct {
    ZnConfigId id[3];
    int use_boot;
    int fail_rank;           /* this rank fails before the check (-1: none) */
    int rc[3];
    ZnErr err[3];
} CfgCase;

static int cfg_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    CfgCase *k = arg;
    if (rank == k->fail_rank) return zn_err(err, ZN_E_IO, "disk full");
    ZnProc p;
    memset(&p, 0, sizeof p);
    p.world = c->world;
    if (k->use_boot) p.boot = c;
    else p.comm = c;
    k->rc[rank] = zn_proc_check_config(&p, &k->id[rank], &k->err[rank]);
    return 0;
}

/* Runs the check on `world` ranks with ids a, b, c; every rank must reach
 * the verdict `want` ("" for agreement). */
static void cfg_check(int world, ZnConfigId a, ZnConfigId b, ZnConfigId c, int use_boot, const char *want) {
    CfgCase k;
    memset(&k, 0, sizeof k);
    k.id[0] = a;
    k.id[1] = b;
    k.id[2] = c;
    k.use_boot = use_boot;
    k.fail_rank = -1;
    ZnErr err = {0};
    assert_int_equal(zt_sim_run(world, cfg_rank, &k, 30, &err), 0);
    for (int q = 0; q < world; q++) {
        if (!*want) {
            assert_int_equal(k.rc[q], 0);
            continue;
        }
        assert_int_equal(k.rc[q], ZN_E_USAGE);
        assert_string_equal(k.err[q].msg, want);
    }
}

static ZnConfigId cfg_id(uint64_t hash, const char *summary) {
    ZnConfigId id;
    memset(&id, 0, sizeof id);
    id.hash = hash;
    snprintf(id.summary, sizeof id.summary, "%s", summary);
    return id;
}

/* spec: Z-PROC-005 a rank whose configuration hash differs from rank 0's
 * is refused on every rank, naming the rank and the first setting that
 * differs (or "the config files differ" when the summaries agree); the
 * hash alone decides; the boot communicator carries the check when there
 * is one; a peer that failed before the check fails it with its message */
static void test_proc_check_config(void **st) {
    (void)st;
    ZnConfigId s2 = cfg_id(1, "stage=2 model=mlp:4,4 dtype=fp32 seed=1");
    ZnConfigId s3 = cfg_id(2, "stage=3 model=mlp:4,4 dtype=fp32 seed=1");
    ZnConfigId seed = cfg_id(3, "stage=2 model=mlp:4,4 dtype=fp32 seed=12");
    ZnConfigId text = cfg_id(4, "stage=2 model=mlp:4,4 dtype=fp32 seed=1");
    ZnConfigId same_hash = cfg_id(1, "stage=9");
    cfg_check(3, s2, s2, s2, 0, "");
    cfg_check(2, s2, same_hash, s2, 0, "");
    cfg_check(2, s2, s3, s2, 0, "rank 1 runs a different configuration than rank 0 (stage: rank 1 has 3, rank 0 has "
              "2; config hash 0000000000000002 vs 0000000000000001): every rank needs the same config file, model "
              "and training flags");
    cfg_check(3, s2, s2, seed, 1, "rank 2 runs a different configuration than rank 0 (seed: rank 2 has 12, rank 0 "
              "has 1; config hash 0000000000000003 vs 0000000000000001): every rank needs the same config file, model "
              "and training flags");
    cfg_check(2, s2, text, s2, 0, "rank 1 runs a different configuration than rank 0 (the config files differ; config "
              "hash 0000000000000004 vs 0000000000000001): every rank needs the same config file, model and training "
              "flags");
    /* a word without '=' is named by itself */
    cfg_check(2, cfg_id(5, "stage=2 canonical"), cfg_id(6, "stage=2 fast"), s2, 0,
              "rank 1 runs a different configuration than rank 0 (fast: rank 1 has fast, rank 0 has canonical; config "
              "hash 0000000000000006 vs 0000000000000005): every rank needs the same config file, model and training "
              "flags");

    CfgCase k;
    memset(&k, 0, sizeof k);
    k.id[0] = k.id[1] = s2;
    k.fail_rank = 1;
    ZnErr err = {0};
    assert_int_equal(zt_sim_run(2, cfg_rank, &k, 30, &err), ZN_E_IO);
    assert_string_equal(err.msg, "rank 1: disk full");
    assert_int_equal(k.rc[0], ZN_E_COMM);
    assert_string_equal(k.err[0].msg, "rank 1 failed: disk full");
}

/* ---- the exchange before NCCL starts ---- */

typedef struct {
    int fail_rank;           /* this rank failed before NCCL (-1: none) */
    int rc[3];
    ZnErr err[3];
    unsigned char id[3][ZN_NCCL_ID_BYTES];
} HelloCase;

static int hello_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)err;
    HelloCase *k = arg;
    ZnErr mine = {0};
    int rc = 0;
    /* each rank's id starts as its rank's bytes; rank 0's must win */
    memset(k->id[rank], 0x10 + rank, ZN_NCCL_ID_BYTES);
    if (rank == k->fail_rank)
        rc = zn_err(&mine, ZN_E_USAGE, "--backend cuda: gpu %d does not exist (1 visible)%*s", rank, 600, "");
    k->rc[rank] = zn_proc_nccl_hello(c, rc, &mine, k->id[rank], &k->err[rank]);
    return 0;
}

/* spec: Z-NCCL-003 before NCCL starts the ranks exchange rank 0's id and
 * whether each got that far: all well, every rank holds rank 0's id; a
 * rank that failed (here its GPU does not exist) keeps its own error and
 * every other rank fails at once naming it and its reason, instead of
 * waiting in NCCL's init for a rank that never comes */
static void test_proc_nccl_hello(void **st) {
    (void)st;
    HelloCase k;
    memset(&k, 0, sizeof k);
    k.fail_rank = -1;
    ZnErr err = {0};
    assert_int_equal(zt_sim_run(3, hello_rank, &k, 30, &err), 0);
    unsigned char want[ZN_NCCL_ID_BYTES];
    memset(want, 0x10, sizeof want);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(k.rc[q], 0);
        assert_memory_equal(k.id[q], want, sizeof want);
    }
    memset(&k, 0, sizeof k);
    k.fail_rank = 1;
    assert_int_equal(zt_sim_run(3, hello_rank, &k, 30, &err), 0);
    assert_int_equal(k.rc[1], ZN_E_USAGE);
    /* its own message whole (600 spaces of padding make it longer than the exchange carries) */
    assert_int_equal(strlen(k.err[1].msg), strlen("--backend cuda: gpu 1 does not exist (1 visible)") + 600);
    for (int q = 0; q < 3; q += 2) {
        char w[160];
        snprintf(w, sizeof w, "rank %d: rank 1 failed before NCCL started: --backend cuda: gpu 1 does not exist (1 visible)", q);
        assert_int_equal(k.rc[q], ZN_E_COMM);
        /* the peer's message, cut to what the exchange carries (382 bytes) */
        assert_true(strncmp(k.err[q].msg, w, strlen(w)) == 0);
        assert_int_equal(strlen(k.err[q].msg), strlen(w) - strlen("--backend cuda: gpu 1 does not exist (1 visible)") + 382);
    }
}

/* spec: Z-PROC-005 when one rank's summary is shorter (rank 0 has one
 * more setting), the message still names the setting, and the missing
 * side has "(none)" */
static void test_proc_check_config_shorter_summary(void **st) {
    (void)st;
    cfg_check(2, cfg_id(1, "stage=2 seed=1"), cfg_id(2, "stage=2"), cfg_id(1, ""), 0,
              "rank 1 runs a different configuration than rank 0 (seed: rank 1 has (none), rank 0 has 1; config hash "
              "0000000000000002 vs 0000000000000001): every rank needs the same config file, model and training "
              "flags");
    cfg_check(2, cfg_id(1, "stage=2"), cfg_id(2, "stage=2 seed=7"), cfg_id(1, ""), 0,
              "rank 1 runs a different configuration than rank 0 (seed: rank 1 has 7, rank 0 has (none); config hash "
              "0000000000000002 vs 0000000000000001): every rank needs the same config file, model and training "
              "flags");
}

ZT_MAIN(
    cmocka_unit_test(test_coll_argument_checks),
    cmocka_unit_test(test_coll_in_place_rules),
    cmocka_unit_test(test_coll_sequence_mismatch),
    cmocka_unit_test(test_coll_wire_bytes),
    cmocka_unit_test(test_coll_pause),
    cmocka_unit_test(test_coll_transport_failures),
    cmocka_unit_test(test_coll_new_and_free),
    cmocka_unit_test(test_backend_names),
    cmocka_unit_test(test_proc_per_node),
    cmocka_unit_test(test_proc_start_refusals),
    cmocka_unit_test(test_proc_start_world_of_one),
    cmocka_unit_test(test_proc_nccl_boot),
    cmocka_unit_test(test_proc_check_config),
    cmocka_unit_test(test_proc_nccl_hello),
    cmocka_unit_test(test_proc_check_config_shorter_summary))
