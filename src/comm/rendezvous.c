/* rendezvous.c: identity from the launcher's environment (spec Z-RDV-001..003). */
#include "comm/rendezvous.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An optional integer variable: 0 unset, 1 read, -1 malformed (err set). */
static int env_int(const char *name, long lo, long hi, int *out, ZnErr *err) {
    const char *s = getenv(name);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        zn_err(err, ZN_E_USAGE, "environment variable %s='%.40s': expected an integer in %ld..%ld", name, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 1;
}

typedef struct {
    const char *source, *rank, *world, *local_rank, *local_world;
} EnvScheme;

static const EnvScheme schemes[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

int zn_proc_env(ZnProcEnv *pe, ZnErr *err) {
    memset(pe, 0, sizeof *pe);
    pe->source = "none";
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0]; s++) {
        const EnvScheme *sc = &schemes[s];
        int rank = 0, world = 0, local = 0, lworld = 0;
        int hr = env_int(sc->rank, 0, INT_MAX - 1, &rank, err);
        int hw = env_int(sc->world, 1, 1 << 20, &world, err);
        if (hr < 0 || hw < 0) return err->code;
        if (!hr && !hw) continue;
        if (!hr || !hw)
            return zn_err(err, ZN_E_USAGE, "environment: %s is set but %s is not (launcher: %s)",
                          hr ? sc->rank : sc->world, hr ? sc->world : sc->rank, sc->source);
        if (rank >= world)
            return zn_err(err, ZN_E_USAGE, "environment: %s=%d is outside 0..%d (%s=%d)", sc->rank, rank,
                          world - 1, sc->world, world);
        int hl = env_int(sc->local_rank, 0, world - 1, &local, err);
        if (hl < 0) return err->code;
        /* Slurm's SLURM_NTASKS_PER_NODE may read "4(x2)"; it is only a hint */
        int hlw = strcmp(sc->source, "slurm") ? env_int(sc->local_world, 1, world, &lworld, err) : 0;
        if (hlw < 0) return err->code;
        pe->rank = rank;
        pe->world = world;
        pe->local_rank = hl ? local : 0;
        pe->local_world = hlw ? lworld : 0;
        pe->source = sc->source;
        break;
    }
    const char *addr = getenv("MASTER_ADDR");
    if (addr) {
        if (!*addr || strlen(addr) >= sizeof pe->master_addr)
            return zn_err(err, ZN_E_USAGE, "environment variable MASTER_ADDR='%.40s': expected a host name or address",
                          addr);
        snprintf(pe->master_addr, sizeof pe->master_addr, "%s", addr);
    }
    if (env_int("MASTER_PORT", 1, 65535, &pe->master_port, err) < 0) return err->code;
    return 0;
}
