/* run_procs.c: a run with one rank per forked process over tcp (run_procs.h).
 *
 * A child sends one message through its pipe and exits: its error code (0
 * ok) and message, then, when it succeeded, the parts of the result its rank
 * holds in a one-rank-per-process run (result_fields). The parent reads
 * every pipe at once to its end, so no child blocks on a full pipe while the
 * parent waits on another. */
#include "app/run_procs.h"
#include "app/proc.h"
#include "core/alloc.h"
#include "core/covmark.h"
#include "comm/store.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FIELDS 24

typedef struct { void *p; size_t n; } Field;

typedef struct {
    pid_t pid;
    int fd;            /* the read end of its pipe; -1 at its end */
    char *buf;         /* what it sent */
    size_t len, cap;
    int status, reaped;
} Child;

/* The parts of res rank `rank` fills in a one-rank-per-process run
 * (run.c: rank 0 the steps, the parameters and the digest; every rank its
 * slot of the per-rank arrays), in the order its child sends them. */
static int result_fields(ZnRunResult *res, const ZnRunOpts *o, int rank, Field *f) {
    int n = 0;
    const size_t S = (size_t)o->steps, P = (size_t)res->numel;
    if (rank == 0) {
        f[n++] = (Field){&res->first_step, sizeof res->first_step};
        f[n++] = (Field){&res->digest, sizeof res->digest};
        f[n++] = (Field){&res->wall_s, sizeof res->wall_s};
        f[n++] = (Field){res->loss, S * sizeof *res->loss};
        f[n++] = (Field){res->grad_norm, S * sizeof *res->grad_norm};
        f[n++] = (Field){res->lr, S * sizeof *res->lr};
        f[n++] = (Field){res->scale, S * sizeof *res->scale};
        f[n++] = (Field){res->scale_after, S * sizeof *res->scale_after};
        f[n++] = (Field){res->skipped, S * sizeof *res->skipped};
        f[n++] = (Field){res->step_ms, S * sizeof *res->step_ms};
        f[n++] = (Field){res->params, P * sizeof *res->params};
        if (o->record) {
            f[n++] = (Field){res->rec_params, S * P * sizeof *res->rec_params};
            f[n++] = (Field){res->rec_grads, S * P * sizeof *res->rec_grads};
        }
    }
    f[n++] = (Field){&res->comm_init[rank], sizeof *res->comm_init};
    f[n++] = (Field){&res->comm_end[rank], sizeof *res->comm_end};
    f[n++] = (Field){&res->mem_end[rank], sizeof *res->mem_end};
    f[n++] = (Field){&res->host_end[rank], sizeof *res->host_end};
    f[n++] = (Field){&res->nvme_end[rank], sizeof *res->nvme_end};
    f[n++] = (Field){&res->moved[4 * rank], 4 * sizeof *res->moved};
    f[n++] = (Field){&res->inter[4 * rank], 4 * sizeof *res->inter};
    f[n++] = (Field){&res->phases[ZN_PH_N * rank], ZN_PH_N * sizeof *res->phases};
    return n;
}

/* The message's head: the child's error code and message. */
typedef struct {
    int32_t code;
    char msg[sizeof ((ZnErr *)0)->msg];
} Head;

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static void set_int_env(const char *name, int v) {
    char s[16];
    snprintf(s, sizeof s, "%d", v);
    setenv(name, s, 1);
}

/* The launcher's environment for rank of o's world, as zinc launch sets it
 * for a node of o->world.per_node ranks (GROUP_RANK: which node, so the
 * tcp transport reads peers' memory only on its own node, Z-PROC-008). */
static void set_identity(const ZnRunOpts *o, int rank) {
    const int pn = o->world.per_node;
    set_int_env("RANK", rank);
    set_int_env("WORLD_SIZE", o->world.size);
    set_int_env("LOCAL_RANK", rank % pn);
    set_int_env("LOCAL_WORLD_SIZE", pn);
    set_int_env("GROUP_RANK", rank / pn);
}

/* ZINC_SPEC_KILL=R: rank R dies once it joined (the test of a dying rank,
 * Z-SPEC-005); unset, empty or not a number: no rank. */
static int kill_me(int rank) {
    const char *s = getenv("ZINC_SPEC_KILL");
    char *end = NULL;
    long r = s && *s ? strtol(s, &end, 10) : -1;
    return r == rank && end && !*end;
}

/* Rank `rank`'s process: joins, runs, sends its message, exits. It leaves
 * by exit(), not _exit(), so a coverage build writes its counts. */
static void child_main(const ZnRunOpts *o, int rank, const char *rdv, int fd) {
    zn_cov_forked();   /* the parent's counts so far are the parent's to write */
    set_identity(o, rank);
    ZnErr e = {0};
    ZnProc proc;
    ZnRunResult rr;
    int rc = zn_proc_start(ZN_BACKEND_TCP, rdv, o->world.size, &proc, &e);
    if (rc) zn_err_prefix(&e, "rank %d: ", rank);
    if (!rc && kill_me(rank)) raise(SIGKILL);
    if (!rc) {
        zn_proc_config_timeout(&proc, o->cfg.comm_timeout);
        ZnRunOpts ro = *o;
        ro.world = proc.world;
        ro.proc_comm = proc.comm;
        ro.out = NULL;
        rc = zn_run(&ro, &rr, &e);
        zn_proc_end(&proc, rc == 0);
    }
    Head h;
    memset(&h, 0, sizeof h);
    h.code = rc ? e.code : 0;
    snprintf(h.msg, sizeof h.msg, "%s", rc ? e.msg : "");
    int bad = write_all(fd, &h, sizeof h);
    if (!rc) {
        Field f[MAX_FIELDS];
        int n = result_fields(&rr, o, rank, f);
        for (int i = 0; i < n && !bad; i++) bad = write_all(fd, f[i].p, f[i].n);
        zn_run_result_free(&rr);
    }
    close(fd);
    exit(rc || bad ? 1 : 0);
}

/* Reads what child c has sent so far; 0 at its end. */
static int pump(Child *c, ZnErr *err) {
    if (c->len == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 1 << 16;
        char *nb = zn_realloc(ZN_HOST_APP, c->buf, cap);
        if (!nb) return zn_nomem(err);
        c->buf = nb;
        c->cap = cap;
    }
    ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (r > 0) {
        c->len += (size_t)r;
        return 0;
    }
    close(c->fd);   /* end of the message (or a read error: the same for us) */
    c->fd = -1;
    if (waitpid(c->pid, &c->status, 0) == c->pid) c->reaped = 1;
    return 0;
}

/* Whether child c ended with a whole message (and so a result or its error). */
static int sent_whole(const Child *c, size_t want) {
    if (c->len < sizeof(Head)) return 0;
    const Head *h = (const Head *)c->buf;
    return h->code ? 1 : c->len == want;
}

static void kill_all(Child *k, int n) {
    for (int r = 0; r < n; r++)
        if (k[r].pid > 0 && !k[r].reaped) kill(k[r].pid, SIGKILL);
}

/* Bytes rank r's whole successful message holds. */
static size_t message_size(ZnRunResult *res, const ZnRunOpts *o, int r) {
    Field f[MAX_FIELDS];
    int n = result_fields(res, o, r, f);
    size_t s = sizeof(Head);
    for (int i = 0; i < n; i++) s += f[i].n;
    return s;
}

/* Reads every child's message to its end, within ZINC_SPEC_TIMEOUT. A child
 * that ends without a whole message died: the others (who may wait for it
 * in a collective) are killed, and its death is the run's error. */
static int collect(Child *k, int n, ZnRunResult *res, const ZnRunOpts *o, ZnErr *err) {
    const double limit = zn_comm_env_seconds("ZINC_SPEC_TIMEOUT", 600.0), end = zn_comm_now_s() + limit;
    struct pollfd *pf = zn_calloc(ZN_HOST_APP, (size_t)n, sizeof *pf);
    int *who = zn_calloc(ZN_HOST_APP, (size_t)n, sizeof *who);
    int rc = !pf || !who ? zn_nomem(err) : 0, dead = -1;
    for (;;) {
        int m = 0;
        for (int r = 0; r < n; r++)
            if (k[r].fd >= 0) { pf[m] = (struct pollfd){k[r].fd, POLLIN, 0}; who[m++] = r; }
        if (!m || rc) break;
        const double left = end - zn_comm_now_s();
        if (left <= 0) {
            char open_ranks[256] = "";   /* every rank still running: which one hangs, its peers wait for */
            for (int j = 0; j < m; j++)
                snprintf(open_ranks + strlen(open_ranks), sizeof open_ranks - strlen(open_ranks), "%s%d",
                         j ? ", " : "", who[j]);
            rc = zn_err(err, ZN_E_COMM, "rank%s %s did not finish within %g s (ZINC_SPEC_TIMEOUT): the ranks were "
                        "killed", m > 1 ? "s" : "", open_ranks, limit);
            break;
        }
        if (poll(pf, (nfds_t)m, left > 1.0 ? 1000 : (int)(left * 1000) + 1) < 0 && errno != EINTR) {
            rc = zn_err(err, ZN_E_COMM, "poll: %s", strerror(errno));
            break;
        }
        for (int j = 0; j < m && !rc; j++) {
            Child *c = &k[who[j]];
            if (!pf[j].revents || (rc = pump(c, err)) || c->fd >= 0) continue;
            if (dead < 0 && !sent_whole(c, message_size(res, o, who[j]))) {
                dead = who[j];
                kill_all(k, n);   /* its peers may wait for it until their own timeout */
            }
        }
    }
    if (rc) kill_all(k, n);
    free(pf);
    free(who);
    if (!rc && dead >= 0) {
        const int s = k[dead].status;
        if (WIFSIGNALED(s))
            rc = zn_err(err, ZN_E_COMM, "rank %d's process was killed by signal %d (%s) before it sent its result",
                        dead, WTERMSIG(s), strsignal(WTERMSIG(s)));
        else
            rc = zn_err(err, ZN_E_COMM, "rank %d's process exited with status %d without sending its result", dead,
                        WIFEXITED(s) ? WEXITSTATUS(s) : -1);
    }
    return rc;
}

/* The run's error from the children's messages: the lowest rank whose error
 * is not a lost peer (ZN_E_COMM follows another rank's failure), else the
 * lowest failing rank; 0 when every rank succeeded. A rank that sent its
 * result and then did not exit 0 (a sanitizer's report at exit) fails too. */
static int ranks_error(const Child *k, int n, ZnErr *err) {
    int pick = -1;
    for (int r = 0; r < n; r++) {
        const Head *h = (const Head *)k[r].buf;
        const int s = k[r].status;
        if (!h->code && !(WIFEXITED(s) && WEXITSTATUS(s) == 0))
            return zn_err(err, ZN_E_INTERNAL, "rank %d's process sent its result, then ended with %s %d", r,
                          WIFSIGNALED(s) ? "signal" : "exit status", WIFSIGNALED(s) ? WTERMSIG(s) : WEXITSTATUS(s));
        if (!h->code) continue;
        if (pick < 0 || (((const Head *)k[pick].buf)->code == ZN_E_COMM && h->code != ZN_E_COMM)) pick = r;
    }
    if (pick < 0) return 0;
    const Head *h = (const Head *)k[pick].buf;
    return zn_err(err, h->code, "%.*s", (int)sizeof h->msg - 1, h->msg);
}

/* Copies every rank's parts into res. */
static void assemble(const Child *k, int n, ZnRunResult *res, const ZnRunOpts *o) {
    for (int r = 0; r < n; r++) {
        Field f[MAX_FIELDS];
        int m = result_fields(res, o, r, f);
        const char *p = k[r].buf + sizeof(Head);
        for (int i = 0; i < m; i++) {
            memcpy(f[i].p, p, f[i].n);
            p += f[i].n;
        }
    }
}

/* Forks the n ranks; on a failed fork, kills those started. */
static int start_ranks(const ZnRunOpts *o, Child *k, int n, const char *rdv, ZnErr *err) {
    fflush(NULL);   /* a child's exit() flushes stdio: what is buffered must not come out twice */
    for (int r = 0; r < n; r++) {
        int p[2];
        if (pipe(p)) {
            kill_all(k, r);
            return zn_err(err, ZN_E_IO, "pipe for rank %d: %s", r, strerror(errno));
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            for (int q = 0; q < r; q++) close(k[q].fd);   /* the earlier ranks' pipes are the parent's */
            child_main(o, r, rdv, p[1]);
        }
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            kill_all(k, r);
            return zn_err(err, ZN_E_IO, "fork for rank %d: %s", r, strerror(errno));
        }
        k[r].pid = pid;
        k[r].fd = p[0];
    }
    return 0;
}

int zn_run_procs(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    const int n = o->world.size;
    memset(res, 0, sizeof *res);
    /* a fresh folder per run: runs side by side never meet at one rendezvous */
    char dir[] = "/tmp/zinc-spec-tcp-XXXXXX", rdv[80], path[64];
    if (!mkdtemp(dir)) return zn_err(err, ZN_E_IO, "cannot make a rendezvous folder under /tmp: %s", strerror(errno));
    snprintf(path, sizeof path, "%s/rendezvous", dir);
    snprintf(rdv, sizeof rdv, "file:%s", path);
    Child *k = zn_calloc(ZN_HOST_APP, (size_t)n, sizeof *k);
    int rc = k ? zn_run_result_alloc(o, res, err) : zn_nomem(err);
    for (int r = 0; r < n && k; r++) k[r].fd = -1;
    if (!rc) rc = start_ranks(o, k, n, rdv, err);
    if (!rc) rc = collect(k, n, res, o, err);
    if (!rc) rc = ranks_error(k, n, err);
    if (!rc) assemble(k, n, res, o);
    for (int r = 0; r < n && k; r++) {   /* every child reaped, every pipe closed */
        if (k[r].fd >= 0) close(k[r].fd);
        if (k[r].pid > 0 && !k[r].reaped) waitpid(k[r].pid, NULL, 0);
        free(k[r].buf);
    }
    free(k);
    unlink(path);
    rmdir(dir);
    if (rc && res->loss) zn_run_result_free(res);
    return rc;
}

/* ------------------------------------------------ against the simulator */

/* Collective counters as Z-PROC-002 promises them equal: calls and bytes per
 * operation and per tag (the wire counters are the transport's own). */
static int same_counters(const ZnCommStats *a, const ZnCommStats *b) {
    if (memcmp(a->calls, b->calls, sizeof a->calls) || memcmp(a->bytes_sent, b->bytes_sent, sizeof a->bytes_sent) ||
        memcmp(a->bytes_recv, b->bytes_recv, sizeof a->bytes_recv) ||
        memcmp(a->bytes_inter, b->bytes_inter, sizeof a->bytes_inter) || a->ntags != b->ntags)
        return 0;
    for (int t = 0; t < a->ntags; t++)
        if (strcmp(a->tags[t].tag, b->tags[t].tag) || a->tags[t].calls != b->tags[t].calls ||
            a->tags[t].bytes_sent != b->tags[t].bytes_sent || a->tags[t].bytes_recv != b->tags[t].bytes_recv ||
            a->tags[t].bytes_inter != b->tags[t].bytes_inter)
            return 0;
    return 1;
}

static int same_mem(const ZnMemStats *a, const ZnMemStats *b) {
    return !memcmp(a->cur, b->cur, sizeof a->cur) && !memcmp(a->peak, b->peak, sizeof a->peak) &&
           a->nallocs == b->nallocs;
}

/* A phase's record but its collectives' wire counters. */
static int same_phase(const ZnPhaseStats *a, const ZnPhaseStats *b) {
    return a->seen == b->seen && !memcmp(a->peak, b->peak, sizeof a->peak) &&
           !memcmp(a->at_peak, b->at_peak, sizeof a->at_peak) && a->h2d == b->h2d && a->d2h == b->d2h &&
           same_counters(&a->comm, &b->comm);
}

/* The first per-step value (bitwise) where p differs from s, or -1. */
static long first_step_differs(const ZnRunResult *p, const ZnRunResult *s) {
    const size_t d = sizeof(double);
    for (long t = 0; t < s->steps; t++)
        if (memcmp(&p->loss[t], &s->loss[t], d) || memcmp(&p->grad_norm[t], &s->grad_norm[t], d) ||
            memcmp(&p->lr[t], &s->lr[t], d) || memcmp(&p->scale[t], &s->scale[t], d) ||
            memcmp(&p->scale_after[t], &s->scale_after[t], d) || p->skipped[t] != s->skipped[t])
            return t;
    return -1;
}

/* What of rank r's slots differs, or NULL. */
static const char *rank_differs(const ZnRunResult *p, const ZnRunResult *s, int r) {
    if (!same_counters(&p->comm_init[r], &s->comm_init[r])) return "collective counters after init";
    if (!same_counters(&p->comm_end[r], &s->comm_end[r])) return "collective counters at the end";
    if (!same_mem(&p->mem_end[r], &s->mem_end[r])) return "device memory";
    if (!same_mem(&p->host_end[r], &s->host_end[r])) return "host tier memory";
    if (!same_mem(&p->nvme_end[r], &s->nvme_end[r])) return "NVMe tier memory";
    if (memcmp(&p->moved[4 * r], &s->moved[4 * r], 4 * sizeof *p->moved)) return "offload bytes moved";
    if (memcmp(&p->inter[4 * r], &s->inter[4 * r], 4 * sizeof *p->inter)) return "bytes to other nodes";
    for (int ph = 0; ph < ZN_PH_N; ph++)
        if (!same_phase(&p->phases[ZN_PH_N * r + ph], &s->phases[ZN_PH_N * r + ph])) return "a phase's record";
    return NULL;
}

int zn_run_procs_compare(const ZnRunOpts *o, const ZnRunResult *p, const ZnRunResult *s, ZnErr *err) {
    const char *pre = "ranks in processes differ from the simulator";
    long t = first_step_differs(p, s);
    if (t >= 0)
        return zn_err(err, ZN_E_INTERNAL, "%s: step %ld: loss %.17g, grad norm %.17g (simulator %.17g, %.17g)", pre,
                      t + 1, p->loss[t], p->grad_norm[t], s->loss[t], s->grad_norm[t]);
    if (p->first_step != s->first_step || p->digest != s->digest ||
        memcmp(p->params, s->params, (size_t)s->numel * sizeof *s->params))
        return zn_err(err, ZN_E_INTERNAL, "%s: final parameters: digest %016llx, the simulator's %016llx", pre,
                      (unsigned long long)p->digest, (unsigned long long)s->digest);
    for (int r = 0; r < o->world.size; r++) {
        const char *what = rank_differs(p, s, r);
        if (what) return zn_err(err, ZN_E_INTERNAL, "%s: rank %d: %s", pre, r, what);
    }
    return 0;
}

int zn_run_procs_vs_sim(const ZnRunOpts *o, ZnRunResult *res, ZnErr *err) {
    ZnRunResult sim;
    ZnErr serr = {0};
    int src = zn_run(o, &sim, &serr);
    int rc = zn_run_procs(o, res, err);
    if (!rc && src) {
        zn_run_result_free(res);
        return zn_err(err, ZN_E_INTERNAL, "ranks in processes succeeded where the simulator failed: %s", serr.msg);
    }
    if (rc && !src) {
        zn_run_result_free(&sim);
        return zn_err_prefix(err, "the simulator succeeded, ranks in processes failed: ");
    }
    if (rc) return rc;   /* both failed: the processes' error is the case's to judge */
    rc = zn_run_procs_compare(o, res, &sim, err);
    zn_run_result_free(&sim);
    if (rc) zn_run_result_free(res);
    return rc;
}
