/* store.c: the rendezvous store over TCP (spec Z-RDV-004..008). */
#include "comm/store.h"
#include "core/alloc.h"
#include "core/fileio.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RDV_MAGIC 0x5a4e5256u   /* "ZNRV" */
#define RDV_VERSION 1u

struct ZnStore {
    int rank, world;
    int listen_fd;
    int *fd;                   /* rank 0: fd[r] for r = 1..world-1; others: fd[0] */
    double msg_timeout_s;
    char where[300];           /* "tcp://host:port" or "file:PATH", for messages */
};

typedef struct {
    uint32_t magic, version;
    int32_t rank, world;
} Hello;

typedef struct {
    uint32_t magic, ok;
    char msg[240];
} Ack;

double zn_comm_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int zn_comm_timed_out(const ZnErr *e) {
    const size_t n = strlen(e->msg), k = sizeof ZN_COMM_TIMEOUT_MARK - 1;
    return n >= k && !strcmp(e->msg + n - k, ZN_COMM_TIMEOUT_MARK);
}

double zn_comm_env_seconds(const char *name, double dflt) {
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    double v = strtod(s, &end);
    return *end || !(v > 0) ? dflt : v;
}

int zn_comm_self_connected(int fd) {
    struct sockaddr_in me, peer;
    socklen_t ml = sizeof me, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&me, &ml) || getpeername(fd, (struct sockaddr *)&peer, &pl)) return 0;
    return me.sin_family == AF_INET && peer.sin_family == AF_INET && me.sin_port == peer.sin_port &&
           me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int zn_rdv_parse(const char *s, const ZnProcEnv *pe, ZnRdvSpec *out, ZnErr *err) {
    memset(out, 0, sizeof *out);
    if (!s || !strcmp(s, "env")) {
        snprintf(out->host, sizeof out->host, "%s", pe->master_addr[0] ? pe->master_addr : "127.0.0.1");
        out->port = pe->master_port ? pe->master_port : ZN_DEFAULT_MASTER_PORT;
        return 0;
    }
    if (!strncmp(s, "file:", 5)) {
        if (!s[5] || strlen(s + 5) >= sizeof out->path)
            return zn_err(err, ZN_E_USAGE, "--rendezvous file:PATH needs a path (got '%.60s')", s);
        out->file = 1;
        snprintf(out->path, sizeof out->path, "%s", s + 5);
        return 0;
    }
    if (!strncmp(s, "tcp://", 6)) {
        const char *colon = strrchr(s + 6, ':');
        char *end;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || colon == s + 6 || (size_t)(colon - (s + 6)) >= sizeof out->host || end == colon + 1 ||
            *end || port < 1 || port > 65535)
            return zn_err(err, ZN_E_USAGE, "--rendezvous '%.60s': expected tcp://HOST:PORT with PORT in 1..65535", s);
        memcpy(out->host, s + 6, (size_t)(colon - (s + 6)));
        out->port = (int)port;
        return 0;
    }
    return zn_err(err, ZN_E_USAGE, "--rendezvous '%.60s': expected env, tcp://HOST:PORT or file:PATH", s);
}

/* ------------------------------------------------------------------ I/O */

/* Waits until fd is ready for ev or the deadline passes. */
static int wait_fd(ZnStore *s, int fd, short ev, int peer, const char *what, ZnErr *err) {
    double deadline = zn_comm_now_s() + s->msg_timeout_s;
    for (;;) {
        double left = deadline - zn_comm_now_s();
        if (left <= 0)
            return zn_err(err, ZN_E_COMM, "timed out after %.0f s %s rank %d " ZN_COMM_TIMEOUT_MARK, s->msg_timeout_s,
                          what, peer);
        struct pollfd p = {fd, ev, 0};
        int n = poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
        if (n > 0) return 0;
        if (n < 0 && errno != EINTR) return zn_err(err, ZN_E_COMM, "poll: %s", strerror(errno));
    }
}

static int peer_fd(ZnStore *s, int peer, ZnErr *err) {
    int ok = s->rank == 0 ? peer > 0 && peer < s->world : peer == 0;
    if (!ok) return zn_err(err, ZN_E_INTERNAL, "store: rank %d has no connection to rank %d", s->rank, peer), -1;
    return s->fd[peer];
}

/* Moves n bytes to (out) or from peer, whatever the socket takes at a time. */
static int move_bytes(ZnStore *s, int peer, char *p, size_t n, int out, ZnErr *err) {
    int fd = peer_fd(s, peer, err);
    if (fd < 0) return err->code;
    while (n > 0) {
        int rc = wait_fd(s, fd, out ? POLLOUT : POLLIN, peer, out ? "sending to" : "waiting for", err);
        if (rc) return rc;
        /* MSG_DONTWAIT: poll said some room, not room for n bytes; a blocking send
           of more would wait past the deadline for a peer that stopped reading */
        ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0)
            return zn_err(err, ZN_E_COMM, "connection to rank %d lost (%s): it failed or exited", peer,
                          k < 0 ? strerror(errno) : "closed");
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* (send only reads buf: the cast serves the shared loop) */
int zn_store_send(ZnStore *s, int peer, const void *buf, size_t n, ZnErr *err) {
    return move_bytes(s, peer, (char *)buf, n, 1, err);
}

int zn_store_recv(ZnStore *s, int peer, void *buf, size_t n, ZnErr *err) { return move_bytes(s, peer, buf, n, 0, err); }

int zn_store_allgather(ZnStore *s, const void *in, void *out, size_t n, ZnErr *err) {
    char *o = out;
    memcpy(o + (size_t)s->rank * n, in, n);
    int rc = 0;
    if (s->rank == 0) {
        for (int r = 1; r < s->world && !rc; r++) rc = zn_store_recv(s, r, o + (size_t)r * n, n, err);
        for (int r = 1; r < s->world && !rc; r++) rc = zn_store_send(s, r, o, (size_t)s->world * n, err);
    } else {
        rc = zn_store_send(s, 0, in, n, err);
        if (!rc) rc = zn_store_recv(s, 0, o, (size_t)s->world * n, err);
    }
    return rc;
}

void zn_store_local_ip(const ZnStore *s, char *buf, size_t cap) {
    snprintf(buf, cap, "127.0.0.1");
    int fd = s->world < 2 ? -1 : s->fd[s->rank == 0 ? 1 : 0];
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET)
        inet_ntop(AF_INET, &a.sin_addr, buf, (socklen_t)cap);
}

int zn_store_rank(const ZnStore *s) { return s->rank; }
int zn_store_world(const ZnStore *s) { return s->world; }

/* Rank 0 does not close at once: an error it has just sent a peer would be
 * lost if the peer's next send met a reset connection (a reset discards
 * what the peer has not read yet). It half-closes every connection and
 * waits, up to 2 s, for the peers to read what they were sent and close. */
static void linger_peers(ZnStore *s) {
    int open_peers = 0;
    for (int r = 1; r < s->world; r++)
        if (s->fd[r] >= 0 && shutdown(s->fd[r], SHUT_WR) == 0) open_peers++;
    double deadline = zn_comm_now_s() + 2.0;
    char sink[4096];
    while (open_peers > 0 && zn_comm_now_s() < deadline) {
        open_peers = 0;
        for (int r = 1; r < s->world; r++) {
            if (s->fd[r] < 0) continue;
            struct pollfd p = {s->fd[r], POLLIN, 0};
            if (poll(&p, 1, 10) <= 0) { open_peers++; continue; }
            ssize_t k = recv(s->fd[r], sink, sizeof sink, MSG_DONTWAIT);
            if (k > 0 || (k < 0 && (errno == EINTR || errno == EAGAIN))) open_peers++;
            else { close(s->fd[r]); s->fd[r] = -1; }   /* EOF or error: the peer is done */
        }
    }
}

void zn_store_close(ZnStore *s) {
    if (!s) return;
    if (s->rank == 0 && s->fd) linger_peers(s);
    if (s->listen_fd >= 0) close(s->listen_fd);
    for (int r = 0; r < s->world && s->fd; r++)
        if (s->fd[r] >= 0) close(s->fd[r]);
    free(s->fd);
    free(s);
}

/* ------------------------------------------------------------- joining */

static void tune(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);   /* small frames must not wait */
}

/* The address peers should use to reach this host: the first non-loopback
 * IPv4 interface that is up, else loopback. */
static void local_addr(char *buf, size_t cap) {
    snprintf(buf, cap, "127.0.0.1");
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs)) return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        if ((i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP)) continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, (socklen_t)cap);
        break;
    }
    freeifaddrs(ifs);
}

static int listen_on(ZnStore *s, int port, ZnErr *err) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return zn_err(err, ZN_E_COMM, "rendezvous %s: socket: %s", s->where, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);   /* like torchrun's store: every interface */
    a.sin_port = htons((uint16_t)port);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, s->world)) {
        int e = errno;
        close(fd);
        return zn_err(err, ZN_E_COMM, "rendezvous %s: rank 0 cannot listen on port %d: %s%s", s->where, port,
                      strerror(e), e == EADDRINUSE ? " (another run uses it? set MASTER_PORT)" : "");
    }
    s->listen_fd = fd;
    return 0;
}

static int accept_peers(ZnStore *s, double deadline, ZnErr *err) {
    int joined = 1;
    while (joined < s->world) {
        double left = deadline - zn_comm_now_s();
        struct pollfd p = {s->listen_fd, POLLIN, 0};
        int n = left > 0 ? poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1) : 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 && left <= 0) {
            char missing[200] = "";
            size_t k = 0;
            for (int r = 1; r < s->world && k + 12 < sizeof missing; r++)
                if (s->fd[r] < 0) k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%d", k ? ", " : "", r);
            return zn_err(err, ZN_E_COMM, "rendezvous %s: %d of %d ranks joined within %.0f s (missing: %s; "
                          "ZINC_RDV_TIMEOUT)", s->where, joined, s->world, zn_comm_env_seconds("ZINC_RDV_TIMEOUT", 120), missing);
        }
        if (n <= 0) continue;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        tune(fd);
        Hello h;
        size_t got = 0;
        /* a silent or foreign connection must not stall the others for long */
        while (got < sizeof h) {
            struct pollfd q = {fd, POLLIN, 0};
            if (poll(&q, 1, 5000) <= 0) break;
            ssize_t k = recv(fd, (char *)&h + got, sizeof h - got, 0);
            if (k <= 0) break;
            got += (size_t)k;
        }
        Ack a = {RDV_MAGIC, 1, ""};
        if (got < sizeof h || h.magic != RDV_MAGIC) {   /* not a zinc rank (a port scan, a stale client) */
            close(fd);
            continue;
        }
        if (h.version != RDV_VERSION)
            snprintf(a.msg, sizeof a.msg, "rank %d speaks rendezvous version %u, rank 0 version %u", h.rank,
                     h.version, RDV_VERSION);
        else if (h.world != s->world)
            snprintf(a.msg, sizeof a.msg, "rank %d has world size %d, rank 0 has %d", h.rank, h.world, s->world);
        else if (h.rank <= 0 || h.rank >= s->world)
            snprintf(a.msg, sizeof a.msg, "a peer claims rank %d, outside 1..%d", h.rank, s->world - 1);
        else if (s->fd[h.rank] >= 0)
            snprintf(a.msg, sizeof a.msg, "two processes claim rank %d", h.rank);
        if (a.msg[0]) {
            a.ok = 0;
            (void)!send(fd, &a, sizeof a, MSG_NOSIGNAL);
            close(fd);
            return zn_err(err, ZN_E_USAGE, "rendezvous %s: %s", s->where, a.msg);
        }
        s->fd[h.rank] = fd;
        joined++;
    }
    Ack a = {RDV_MAGIC, 1, ""};
    for (int r = 1; r < s->world; r++) {
        int rc = zn_store_send(s, r, &a, sizeof a, err);
        if (rc) return rc;
    }
    return 0;
}

/* Reads "zinc-rendezvous v1 ADDR PORT" from the file; 0 if not there yet. */
static int read_rdv_file(const char *path, char *host, size_t cap, int *port) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char h[256];
    int p = 0, ok = fscanf(f, "zinc-rendezvous v1 %255s %d", h, &p) == 2 && p > 0 && p < 65536;
    fclose(f);
    if (ok) {
        snprintf(host, cap, "%s", h);
        *port = p;
    }
    return ok;
}

static int connect_to(ZnStore *s, const ZnRdvSpec *spec, double deadline, ZnErr *err) {
    char host[256];
    int port = spec->port;
    snprintf(host, sizeof host, "%s", spec->host);
    char last[1400] = "rank 0 was not reachable";
    int nap = 1;   /* rank 0 started beside us mostly writes the file within ms: look again soon, then every 50 ms */
    while (zn_comm_now_s() < deadline) {
        if (spec->file && !read_rdv_file(spec->path, host, sizeof host, &port)) {
            snprintf(last, sizeof last, "%s does not name rank 0 yet", spec->path);
            sleep_ms(nap);
            nap = nap < 25 ? 2 * nap : 50;
            continue;
        }
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        struct addrinfo hints = {0}, *ai = NULL;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        int g = getaddrinfo(host, ps, &hints, &ai);
        if (g) {
            snprintf(last, sizeof last, "cannot resolve '%s': %s", host, gai_strerror(g));
            sleep_ms(100);
            continue;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        int e = errno;
        freeaddrinfo(ai);
        if (ok && zn_comm_self_connected(fd)) {   /* Z-RDV-007: we hold rank 0's port; let it go */
            ok = 0;
            e = ECONNREFUSED;
        }
        if (!ok) {
            if (fd >= 0) close(fd);
            snprintf(last, sizeof last, "connecting to %s:%d: %s", host, port, strerror(e));
            sleep_ms(50);   /* rank 0 may not listen yet */
            continue;
        }
        tune(fd);
        s->fd[0] = fd;
        Hello h = {RDV_MAGIC, RDV_VERSION, s->rank, s->world};
        Ack a;
        double keep = s->msg_timeout_s;
        s->msg_timeout_s = deadline - zn_comm_now_s() > 1 ? deadline - zn_comm_now_s() : 1;
        int rc = zn_store_send(s, 0, &h, sizeof h, err);
        if (!rc) rc = zn_store_recv(s, 0, &a, sizeof a, err);
        s->msg_timeout_s = keep;
        if (!rc && (a.magic != RDV_MAGIC || !a.ok)) {
            a.msg[sizeof a.msg - 1] = 0;
            return zn_err(err, ZN_E_USAGE, "rendezvous %s: rank 0 refused rank %d: %s", s->where, s->rank,
                          a.magic == RDV_MAGIC ? a.msg : "not a zinc rendezvous");
        }
        if (rc) {   /* a stale address (an old file): try again until the deadline */
            close(fd);
            s->fd[0] = -1;
            snprintf(last, sizeof last, "%s", err->msg);
            sleep_ms(50);
            continue;
        }
        return 0;
    }
    return zn_err(err, ZN_E_COMM, "rendezvous %s: rank %d could not join within %.0f s: %.400s (ZINC_RDV_TIMEOUT)",
                  s->where, s->rank, zn_comm_env_seconds("ZINC_RDV_TIMEOUT", 120), last);
}

ZnStore *zn_store_open(const ZnRdvSpec *spec, int rank, int world, ZnErr *err) {
    ZnStore *s = zn_calloc(ZN_HOST_COMM, 1, sizeof *s);
    int *fd = zn_calloc(ZN_HOST_COMM, (size_t)world, sizeof(int));
    if (!s || !fd) {
        ZN_FREE_ALL(s, fd);
        zn_nomem(err);
        return NULL;
    }
    s->rank = rank;
    s->world = world;
    s->fd = fd;
    s->listen_fd = -1;
    for (int r = 0; r < world; r++) s->fd[r] = -1;
    s->msg_timeout_s = zn_comm_env_seconds("ZINC_COMM_TIMEOUT", ZN_COMM_TIMEOUT_DEFAULT);
    if (spec->file) snprintf(s->where, sizeof s->where, "file:%.280s", spec->path);
    else snprintf(s->where, sizeof s->where, "tcp://%.250s:%d", spec->host, spec->port);
    double deadline = zn_comm_now_s() + zn_comm_env_seconds("ZINC_RDV_TIMEOUT", 120);
    int rc = 0;
    if (world > 1 && rank == 0) {
        rc = listen_on(s, spec->file ? 0 : spec->port, err);
        if (!rc && spec->file) {   /* publish the port the kernel chose */
            struct sockaddr_in a;
            socklen_t al = sizeof a;
            char host[64], line[160];
            getsockname(s->listen_fd, (struct sockaddr *)&a, &al);
            local_addr(host, sizeof host);
            int n = snprintf(line, sizeof line, "zinc-rendezvous v1 %s %d\n", host, ntohs(a.sin_port));
            rc = zn_write_file_atomic(spec->path, line, (size_t)n, err);
        }
        if (!rc) rc = accept_peers(s, deadline, err);
    } else if (world > 1) {
        rc = connect_to(s, spec, deadline, err);
    }
    if (rc) {
        zn_store_close(s);
        return NULL;
    }
    return s;
}
