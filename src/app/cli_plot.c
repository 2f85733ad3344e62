/* cli_plot.c: `zinc plot A.csv [B.csv ...] -o OUT.svg` (spec Z-PLOT-*): its
 * flags and the files it reads and writes; the CSV reader and the SVG
 * writer are src/io/plot.c. */
#include "app/cli.h"
#include "io/plot.h"
#include "core/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void print_plot_usage(FILE *f) {
    fprintf(f, "usage: zinc plot A.csv [B.csv ...] -o OUT.svg [--metric loss|grad_norm|lr|scale]\n"
               "                 [--title T] [--names a,b,...] [--logy]\n"
               "Draws the per-step logs of `zinc train --log FILE.csv` as curves on one SVG chart.\n");
}

/* Splits "a,b,c" into exactly want names (each malloc'd into names[]). */
static int split_names(const char *s, char **names, int want, ZnErr *err) {
    int k = 1;
    for (const char *c = s; *c; c++) k += *c == ',';
    if (k != want)
        return zn_err(err, ZN_E_USAGE, "--names: %d name%s for %d file%s", k, k == 1 ? "" : "s", want,
                      want == 1 ? "" : "s");
    const char *p = s;
    for (int i = 0; i < k; i++) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == 0) return zn_err(err, ZN_E_USAGE, "--names: name %d is empty", i + 1);
        if (!(names[i] = zn_malloc(ZN_HOST_APP, n + 1))) return zn_nomem(err);
        memcpy(names[i], p, n);
        names[i][n] = 0;
        p += n + 1;
    }
    return 0;
}

int zn_cmd_plot(int argc, char **argv) {
    ZnErr err = {0};
    ZnPlotOpts o = {ZN_PLOT_LOSS, NULL, 0};
    const char *out = NULL, *names = NULL;
    const char **files = zn_calloc(ZN_HOST_APP, (size_t)argc + 1, sizeof *files);
    ZnPlotRun *runs = zn_calloc(ZN_HOST_APP, (size_t)argc + 1, sizeof *runs);
    char **nm = zn_calloc(ZN_HOST_APP, (size_t)argc + 1, sizeof *nm);
    int nfiles = 0, rc = 0;
    if (!files || !runs || !nm) { rc = zn_nomem(&err); goto done; }
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        int valued = !strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--metric") ||
                     !strcmp(a, "--title") || !strcmp(a, "--names");
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_plot_usage(stdout);
            goto done;
        } else if (!strcmp(a, "--logy")) {
            o.logy = 1;
        } else if (valued) {
            if (i + 1 >= argc) { rc = zn_err(&err, ZN_E_USAGE, "%s needs a value", a); break; }
            const char *v = argv[++i];
            if (a[1] == 'o' || !strcmp(a, "--output")) out = v;
            else if (!strcmp(a, "--metric")) rc = zn_plot_metric_parse(v, &o.metric, &err);
            else if (!strcmp(a, "--title")) o.title = v;
            else names = v;
        } else if (a[0] == '-' && a[1]) {
            rc = zn_err(&err, ZN_E_USAGE, "unknown flag '%s' for 'zinc plot'", a);
        } else {
            files[nfiles++] = a;
        }
    }
    if (rc) goto done;
    if (!nfiles) { rc = zn_err(&err, ZN_E_USAGE, "no CSV files given (usage: zinc plot A.csv ... -o OUT.svg)"); goto done; }
    if (!out) { rc = zn_err(&err, ZN_E_USAGE, "no output file: give -o OUT.svg"); goto done; }
    if (names && (rc = split_names(names, nm, nfiles, &err))) goto done;
    /* refuse to overwrite an input: `-o run.csv` by slip of the hand would
       replace a training log with a picture of it */
    struct stat so, si;
    int have_out = stat(out, &so) == 0;
    for (int k = 0; k < nfiles; k++)
        if (!strcmp(files[k], out) || (have_out && stat(files[k], &si) == 0 && si.st_dev == so.st_dev &&
                                       si.st_ino == so.st_ino)) {
            rc = zn_err(&err, ZN_E_USAGE, "output '%s' is also an input file", out);
            goto done;
        }
    for (int k = 0; k < nfiles; k++) {
        if ((rc = zn_plot_read_csv(files[k], o.metric, &runs[k], &err))) goto done;
        if (nm[k]) {   /* --names overrides the file's base name */
            free(runs[k].name);
            runs[k].name = nm[k];
            nm[k] = NULL;
        }
    }
    if ((rc = zn_plot_write(out, runs, nfiles, &o, &err))) goto done;
    for (int k = 0; k < nfiles; k++) {
        if (!zn_plot_drawn_points(&runs[k], o.logy))
            fprintf(stderr, "zinc: warning: %s: no %s '%s' value, its curve is empty\n", files[k],
                    o.logy ? "positive" : "finite", zn_plot_metric_column(o.metric));
    }
    printf("zinc plot: wrote %s (%d run%s, %s)\n", out, nfiles, nfiles == 1 ? "" : "s",
           zn_plot_metric_column(o.metric));
done:
    if (rc) zn_err_print(stderr, "", &err);
    for (int k = 0; k < nfiles; k++) zn_plot_run_free(&runs[k]);
    for (int k = 0; nm && k < argc + 1; k++) free(nm[k]);
    free(files);
    free(runs);
    free(nm);
    return rc ? 2 : 0;
}

const ZnCommand zn_plot_command = {"plot", zn_cmd_plot, print_plot_usage};
