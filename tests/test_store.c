/* test_store.c: the rendezvous store (src/comm/store.c) and the TCP
 * transport (src/comm/comm_tcp.c) at their edges: refusals at the
 * rendezvous, connections that are not zinc ranks, joins that fail, bounded
 * waits, peers that die, and frames that do not follow the protocol. Ranks
 * are threads over real loopback sockets; a misbehaving peer is a raw
 * socket, or a bare store that writes the tcp frames by hand. Every wait is
 * bounded (ZINC_RDV_TIMEOUT / ZINC_COMM_TIMEOUT of 1 s where a test waits
 * for a timeout, and alarm() against a hang). Assertions run on the main
 * thread only: rank threads record what they saw. */
#include "testutil.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include "comm/comm_proc.h"
#include "comm/comm_seq.h"
#include "comm/store.h"

/* The rendezvous frames (spec Z-RDV-005: magic, version, rank, world; the
 * answer: magic, ok, message), and the tcp mesh's (Z-PROC-002, Z-PROC-007):
 * the address each rank publishes, the hello on a mesh connection, the
 * header of each peer's part of an exchange. */
#define RDV_MAGIC 0x5a4e5256u
typedef struct { uint32_t magic, version; int32_t rank, world; } Hello;
typedef struct { uint32_t magic, ok; char msg[240]; } Ack;
#define MESH_MAGIC 0x5a4e4d53u
typedef struct {
    uint32_t magic; int32_t port; uint64_t token; char host[64];
    int32_t pid, node_rank;                       /* node_rank: GROUP_RANK, -1 where none was given */
    uint64_t probe_at, probe;                     /* 0: nothing to read by reference */
    uint64_t node;                                /* the node it runs on: reads by reference stay inside one */
} MeshAddr;
typedef struct { uint32_t magic; int32_t rank; uint64_t token; } MeshHello;
typedef struct { uint32_t magic, by_ref; int64_t bytes; uint64_t addr; } Frame;

#define MAXR 4
#define ALARM_S 30

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    return a;
}

/* A socket bound to 127.0.0.1 on the kernel's choice of port (in *a). */
static int bound_socket(struct sockaddr_in *a) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    *a = loopback(0);
    socklen_t al = sizeof *a;
    assert_int_equal(bind(fd, (struct sockaddr *)a, sizeof *a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)a, &al), 0);
    return fd;
}

/* A TCP port nothing uses now, a new one at each call, from 10000..19999:
 * below the kernel's ephemeral range (32768-60999 by default), so that no
 * outgoing connection elsewhere on the machine (a test suite running beside
 * this one) takes it as its local port between this call and rank 0's bind,
 * as it may take the kernel's own choice for port 0. */
static int free_port(void) {
    static int next = -1;
    if (next < 0) next = (int)(getpid() % 5000) * 2;
    for (int tries = 0; tries < 10000; tries++) {
        int port = 10000 + next++ % 10000;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = loopback(port);
        int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
        close(fd);
        if (ok) return port;
    }
    fail_msg("no free port in 10000..19999");
    return -1;
}

/* A socket listening on port (every interface, as rank 0 would). */
static int listen_port(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = loopback(0);
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Connects to 127.0.0.1:port, retrying while rank 0 is not listening yet. */
static int raw_connect(int port) {
    double end = now_s() + 5;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        struct sockaddr_in a = loopback(port);
        /* a connection to itself (Z-RDV-007) would hold the port rank 0
           is about to bind */
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && !zn_comm_self_connected(fd)) return fd;
        close(fd);
        if (now_s() > end) fail_msg("nothing listens on port %d", port);
        sleep_s(0.01);
    }
}

static void raw_send(int fd, const void *p, size_t n) {
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Reads up to n bytes (waiting at most 5 s for each part); returns how many
 * came before the end of the stream. */
static size_t raw_recv(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        struct pollfd q = {fd, POLLIN, 0};
        if (poll(&q, 1, 5000) <= 0) break;
        ssize_t k = recv(fd, (char *)p + got, n - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    return got;
}

static ZnRdvSpec tcp_spec(const char *host, int port) {
    ZnRdvSpec s;
    memset(&s, 0, sizeof s);
    snprintf(s.host, sizeof s.host, "%s", host);
    s.port = port;
    return s;
}

static ZnRdvSpec file_spec(const char *path) {
    ZnRdvSpec s;
    memset(&s, 0, sizeof s);
    s.file = 1;
    snprintf(s.path, sizeof s.path, "%s", path);
    return s;
}

static void tmp_path(char *buf, size_t cap, const char *what) {
    snprintf(buf, cap, "/tmp/zinc-test-store-%d-%s", (int)getpid(), what);
    unlink(buf);
}

/* ---- zn_store_open on a thread of its own ---- */

typedef struct {
    pthread_t th;
    ZnRdvSpec spec;
    int rank, world;
    ZnErr err;       /* zn_store_open's message where it failed */
    ZnStore *s;
} Opener;

static void *open_main(void *p) {
    Opener *o = p;
    o->s = zn_store_open(&o->spec, o->rank, o->world, &o->err);
    return NULL;
}

static void open_start(Opener *o, ZnRdvSpec spec, int rank, int world) {
    memset(o, 0, sizeof *o);
    o->spec = spec;
    o->rank = rank;
    o->world = world;
    assert_int_equal(pthread_create(&o->th, NULL, open_main, o), 0);
}

static ZnStore *open_join(Opener *o) {
    pthread_join(o->th, NULL);
    return o->s;
}

/* ---- a world of ranks on threads over a file rendezvous: each opens its
 * store, runs its function, closes the store (timed) ---- */

typedef void (*RankFn)(int rank, ZnStore *s, void *arg);

typedef struct {
    int rank, world;
    const char *path;
    RankFn fn;
    void *arg;
    int open_rc;
    char open_msg[256];
    double close_s;          /* how long zn_store_close took */
} RankRun;

static void *rank_main(void *p) {
    RankRun *r = p;
    ZnRdvSpec spec = file_spec(r->path);
    ZnErr err = {0};
    ZnStore *s = zn_store_open(&spec, r->rank, r->world, &err);
    if (!s) {
        r->open_rc = err.code;
        snprintf(r->open_msg, sizeof r->open_msg, "%.250s", err.msg);
        return NULL;
    }
    r->fn(r->rank, s, r->arg);
    double t0 = now_s();
    zn_store_close(s);
    r->close_s = now_s() - t0;
    return NULL;
}

static void run_ranks(int W, const RankFn *fns, void *arg, double *close_s) {
    static int seq;
    char path[128], what[32];
    snprintf(what, sizeof what, "world-%d", ++seq);
    tmp_path(path, sizeof path, what);
    RankRun r[MAXR];
    pthread_t th[MAXR];
    alarm(ALARM_S);
    for (int q = 0; q < W; q++) {
        r[q] = (RankRun){.rank = q, .world = W, .path = path, .fn = fns[q], .arg = arg};
        assert_int_equal(pthread_create(&th[q], NULL, rank_main, &r[q]), 0);
    }
    for (int q = 0; q < W; q++) pthread_join(th[q], NULL);
    alarm(0);
    unlink(path);
    for (int q = 0; q < W; q++) {
        if (r[q].open_rc) fail_msg("rank %d could not open its store: %s", q, r[q].open_msg);
        if (close_s) close_s[q] = r[q].close_s;
    }
}

/* what the rank functions saw */
typedef struct {
    pthread_barrier_t bar;
    int rc[8], rc2[8];
    ZnErr err[8], err2[8];
    char got[MAXR][64];
    int variant;
    long val[MAXR];          /* what a hand-played rank counted or read */
} Seen;

/* Runs ranks 0 and 1 (a and b) with v cleared. */
static void run_pair(RankFn a, RankFn b, Seen *v) {
    memset(v, 0, sizeof *v);
    const RankFn fns[] = {a, b};
    run_ranks(2, fns, v, NULL);
}

/* Rank r of the last run failed with code and exactly message msg. */
static void expect_rank(const Seen *v, int r, int code, const char *msg) {
    assert_int_equal(v->rc[r], code);
    assert_string_equal(v->err[r].msg, msg);
}

/* ------------------------------------------------------------ tests */

/* spec: Z-RDV-005 a store connects rank 0 with each other rank, and only
 * those pairs: a world of one opens nothing (no listening, no file), and a
 * message to a rank without a connection is refused */
static void test_store_world_of_one(void **st) {
    (void)st;
    ZnErr err = {0};
    ZnRdvSpec spec = tcp_spec("127.0.0.1", free_port());
    ZnStore *s = zn_store_open(&spec, 0, 1, &err);
    assert_non_null(s);
    assert_int_equal(zn_store_rank(s), 0);
    assert_int_equal(zn_store_world(s), 1);
    int in = 42, out = 0;
    assert_int_equal(zn_store_allgather(s, &in, &out, sizeof in, &err), 0);
    assert_int_equal(out, 42);
    assert_int_equal(zn_store_send(s, 0, &in, sizeof in, &err), ZN_E_INTERNAL);
    assert_string_equal(err.msg, "store: rank 0 has no connection to rank 0");
    assert_int_equal(zn_store_recv(s, 1, &in, sizeof in, &err), ZN_E_INTERNAL);
    assert_string_equal(err.msg, "store: rank 0 has no connection to rank 1");
    char ip[32] = "x";
    zn_store_local_ip(s, ip, sizeof ip);   /* no connection: this host's loopback */
    assert_string_equal(ip, "127.0.0.1");
    zn_store_close(s);
    /* a file rendezvous in a folder that does not exist: a world of one
       writes nothing there */
    spec = file_spec("/nonexistent-zinc-test-dir/rdv");
    s = zn_store_open(&spec, 0, 1, &err);
    assert_non_null(s);
    zn_store_close(s);
    zn_store_close(NULL);
}

static void peers_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    int x = 1;
    v->rc[rank] = zn_store_send(s, 2, &x, sizeof x, &v->err[rank]);
    v->rc2[rank] = zn_store_recv(s, -1, &x, sizeof x, &v->err2[rank]);
}

static void peers_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    int x = 1;
    v->rc[rank] = zn_store_send(s, 1, &x, sizeof x, &v->err[rank]);
    v->rc2[rank] = zn_store_allgather(s, &rank, v->got[rank], sizeof rank, &v->err2[rank]);
}

static void peers_rank0_gather(int rank, ZnStore *s, void *arg) {
    peers_rank0(rank, s, arg);
    Seen *v = arg;
    v->rc2[rank] = zn_store_allgather(s, &rank, v->got[rank], sizeof rank, &v->err2[rank]);
}

/* spec: Z-RDV-005 rank 0 talks to ranks 1..world-1, every other rank to
 * rank 0 alone; the pairs that exist still carry data afterwards */
static void test_store_peer_checks(void **st) {
    (void)st;
    Seen v;
    run_pair(peers_rank0_gather, peers_rank1, &v);
    expect_rank(&v, 0, ZN_E_INTERNAL, "store: rank 0 has no connection to rank 2");
    expect_rank(&v, 1, ZN_E_INTERNAL, "store: rank 1 has no connection to rank 1");
    for (int q = 0; q < 2; q++) {
        assert_int_equal(v.rc2[q], 0);
        int all[2];
        memcpy(all, v.got[q], sizeof all);
        assert_int_equal(all[0], 0);
        assert_int_equal(all[1], 1);
    }
}

/* spec: Z-RDV-004 a path or host too long for the store, and a port that
 * is empty or negative, are usage errors naming the flag */
static void test_rdv_parse_limits(void **st) {
    (void)st;
    ZnProcEnv pe;
    memset(&pe, 0, sizeof pe);
    ZnRdvSpec s;
    ZnErr err;
    static char arg[1200], want[400];
    /* the longest path that fits (1023 bytes) is taken whole */
    snprintf(arg, sizeof arg, "file:%01023d", 7);
    assert_int_equal(zn_rdv_parse(arg, &pe, &s, &err), 0);
    assert_int_equal(strlen(s.path), 1023);
    snprintf(arg, sizeof arg, "file:%01024d", 7);
    assert_int_equal(zn_rdv_parse(arg, &pe, &s, &err), ZN_E_USAGE);
    snprintf(want, sizeof want, "--rendezvous file:PATH needs a path (got '%.60s')", arg);
    assert_string_equal(err.msg, want);
    /* a host of 255 bytes fits, 256 do not */
    snprintf(arg, sizeof arg, "tcp://%0255d:80", 5);
    assert_int_equal(zn_rdv_parse(arg, &pe, &s, &err), 0);
    assert_int_equal(strlen(s.host), 255);
    assert_int_equal(s.port, 80);
    snprintf(arg, sizeof arg, "tcp://%0256d:80", 5);
    assert_int_equal(zn_rdv_parse(arg, &pe, &s, &err), ZN_E_USAGE);
    snprintf(want, sizeof want, "--rendezvous '%.60s': expected tcp://HOST:PORT with PORT in 1..65535", arg);
    assert_string_equal(err.msg, want);
    const char *bad[] = {"tcp://h:", "tcp://h:-3", "tcp://h:65536"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(zn_rdv_parse(bad[i], &pe, &s, &err), ZN_E_USAGE);
        snprintf(want, sizeof want, "--rendezvous '%s': expected tcp://HOST:PORT with PORT in 1..65535", bad[i]);
        assert_string_equal(err.msg, want);
    }
    assert_int_equal(zn_rdv_parse("tcp://h:65535", &pe, &s, &err), 0);
    assert_int_equal(s.port, 65535);
}

/* e failed with code and exactly "rendezvous tcp://127.0.0.1:PORT: rest". */
static void expect_rdv(const ZnErr *e, int code, int port, const char *rest) {
    char want[600];
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: %s", port, rest);
    assert_int_equal(e->code, code);
    assert_string_equal(e->msg, want);
}

/* spec: Z-RDV-006 joining is bounded by ZINC_RDV_TIMEOUT and rank 0's
 * message lists the ranks still missing (cut short for a large world);
 * a rank that joined is told it could not complete the join */
static void test_store_join_timeout(void **st) {
    (void)st;
    setenv("ZINC_RDV_TIMEOUT", "1", 1);
    int p3 = free_port(), p2 = free_port(), p60 = free_port();
    Opener alone, with2, rank2, big;
    open_start(&alone, tcp_spec("127.0.0.1", p3), 0, 3);
    open_start(&with2, tcp_spec("127.0.0.1", p2), 0, 3);
    open_start(&rank2, tcp_spec("127.0.0.1", p2), 2, 3);
    open_start(&big, tcp_spec("127.0.0.1", p60), 0, 60);
    alarm(ALARM_S);
    double t0 = now_s();
    assert_null(open_join(&alone));
    assert_null(open_join(&with2));
    assert_null(open_join(&rank2));
    assert_null(open_join(&big));
    double took = now_s() - t0;
    alarm(0);
    unsetenv("ZINC_RDV_TIMEOUT");
    char want[400];
    expect_rdv(&alone.err, ZN_E_COMM, p3, "1 of 3 ranks joined within 1 s (missing: 1, 2; "
             "ZINC_RDV_TIMEOUT)");
    expect_rdv(&with2.err, ZN_E_COMM, p2, "2 of 3 ranks joined within 1 s (missing: 1; "
             "ZINC_RDV_TIMEOUT)");
    assert_int_equal(rank2.err.code, ZN_E_COMM);
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: rank 2 could not join within 1 s: ", p2);
    assert_memory_equal(rank2.err.msg, want, strlen(want));
    assert_str_contains(rank2.err.msg, "(ZINC_RDV_TIMEOUT)");
    /* 59 missing ranks: the list stops before it outgrows the message */
    assert_int_equal(big.err.code, ZN_E_COMM);
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: 1 of 60 ranks joined within 1 s (missing: 1, 2, 3, ",
             p60);
    assert_memory_equal(big.err.msg, want, strlen(want));
    assert_str_contains(big.err.msg, ", 49, 50; ZINC_RDV_TIMEOUT)");
    const char *missing = strstr(big.err.msg, "(missing: ");   /* not the port, which may hold "51" */
    assert_non_null(missing);
    assert_null(strstr(missing, " 51"));
    assert_true(took < 5);
}

/* Rank 0 of world `world` on a thread; the main thread plays a peer that
 * sends hello h and reads rank 0's answer. */
static void refused_hello(Hello h, int world, const char *why) {
    int port = free_port();
    Opener r0;
    open_start(&r0, tcp_spec("127.0.0.1", port), 0, world);
    alarm(ALARM_S);
    int fd = raw_connect(port);
    raw_send(fd, &h, sizeof h);
    Ack a;
    memset(&a, 0, sizeof a);
    assert_int_equal(raw_recv(fd, &a, sizeof a), sizeof a);
    close(fd);
    assert_null(open_join(&r0));
    alarm(0);
    assert_int_equal(a.magic, RDV_MAGIC);
    assert_int_equal(a.ok, 0);
    assert_string_equal(a.msg, why);
    char want[400];
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: %s", port, why);
    assert_int_equal(r0.err.code, ZN_E_USAGE);
    assert_string_equal(r0.err.msg, want);
}

/* spec: Z-RDV-005 rank 0 refuses another protocol version, a rank outside
 * 1..world-1 and a rank claimed twice, telling the peer why; Z-FAULT-003
 * ranks told different world sizes are refused on both sides */
static void test_store_refusals(void **st) {
    (void)st;
    refused_hello((Hello){RDV_MAGIC, 2, 1, 2}, 2, "rank 1 speaks rendezvous version 2, rank 0 version 1");
    refused_hello((Hello){RDV_MAGIC, 1, 5, 2}, 2, "a peer claims rank 5, outside 1..1");
    refused_hello((Hello){RDV_MAGIC, 1, 0, 3}, 3, "a peer claims rank 0, outside 1..2");

    /* world sizes 2 and 3: both stores fail, with the same reason */
    int port = free_port();
    Opener r0, r1;
    open_start(&r0, tcp_spec("127.0.0.1", port), 0, 2);
    open_start(&r1, tcp_spec("127.0.0.1", port), 1, 3);
    alarm(ALARM_S);
    assert_null(open_join(&r0));
    assert_null(open_join(&r1));
    alarm(0);
    char want[400];
    expect_rdv(&r0.err, ZN_E_USAGE, port, "rank 1 has world size 3, rank 0 has 2");
    expect_rdv(&r1.err, ZN_E_USAGE, port, "rank 0 refused rank 1: rank 1 has world size 3, "
             "rank 0 has 2");

    /* two processes claim rank 1 of 3: the second is refused, then rank 0
       gives up and closes the first */
    port = free_port();
    open_start(&r0, tcp_spec("127.0.0.1", port), 0, 3);
    alarm(ALARM_S);
    int a = raw_connect(port);
    Hello h = {RDV_MAGIC, 1, 1, 3};
    raw_send(a, &h, sizeof h);
    int b = raw_connect(port);
    raw_send(b, &h, sizeof h);
    Ack ack;
    memset(&ack, 0, sizeof ack);
    assert_int_equal(raw_recv(b, &ack, sizeof ack), sizeof ack);
    char rest;
    assert_int_equal(raw_recv(a, &rest, 1), 0);   /* the first is closed unanswered */
    close(a);
    close(b);
    assert_null(open_join(&r0));
    alarm(0);
    assert_int_equal(ack.ok, 0);
    assert_string_equal(ack.msg, "two processes claim rank 1");
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: two processes claim rank 1", port);
    assert_string_equal(r0.err.msg, want);
}

/* spec: Z-RDV-005 connections that are not zinc ranks (closed at once, a
 * short or foreign greeting) are dropped unanswered, and the rendezvous
 * completes with the real rank */
static void test_store_drops_foreign(void **st) {
    (void)st;
    int port = free_port();
    Opener r0;
    open_start(&r0, tcp_spec("127.0.0.1", port), 0, 2);
    alarm(ALARM_S);
    close(raw_connect(port));                       /* a port scan */
    int foreign = raw_connect(port);                /* a greeting in another protocol */
    unsigned char junk[sizeof(Hello)];
    memset(junk, 0xab, sizeof junk);
    raw_send(foreign, junk, sizeof junk);
    char c;
    assert_int_equal(raw_recv(foreign, &c, 1), 0);  /* dropped: no answer, closed */
    close(foreign);
    int shorty = raw_connect(port);                 /* half a greeting, then gone */
    Hello h = {RDV_MAGIC, 1, 1, 2};
    raw_send(shorty, &h, sizeof h / 2);
    close(shorty);
    ZnErr err = {0};
    ZnRdvSpec spec = tcp_spec("127.0.0.1", port);
    ZnStore *s1 = zn_store_open(&spec, 1, 2, &err);
    if (!s1) fail_msg("rank 1: %s", err.msg);
    ZnStore *s0 = open_join(&r0);
    if (!s0) fail_msg("rank 0: %s", r0.err.msg);
    alarm(0);
    int x = 7, y = 0;
    assert_int_equal(zn_store_send(s1, 0, &x, sizeof x, &err), 0);
    assert_int_equal(zn_store_recv(s0, 1, &y, sizeof y, &err), 0);
    assert_int_equal(y, 7);
    zn_store_close(s1);
    zn_store_close(s0);
}

/* a rank 0 that answers a greeting with bytes that are no rendezvous answer */
static void *foreign_server(void *p) {
    int lfd = *(int *)p;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) return NULL;
    Hello h;
    raw_recv(fd, &h, sizeof h);
    char junk[sizeof(Ack)];
    memset(junk, 'x', sizeof junk);
    (void)!send(fd, junk, sizeof junk, MSG_NOSIGNAL);
    close(fd);
    return NULL;
}

/* spec: Z-FAULT-004 a rendezvous with no rank 0 behind it fails at
 * ZINC_RDV_TIMEOUT naming what was tried: a refused connection, a file that
 * is missing or names no rank 0, a host that does not resolve (IPv6), a
 * listener that never answers (port 0 in the file is no address either); something that answers but is no zinc rank
 * 0 is refused at once */
static void test_store_join_failures(void **st) {
    (void)st;
    setenv("ZINC_RDV_TIMEOUT", "1", 1);
    char missing[128], garbage[128], badport[128];
    tmp_path(missing, sizeof missing, "missing");
    tmp_path(garbage, sizeof garbage, "garbage");
    tmp_path(badport, sizeof badport, "badport");
    FILE *f = fopen(garbage, "w");
    assert_non_null(f);
    fputs("hello\n", f);
    fclose(f);
    f = fopen(badport, "w");
    assert_non_null(f);
    fputs("zinc-rendezvous v1 127.0.0.1 70000\n", f);
    fclose(f);
    char port0[128];
    tmp_path(port0, sizeof port0, "port0");
    f = fopen(port0, "w");
    assert_non_null(f);
    fputs("zinc-rendezvous v1 127.0.0.1 0\n", f);
    fclose(f);
    int refused = free_port(), v6 = free_port(), silent_port, foreign_port;
    int silent = listen_port(&silent_port), foreign = listen_port(&foreign_port);
    pthread_t fs;
    assert_int_equal(pthread_create(&fs, NULL, foreign_server, &foreign), 0);
    Opener o[7];
    open_start(&o[6], file_spec(port0), 1, 2);
    open_start(&o[0], tcp_spec("127.0.0.1", refused), 1, 2);
    open_start(&o[1], file_spec(missing), 1, 2);
    open_start(&o[2], file_spec(garbage), 1, 2);
    open_start(&o[3], file_spec(badport), 1, 2);
    open_start(&o[4], tcp_spec("::1", v6), 1, 2);
    open_start(&o[5], tcp_spec("127.0.0.1", silent_port), 1, 2);
    Opener fo;
    open_start(&fo, tcp_spec("127.0.0.1", foreign_port), 1, 2);
    alarm(ALARM_S);
    for (int i = 0; i < 7; i++) assert_null(open_join(&o[i]));
    assert_null(open_join(&fo));
    pthread_join(fs, NULL);
    alarm(0);
    unsetenv("ZINC_RDV_TIMEOUT");
    close(silent);
    close(foreign);
    unlink(garbage);
    unlink(badport);
    unlink(port0);
    char want[1200];
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: rank 1 could not join within 1 s: connecting to "
             "127.0.0.1:%d: Connection refused (ZINC_RDV_TIMEOUT)", refused, refused);
    assert_string_equal(o[0].err.msg, want);
    const char *paths[] = {missing, garbage, badport, port0};
    for (int i = 0; i < 4; i++) {
        snprintf(want, sizeof want, "rendezvous file:%s: rank 1 could not join within 1 s: %s does not name rank 0 "
                 "yet (ZINC_RDV_TIMEOUT)", paths[i], paths[i]);
        assert_string_equal(o[i < 3 ? 1 + i : 6].err.msg, want);
    }
    snprintf(want, sizeof want, "rendezvous tcp://::1:%d: rank 1 could not join within 1 s: cannot resolve '::1': ",
             v6);
    assert_memory_equal(o[4].err.msg, want, strlen(want));
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: rank 1 could not join within 1 s: timed out after "
             "1 s waiting for rank 0 (ZINC_COMM_TIMEOUT) (ZINC_RDV_TIMEOUT)", silent_port);
    assert_string_equal(o[5].err.msg, want);
    for (int i = 0; i < 7; i++) assert_int_equal(o[i].err.code, ZN_E_COMM);
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: rank 0 refused rank 1: not a zinc rendezvous",
             foreign_port);
    assert_int_equal(fo.err.code, ZN_E_USAGE);
    assert_string_equal(fo.err.msg, want);
}

/* spec: Z-RDV-007 a socket connected to itself is told apart from one
 * connected to a listener. A socket bound to port P that connects to
 * 127.0.0.1:P, where nothing listens, is what a rank gets when the kernel
 * picks rank 0's port as its local port: TCP's simultaneous open connects
 * it to itself, and it reads back what it sends. */
static void test_store_self_connect(void **st) {
    (void)st;
    struct sockaddr_in a;
    int fd = bound_socket(&a);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    uint32_t hello = 0x5a4e5256u, back = 0;
    raw_send(fd, &hello, sizeof hello);
    assert_int_equal(raw_recv(fd, &back, sizeof back), sizeof back);   /* its own bytes */
    assert_int_equal(back, hello);
    assert_int_equal(zn_comm_self_connected(fd), 1);
    close(fd);

    int port;
    int lfd = listen_port(&port);
    int c = raw_connect(port);
    int d = accept(lfd, NULL, NULL);
    assert_true(d >= 0);
    assert_int_equal(zn_comm_self_connected(c), 0);   /* a real connection, both ends */
    assert_int_equal(zn_comm_self_connected(d), 0);
    assert_int_equal(zn_comm_self_connected(lfd), 0);  /* not connected at all */
    close(c);
    close(d);
    /* the same port at both ends, but two addresses: 127.0.0.2:P to the
       listener at 127.0.0.1:P is a real connection */
    close(lfd);
    struct sockaddr_in to;
    lfd = bound_socket(&to);   /* 127.0.0.1 only, so 127.0.0.2 may take the port */
    assert_int_equal(listen(lfd, 1), 0);
    int e = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in from = to;
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
    assert_int_equal(bind(e, (struct sockaddr *)&from, sizeof from), 0);
    assert_int_equal(connect(e, (struct sockaddr *)&to, sizeof to), 0);
    assert_int_equal(zn_comm_self_connected(e), 0);
    close(e);
    close(lfd);
    /* not an IPv4 socket (a unix socket pair), not a socket at all (a pipe) */
    int sp[2], pp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    assert_int_equal(pipe(pp), 0);
    assert_int_equal(zn_comm_self_connected(sp[0]), 0);
    assert_int_equal(zn_comm_self_connected(pp[0]), 0);
    close(sp[0]);
    close(sp[1]);
    close(pp[0]);
    close(pp[1]);
}

/* spec: Z-RDV-009 a message is a timeout when it ends with the transports'
 * mark, not when the mark stands elsewhere or the message is shorter */
static void test_comm_timed_out(void **st) {
    (void)st;
    ZnErr e = {0};
    snprintf(e.msg, sizeof e.msg, "timed out after 1 s waiting for rank 1 " ZN_COMM_TIMEOUT_MARK);
    assert_int_equal(zn_comm_timed_out(&e), 1);
    snprintf(e.msg, sizeof e.msg, ZN_COMM_TIMEOUT_MARK " and more");
    assert_int_equal(zn_comm_timed_out(&e), 0);
    snprintf(e.msg, sizeof e.msg, "TIMEOUT)");
    assert_int_equal(zn_comm_timed_out(&e), 0);
    e.msg[0] = 0;
    assert_int_equal(zn_comm_timed_out(&e), 0);
}

/* spec: Z-FAULT-004 a port already in use is an error at once, naming it;
 * a rendezvous file rank 0 cannot write fails rank 0 naming the file */
static void test_store_listen_failures(void **st) {
    (void)st;
    int port;
    int busy = listen_port(&port);
    ZnRdvSpec spec = tcp_spec("127.0.0.1", port);
    ZnErr err = {0};
    alarm(ALARM_S);
    double t0 = now_s();
    assert_null(zn_store_open(&spec, 0, 2, &err));
    assert_true(now_s() - t0 < 1);
    close(busy);
    char want[400];
    snprintf(want, sizeof want, "rendezvous tcp://127.0.0.1:%d: rank 0 cannot listen on port %d: Address already in "
             "use (another run uses it? set MASTER_PORT)", port, port);
    assert_int_equal(err.code, ZN_E_COMM);
    assert_string_equal(err.msg, want);
    spec = file_spec("/nonexistent-zinc-test-dir/rdv");
    assert_null(zn_store_open(&spec, 0, 2, &err));
    alarm(0);
    assert_int_not_equal(err.code, 0);
    assert_str_contains(err.msg, "/nonexistent-zinc-test-dir/rdv");
}

#define CHUNK 4096
#define MAX_CHUNKS 65536     /* 256 MB: far more than loopback sockets hold */

static void tmo_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    pthread_barrier_wait(&v->bar);   /* phase 1: rank 1 waits for a message never sent */
    pthread_barrier_wait(&v->bar);
    /* phase 2: frames to a rank that does not read, until the sockets are
       full and a frame waits for room */
    static char chunk[CHUNK];
    for (int i = 0; i < MAX_CHUNKS && !v->rc[rank]; i++) v->rc[rank] = zn_store_send(s, 1, chunk, CHUNK, &v->err[rank]);
    pthread_barrier_wait(&v->bar);
}

static void tmo_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    pthread_barrier_wait(&v->bar);
    char b[4];
    v->rc[rank] = zn_store_recv(s, 0, b, sizeof b, &v->err[rank]);
    pthread_barrier_wait(&v->bar);
    pthread_barrier_wait(&v->bar);
}


/* Runs ranks 0 and 1 (a and b) with ZINC_COMM_TIMEOUT=1 s and a barrier
   of two they share in v. */
static void run_timed(RankFn a, RankFn b, Seen *v) {
    memset(v, 0, sizeof *v);
    pthread_barrier_init(&v->bar, NULL, 2);
    setenv("ZINC_COMM_TIMEOUT", "1", 1);
    const RankFn fns[] = {a, b};
    run_ranks(2, fns, v, NULL);
    unsetenv("ZINC_COMM_TIMEOUT");
    pthread_barrier_destroy(&v->bar);
}


static void late_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    sleep_s(0.3);
    v->rc[rank] = zn_store_send(s, 1, "late", 5, &v->err[rank]);
}

static void late_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    v->rc[rank] = zn_store_recv(s, 0, v->got[rank], 5, &v->err[rank]);
}

/* spec: Z-RDV-006 a ZINC_COMM_TIMEOUT that is not a positive number of
 * seconds leaves the default (600 s): a message 0.3 s late still arrives
 * (read as 0.1 s, "0" or a negative number, it would not) */
static void test_store_timeout_fallback(void **st) {
    (void)st;
    const char *bad[] = {"0.1x", "0", "-5", ""};
    for (int i = 0; i < 4; i++) {
        Seen v;
        memset(&v, 0, sizeof v);
        setenv("ZINC_COMM_TIMEOUT", bad[i], 1);
        const RankFn fns[] = {late_rank0, late_rank1};
        run_ranks(2, fns, &v, NULL);
        unsetenv("ZINC_COMM_TIMEOUT");
        if (v.rc[1]) fail_msg("ZINC_COMM_TIMEOUT='%s': %s", bad[i], v.err[1].msg);
        assert_int_equal(v.rc[0], 0);
        assert_string_equal(v.got[1], "late");
    }
}

/* A send larger than the room in the socket buffers, to a live peer that
 * does not read, times out too: send() never blocks past what poll() said
 * (before the fix a 32 MB send sat in send() forever). */
#define BIG (32u << 20)

static void big_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    char *big = calloc(1, BIG);
    v->rc[rank] = big ? zn_store_send(s, 1, big, BIG, &v->err[rank]) : -1;
    free(big);
    pthread_barrier_wait(&v->bar);
}

static void big_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    (void)rank, (void)s;
    pthread_barrier_wait(&v->bar);   /* alive, not reading, until rank 0 gives up */
}


/* spec: Z-RDV-006 each message is bounded by ZINC_COMM_TIMEOUT, receiving
 * and sending alike (a send larger than the socket buffers included), and
 * the message names the peer */
static void test_store_message_timeouts(void **st) {
    (void)st;
    Seen v;
    /* more than the socket buffers hold, to a live peer that does not read */
    run_timed(big_rank0, big_rank1, &v);
    expect_rank(&v, 0, ZN_E_COMM, "timed out after 1 s sending to rank 1 (ZINC_COMM_TIMEOUT)");
    /* rank 1 waits for a message that never comes; rank 0 sends to a rank that stopped reading */
    run_timed(tmo_rank0, tmo_rank1, &v);
    expect_rank(&v, 1, ZN_E_COMM, "timed out after 1 s waiting for rank 0 (ZINC_COMM_TIMEOUT)");
    expect_rank(&v, 0, ZN_E_COMM, "timed out after 1 s sending to rank 1 (ZINC_COMM_TIMEOUT)");
}

static void lost_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    char b[4];
    if (v->variant == 0) {   /* rank 1 just leaves */
        v->rc[rank] = zn_store_recv(s, 1, b, sizeof b, &v->err[rank]);
        return;
    }
    /* rank 1 leaves with bytes unread: its connection is reset */
    char msg[100] = "unread";
    v->rc2[rank] = zn_store_send(s, 1, msg, sizeof msg, &v->err2[rank]);
    pthread_barrier_wait(&v->bar);   /* then rank 1 closes */
    v->rc[rank] = zn_store_recv(s, 1, b, sizeof b, &v->err[rank]);
}

static void lost_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    (void)rank, (void)s;
    if (v->variant == 1) pthread_barrier_wait(&v->bar);   /* rank 0's bytes are here */
}

static void gather_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    int64_t mine = 100 + rank;
    v->rc[rank] = zn_store_allgather(s, &mine, v->got[rank], sizeof mine, &v->err[rank]);
}

static void gone_rank(int rank, ZnStore *s, void *arg) { (void)rank, (void)s, (void)arg; }

/* spec: Z-RDV-006 a connection closed or reset by a peer that exited is
 * reported at once, naming the peer ("connection to rank R lost ...: it
 * failed or exited"); an all-gather with a dead rank fails on rank 0 and,
 * through rank 0, on the others */
static void test_store_lost_peer(void **st) {
    (void)st;
    Seen v;
    const RankFn fns[] = {lost_rank0, lost_rank1};
    run_pair(lost_rank0, lost_rank1, &v);
    expect_rank(&v, 0, ZN_E_COMM, "connection to rank 1 lost (closed): it failed or exited");

    memset(&v, 0, sizeof v);
    v.variant = 1;
    pthread_barrier_init(&v.bar, NULL, 2);
    run_ranks(2, fns, &v, NULL);
    pthread_barrier_destroy(&v.bar);
    assert_int_equal(v.rc2[0], 0);
    expect_rank(&v, 0, ZN_E_COMM, "connection to rank 1 lost (Connection reset by peer): it failed or exited");

    /* a good all-gather, then one with rank 1 gone */
    memset(&v, 0, sizeof v);
    const RankFn good[] = {gather_rank, gather_rank, gather_rank};
    run_ranks(3, good, &v, NULL);
    for (int q = 0; q < 3; q++) {
        assert_int_equal(v.rc[q], 0);
        int64_t all[3];
        memcpy(all, v.got[q], sizeof all);
        assert_true(all[0] == 100 && all[1] == 101 && all[2] == 102);
    }
    memset(&v, 0, sizeof v);
    const RankFn one_gone[] = {gather_rank, gone_rank, gather_rank};
    run_ranks(3, one_gone, &v, NULL);
    expect_rank(&v, 0, ZN_E_COMM, "connection to rank 1 lost (closed): it failed or exited");
    expect_rank(&v, 2, ZN_E_COMM, "connection to rank 0 lost (closed): it failed or exited");
}

static void linger_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    for (int q = 1; q < 3; q++) v->rc[rank] |= zn_store_send(s, q, "bye", 4, &v->err[rank]);
}

static void linger_peer(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    v->rc[rank] = zn_store_recv(s, 0, v->got[rank], 4, &v->err[rank]);
    if (rank == 1) {   /* sends what rank 0 never reads, and stays a while */
        char extra[1000] = {0};
        v->rc[rank] |= zn_store_send(s, 0, extra, sizeof extra, &v->err[rank]);
        sleep_s(0.2);
    }
    char more;
    v->rc2[rank] = zn_store_recv(s, 0, &more, 1, &v->err2[rank]);
}

static void stay_rank(int rank, ZnStore *s, void *arg) {
    (void)rank, (void)s, (void)arg;
    sleep_s(3.0);
}

/* spec: Z-FAULT-002 rank 0 does not close at once: it half-closes and
 * waits, up to 2 s, for the peers to read what it sent and close (draining
 * what they still send); the peers read its last message, then the end */
static void test_store_close_lingers(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    double close_s[MAXR];
    const RankFn fns[] = {linger_rank0, linger_peer, linger_peer};
    run_ranks(3, fns, &v, close_s);
    assert_int_equal(v.rc[0], 0);
    for (int q = 1; q < 3; q++) {
        assert_int_equal(v.rc[q], 0);
        assert_string_equal(v.got[q], "bye");
        assert_int_equal(v.rc2[q], ZN_E_COMM);
        assert_string_equal(v.err2[q].msg, "connection to rank 0 lost (closed): it failed or exited");
    }
    /* rank 0 waited for rank 1's 0.2 s, not for the 2 s bound */
    assert_true(close_s[0] > 0.1);
    assert_true(close_s[0] < 1.5);
    /* a peer that keeps its connection: rank 0 stops waiting after 2 s */
    const RankFn stay[] = {gone_rank, stay_rank};
    run_ranks(2, stay, &v, close_s);
    assert_true(close_s[0] > 1.9);
    assert_true(close_s[0] < 2.8);
}

/* ---- the tcp mesh against peers that break its protocol ---- */

/* rank's tcp mesh over s, or NULL with its error recorded in v */
static ZnComm *mesh_of(int rank, ZnStore *s, Seen *v) {
    ZnComm *c = zn_comm_tcp_new(s, &v->err[rank]);
    if (!c) v->rc[rank] = v->err[rank].code;
    return c;
}

static void comm_barrier_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = mesh_of(rank, s, v);
    if (!c) return;
    v->rc[rank] = c->barrier(c, "b", &v->err[rank]);
    v->rc2[rank] = c->barrier(c, "b2", &v->err2[rank]);
    zn_comm_tcp_free(c);
}

/* A rank that builds its comm and leaves at once. */
static void comm_leave_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    zn_comm_tcp_free(zn_comm_tcp_new(s, &v->err[rank]));
}

/* Rank 1 of two by hand: publishes an address (variant 0 and 5: a real
 * listening socket; 1: a port nothing listens on; 2: port 0; 3: another
 * magic; 4: leaves before it publishes), then, for variant 0, joins rank 0
 * as a mesh peer and answers each of its exchanges with a header of the
 * kind in v->got[1][0]; variant 5 greets rank 0 and leaves. */
static void hand_peer_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    if (v->variant == 4) return;
    int port = 0, lfd = v->variant == 0 || v->variant == 5 ? listen_port(&port) : -1;
    MeshAddr mine = {v->variant == 3 ? 0 : MESH_MAGIC, v->variant == 1 ? free_port() : port, 0, "127.0.0.1", 0, -1},
             all[2];
    if ((v->rc[rank] = zn_store_allgather(s, &mine, all, sizeof mine, &v->err[rank]))) return;
    if (v->variant == 0 || v->variant == 5) {
        int fd = raw_connect(all[0].port);
        MeshHello h = {MESH_MAGIC, 1, all[0].token};
        raw_send(fd, &h, sizeof h);
        if (v->variant == 5) {
            close(fd);
            close(lfd);
            return;
        }
        /* which peers each rank can read by reference (Z-PROC-008): none */
        unsigned char row[2] = {0, 0}, rows[4];
        if ((v->rc[rank] = zn_store_allgather(s, row, rows, sizeof row, &v->err[rank]))) {
            close(fd);
            return;
        }
        for (int i = 0; i < 2; i++) {   /* the two barriers: rank 0's frame, then ours */
            Frame f;
            ZnSeqRec rec;
            if (raw_recv(fd, &f, sizeof f) < sizeof f || raw_recv(fd, &rec, sizeof rec) < sizeof rec) break;
            Frame bad[] = {{0xdeadbeefu, 0, sizeof rec, 0}, {ZN_SEQ_MAGIC, 0, -1, 0}, {ZN_SEQ_MAGIC, 0, 3, 0},
                           {ZN_SEQ_MAGIC, 1, sizeof rec, 0}};
            raw_send(fd, &bad[(int)v->got[1][0]], sizeof bad[0]);
            raw_send(fd, &rec, sizeof rec);
        }
        close(fd);
    }
    if (lfd >= 0) close(lfd);
}

/* spec: Z-PROC-002 each peer's part of an exchange is a header (magic,
 * bytes) and the bytes; a header of another magic, a negative length,
 * another length than the receiver expects, or bytes by reference from a
 * peer whose memory the receiver cannot read, is an error naming the rank,
 * and later calls fail the same way */
static void test_tcp_bad_frames(void **st) {
    (void)st;
    char want[200];
    snprintf(want, sizeof want, "rank 1 sent 3 bytes, expected %zu", sizeof(ZnSeqRec));
    const char *bad = "rank 1 sent a malformed exchange header";
    const char *why[] = {bad, bad, want, bad};   /* the last: by reference, where rank 0 cannot read rank 1 */
    for (int kind = 0; kind < 4; kind++) {
        Seen v;
        memset(&v, 0, sizeof v);
        v.got[1][0] = (char)kind;
        const RankFn fns[] = {comm_barrier_rank, hand_peer_rank1};
        run_ranks(2, fns, &v, NULL);
        expect_rank(&v, 0, ZN_E_COMM, why[kind]);
        assert_int_equal(v.rc2[0], ZN_E_COMM);
        assert_string_equal(v.err2[0].msg, why[kind]);
    }
}

/* spec: Z-PROC-007 the mesh's set-up fails with a message naming the rank:
 * a peer that publishes an address but never connects (at
 * ZINC_RDV_TIMEOUT), a peer that publishes no port */
static void test_tcp_mesh_setup_failures(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    v.variant = 1;
    setenv("ZINC_RDV_TIMEOUT", "1", 1);
    run_ranks(2, (const RankFn[]){comm_barrier_rank, hand_peer_rank1}, &v, NULL);
    unsetenv("ZINC_RDV_TIMEOUT");
    expect_rank(&v, 0, ZN_E_COMM, "tcp mesh: rank 0: no connection from rank 1 within 1 s (ZINC_RDV_TIMEOUT)");
    memset(&v, 0, sizeof v);
    v.variant = 2;
    run_ranks(2, (const RankFn[]){comm_barrier_rank, hand_peer_rank1}, &v, NULL);
    expect_rank(&v, 0, ZN_E_COMM, "tcp mesh: rank 1 has no listening socket");
    /* spec: Z-PROC-007 an address without the mesh's magic is no listening
     * socket either; a peer that leaves before it publishes, or after it
     * greeted but before the ranks tell which peers they can read
     * (Z-PROC-008), fails the set-up naming it */
    const char *why[] = {"tcp mesh: rank 1 has no listening socket",
                         "connection to rank 1 lost (closed): it failed or exited",
                         "connection to rank 1 lost (closed): it failed or exited"};
    for (int k = 0; k < 3; k++) {
        memset(&v, 0, sizeof v);
        v.variant = 3 + k;
        run_ranks(2, (const RankFn[]){comm_barrier_rank, hand_peer_rank1}, &v, NULL);
        expect_rank(&v, 0, ZN_E_COMM, why[k]);
    }
}

/* Rank 0 of two by hand: publishes a port nothing listens on. */
static void dead_port_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    MeshAddr mine = {MESH_MAGIC, free_port(), 0, "127.0.0.1", 0, -1}, all[2];
    v->rc[rank] = zn_store_allgather(s, &mine, all, sizeof mine, &v->err[rank]);
    snprintf(v->got[0], sizeof v->got[0], "%d", mine.port);
}

/* spec: Z-PROC-007 a published port that refuses the connection */
static void test_tcp_mesh_connect_refused(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    run_ranks(2, (const RankFn[]){dead_port_rank0, comm_barrier_rank}, &v, NULL);
    char want[200];
    snprintf(want, sizeof want, "tcp mesh: rank 1 cannot connect to rank 0 at 127.0.0.1:%s: Connection refused", v.got[0]);
    expect_rank(&v, 1, ZN_E_COMM, want);
}

/* spec: Z-FAULT-002 a rank that is gone is found by its connection closing,
 * by every rank, each naming it; a rank that finds several connections
 * closed names them all (the dead rank and those that failed after it) */
static void test_tcp_peer_gone(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    run_ranks(3, (const RankFn[]){comm_barrier_rank, comm_leave_rank, comm_barrier_rank}, &v, NULL);
    for (int q = 0; q < 3; q += 2) {
        /* rank 1 alone, or with the other survivor when that one failed and
           closed first: "connections to rank 0 and rank 1 lost (...)" */
        assert_int_equal(v.rc[q], ZN_E_COMM);
        assert_str_contains(v.err[q].msg, "rank 1");
        assert_str_contains(v.err[q].msg, " lost (");
        assert_int_equal(v.rc2[q], ZN_E_COMM);
        assert_string_equal(v.err2[q].msg, v.err[q].msg);
    }
    memset(&v, 0, sizeof v);
    run_ranks(2, (const RankFn[]){comm_leave_rank, comm_barrier_rank}, &v, NULL);
    /* closed, or reset when rank 1's frame reached rank 0 before it left */
    assert_int_equal(v.rc[1], ZN_E_COMM);
    assert_str_contains(v.err[1].msg, "connection to rank 0 lost (");
}

/* Waits until the others have left, then a barrier. */
static void late_barrier_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = mesh_of(rank, s, v);
    if (!c) return;
    sleep_s(0.3);
    v->rc[rank] = c->barrier(c, "b", &v->err[rank]);
    zn_comm_tcp_free(c);
}

/* spec: Z-FAULT-002 a rank that finds several peers gone names them all,
 * in rank order */
static void test_tcp_peers_gone(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    run_ranks(4, (const RankFn[]){comm_leave_rank, late_barrier_rank, comm_leave_rank, comm_leave_rank}, &v, NULL);
    expect_rank(&v, 1, ZN_E_COMM, "connections to rank 0, rank 2 and rank 3 lost (closed): they failed or exited, "
                "or left after one of them did");
}

/* spec: Z-RDV-006 an exchange is bounded by ZINC_COMM_TIMEOUT without
 * progress, and the message names the peer */
static void late_rank1_mesh(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = zn_comm_tcp_new(s, &v->err[rank]);
    sleep_s(1.5);   /* alive, but in no collective */
    zn_comm_tcp_free(c);
}

static void test_tcp_exchange_timeout(void **st) {
    (void)st;
    Seen v;
    run_timed(comm_barrier_rank, late_rank1_mesh, &v);
    /* spec: Z-RDV-009 the collective that waited is named: op, tag, call number */
    expect_rank(&v, 0, ZN_E_COMM, "barrier 'b' (call 1): timed out after 1 s waiting for rank 1 (ZINC_COMM_TIMEOUT)");
}

/* ---- the tcp mesh's reads by reference and its hellos, against ranks
 * played by hand (Z-PROC-007, Z-PROC-008) ---- */

#define ACK_MAGIC 0x5a4e414bu   /* the acknowledgement of bytes read by reference */

/* What a hand-played rank publishes: a listening socket of its own (*lfd),
 * this process and a probe at &probe on node `node`, and its launcher node
 * (node_rank, -1 none). */
static MeshAddr hand_addr(int *lfd, const uint64_t *probe, uint64_t node, int node_rank) {
    int port;
    *lfd = listen_port(&port);
    return (MeshAddr){MESH_MAGIC, port, 0, "127.0.0.1", (int32_t)getpid(), node_rank, (uint64_t)(uintptr_t)probe,
                      *probe, node};
}

/* Joins rank 0's mesh as `rank` with address *mine: publishes it, greets
 * rank 0 with its token and all-gathers row (the peers this rank reads by
 * reference) into rows. The connection to rank 0, or -1 with the store's
 * error in v. */
static int hand_join(int rank, ZnStore *s, Seen *v, const MeshAddr *mine, const unsigned char *row,
                     unsigned char *rows) {
    MeshAddr all[MAXR];
    if ((v->rc[rank] = zn_store_allgather(s, mine, all, sizeof *mine, &v->err[rank]))) return -1;
    int fd = raw_connect(all[0].port);
    MeshHello h = {MESH_MAGIC, rank, all[0].token};
    raw_send(fd, &h, sizeof h);
    if ((v->rc[rank] = zn_store_allgather(s, row, rows, (size_t)zn_store_world(s), &v->err[rank]))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads rank 0's part of an exchange of sequence records: its header and
 * record (into *rec); 0 if both came whole. */
static int hand_read_seq(int fd, ZnSeqRec *rec) {
    Frame f;
    return raw_recv(fd, &f, sizeof f) == sizeof f && f.magic == ZN_SEQ_MAGIC && f.bytes == (int64_t)sizeof *rec &&
                   raw_recv(fd, rec, sizeof *rec) == sizeof *rec
               ? 0
               : -1;
}

/* Answers rank 0's sequence record with its own (as a rank that calls the
 * same collective does); 0 once both went through. */
static int hand_echo_seq(int fd) {
    ZnSeqRec rec;
    if (hand_read_seq(fd, &rec)) return -1;
    Frame back = {ZN_SEQ_MAGIC, 0, sizeof rec, 0};
    raw_send(fd, &back, sizeof back);
    raw_send(fd, &rec, sizeof rec);
    return 0;
}

/* A hand-played rank leaves: closes its connection to rank 0 (fd, if
 * any; with a reset where reset is set, SO_LINGER 0, as a process killed
 * mid-message leaves it when bytes are unread) and its listening socket. */
static void hand_leave(int fd, int reset, int lfd) {
    struct linger l = {1, 0};
    if (fd >= 0 && reset) setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    if (fd >= 0) close(fd);
    close(lfd);
}

/* rank 0's mesh, made and freed; its error recorded in v */
static void mesh_only_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = mesh_of(rank, s, v);
    if (c) zn_comm_tcp_free(c);
}

/* Rank 1 by hand, published so that rank 0 may read its probe (variant 0),
 * or with the probe's value off (1), on another node (2), or the probe at
 * an address that is not mapped (3); records whether rank 0 said it can
 * read rank 1 (v->val[1]) and whether rank 0 claimed to read itself (val[0]). */
static void probe_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe;
    probe = 0x7a696e63u + (uint64_t)v->variant;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + (v->variant == 2), -1);
    if (v->variant == 1) mine.probe++;
    if (v->variant == 3) mine.probe_at = 8;
    unsigned char row[2] = {0, 0}, rows[4];
    int fd = hand_join(rank, s, v, &mine, row, rows);
    if (fd >= 0) {
        v->val[0] = rows[0];
        v->val[1] = rows[1];
        close(fd);
    }
    close(lfd);
}

/* spec: Z-PROC-008 a rank reads a peer by reference only where it read the
 * peer's probe (the value the peer published, at the address it published,
 * in its process) and the peer runs on its node; ZINC_TCP_CMA=0 reads
 * nothing; the ranks all-gather what each found */
static void test_tcp_probe(void **st) {
    (void)st;
    /* variants 0..3, then 0 under ZINC_TCP_CMA=0 */
    const long want[] = {1, 0, 0, 0, 0};
    for (int k = 0; k < 5; k++) {
        Seen v;
        memset(&v, 0, sizeof v);
        v.variant = k % 4;
        if (k == 4) setenv("ZINC_TCP_CMA", "0", 1);
        run_ranks(2, (const RankFn[]){mesh_only_rank, probe_rank1}, &v, NULL);
        unsetenv("ZINC_TCP_CMA");
        if (v.rc[0] || v.rc[1]) fail_msg("case %d: %s / %s", k, v.err[0].msg, v.err[1].msg);
        assert_int_equal(v.val[0], 0);   /* never itself */
        if (v.val[1] != want[k]) fail_msg("case %d: rank 0 can read rank 1: %ld, expected %ld", k, v.val[1], want[k]);
    }
}

/* Rank 1 by hand, readable by rank 0 (a probe rank 0 reads), that sends its
 * sequence records of two barriers by reference (Z-PROC-008): at their
 * address (variant 0), at an address that is not mapped (1), or from a
 * process that is gone (2: the probe is a child's, killed and reaped
 * before the first barrier). Records in v->val[1] how many acknowledgements came. */
static void by_ref_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 0x7a6e7265u;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id(), -1);
    pid_t child = -1;
    if (v->variant == 2) {   /* the child holds a copy of probe at the same address until it is killed */
        child = fork();
        if (child == 0)
            for (;;) pause();   /* (killed, not exited: valgrind does not check a dying copy's memory) */
        mine.pid = (int32_t)child;
    }
    unsigned char row[2] = {0, 0}, rows[4];
    int fd = hand_join(rank, s, v, &mine, row, rows);
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    for (int i = 0; fd >= 0 && i < 2; i++) {
        ZnSeqRec rec;
        if (hand_read_seq(fd, &rec)) break;
        Frame f = {ZN_SEQ_MAGIC, 1, sizeof rec, v->variant == 1 ? 8 : (uint64_t)(uintptr_t)&rec};
        raw_send(fd, &f, sizeof f);
        uint64_t ack = 0;
        if (raw_recv(fd, &ack, sizeof ack) < sizeof ack || ack != ACK_MAGIC) break;
        v->val[1]++;
    }
    hand_leave(fd, 0, lfd);
}

/* spec: Z-PROC-008 bytes by reference are read from the sender's memory
 * and acknowledged; a read that fails names the rank, a sender whose
 * process is gone is a lost connection, and later calls fail the same way */
static void test_tcp_by_reference_in(void **st) {
    (void)st;
    const char *why[] = {NULL, "reading rank 1's bytes in its memory failed: Bad address",
                         "connection to rank 1 lost (its process is gone): it failed or exited"};
    for (int k = 0; k < 3; k++) {
        Seen v;
        memset(&v, 0, sizeof v);
        v.variant = k;
        run_ranks(2, (const RankFn[]){comm_barrier_rank, by_ref_rank1}, &v, NULL);
        if (!why[k]) {
            if (v.rc[0] || v.rc2[0]) fail_msg("by reference: %s / %s", v.err[0].msg, v.err2[0].msg);
            assert_int_equal(v.val[1], 2);   /* both barriers' records read and acknowledged */
            continue;
        }
        expect_rank(&v, 0, ZN_E_COMM, why[k]);
        assert_int_equal(v.rc2[0], ZN_E_COMM);
        assert_string_equal(v.err2[0].msg, why[k]);
        assert_int_equal(v.val[1], 0);
    }
}

#define REF_N 16384   /* floats: 64 KiB, the least that goes by reference */

/* Rank 0 broadcasts REF_N floats (value i at i) to rank 1. */
static void bcast_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = mesh_of(rank, s, v);
    if (!c) return;
    static float buf[REF_N];
    for (int i = 0; i < REF_N; i++) buf[i] = (float)i;
    v->rc[rank] = c->broadcast(c, buf, REF_N, ZN_F32, 0, "ref", &v->err[rank]);
    zn_comm_tcp_free(c);
}

/* Rank 1 by hand, which says it can read rank 0: takes the broadcast's
 * header, reads the floats where it points (this process: memory at the
 * address) and acknowledges with ACK_MAGIC (variant 0) or another value
 * (1). val[1]: 1 when the header was by reference and every float right. */
static void ref_out_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 1;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + 1, -1);   /* rank 0 reads nothing of it */
    unsigned char row[2] = {1, 0}, rows[4];
    int fd = hand_join(rank, s, v, &mine, row, rows);
    Frame f;
    if (fd >= 0 && !hand_echo_seq(fd) && raw_recv(fd, &f, sizeof f) == sizeof f) {
        Frame none = {ZN_SEQ_MAGIC, 0, 0, 0};
        const float *at = (const float *)(uintptr_t)f.addr;
        int right = f.by_ref == 1 && f.bytes == REF_N * (int64_t)sizeof(float) && at;
        for (int i = 0; right && i < REF_N; i++) right = at[i] == (float)i;
        v->val[1] = right;
        uint64_t ack = v->variant == 0 ? ACK_MAGIC : 0x1234;
        raw_send(fd, &none, sizeof none);
        raw_send(fd, &ack, sizeof ack);
        char c;
        raw_recv(fd, &c, 1);   /* until rank 0 closes */
    }
    hand_leave(fd, 0, lfd);
}

/* spec: Z-PROC-008 a rank sends a peer that can read it a header with its
 * buffer's address instead of 64 KiB or more, and its exchange ends when
 * the peer's acknowledgement is in; another acknowledgement is an error
 * naming the rank */
static void test_tcp_by_reference_out(void **st) {
    (void)st;
    for (int k = 0; k < 2; k++) {
        Seen v;
        memset(&v, 0, sizeof v);
        v.variant = k;
        run_ranks(2, (const RankFn[]){bcast_rank0, ref_out_rank1}, &v, NULL);
        assert_int_equal(v.val[1], 1);
        if (k == 0 && v.rc[0]) fail_msg("broadcast by reference: %s", v.err[0].msg);
        if (k == 1) expect_rank(&v, 0, ZN_E_COMM, "rank 1 sent a malformed acknowledgement");
    }
}

/* Runs rank 0 (a) and rank 1 by hand (b) once per variant 0..n-1 under
 * ZINC_COMM_TIMEOUT=1: rank 0 fails with ZN_E_COMM and why[variant]. */
static void run_hand_cases(RankFn a, RankFn b, const char *const *why, int n) {
    for (int k = 0; k < n; k++) {
        Seen v;
        memset(&v, 0, sizeof v);
        v.variant = k;
        setenv("ZINC_COMM_TIMEOUT", "1", 1);
        run_ranks(2, (const RankFn[]){a, b}, &v, NULL);
        unsetenv("ZINC_COMM_TIMEOUT");
        expect_rank(&v, 0, ZN_E_COMM, why[k]);
    }
}

/* Rank 1 by hand, published on another node (launcher node 3), that breaks
 * off rank 0's first barrier: never answers (variant 0), sends half its
 * header and closes (1) or resets the connection (2). */
static void midway_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 1;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + 1, 3);
    unsigned char row[2] = {0, 0}, rows[4];
    int fd = hand_join(rank, s, v, &mine, row, rows);
    ZnSeqRec rec;
    if (fd >= 0 && !hand_read_seq(fd, &rec)) {
        if (v->variant == 0) {
            sleep_s(1.2);   /* alive, silent, past rank 0's ZINC_COMM_TIMEOUT */
        } else {
            Frame f = {ZN_SEQ_MAGIC, 0, sizeof rec, 0};
            raw_send(fd, &f, sizeof f / 2);
            sleep_s(0.05);   /* rank 0 takes the half header first */
        }
    }
    hand_leave(fd, v->variant == 2, lfd);
}

/* spec: Z-PROC-007 a wait past ZINC_COMM_TIMEOUT names the peer and, for
 * a peer of another launcher node, its node; Z-FAULT-002 a peer that closes
 * or resets its connection in the middle of a header is a lost connection
 * naming it */
static void test_tcp_midway(void **st) {
    (void)st;
    const char *why[] = {"barrier 'b' (call 1): timed out after 1 s waiting for rank 1 on node 3 (ZINC_COMM_TIMEOUT)",
                         "connection to rank 1 lost (closed): it failed or exited",
                         "connection to rank 1 lost (Connection reset by peer): it failed or exited"};
    run_hand_cases(comm_barrier_rank, midway_rank1, why, 3);
}

#define BIG_N (8 << 20)   /* floats: 32 MB, more than loopback sockets hold */

static void big_bcast_rank0(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    ZnComm *c = mesh_of(rank, s, v);
    if (!c) return;
    float *buf = calloc(BIG_N, sizeof *buf);
    v->rc[rank] = buf ? c->broadcast(c, buf, BIG_N, ZN_F32, 0, "big", &v->err[rank]) : -1;
    free(buf);
    zn_comm_tcp_free(c);
}

/* Rank 1 by hand: answers the broadcast's record and its own empty part,
 * then reads nothing of rank 0's 32 MB: stays until rank 0 gives up
 * (variant 0) or resets the connection (1). */
static void no_read_rank1(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 1;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + 1, -1);
    unsigned char row[2] = {0, 0}, rows[4];
    int fd = hand_join(rank, s, v, &mine, row, rows);
    if (fd >= 0 && !hand_echo_seq(fd)) {
        Frame none = {ZN_SEQ_MAGIC, 0, 0, 0};
        raw_send(fd, &none, sizeof none);
        sleep_s(v->variant == 0 ? 1.2 : 0.2);
    }
    hand_leave(fd, v->variant == 1, lfd);
}

/* spec: Z-RDV-009 an exchange whose bytes did not get out within
 * ZINC_COMM_TIMEOUT says "sending to rank Q"; Z-FAULT-002 a peer that
 * resets its connection while this rank still sends is a lost connection
 * naming it */
static void test_tcp_send_side(void **st) {
    (void)st;
    const char *why[] = {"broadcast 'big' (call 1): timed out after 1 s sending to rank 1 (ZINC_COMM_TIMEOUT)",
                         "connection to rank 1 lost (Connection reset by peer): it failed or exited"};
    run_hand_cases(big_bcast_rank0, no_read_rank1, why, 2);
}

/* Opens a connection to rank 0's mesh port that is no rank of this run:
 * sends the first n bytes of h, and the end of the stream where that is not
 * all of it; counts in *closed whether rank 0 closed it unanswered. */
static void knock(int port, const MeshHello *h, size_t n, long *closed) {
    int fd = raw_connect(port);
    if (n) raw_send(fd, h, n);
    if (n < sizeof *h) shutdown(fd, SHUT_WR);   /* the rest never comes */
    char c;
    *closed += raw_recv(fd, &c, 1) == 0;
    close(fd);
}

/* Ranks 1 and 2 of three by hand. Rank 1 first knocks on rank 0's mesh
 * port with connections that are no rank of this run (one that closes at
 * once, half a hello, another magic, another token, a claim of rank 0 and
 * of rank 3), greets as itself, then claims rank 1 again; v->val[1] counts
 * those rank 0 closed unanswered. Rank 2 greets after all that. Both then
 * serve rank 0's two barriers. */
static void knock_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 1;
    int lfd, fd = -1;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + 1, -1), all[3];
    if (!(v->rc[rank] = zn_store_allgather(s, &mine, all, sizeof mine, &v->err[rank]))) {
        const int port = all[0].port;
        const uint64_t tok = all[0].token;
        MeshHello h = {MESH_MAGIC, rank, tok};
        if (rank == 1) {
            const MeshHello foreign[] = {h, h, {0x12345678u, 1, tok}, {MESH_MAGIC, 1, tok + 1}, {MESH_MAGIC, 0, tok},
                                         {MESH_MAGIC, 3, tok}};
            const size_t n[] = {0, sizeof h / 2, sizeof h, sizeof h, sizeof h, sizeof h};
            for (int i = 0; i < 6; i++) knock(port, &foreign[i], n[i], &v->val[1]);
        } else {
            pthread_barrier_wait(&v->bar);   /* after rank 1's knocks */
        }
        fd = raw_connect(port);
        raw_send(fd, &h, sizeof h);
        if (rank == 1) {
            knock(port, &h, sizeof h, &v->val[1]);   /* a second rank 1 */
            pthread_barrier_wait(&v->bar);
        }
        unsigned char row[3] = {0, 0, 0}, rows[9];
        if (!(v->rc[rank] = zn_store_allgather(s, row, rows, sizeof row, &v->err[rank])))
            for (int i = 0; i < 2 && !hand_echo_seq(fd); i++) {}
    }
    hand_leave(fd, 0, lfd);
}

/* spec: Z-PROC-007 a connection to a rank's mesh port without the magic and
 * the run's token, claiming a rank that does not connect to it or one that
 * has its connection, or that closes before its hello is whole, is closed
 * unanswered, and the mesh is built with the real ranks */
static void test_tcp_mesh_drops_foreign(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    pthread_barrier_init(&v.bar, NULL, 2);
    run_ranks(3, (const RankFn[]){comm_barrier_rank, knock_rank, knock_rank}, &v, NULL);
    pthread_barrier_destroy(&v.bar);
    if (v.rc[0] || v.rc2[0]) fail_msg("rank 0: %s / %s", v.err[0].msg, v.err2[0].msg);
    assert_int_equal(v.val[1], 7);
}

/* Ranks 2 and 3 of four by hand: publish an address and never greet; rank
 * 2 holds a silent connection to rank 1's mesh port. Both stay until rank
 * 0's store goes. */
static void absent_rank(int rank, ZnStore *s, void *arg) {
    Seen *v = arg;
    static uint64_t probe = 1;
    int lfd;
    MeshAddr mine = hand_addr(&lfd, &probe, zn_comm_tcp_node_id() + 1, -1), all[4];
    if (!(v->rc[rank] = zn_store_allgather(s, &mine, all, sizeof mine, &v->err[rank]))) {
        int silent = rank == 2 ? raw_connect(all[1].port) : -1;
        unsigned char row[4] = {0, 0, 0, 0}, rows[16];
        v->rc2[rank] = zn_store_allgather(s, row, rows, sizeof row, &v->err2[rank]);   /* fails when rank 0 leaves */
        if (silent >= 0) close(silent);
    }
    close(lfd);
}

/* spec: Z-PROC-007 the ranks that never connected are named together; a
 * silent connection does not hold a rank past ZINC_RDV_TIMEOUT */
static void test_tcp_mesh_missing_ranks(void **st) {
    (void)st;
    Seen v;
    memset(&v, 0, sizeof v);
    setenv("ZINC_RDV_TIMEOUT", "1", 1);
    run_ranks(4, (const RankFn[]){comm_barrier_rank, comm_barrier_rank, absent_rank, absent_rank}, &v, NULL);
    unsetenv("ZINC_RDV_TIMEOUT");
    expect_rank(&v, 0, ZN_E_COMM, "tcp mesh: rank 0: no connection from ranks 2, 3 within 1 s (ZINC_RDV_TIMEOUT)");
    expect_rank(&v, 1, ZN_E_COMM, "tcp mesh: rank 1: no connection from ranks 2, 3 within 1 s (ZINC_RDV_TIMEOUT)");
    assert_int_equal(v.rc2[2], ZN_E_COMM);
    assert_int_equal(v.rc2[3], ZN_E_COMM);
}

ZT_MAIN(
    cmocka_unit_test(test_store_world_of_one),
    cmocka_unit_test(test_store_peer_checks),
    cmocka_unit_test(test_rdv_parse_limits),
    cmocka_unit_test(test_store_join_timeout),
    cmocka_unit_test(test_store_refusals),
    cmocka_unit_test(test_store_drops_foreign),
    cmocka_unit_test(test_store_join_failures),
    cmocka_unit_test(test_store_self_connect),
    cmocka_unit_test(test_comm_timed_out),
    cmocka_unit_test(test_store_listen_failures),
    cmocka_unit_test(test_store_message_timeouts),
    cmocka_unit_test(test_store_timeout_fallback),
    cmocka_unit_test(test_store_lost_peer),
    cmocka_unit_test(test_store_close_lingers),
    cmocka_unit_test(test_tcp_bad_frames),
    cmocka_unit_test(test_tcp_mesh_setup_failures),
    cmocka_unit_test(test_tcp_mesh_connect_refused),
    cmocka_unit_test(test_tcp_peer_gone),
    cmocka_unit_test(test_tcp_peers_gone),
    cmocka_unit_test(test_tcp_exchange_timeout),
    cmocka_unit_test(test_tcp_probe),
    cmocka_unit_test(test_tcp_by_reference_in),
    cmocka_unit_test(test_tcp_by_reference_out),
    cmocka_unit_test(test_tcp_midway),
    cmocka_unit_test(test_tcp_send_side),
    cmocka_unit_test(test_tcp_mesh_drops_foreign),
    cmocka_unit_test(test_tcp_mesh_missing_ranks))
