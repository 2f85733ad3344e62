/* replay_main.c: a main() for a fuzz harness without libFuzzer (spec
 * Z-FUZZ-008). `replay_TARGET PATH...` feeds every regular file of the
 * given directories (and every file given by name) to the harness's
 * LLVMFuzzerTestOneInput, each in a child process of its own, so a crash, a
 * sanitizer report, a leak (LeakSanitizer checks at the child's exit) or a
 * hang (FUZZ_TIMEOUT seconds, default 10) fails that file alone and the
 * rest still run. Prints a line for each file that fails, then
 *   fuzz TARGET: N passed, N failed
 * and exits 1 if any failed. Built with gcc by `make tests` (BUILD/fuzz/)
 * and, with -fsanitize=address,undefined, by `make sanitize` and `make
 * fuzz-replay` (build-asan/fuzz/). */
#include "fuzz.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the child: one input, then exit (LeakSanitizer runs at exit) */
static void run_one(const char *path, unsigned timeout) {
    alarm(timeout);   /* SIGALRM kills the child: a hang fails the file */
    FILE *f = fopen(path, "rb");
    if (!f) { dprintf(2, "fuzz: cannot open %s: %s\n", path, strerror(errno)); exit(3); }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);   /* NULL ends the loop; exit(3) below */
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) { dprintf(2, "fuzz: cannot read %s\n", path); exit(3); }
    /* a copy of exactly n bytes, so ASan sees a read past the input */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) exit(3);
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    exit(0);
}

/* 1 if the file passed */
static int replay(const char *path, unsigned timeout) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { dprintf(2, "fuzz: fork: %s\n", strerror(errno)); return 0; }
    if (pid == 0) run_one(path, timeout);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 1;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
        printf("FAIL %s: hang (more than %u s)\n", path, timeout);
    else if (WIFSIGNALED(st))
        printf("FAIL %s: killed by signal %d\n", path, WTERMSIG(st));
    else
        printf("FAIL %s: exit status %d\n", path, WEXITSTATUS(st));
    return 0;
}

int main(int argc, char **argv) {
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!strncmp(name, "replay_", 7)) name += 7;
    const char *t = getenv("FUZZ_TIMEOUT");
    unsigned timeout = t && atoi(t) > 0 ? (unsigned)atoi(t) : 10;
    LLVMFuzzerInitialize(&argc, &argv);
    int pass = 0, fail = 0;
    for (int a = 1; a < argc; a++) {
        struct stat sb;
        if (stat(argv[a], &sb)) { printf("FAIL %s: %s\n", argv[a], strerror(errno)); fail++; continue; }
        if (!S_ISDIR(sb.st_mode)) { replay(argv[a], timeout) ? pass++ : fail++; continue; }
        DIR *d = opendir(argv[a]);
        if (!d) { printf("FAIL %s: %s\n", argv[a], strerror(errno)); fail++; continue; }
        char **files = NULL;   /* sorted, so the order is the same everywhere */
        size_t nf = 0;
        for (struct dirent *e; (e = readdir(d));) {
            char p[4096];
            snprintf(p, sizeof p, "%s/%s", argv[a], e->d_name);
            if (e->d_name[0] == '.' || stat(p, &sb) || !S_ISREG(sb.st_mode)) continue;
            char **more = realloc(files, (nf + 1) * sizeof *files);
            if (!more || !(more[nf] = strdup(p))) { dprintf(2, "fuzz: out of memory\n"); exit(3); }
            files = more;
            nf++;
        }
        closedir(d);
        if (nf) qsort(files, nf, sizeof *files, cmp_str);
        for (size_t i = 0; i < nf; i++) {
            replay(files[i], timeout) ? pass++ : fail++;
            free(files[i]);
        }
        free(files);
    }
    printf("fuzz %s: %d passed, %d failed\n", name, pass, fail);
    return fail ? 1 : 0;
}
