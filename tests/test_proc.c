/* test_proc.c: the pieces of multi-process runs that can be checked inside
 * one process: the launcher environment, --rendezvous forms, sequence
 * records, and the TCP communicator (ranks as threads over real loopback
 * sockets) against the simulator, bit for bit. Runs of real processes are
 * checked by tests/proc_test.sh. */
#include "testutil.h"
#include <pthread.h>
#include <unistd.h>
#include "comm/rendezvous.h"
#include "comm/store.h"
#include "comm/comm_proc.h"
#include "comm/comm_seq.h"
#include "core/half.h"
#include "comm/world.h"
#include "app/run_procs.h"

static const char *all_vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MASTER_ADDR",
    "MASTER_PORT", NULL};

static void clear_env(void) {
    for (int i = 0; all_vars[i]; i++) unsetenv(all_vars[i]);
}

/* Sets each NAME to its value (pairs, NULL-ended), reads the launcher
   environment and checks the scheme, rank and world it finds; returns it
   for the checks of the other fields. */
static ZnProcEnv env_read(const char *const *vars, const char *source, int rank, int world) {
    for (int i = 0; vars[i]; i += 2) setenv(vars[i], vars[i + 1], 1);
    ZnProcEnv pe;
    ZnErr err;
    assert_int_equal(zn_proc_env(&pe, &err), 0);
    assert_string_equal(pe.source, source);
    assert_int_equal(pe.rank, rank);
    assert_int_equal(pe.world, world);
    return pe;
}

/* spec: Z-RDV-001 identity from each launcher's variables; Z-RDV-003 the
 * first scheme found wins (torchrun, then OpenMPI, Slurm, PMI) */
static void test_env_schemes(void **st) {
    (void)st;
    ZnProcEnv pe;
    ZnErr err;
    clear_env();
    assert_int_equal(zn_proc_env(&pe, &err), 0);
    assert_int_equal(pe.world, 0);
    assert_string_equal(pe.source, "none");

    const char *ompi[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "8", "OMPI_COMM_WORLD_LOCAL_RANK", "1",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "2", NULL};
    pe = env_read(ompi, "openmpi", 3, 8);
    assert_int_equal(pe.local_rank, 1);
    assert_int_equal(pe.local_world, 2);

    /* torchrun's variables win */
    const char *torchrun[] = {"RANK", "5", "WORLD_SIZE", "6", "LOCAL_RANK", "0", "MASTER_ADDR", "node7",
                              "MASTER_PORT", "1234", NULL};
    pe = env_read(torchrun, "torchrun", 5, 6);
    assert_string_equal(pe.master_addr, "node7");
    assert_int_equal(pe.master_port, 1234);

    clear_env();
    /* Slurm's own notation "2(x2)" for SLURM_NTASKS_PER_NODE: not read */
    const char *slurm[] = {"SLURM_PROCID", "2", "SLURM_NTASKS", "4", "SLURM_LOCALID", "0",
                           "SLURM_NTASKS_PER_NODE", "2(x2)", NULL};
    env_read(slurm, "slurm", 2, 4);

    clear_env();
    const char *pmi[] = {"PMI_RANK", "1", "PMI_SIZE", "2", NULL};
    pe = env_read(pmi, "pmi", 1, 2);
    assert_int_equal(pe.local_rank, 0);
    clear_env();
}

/* spec: Z-RDV-002 malformed variables are refused, naming the variable */
static void test_env_errors(void **st) {
    (void)st;
    ZnProcEnv pe;
    ZnErr err;
    struct { const char *k1, *v1, *k2, *v2, *msg; } cases[] = {
        {"RANK", "4", "WORLD_SIZE", "4", "RANK=4 is outside 0..3"},
        {"RANK", "-1", "WORLD_SIZE", "4", "RANK='-1'"},
        {"RANK", "0", "WORLD_SIZE", "0", "WORLD_SIZE='0'"},
        {"RANK", "1x", "WORLD_SIZE", "4", "RANK='1x'"},
        {"WORLD_SIZE", "4", NULL, NULL, "WORLD_SIZE is set but RANK is not"},
        {"SLURM_PROCID", "0", NULL, NULL, "SLURM_PROCID is set but SLURM_NTASKS is not"},
        {"MASTER_PORT", "70000", NULL, NULL, "MASTER_PORT='70000'"},
        {"MASTER_ADDR", "", NULL, NULL, "MASTER_ADDR=''"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv(cases[i].k1, cases[i].v1, 1);
        if (cases[i].k2) setenv(cases[i].k2, cases[i].v2, 1);
        assert_int_equal(zn_proc_env(&pe, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, cases[i].msg);
    }
    clear_env();
}

/* spec: Z-RDV-004 the --rendezvous forms */
static void test_rdv_parse(void **st) {
    (void)st;
    ZnProcEnv pe = {0};
    ZnRdvSpec s;
    ZnErr err;
    assert_int_equal(zn_rdv_parse(NULL, &pe, &s, &err), 0);
    assert_string_equal(s.host, "127.0.0.1");
    assert_int_equal(s.port, 29500);
    snprintf(pe.master_addr, sizeof pe.master_addr, "head");
    pe.master_port = 6000;
    assert_int_equal(zn_rdv_parse("env", &pe, &s, &err), 0);
    assert_string_equal(s.host, "head");
    assert_int_equal(s.port, 6000);
    assert_int_equal(zn_rdv_parse("tcp://10.0.0.2:7000", &pe, &s, &err), 0);
    assert_string_equal(s.host, "10.0.0.2");
    assert_int_equal(s.port, 7000);
    assert_int_equal(s.file, 0);
    assert_int_equal(zn_rdv_parse("file:/shared/rdv", &pe, &s, &err), 0);
    assert_int_equal(s.file, 1);
    assert_string_equal(s.path, "/shared/rdv");
    const char *bad[] = {"tcp://host", "tcp://:80", "tcp://h:0", "tcp://h:99999", "tcp://h:8x", "file:", "udp://h:1", "x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(zn_rdv_parse(bad[i], &pe, &s, &err), ZN_E_USAGE);
        assert_str_contains(err.msg, "--rendezvous");
    }
}

/* spec: Z-SEQ-001 the record and the simulator's wording of a mismatch */
static void test_seq_records(void **st) {
    (void)st;
    ZnSeqRec a, b;
    ZnErr err;
    long c1[3] = {4, 4, 4}, c2[3] = {4, 5, 3};
    zn_seq_fill(&a, 12, ZN_OP_ALL_GATHER, ZN_F32, ZN_SUM, 0, 0, c1, 3, "param_gather");
    a.count = 12;
    zn_seq_fill(&b, 12, ZN_OP_ALL_GATHER, ZN_F32, ZN_SUM, 0, 0, c1, 3, "param_gather");
    b.count = 12;
    assert_int_equal(zn_seq_compare(&a, 0, &b, 1, &err), 0);
    zn_seq_fill(&b, 12, ZN_OP_REDUCE_SCATTER, ZN_BF16, ZN_SUM, 0, 64, NULL, 3, "grad_reduce");
    assert_int_equal(zn_seq_compare(&a, 0, &b, 2, &err), ZN_E_COMM);
    assert_string_equal(err.msg, "collective mismatch at call #12: rank 0 all_gather fp32 n=12 'param_gather' vs "
                                 "rank 2 reduce_scatter bf16 n=64 'grad_reduce'");
    /* only the counts differ: they are shown */
    zn_seq_fill(&b, 12, ZN_OP_ALL_GATHER, ZN_F32, ZN_SUM, 0, 0, c2, 3, "param_gather");
    b.count = 12;
    assert_int_equal(zn_seq_compare(&a, 0, &b, 1, &err), ZN_E_COMM);
    assert_str_contains(err.msg, "counts=[4,4,4]");
    assert_str_contains(err.msg, "counts=[4,5,3]");
    /* a barrier matches a barrier whatever else the record says */
    zn_seq_fill(&a, 3, ZN_OP_BARRIER, ZN_U8, ZN_SUM, 0, 0, NULL, 3, "ckpt");
    zn_seq_fill(&b, 3, ZN_OP_BARRIER, ZN_F32, ZN_MAX, 2, 9, NULL, 3, "ckpt");
    assert_int_equal(zn_seq_compare(&a, 0, &b, 1, &err), 0);
    b.magic = 0;
    assert_int_equal(zn_seq_compare(&a, 0, &b, 1, &err), ZN_E_COMM);
    assert_str_contains(err.msg, "malformed record");
}

/* ------------------------------------------------------------------------
 * The same script of collectives on the TCP communicator and on the
 * simulator: every rank's results must be the same bytes. */

#define MAXW 5
#define OUT_BYTES (1 << 16)

typedef struct {
    int world;
    char rdv_path[256];
    unsigned char out[MAXW][OUT_BYTES];   /* what each rank received, concatenated */
    size_t used[MAXW];
    int rc[MAXW];
    ZnErr err[MAXW];
    int (*fn)(int rank, ZnComm *c, void *arg, ZnErr *err);   /* the script (tcp ranks) */
} Script;

static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}

/* deterministic inputs in dt, different per rank and call */
static void fill(void *buf, long n, ZnDtype dt, int rank, int call) {
    for (long i = 0; i < n; i++) {
        uint64_t r = mix(((uint64_t)rank << 40) ^ ((uint64_t)call << 24) ^ (uint64_t)i);
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 8.0 - 4.0);
        if (dt == ZN_F32) ((float *)buf)[i] = f;
        else if (dt == ZN_F16) ((uint16_t *)buf)[i] = zn_f32_to_f16(f);
        else if (dt == ZN_BF16) ((uint16_t *)buf)[i] = zn_f32_to_bf16(f);
        else if (dt == ZN_F64) ((double *)buf)[i] = (double)f * 1.0000001;
        else ((uint64_t *)buf)[i] = r;
    }
}

static void keep(Script *s, int rank, const void *p, size_t n) {
    if (s->used[rank] + n > OUT_BYTES) n = OUT_BYTES - s->used[rank];
    memcpy(s->out[rank] + s->used[rank], p, n);
    s->used[rank] += n;
}

/* The counters of the ring's model, which every backend keeps alike; the
 * wire counts are a process transport's own (Z-NODE-008), none in the
 * simulator. */
static void keep_ring_counts(Script *s, int rank, const ZnComm *c) {
    ZnCommStats ring = c->stats;
    ring.wire_inter = ring.wire_intra = ring.wire_msgs_inter = 0;
    keep(s, rank, &ring, sizeof ring);
}

static int run_script(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Script *s = arg;
    const int W = c->world.size;
    const ZnDtype dts[] = {ZN_F32, ZN_F16, ZN_BF16, ZN_F64};
    char *a = calloc(1, 16384), *b = calloc(1, 16384);
    long counts[MAXW];
    int rc = 0, call = 0;
    for (int d = 0; d < 4 && !rc; d++) {
        ZnDtype dt = dts[d];
        size_t es = zn_dtype_size(dt);
        for (int red = 0; red < 2 && !rc; red++) {
            ZnRedOp op = red ? ZN_MAX : ZN_SUM;
            fill(a, 1001, dt, rank, ++call);   /* n not divisible by W */
            if ((rc = c->all_reduce(c, a, 1001, dt, op, "t_ar", err))) break;
            keep(s, rank, a, 1001 * es);
            long tot = 0, off = 0;
            for (int q = 0; q < W; q++) { counts[q] = 37 + 5 * q; tot += counts[q]; if (q < rank) off += counts[q]; }
            fill(a, tot, dt, rank, ++call);
            if ((rc = c->reduce_scatter(c, a, b, counts, dt, op, "t_rs", err))) break;
            keep(s, rank, b, (size_t)counts[rank] * es);
            fill(a, tot, dt, rank, ++call);   /* in place: recv = send + offset */
            if ((rc = c->reduce_scatter(c, a, a + off * (long)es, counts, dt, op, "t_rs", err))) break;
            keep(s, rank, a + off * (long)es, (size_t)counts[rank] * es);
        }
        if (rc) break;
        long tot = 0, off = 0;
        for (int q = 0; q < W; q++) { counts[q] = 11 + q; tot += counts[q]; if (q < rank) off += counts[q]; }
        fill(b + off * (long)es, counts[rank], dt, rank, ++call);   /* send aliases its place */
        if ((rc = c->all_gather(c, b + off * (long)es, b, counts, dt, "t_ag", err))) break;
        keep(s, rank, b, (size_t)tot * es);
        fill(a, 50, dt, rank, ++call);
        if ((rc = c->broadcast(c, a, 50, dt, W - 1, "t_bc", err))) break;
        keep(s, rank, a, 50 * es);
    }
    if (!rc) {
        fill(a, 7, ZN_U64, rank, ++call);
        long one[MAXW];
        for (int q = 0; q < W; q++) one[q] = 7;
        rc = c->all_gather(c, a, b, one, ZN_U64, "t_u64", err);
        if (!rc) keep(s, rank, b, (size_t)W * 7 * 8);
    }
    if (!rc) rc = c->barrier(c, "t_barrier", err);
    keep_ring_counts(s, rank, c);   /* the counters agree too */
    free(a);
    free(b);
    return rc;
}

/* Collectives of hundreds of KiB per peer: above the size tcp sends by
 * reference between ranks that can read each other (Z-PROC-008). Each
 * result is kept as a hash (the outputs are larger than Script holds). */
static void keep_hash(Script *s, int rank, const void *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    keep(s, rank, &h, sizeof h);
}

static int run_big(int rank, ZnComm *c, void *arg, ZnErr *err) {
    Script *s = arg;
    const int W = c->world.size;
    const long n = 300000;   /* fp32: 1.2 MB, a peer's part about 400 KB */
    float *a = calloc((size_t)n, 4), *b = calloc((size_t)n, 4);
    long counts[MAXW], off = 0;
    for (int q = 0; q < W; q++) { counts[q] = n / W - 7 * q; if (q < rank) off += counts[q]; }
    int rc = 0;
    fill(a, n, ZN_F32, rank, 1);
    if (!(rc = c->all_reduce(c, a, n, ZN_F32, ZN_SUM, "big_ar", err))) keep_hash(s, rank, a, (size_t)n * 4);
    fill(a, n, ZN_F32, rank, 2);   /* in place */
    if (!rc && !(rc = c->reduce_scatter(c, a, a + off, counts, ZN_F32, ZN_SUM, "big_rs", err)))
        keep_hash(s, rank, a + off, (size_t)counts[rank] * 4);
    if (!rc && !(rc = c->all_gather(c, a + off, b, counts, ZN_F32, "big_ag", err)))
        keep_hash(s, rank, b, (size_t)(n / W * W - 7 * (W - 1) * W / 2) * 4);
    fill(b, n, ZN_BF16, rank, 3);
    if (!rc && !(rc = c->broadcast(c, b, n, ZN_BF16, 1 % W, "big_bc", err))) keep_hash(s, rank, b, (size_t)n * 2);
    keep_ring_counts(s, rank, c);
    free(a);
    free(b);
    return rc;
}

typedef struct { Script *s; int rank; } TcpArg;

static void *tcp_rank(void *p) {
    TcpArg *t = p;
    Script *s = t->s;
    ZnRdvSpec spec = {0};
    spec.file = 1;
    snprintf(spec.path, sizeof spec.path, "%s", s->rdv_path);
    ZnErr *err = &s->err[t->rank];
    ZnStore *st = zn_store_open(&spec, t->rank, s->world, err);
    if (!st) { s->rc[t->rank] = err->code; return NULL; }
    ZnComm *c = zn_comm_tcp_new(st, err);
    s->rc[t->rank] = c ? s->fn(t->rank, c, s, err) : err->code;
    zn_comm_tcp_free(c);
    zn_store_close(st);
    return NULL;
}

/* Runs fn on W tcp ranks (threads over loopback) and on the simulator:
 * every rank's kept bytes must be equal. */
static void tcp_vs_sim(int W, int (*fn)(int, ZnComm *, void *, ZnErr *)) {
    Script *tcp = calloc(1, sizeof *tcp), *sim = calloc(1, sizeof *sim);
    tcp->world = sim->world = W;
    tcp->fn = fn;
    snprintf(tcp->rdv_path, sizeof tcp->rdv_path, "/tmp/zinc-test-rdv-%d-%d", (int)getpid(), W);
    pthread_t th[MAXW];
    TcpArg args[MAXW];
    for (int r = 0; r < W; r++) {
        args[r] = (TcpArg){tcp, r};
        pthread_create(&th[r], NULL, tcp_rank, &args[r]);
    }
    for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
    unlink(tcp->rdv_path);
    for (int r = 0; r < W; r++)
        if (tcp->rc[r]) fail_msg("W=%d rank %d: %s", W, r, tcp->err[r].msg);
    ZnErr err;
    ZnSimWorld *w = zn_sim_world_new(W, &err);
    assert_int_equal(zn_sim_run(w, fn, sim, &err), 0);
    zn_sim_world_free(w);
    for (int r = 0; r < W; r++) {
        assert_int_equal(tcp->used[r], sim->used[r]);
        assert_memory_equal(tcp->out[r], sim->out[r], sim->used[r]);
    }
    free(tcp);
    free(sim);
}

/* spec: Z-PROC-002 the TCP communicator gives the simulator's bits for every
 * collective, dtype and reduction, and the same byte counters; Z-RDV-005 the
 * file rendezvous (ranks as threads, real loopback sockets) */
static void test_tcp_matches_sim(void **st) {
    (void)st;
    for (int W = 1; W <= MAXW; W += 2) tcp_vs_sim(W, run_script);
}

/* spec: Z-PROC-008 large messages between ranks that can read each other go
 * by reference (the threads of this test can), and through the sockets with
 * ZINC_TCP_CMA=0: the same bits as the simulator either way */
static void test_tcp_by_reference(void **st) {
    (void)st;
    for (int W = 2; W <= 3; W++) tcp_vs_sim(W, run_big);
    setenv("ZINC_TCP_CMA", "0", 1);
    tcp_vs_sim(3, run_big);
    tcp_vs_sim(3, run_script);
    unsetenv("ZINC_TCP_CMA");
}

/* The comparison of a processes' result p with the simulator's s, with one
 * value of p changed: it must fail naming what (want), and pass again once
 * the value is put back. */
#define DIFFERS(field, change, want)                                            \
    do {                                                                        \
        __typeof__(field) saved_ = (field);                                     \
        change;                                                                 \
        ZnErr err_ = {0};                                                       \
        assert_int_equal(zn_run_procs_compare(&o, &p, &s, &err_), ZN_E_INTERNAL); \
        assert_str_contains(err_.msg, "ranks in processes differ from the simulator: "); \
        assert_str_contains(err_.msg, want);                                    \
        (field) = saved_;                                                       \
        assert_int_equal(zn_run_procs_compare(&o, &p, &s, &err_), 0);           \
    } while (0)

/* spec: Z-SPEC-005 the processes' result must be the simulator's bit for bit,
 * else the run fails naming the step, the final parameters, or the rank and
 * what differs: each value the comparison reads, changed alone, is named */
static void test_procs_compare(void **st) {
    (void)st;
    ZnTrainFlags f = zt_train_flags("mlp:12,16,6", 2, 2, 3);
    ZnRunOpts o = zt_resolve(&f, "{\"train_micro_batch_size_per_gpu\": 2, \"fp16\": {\"enabled\": true}}");
    o.out = NULL;
    ZnRunResult p, s;
    ZnErr err = {0};
    if (zn_run(&o, &p, &err) || zn_run(&o, &s, &err)) fail_msg("run: %s", err.msg);
    assert_int_equal(zn_run_procs_compare(&o, &p, &s, &err), 0);

    DIFFERS(p.loss[1], p.loss[1] += 1, "step 2: loss ");
    DIFFERS(p.loss[0], p.loss[0] = -p.loss[0], "step 1: loss ");
    DIFFERS(p.grad_norm[0], p.grad_norm[0] *= 2, "step 1: loss ");
    DIFFERS(p.lr[1], p.lr[1] += 1e-9, "step 2: ");
    DIFFERS(p.scale[0], p.scale[0] /= 2, "step 1: ");
    DIFFERS(p.scale_after[1], p.scale_after[1] *= 2, "step 2: ");
    DIFFERS(p.skipped[0], p.skipped[0] = !p.skipped[0], "step 1: ");
    DIFFERS(p.first_step, p.first_step = 1, "final parameters");
    DIFFERS(p.digest, p.digest ^= 1, "final parameters: digest");
    DIFFERS(p.params[p.numel - 1], p.params[p.numel - 1] += 1, "final parameters");

    /* rank 1's slots (rank 0's too: the loop reaches every rank) */
    for (int r = 0; r < 2; r++) {
        char init[64], end[64], dev[64], host[64], nvme[64], moved[64], inter[64], phase[64];
        snprintf(init, sizeof init, "rank %d: collective counters after init", r);
        snprintf(end, sizeof end, "rank %d: collective counters at the end", r);
        snprintf(dev, sizeof dev, "rank %d: device memory", r);
        snprintf(host, sizeof host, "rank %d: host tier memory", r);
        snprintf(nvme, sizeof nvme, "rank %d: NVMe tier memory", r);
        snprintf(moved, sizeof moved, "rank %d: offload bytes moved", r);
        snprintf(inter, sizeof inter, "rank %d: bytes to other nodes", r);
        snprintf(phase, sizeof phase, "rank %d: a phase's record", r);
        ZnCommStats *ci = &p.comm_init[r], *ce = &p.comm_end[r];
        DIFFERS(ci->calls[ZN_OP_BROADCAST], ci->calls[ZN_OP_BROADCAST]++, init);
        DIFFERS(ce->bytes_sent[ZN_OP_ALL_GATHER], ce->bytes_sent[ZN_OP_ALL_GATHER]++, end);
        DIFFERS(ce->bytes_recv[ZN_OP_REDUCE_SCATTER], ce->bytes_recv[ZN_OP_REDUCE_SCATTER]++, end);
        DIFFERS(ce->bytes_inter[ZN_OP_ALL_REDUCE], ce->bytes_inter[ZN_OP_ALL_REDUCE]++, end);
        DIFFERS(ce->ntags, ce->ntags--, end);
        assert_true(ce->ntags > 0);
        int t = ce->ntags - 1;
        DIFFERS(ce->tags[t].tag[0], ce->tags[t].tag[0] ^= 1, end);
        DIFFERS(ce->tags[t].calls, ce->tags[t].calls++, end);
        DIFFERS(ce->tags[t].bytes_sent, ce->tags[t].bytes_sent++, end);
        DIFFERS(ce->tags[t].bytes_recv, ce->tags[t].bytes_recv++, end);
        DIFFERS(ce->tags[t].bytes_inter, ce->tags[t].bytes_inter++, end);
        DIFFERS(p.mem_end[r].cur[ZN_MEM_PARAMS16], p.mem_end[r].cur[ZN_MEM_PARAMS16]++, dev);
        DIFFERS(p.mem_end[r].peak[ZN_MEM_GRADS], p.mem_end[r].peak[ZN_MEM_GRADS]++, dev);
        DIFFERS(p.mem_end[r].nallocs, p.mem_end[r].nallocs++, dev);
        DIFFERS(p.host_end[r].nallocs, p.host_end[r].nallocs++, host);
        DIFFERS(p.nvme_end[r].peak[ZN_MEM_PARAMS16], p.nvme_end[r].peak[ZN_MEM_PARAMS16]++, nvme);
        DIFFERS(p.moved[4 * r + 3], p.moved[4 * r + 3]++, moved);
        DIFFERS(p.inter[4 * r + 2], p.inter[4 * r + 2]++, inter);
        ZnPhaseStats *ph = &p.phases[ZN_PH_N * r + ZN_PH_N - 1];
        DIFFERS(ph->seen, ph->seen = !ph->seen, phase);
        DIFFERS(ph->peak[ZN_TIER_DEVICE], ph->peak[ZN_TIER_DEVICE]++, phase);
        DIFFERS(ph->at_peak[ZN_TIER_HOST][ZN_MEM_PARAMS16], ph->at_peak[ZN_TIER_HOST][ZN_MEM_PARAMS16]++, phase);
        DIFFERS(ph->h2d, ph->h2d += 1, phase);
        DIFFERS(ph->d2h, ph->d2h += 1, phase);
        DIFFERS(ph->comm.calls[ZN_OP_ALL_GATHER], ph->comm.calls[ZN_OP_ALL_GATHER]++, phase);
    }
    zn_run_result_free(&p);
    zn_run_result_free(&s);
    zn_run_opts_free(&o);
}

ZT_MAIN(
    cmocka_unit_test(test_env_schemes),
    cmocka_unit_test(test_env_errors),
    cmocka_unit_test(test_rdv_parse),
    cmocka_unit_test(test_seq_records),
    cmocka_unit_test(test_tcp_matches_sim),
    cmocka_unit_test(test_tcp_by_reference),
    cmocka_unit_test(test_procs_compare))
