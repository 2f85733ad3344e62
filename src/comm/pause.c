/* pause.c: ZINC_COMM_PAUSE (pause.h). */
#include "comm/pause.h"
#include "comm/comm_seq.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int zn_pause_from_env(ZnPause *p, ZnErr *err) {
    memset(p, 0, sizeof *p);
    p->rank = -1;
    const char *s = getenv("ZINC_COMM_PAUSE");
    if (!s || !*s) return 0;
    const char *a = strchr(s, ':'), *b = a ? strrchr(s, ':') : NULL;
    char *end;
    long r = a ? strtol(s, &end, 10) : -1, n = b ? strtol(b + 1, &end, 10) : 0;
    int ok = a && b > a + 1 && (size_t)(b - a - 1) < sizeof p->tag && r >= 0 && r <= 1 << 20 && *(b + 1) &&
             !*end && n >= 1;
    if (ok) {   /* the rank's digits run up to the first colon */
        for (const char *c = s; c < a; c++) ok = ok && *c >= '0' && *c <= '9';
        ok = ok && a > s;
    }
    if (!ok) return zn_err(err, ZN_E_USAGE, "ZINC_COMM_PAUSE='%s' is not RANK:TAG:N (N counting from 1)", s);
    p->rank = (int)r;
    memcpy(p->tag, a + 1, (size_t)(b - a - 1));
    p->call = n;
    return 0;
}

void zn_pause_check(const ZnPause *p, const ZnComm *c, ZnCollOp op, const char *tag, long done) {
    if (p->rank != c->world.rank || done + 1 != p->call || strcmp(tag ? tag : "", p->tag)) return;
    fprintf(stderr, "rank %d: stopping before %s '%s' (call %ld), pid %ld (ZINC_COMM_PAUSE)\n", c->world.rank,
            zn_coll_op_name(op), p->tag, p->call, (long)getpid());
    fflush(stderr);
    raise(SIGSTOP);
}
