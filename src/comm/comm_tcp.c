/* comm_tcp.c: the TCP transport (spec Z-PROC-002, Z-PROC-007, Z-PROC-008). A full mesh:
 * at creation every rank listens on a port the kernel picks, the ranks
 * all-gather host:port through the rendezvous store, and each rank connects
 * to every lower rank and accepts every higher one, so each pair of ranks
 * shares one connection. An exchange then moves every peer's bytes over its
 * own connection at once: non-blocking sockets and poll(), one frame per
 * peer (a 24-byte header, then the bytes), sent with sendmsg straight from
 * the caller's buffers and received with recvmsg straight into them. No
 * rank routes another's bytes and nothing is staged on the way.
 *
 * Ranks on one host skip the socket for large messages (Z-PROC-008): the
 * header carries the address of the sender's buffer, the receiver reads it
 * with process_vm_readv (one copy where a socket makes two, user to kernel
 * to user) and acknowledges; the sender's exchange ends only when every
 * such read is acknowledged, so its buffers stay valid while they are read.
 * A probe at set-up decides which pairs can (same node: network namespace
 * and launcher node rank; same host and pid namespace, and a kernel that
 * lets them); ZINC_TCP_CMA=0 turns it off.
 *
 * The collectives on top are comm/coll.c's (the sums are the receiver's, so
 * no transport choice can change a bit). */
#include "comm/comm_proc.h"
#include "core/alloc.h"
#include "comm/coll.h"
#include "comm/comm_seq.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MESH_MAGIC 0x5a4e4d53u   /* "ZNMS": a mesh hello */

#define ACK_MAGIC 0x5a4e414bu    /* "ZNAK": bytes read by reference, the sender may go on */
/* Below this a copy through the socket costs less than a read by reference
 * and its acknowledgement (a round trip). */
#define BY_REF_MIN ((size_t)64 << 10)

typedef struct {
    uint32_t magic, by_ref;  /* by_ref: the bytes stay at addr in the sender (Z-PROC-008) */
    int64_t bytes;           /* bytes for the receiver: they follow, or lie at addr */
    uint64_t addr;
} Frame;

typedef struct {
    uint32_t magic;
    int32_t port;
    uint64_t token;          /* rank 0's: a connection from another run is refused */
    char host[64];
    int32_t pid;             /* the probe: 8 bytes at probe_at in process pid read probe */
    int32_t node_rank;       /* its launcher's node (GROUP_RANK), -1 where none was given */
    uint64_t probe_at, probe;
    uint64_t node;           /* the node it runs on (zn_comm_tcp_node_id): reads by reference stay inside one */
} Addr;

typedef struct {
    uint32_t magic;
    int32_t rank;
    uint64_t token;
} Hello;

/* One peer's two streams in an exchange. Out: this rank's header, its bytes
 * unless by reference, then the acknowledgement of the peer's bytes if they
 * came by reference (sent once they are read). In: the peer's header, its
 * bytes unless by reference, then its acknowledgement of ours if ours went
 * by reference. */
typedef struct {
    Frame hout, hin;
    uint64_t ack_out, ack_in;
    size_t done_out, done_in;  /* bytes of each stream moved so far */
    int ack_due;               /* the peer's bytes came by reference and are read */
} Peer;

typedef struct {
    int rank, world;
    int *fd;                 /* [world] the connection to each peer; -1 for this rank */
    Peer *pr;                /* [world] */
    struct pollfd *pfd;      /* [world] */
    int *who;                /* [world] the peer of each pfd entry */
    int *pid;                /* [world] each peer's process id, for reads by reference */
    unsigned char *by_ref;   /* [world] 1: the peer reads this rank's bytes by reference */
    unsigned char *can_read; /* [world] 1: this rank can read the peer's memory */
    uint64_t probe;          /* what the peers read to find whether they can (set-up) */
    double timeout_s;        /* ZINC_COMM_TIMEOUT: the longest an exchange may take */
    unsigned char *remote;   /* [world] 1: the peer runs on another node (zn_comm_tcp_node_id) */
    int *node_rank;          /* [world] each peer's launcher node (GROUP_RANK), -1 unknown */
    uint64_t sent[2];        /* bytes handed to the sockets, to this node's peers [0] and other nodes' [1] */
} Tcp;

static int poll_ms(double left) { return left > 1.0 ? 1000 : (int)(left * 1000) + 1; }

/* ------------------------------------------------------------ exchange */

/* How long a rank that lost a connection watches the others before it
 * reports: a dead rank's connections close as its process exits, and a
 * busy machine can run a peer's whole failure (it saw the death, failed and
 * exited) between two of them. */
#define LOST_GRACE_S 1.0

/* A lost connection names its peer, and every other peer whose connection
 * closes within LOST_GRACE_S: when a rank dies, the ranks that saw it first
 * fail and close too, and a survivor may find one of their connections
 * first; the dead rank's is among those closed. (t->pfd and t->who serve as
 * scratch: the exchange ends here.) */
static int lost(Tcp *t, int peer, const char *why, ZnErr *err) {
    const int W = t->world;
    unsigned char gone[256] = {0};   /* peers beyond 256 are not watched */
    double until = zn_comm_now_s() + LOST_GRACE_S;
    for (;;) {
        int n = 0;
        for (int q = 0; q < W && q < 256; q++)
            if (q != t->rank && q != peer && !gone[q] && t->fd[q] >= 0) {
                t->pfd[n] = (struct pollfd){t->fd[q], POLLRDHUP, 0};
                t->who[n++] = q;
            }
        double left = until - zn_comm_now_s();
        if (!n || left <= 0 || poll(t->pfd, (nfds_t)n, poll_ms(left)) < 0) break;
        for (int i = 0; i < n; i++)
            if (t->pfd[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) gone[t->who[i]] = 1;
    }
    int n = 0;
    for (int q = 0; q < W; q++)
        if (q == peer || (q < 256 && gone[q])) t->who[n++] = q;
    if (n == 1) return zn_err(err, ZN_E_COMM, "connection to rank %d lost (%s): it failed or exited", peer, why);
    char names[240] = "";
    size_t k = 0;
    for (int i = 0; i < n && k + 32 < sizeof names; i++)
        k += (size_t)snprintf(names + k, sizeof names - k, "%srank %d", i == 0 ? "" : i == n - 1 ? " and " : ", ",
                              t->who[i]);
    return zn_err(err, ZN_E_COMM, "connections to %s lost (%s): they failed or exited, or left after one of them "
                  "did", names, why);
}

typedef struct {
    void *p;
    size_t n;
} Seg;

/* The iovecs of what is left of a stream of segments after done bytes. */
static int seg_iov(struct iovec *v, const Seg *s, int ns, size_t done) {
    int n = 0;
    for (int i = 0; i < ns; i++) {
        if (done >= s[i].n) {
            done -= s[i].n;
            continue;
        }
        v[n].iov_base = (char *)s[i].p + done;
        v[n++].iov_len = s[i].n - done;
        done = 0;
    }
    return n;
}

/* The streams' segments as far as they are known: the in stream past the
 * header only once the header is in (it says whether bytes follow), the
 * out stream's acknowledgement only once it is due. */
static int out_segs(const Peer *p, const void *out, size_t nout, Seg *s) {
    s[0] = (Seg){(void *)&p->hout, sizeof p->hout};
    s[1] = (Seg){(void *)out, p->hout.by_ref ? 0 : nout};   /* (sendmsg only reads it) */
    s[2] = (Seg){(void *)&p->ack_out, p->ack_due ? sizeof p->ack_out : 0};
    return 3;
}

static int in_segs(Peer *p, void *in, size_t nin, Seg *s) {
    s[0] = (Seg){&p->hin, sizeof p->hin};
    if (p->done_in < sizeof p->hin) return 1;
    s[1] = (Seg){in, p->hin.by_ref ? 0 : nin};
    s[2] = (Seg){&p->ack_in, p->hout.by_ref ? sizeof p->ack_in : 0};
    return 3;
}

static size_t seg_len(const Seg *s, int ns) {
    size_t n = 0;
    for (int i = 0; i < ns; i++) n += s[i].n;
    return n;
}

/* Reads n bytes at addr in peer q's memory (Z-PROC-008). */
static int pull(Tcp *t, int q, void *dst, size_t n, uint64_t addr, ZnErr *err) {
    while (n > 0) {
        struct iovec l = {dst, n}, r = {(void *)(uintptr_t)addr, n};
        ssize_t k = process_vm_readv(t->pid[q], &l, 1, &r, 1, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == ESRCH) return lost(t, q, "its process is gone", err);
        if (k <= 0)
            return zn_err(err, ZN_E_COMM, "reading rank %d's bytes in its memory failed: %s", q,
                          k < 0 ? strerror(errno) : "nothing read");
        dst = (char *)dst + k;
        addr += (uint64_t)k;
        n -= (size_t)k;
    }
    return 0;
}

/* The peer's header is in: it must send what this rank expects, else the
 * stream cannot be trusted past it; bytes by reference are read now. */
static int header_in(Tcp *t, int q, void *in, size_t want, ZnErr *err) {
    Peer *p = &t->pr[q];
    const Frame *h = &p->hin;
    if (h->magic != ZN_SEQ_MAGIC || h->bytes < 0 || h->by_ref > 1 || (h->by_ref && !t->can_read[q]))
        return zn_err(err, ZN_E_COMM, "rank %d sent a malformed exchange header", q);
    if ((uint64_t)h->bytes != (uint64_t)want)
        return zn_err(err, ZN_E_COMM, "rank %d sent %lld bytes, expected %zu", q, (long long)h->bytes, want);
    if (!h->by_ref) return 0;
    int rc = pull(t, q, in, want, h->addr, err);
    p->ack_due = !rc;
    return rc;
}

static int tcp_exchange(void *x, const void *const *out, const size_t *nout, void *const *in, const size_t *nin,
                        ZnErr *err) {
    Tcp *t = x;
    const int W = t->world, me = t->rank;
    for (int q = 0; q < W; q++) {
        if (q == me) continue;
        Peer *p = &t->pr[q];
        int ref = t->by_ref[q] && nout[q] >= BY_REF_MIN;
        *p = (Peer){.hout = {ZN_SEQ_MAGIC, (uint32_t)ref, (int64_t)nout[q], ref ? (uint64_t)(uintptr_t)out[q] : 0},
                    .ack_out = ACK_MAGIC};
    }
    double deadline = zn_comm_now_s() + t->timeout_s;
    for (;;) {
        /* every peer with bytes still to move, in or out */
        int n = 0;
        for (int q = 0; q < W; q++) {
            if (q == me) continue;
            Peer *p = &t->pr[q];
            Seg so[3], si[3];
            int ni = in_segs(p, in[q], nin[q], si);
            short ev = (p->done_out < seg_len(so, out_segs(p, out[q], nout[q], so)) ? POLLOUT : 0) |
                       (ni == 1 || p->done_in < seg_len(si, ni) ? POLLIN : 0);
            if (!ev) continue;
            t->pfd[n] = (struct pollfd){t->fd[q], ev, 0};
            t->who[n++] = q;
        }
        if (!n) return 0;
        double left = deadline - zn_comm_now_s();
        if (left <= 0) {
            int q = t->who[0], in_wait = t->pfd[0].events & POLLIN;
            char node[48] = "";
            if (t->remote[q] && t->node_rank[q] >= 0) snprintf(node, sizeof node, " on node %d", t->node_rank[q]);
            return zn_err(err, ZN_E_COMM, "timed out after %.0f s %s rank %d%s " ZN_COMM_TIMEOUT_MARK, t->timeout_s,
                          in_wait ? "waiting for" : "sending to", q, node);
        }
        int k = poll(t->pfd, (nfds_t)n, poll_ms(left));
        if (k < 0 && errno != EINTR) return zn_err(err, ZN_E_COMM, "poll: %s", strerror(errno));
        if (k <= 0) continue;
        for (int i = 0; i < n; i++) {
            const int q = t->who[i];
            Peer *p = &t->pr[q];
            short re = t->pfd[i].revents;
            if (!re) continue;
            struct iovec v[3];
            Seg sg[3];
            struct msghdr m = {0};
            m.msg_iov = v;
            /* POLLHUP/POLLERR: the call below reports what happened */
            if ((re & (POLLIN | POLLHUP | POLLERR)) && (t->pfd[i].events & POLLIN)) {
                m.msg_iovlen = (size_t)seg_iov(v, sg, in_segs(p, in[q], nin[q], sg), p->done_in);
                ssize_t r = recvmsg(t->fd[q], &m, MSG_DONTWAIT);
                if (r == 0) return lost(t, q, "closed", err);
                if (r < 0 && errno != EINTR && errno != EAGAIN) return lost(t, q, strerror(errno), err);
                if (r > 0) {
                    size_t before = p->done_in;
                    p->done_in += (size_t)r;
                    int rc = before < sizeof p->hin && p->done_in >= sizeof p->hin ? header_in(t, q, in[q], nin[q], err) : 0;
                    if (rc) return rc;
                    int ns = in_segs(p, in[q], nin[q], sg);
                    if (p->hout.by_ref && p->done_in == seg_len(sg, ns) && p->ack_in != ACK_MAGIC)
                        return zn_err(err, ZN_E_COMM, "rank %d sent a malformed acknowledgement", q);
                }
            }
            if ((re & (POLLOUT | POLLHUP | POLLERR)) && (t->pfd[i].events & POLLOUT)) {
                m.msg_iovlen = (size_t)seg_iov(v, sg, out_segs(p, out[q], nout[q], sg), p->done_out);
                ssize_t r = sendmsg(t->fd[q], &m, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (r < 0 && errno != EINTR && errno != EAGAIN) return lost(t, q, strerror(errno), err);
                if (r > 0) {
                    p->done_out += (size_t)r;
                    t->sent[t->remote[q]] += (uint64_t)r;
                }
            }
        }
        /* (the bound is on the whole exchange, as torch.distributed's timeout
           is on the whole collective: a link too slow for it is the same
           error as a silent peer, never a wait without end) */
    }
}

static void tcp_free(void *x) {
    Tcp *t = x;
    /* ZINC_TCP_STATS: what went through the sockets (the wire's share of
       the traffic: `make test-nodes` holds the links' counters to it) */
    const char *st = getenv("ZINC_TCP_STATS");
    if (st && strcmp(st, "0") && t->world > 1)
        fprintf(stderr, "tcp rank %d: to other nodes %llu B, to its own node %llu B (headers and acknowledgements "
                "included; bytes read by reference not)\n", t->rank, (unsigned long long)t->sent[1],
                (unsigned long long)t->sent[0]);
    for (int q = 0; t->fd && q < t->world; q++)
        if (t->fd[q] >= 0) close(t->fd[q]);
    ZN_FREE_ALL(t->fd, t->pr, t->pfd, t->who, t->pid, t->by_ref, t->can_read, t->remote, t->node_rank, t);
}

static void tcp_set_timeout(void *x, double s) { ((Tcp *)x)->timeout_s = s; }

static const ZnXportOps tcp_ops = {tcp_exchange, tcp_free, tcp_set_timeout};

/* ------------------------------------------------------------- set-up */

/* Small frames (headers, sequence records) must not wait for more bytes.
 * The socket buffers keep the kernel's autotuning: fixed SO_SNDBUF/SO_RCVBUF
 * of 1 or 4 MB measured no faster on loopback (make bench), and a fixed size
 * turns the tuning off. */
static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Moves n bytes of a set-up message on a non-blocking socket before the
 * deadline; 0, or -1 with errno (ETIMEDOUT, or 0 for a closed stream). */
static int setup_io(int fd, void *p, size_t n, int out, double deadline) {
    char *c = p;
    while (n > 0) {
        double left = deadline - zn_comm_now_s();
        if (left <= 0) return errno = ETIMEDOUT, -1;
        struct pollfd q = {fd, out ? POLLOUT : POLLIN, 0};
        if (poll(&q, 1, poll_ms(left)) <= 0) continue;
        ssize_t k = out ? send(fd, c, n, MSG_DONTWAIT | MSG_NOSIGNAL) : recv(fd, c, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return errno = k < 0 ? errno : 0, -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Connects to host:port, waiting at most until the deadline. */
static int connect_peer(const Addr *a, double deadline, int *fd_out) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", a->port);
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(a->host, ps, &hints, &ai)) return errno = EHOSTUNREACH, -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc && errno == EINPROGRESS) {   /* a host that drops SYNs must not hold us past the deadline */
        struct pollfd q = {fd, POLLOUT, 0};
        double left;
        int e = 0;
        socklen_t el = sizeof e;
        while ((left = deadline - zn_comm_now_s()) > 0 && poll(&q, 1, poll_ms(left)) == 0) {}
        if (left <= 0) e = ETIMEDOUT;
        else getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
        rc = e ? -1 : 0;
        errno = e;
    }
    if (!rc && zn_comm_self_connected(fd)) rc = -1, errno = ECONNREFUSED;   /* Z-RDV-007 */
    if (rc) {
        int e = errno;
        if (fd >= 0) close(fd);
        return errno = e, -1;
    }
    *fd_out = fd;
    return 0;
}

/* Each rank connects to the lower ranks and accepts the higher ones; the
 * accepted connection says who it is (and carries rank 0's token, so a
 * stray connection is dropped, not taken for a rank). */
static int build_mesh(Tcp *t, int lfd, const Addr *all, double deadline, ZnErr *err) {
    const int me = t->rank;
    for (int q = 0; q < me; q++) {
        if (connect_peer(&all[q], deadline, &t->fd[q]))
            return zn_err(err, ZN_E_COMM, "tcp mesh: rank %d cannot connect to rank %d at %s:%d: %s", me, q,
                          all[q].host, all[q].port, strerror(errno));
        Hello h = {MESH_MAGIC, me, all[0].token};
        if (setup_io(t->fd[q], &h, sizeof h, 1, deadline))
            return zn_err(err, ZN_E_COMM, "tcp mesh: rank %d cannot greet rank %d: %s", me, q,
                          errno ? strerror(errno) : "connection closed");
    }
    for (int joined = me + 1; joined < t->world;) {
        double left = deadline - zn_comm_now_s();
        if (left <= 0) {
            char missing[160] = "";
            size_t k = 0;
            for (int q = me + 1; q < t->world && k + 12 < sizeof missing; q++)
                if (t->fd[q] < 0) k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%d", k ? ", " : "", q);
            return zn_err(err, ZN_E_COMM, "tcp mesh: rank %d: no connection from rank%s %s within %.0f s "
                          "(ZINC_RDV_TIMEOUT)", me, strchr(missing, ',') ? "s" : "", missing,
                          zn_comm_env_seconds("ZINC_RDV_TIMEOUT", 120));
        }
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, poll_ms(left)) <= 0) continue;
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) continue;
        Hello h = {0};
        /* a silent or foreign connection must not stall the others for long */
        double until = zn_comm_now_s() + 5 < deadline ? zn_comm_now_s() + 5 : deadline;
        int ok = setup_io(fd, &h, sizeof h, 0, until) == 0 && h.magic == MESH_MAGIC && h.token == all[0].token &&
                 h.rank > me && h.rank < t->world && t->fd[h.rank] < 0;
        if (!ok) {
            close(fd);
            continue;
        }
        t->fd[h.rank] = fd;
        joined++;
    }
    for (int q = 0; q < t->world; q++)
        if (q != me) tune(t->fd[q]);
    return 0;
}

/* The listening socket, on every interface and a port the kernel picks. */
static int listen_any(int world, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    socklen_t al = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, world) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        int e = errno;
        if (fd >= 0) close(fd);
        return errno = e, -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* The node a rank runs on, as far as reads by reference go: its network
 * namespace (namespaces of one machine are the nodes of a test cluster,
 * and a pid namespace does not separate them) and its launcher's node rank
 * (GROUP_RANK, as zinc launch and torchrun set it). Ranks of different
 * nodes talk through their sockets only, whatever one kernel would let
 * them read. */
uint64_t zn_comm_tcp_node_id(void) {
    struct stat st;
    uint64_t h = 1469598103934665603ull;
    if (stat("/proc/self/ns/net", &st) == 0) h = (h ^ (uint64_t)st.st_ino) * 1099511628211ull;
    const char *g = getenv("GROUP_RANK");
    for (const char *c = g ? g : ""; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return h;
}

/* Which peers can read this rank's memory (Z-PROC-008): each rank reads
 * every peer's probe (its process id may name another process in another
 * pid namespace or on another host: the value tells), and the ranks
 * all-gather what they found. ZINC_TCP_CMA=0 reads nothing. */
static int probe_peers(Tcp *t, ZnStore *s, const Addr *all, unsigned char *rows, ZnErr *err) {
    const int W = t->world, me = t->rank;
    const char *e = getenv("ZINC_TCP_CMA");
    int try = !(e && !strcmp(e, "0"));
    unsigned char *mine = rows + (size_t)me * (size_t)W;
    for (int q = 0; q < W; q++) {
        t->pid[q] = all[q].pid;
        t->remote[q] = all[q].node != all[me].node;
        t->node_rank[q] = all[q].node_rank;
        uint64_t v = 0;
        struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)all[q].probe_at, sizeof v};
        mine[q] = q != me && try && all[q].node == all[me].node &&
                  process_vm_readv(all[q].pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof v && v == all[q].probe;
    }
    /* (allgather reads mine before it writes the rows: copy it out first) */
    unsigned char row[64], *own = W <= 64 ? row : zn_malloc(ZN_HOST_COMM, (size_t)W);
    if (!own) return zn_nomem(err), err->code;
    memcpy(own, mine, (size_t)W);
    int rc = zn_store_allgather(s, own, rows, (size_t)W, err);
    if (own != row) free(own);
    if (rc) return rc;
    for (int q = 0; q < W; q++) {
        t->can_read[q] = rows[(size_t)me * (size_t)W + (size_t)q];
        t->by_ref[q] = rows[(size_t)q * (size_t)W + (size_t)me];
    }
    return 0;
}

static uint64_t run_token(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
}

ZnComm *zn_comm_tcp_new(ZnStore *s, ZnErr *err) {
    Tcp *t = zn_calloc(ZN_HOST_COMM, 1, sizeof *t);
    const int W = zn_store_world(s);
    const size_t w = (size_t)W;
    if (t) {
        t->rank = zn_store_rank(s);
        t->world = W;
        t->timeout_s = zn_comm_env_seconds("ZINC_COMM_TIMEOUT", ZN_COMM_TIMEOUT_DEFAULT);
    }
    Addr *all = zn_calloc(ZN_HOST_COMM, w, sizeof *all);
    unsigned char *rows = zn_calloc(ZN_HOST_COMM, w * w, 1);
    const ZnHostCat H = ZN_HOST_COMM;   /* per peer: socket, progress, poll slot, and what set-up learns */
    if (!t || !all || !rows ||
        !(ZN_NEW_ARRAY(H, t->fd, w) && ZN_NEW_ARRAY(H, t->pr, w) && ZN_NEW_ARRAY(H, t->pfd, w) &&
          ZN_NEW_ARRAY(H, t->who, w) && ZN_NEW_ARRAY(H, t->pid, w) && ZN_NEW_ARRAY(H, t->by_ref, w) &&
          ZN_NEW_ARRAY(H, t->can_read, w) && ZN_NEW_ARRAY(H, t->remote, w) && ZN_NEW_ARRAY(H, t->node_rank, w))) {
        if (t && t->fd) memset(t->fd, 0xff, w * sizeof *t->fd);   /* -1 each: nothing to close */
        if (t) tcp_free(t);
        ZN_FREE_ALL(all, rows);
        zn_nomem(err);
        return NULL;
    }
    for (int q = 0; q < W; q++) t->fd[q] = -1;
    int rc = 0, lfd = -1;
    if (W > 1) {
        t->probe = run_token() ^ ((uint64_t)t->rank << 48);
        const char *g = getenv("GROUP_RANK");
        Addr mine = {MESH_MAGIC, 0, t->rank == 0 ? run_token() : 0, "", (int32_t)getpid(), g ? atoi(g) : -1,
                     (uint64_t)(uintptr_t)&t->probe, t->probe, zn_comm_tcp_node_id()};
        zn_store_local_ip(s, mine.host, sizeof mine.host);
        if ((lfd = listen_any(W, &mine.port)) < 0)
            rc = zn_err(err, ZN_E_COMM, "tcp mesh: rank %d cannot listen: %s", t->rank, strerror(errno));
        /* a rank that failed still takes part, with port 0, so no rank waits on it */
        if (!zn_store_allgather(s, &mine, all, sizeof mine, rc ? &(ZnErr){0} : err) && !rc) {
            for (int q = 0; q < W && !rc; q++)
                if (all[q].magic != MESH_MAGIC || all[q].port <= 0)
                    rc = zn_err(err, ZN_E_COMM, "tcp mesh: rank %d has no listening socket", q);
            if (!rc) rc = build_mesh(t, lfd, all, zn_comm_now_s() + zn_comm_env_seconds("ZINC_RDV_TIMEOUT", 120), err);
        } else if (!rc) {
            rc = err->code;
        }
        if (lfd >= 0) close(lfd);   /* every peer is connected or has failed */
        if (!rc) rc = probe_peers(t, s, all, rows, err);
    }
    ZN_FREE_ALL(all, rows);
    if (rc) {
        tcp_free(t);
        return NULL;
    }
    return zn_coll_proc_new(t->rank, W, t, &tcp_ops, err);
}

void zn_comm_tcp_free(ZnComm *c) { zn_coll_proc_free(c); }
