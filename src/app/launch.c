/* launch.c: `zinc launch` (spec Z-LAUNCH-*), zinc's torchrun.
 *
 *   zinc launch --nproc-per-node N [--nnodes M --node-rank R]
 *               [--master-addr A] [--master-port P] -- CMD [ARGS...]
 *
 * starts N processes of CMD on this node with the environment torchrun
 * gives (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
 * MASTER_ADDR, MASTER_PORT), prefixes every line they print with
 * "[rankR]: ", forwards SIGINT/SIGTERM/SIGHUP, and when one process fails
 * stops the others (SIGTERM, then SIGKILL after a grace period) and exits 1
 * naming the failed rank and its last error line. CMD "zinc" means this
 * zinc binary.
 *
 * MPI processes find each other only through MPI's own runtime, so when CMD
 * asks for `--backend mpi` the launcher starts the N ranks through
 * `mpirun -np N` (single node) and maps mpirun's tagged lines to the same
 * "[rankR]: " prefix. */
#include "app/cli.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core/err.h"
#include "core/alloc.h"
#include "comm/rendezvous.h"

#define MAX_PROCS 1024
#define LINE_MAX_LEN 8192
#define GRACE_S 3.0
/* A rank killed by a signal takes its peers down within milliseconds (their
 * connections break), and the kernel may report them first; failures within
 * this window are judged together. */
#define SETTLE_S 0.3

typedef struct {
    pid_t pid;
    int rank;                /* -1: mpirun (its lines carry their rank) */
    int fd[2];               /* stdout, stderr pipes; -1 once closed */
    char *buf[2];            /* partial line per stream */
    size_t len[2];
    int exited, status;
    int order;               /* 1 = exited first */
    char last_err[512];      /* the last line it printed on stderr */
} Child;

static volatile sig_atomic_t got_signal;
static void on_signal(int s) { got_signal = s; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void print_launch_usage(FILE *f) {
    fprintf(f, "usage: zinc launch --nproc-per-node N [--nnodes M --node-rank R] [--master-addr A]\n"
               "                   [--master-port P] -- CMD [ARGS...]\n"
               "  starts N ranks of CMD on this node (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
               "  GROUP_RANK, MASTER_ADDR, MASTER_PORT set as torchrun does); CMD 'zinc' is this binary.\n");
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "zinc: error: %s: expected an integer in %d..%d, got '%s'\n", flag, lo, hi, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* mpirun --tag-output writes "[jobid,rank]<stdout>:text"; the rank, and
 * where the text starts, or -1 for mpirun's own lines. */
static int mpi_tag(const char *line, const char **text) {
    int job, rank, n = 0;
    char stream[8];
    if (sscanf(line, "[%d,%d]<%7[a-z]>:%n", &job, &rank, stream, &n) == 3 && n > 0) {
        *text = line + n;
        return rank;
    }
    *text = line;
    return -1;
}

static void emit(Child *c, int stream, const char *line) {
    const char *text = line;
    int rank = c->rank >= 0 ? c->rank : mpi_tag(line, &text);
    FILE *out = stream ? stderr : stdout;
    if (rank >= 0) fprintf(out, "[rank%d]: %s\n", rank, text);
    else fprintf(out, "[mpirun]: %s\n", text);
    fflush(out);
    if (stream && !strncmp(text, "zinc: error: ", 13)) snprintf(c->last_err, sizeof c->last_err, "%s", text);
}

/* Reads what is there; emits whole lines. Returns 0 at EOF. */
static int pump(Child *c, int stream) {
    char chunk[4096];
    ssize_t n = read(c->fd[stream], chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
    if (n <= 0) {
        if (c->len[stream]) {
            c->buf[stream][c->len[stream]] = 0;
            emit(c, stream, c->buf[stream]);
            c->len[stream] = 0;
        }
        close(c->fd[stream]);
        c->fd[stream] = -1;
        return 0;
    }
    for (ssize_t i = 0; i < n; i++) {
        char ch = chunk[i];
        if (ch == '\n' || c->len[stream] == LINE_MAX_LEN) {
            c->buf[stream][c->len[stream]] = 0;
            emit(c, stream, c->buf[stream]);
            c->len[stream] = 0;
            if (ch == '\n') continue;
        }
        c->buf[stream][c->len[stream]++] = ch;
    }
    return 1;
}

static int spawn(Child *c, char **argv, const char *self, ZnErr *err) {
    int out[2], er[2];
    if (pipe(out) || pipe(er)) return zn_err(err, ZN_E_IO, "zinc launch: pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return zn_err(err, ZN_E_IO, "zinc launch: fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);   /* a terminal's Ctrl-C reaches the launcher, which forwards it once */
        dup2(out[1], 1);
        dup2(er[1], 2);
        close(out[0]); close(out[1]); close(er[0]); close(er[1]);
        if (!strcmp(argv[0], "zinc")) execv(self, argv);
        else execvp(argv[0], argv);
        fprintf(stderr, "zinc: error: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);   /* also here, so the group exists before the first signal_all (the
                            child's own call may not have run yet; EACCES after its exec is fine) */
    close(out[1]);
    close(er[1]);
    c->pid = pid;
    c->fd[0] = out[0];
    c->fd[1] = er[0];
    c->buf[0] = zn_malloc(ZN_HOST_APP, LINE_MAX_LEN + 1);
    c->buf[1] = zn_malloc(ZN_HOST_APP, LINE_MAX_LEN + 1);
    if (!c->buf[0] || !c->buf[1]) return zn_err(err, ZN_E_NOMEM, "out of memory");
    return 0;
}

/* Each rank's whole process group, exited leaders' too (Z-LAUNCH-006): a
   rank that is a shell wrapper leaves its children there, and they hold the
   rank's output pipes; an empty group answers ESRCH, which is fine. */
static void signal_all(Child *k, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (k[i].pid > 0) kill(-k[i].pid, sig);
}

static void describe(const Child *c, char *s, size_t cap) {
    if (WIFSIGNALED(c->status)) snprintf(s, cap, "killed by signal %d (%s)", WTERMSIG(c->status), strsignal(WTERMSIG(c->status)));
    else snprintf(s, cap, "exit code %d", WEXITSTATUS(c->status));
}

/* Which failed child caused the failure: one killed by a signal (zinc's
 * ranks never die of one on their own errors), else one whose error is not a
 * broken connection to a peer, else the first to exit. */
static int the_cause(const Child *k, int n) {
    int best = -1, best_score = -1;
    for (int i = 0; i < n; i++) {
        const Child *c = &k[i];
        if (!c->exited || (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)) continue;
        int score = WIFSIGNALED(c->status) ? 2 : !strstr(c->last_err, "failed or exited") ? 1 : 0;
        if (score > best_score || (score == best_score && c->order < k[best].order)) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

/* Runs until every child has exited and its pipes are drained. */
static int supervise(Child *k, int n) {
    int failed = -1, nexits = 0;
    double stop_at = 0;          /* when SIGKILL follows SIGTERM */
    double decide_at = 0;        /* when the failures seen so far are judged */
    int live = n, open_fds = 2 * n;
    struct pollfd *pf = zn_calloc(ZN_HOST_APP, (size_t)open_fds + 1, sizeof *pf);
    int *who = zn_calloc(ZN_HOST_APP, (size_t)open_fds + 1, sizeof *who);
    if (!pf || !who) { free(pf); free(who); signal_all(k, n, SIGKILL); return 1; }
    while (live > 0 || open_fds > 0) {
        if (got_signal) {   /* forward, then give them the grace period */
            signal_all(k, n, got_signal == SIGHUP ? SIGHUP : SIGTERM);
            if (!stop_at) stop_at = now_s() + GRACE_S;
            got_signal = 0;
        }
        int m = 0;
        for (int i = 0; i < n; i++)
            for (int s = 0; s < 2; s++)
                if (k[i].fd[s] >= 0) { pf[m] = (struct pollfd){k[i].fd[s], POLLIN, 0}; who[m++] = 2 * i + s; }
        open_fds = m;
        if (m && poll(pf, (nfds_t)m, 100) > 0)
            for (int j = 0; j < m; j++)
                if (pf[j].revents) pump(&k[who[j] / 2], who[j] % 2);
        if (!m) { struct timespec ts = {0, 20000000}; nanosleep(&ts, NULL); }
        int st;
        pid_t pid;
        while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
            for (int i = 0; i < n; i++) {
                if (k[i].pid != pid) continue;
                k[i].exited = 1;
                k[i].status = st;
                k[i].order = ++nexits;
                live--;
                if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !decide_at && failed < 0)
                    decide_at = now_s() + SETTLE_S;
            }
        }
        if (decide_at && (now_s() >= decide_at || live == 0) && failed < 0) {
            failed = the_cause(k, n);   /* then the first failure stops the rest */
            signal_all(k, n, SIGTERM);
            stop_at = now_s() + GRACE_S;
        }
        if (stop_at && now_s() > stop_at) {
            signal_all(k, n, SIGKILL);
            stop_at = now_s() + 3600;
        }
    }
    free(pf);
    free(who);
    if (failed < 0) {
        for (int i = 0; i < n; i++) free(k[i].buf[0]), free(k[i].buf[1]);
        return 0;
    }
    Child *c = &k[failed];
    char how[96];
    describe(c, how, sizeof how);
    if (c->rank >= 0)
        fprintf(stderr, "zinc launch: rank %d failed (%s)%s%s\n", c->rank, how, c->last_err[0] ? ": " : "",
                c->last_err);
    else
        fprintf(stderr, "zinc launch: mpirun failed (%s)%s%s\n", how, c->last_err[0] ? "; first error: " : "",
                c->last_err);
    for (int i = 0; i < n; i++) free(k[i].buf[0]), free(k[i].buf[1]);
    return 1;
}

static int wants_mpi(int argc, char **argv) {
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--backend") && !strcmp(argv[i + 1], "mpi")) return 1;
    return 0;
}

int zn_cmd_launch(int argc, char **argv) {
    int nproc = 1, nnodes = 1, node_rank = 0, port = ZN_DEFAULT_MASTER_PORT, i;
    const char *addr = "127.0.0.1";
    for (i = 0; i < argc && strcmp(argv[i], "--"); i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { print_launch_usage(stdout); return 0; }
        if (!v || !strcmp(v, "--")) { fprintf(stderr, "zinc: error: zinc launch: %s needs a value\n", a); return 2; }
        int rc = 0;
        if (!strcmp(a, "--nproc-per-node")) rc = parse_int(a, v, 1, MAX_PROCS, &nproc);
        else if (!strcmp(a, "--nnodes")) rc = parse_int(a, v, 1, 65536, &nnodes);
        else if (!strcmp(a, "--node-rank")) rc = parse_int(a, v, 0, 65535, &node_rank);
        else if (!strcmp(a, "--master-port")) rc = parse_int(a, v, 1, 65535, &port);
        else if (!strcmp(a, "--master-addr")) {
            /* every rank would refuse an empty MASTER_ADDR: say so once, naming the flag */
            if (!*v) { fprintf(stderr, "zinc: error: zinc launch: --master-addr: expected a host name or address, got ''\n"); return 2; }
            addr = v;
        }
        else {
            fprintf(stderr, "zinc: error: zinc launch: unknown flag '%s'\n", a);
            print_launch_usage(stderr);
            return 2;
        }
        if (rc) return 2;
        i++;
    }
    if (i >= argc - 1) {
        fprintf(stderr, "zinc: error: zinc launch: give the command after '--'\n");
        print_launch_usage(stderr);
        return 2;
    }
    if (node_rank >= nnodes) {
        fprintf(stderr, "zinc: error: zinc launch: --node-rank %d outside 0..%d (--nnodes %d)\n", node_rank,
                nnodes - 1, nnodes);
        return 2;
    }
    char **cmd = argv + i + 1;
    int ncmd = argc - i - 1;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) snprintf(self, sizeof self, "zinc");
    else self[sl] = 0;

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    ZnErr err = {0};
    Child *k = zn_calloc(ZN_HOST_APP, (size_t)nproc, sizeof *k);
    if (!k) { fprintf(stderr, "zinc: error: out of memory\n"); return 1; }
    int n = 0, rc = 0;
    if (wants_mpi(ncmd, cmd)) {
        if (nnodes > 1) {
            fprintf(stderr, "zinc: error: zinc launch: --backend mpi across nodes: start it with mpirun or srun "
                            "(MPI's runtime places the ranks)\n");
            free(k);
            return 2;
        }
        /* mpirun -np N [--allow-run-as-root] --oversubscribe --bind-to none --tag-output CMD... */
        char np[16];
        snprintf(np, sizeof np, "%d", nproc);
        char **mv = zn_calloc(ZN_HOST_APP, (size_t)ncmd + 12, sizeof *mv);
        if (!mv) { free(k); return 1; }
        int j = 0;
        mv[j++] = "mpirun";
        mv[j++] = "-np";
        mv[j++] = np;
        if (geteuid() == 0) mv[j++] = "--allow-run-as-root";
        mv[j++] = "--oversubscribe";
        mv[j++] = "--bind-to";
        mv[j++] = "none";
        mv[j++] = "--tag-output";
        for (int q = 0; q < ncmd; q++) mv[j++] = !strcmp(cmd[q], "zinc") && q == 0 ? self : cmd[q];
        fprintf(stderr, "zinc launch: --backend mpi: starting %d ranks through mpirun (MPI processes find each "
                        "other only through MPI's runtime)\n", nproc);
        k[0].rank = -1;
        rc = spawn(&k[0], mv, self, &err);
        free(mv);
        n = rc ? 0 : 1;
    } else {
        char v[64];
        snprintf(v, sizeof v, "%d", nproc * nnodes);
        setenv("WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", nproc);
        setenv("LOCAL_WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", node_rank);
        setenv("GROUP_RANK", v, 1);
        setenv("MASTER_ADDR", addr, 1);
        snprintf(v, sizeof v, "%d", port);
        setenv("MASTER_PORT", v, 1);
        for (int r = 0; r < nproc && !rc; r++) {
            snprintf(v, sizeof v, "%d", node_rank * nproc + r);
            setenv("RANK", v, 1);
            snprintf(v, sizeof v, "%d", r);
            setenv("LOCAL_RANK", v, 1);
            k[r].rank = node_rank * nproc + r;
            rc = spawn(&k[r], cmd, self, &err);
            if (!rc) n++;
        }
    }
    if (rc) {
        zn_err_print(stderr, "", &err);
        signal_all(k, n, SIGKILL);
        while (wait(NULL) > 0) {}
        free(k);
        return 1;
    }
    rc = supervise(k, n);
    free(k);
    return rc;
}

const ZnCommand zn_launch_command = {"launch", zn_cmd_launch, print_launch_usage};
