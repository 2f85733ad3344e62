/* test_topo.c: the one world (spec Z-WORLD-001): ZnWorld, the simulator's
 * communicators, the engine and the launcher's ranks per node. */
#include "testutil.h"
#include "core/topo.h"
#include "app/proc.h"

/* spec: Z-WORLD-001 nodes hold consecutive ranks; a bad world is refused by name */
static void test_world_shape(void **st) {
    (void)st;
    ZnWorld w = zn_world(8, 5, 4);
    assert_int_equal(zn_world_nodes(&w), 2);
    assert_int_equal(zn_world_node(&w), 1);
    assert_int_equal(zn_world_local_rank(&w), 1);
    ZnErr err = {0};
    assert_int_equal(zn_world_check(&w, &err), 0);
    ZnWorld one = zn_world(6, 2, 0);   /* per_node <= 0: one node */
    assert_int_equal(one.per_node, 6);
    assert_int_equal(zn_world_nodes(&one), 1);
    assert_int_equal(zn_world_local_rank(&one), 2);
    const struct { ZnWorld w; const char *msg; } bad[] = {
        {{0, 0, 1}, "world size 0: a world has at least one rank"},
        {{4, 4, 4}, "rank 4 is not a rank of a world of 4"},
        {{4, -1, 4}, "rank -1 is not a rank of a world of 4"},
        {{6, 0, 4}, "4 ranks per node do not divide a world of 6 ranks into whole nodes"},
        {{6, 0, 0}, "0 ranks per node do not divide a world of 6 ranks into whole nodes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(zn_world_check(&bad[i].w, &err), ZN_E_USAGE);
        assert_string_equal(err.msg, bad[i].msg);
    }
}

/* spec: Z-WORLD-001 the launcher's local world size becomes ranks per node
   only where it agrees with consecutive placement */
static void test_per_node_from_launcher(void **st) {
    (void)st;
    ZnProcEnv pe = {0};
    pe.local_world = 4;
    pe.local_rank = 1;
    assert_int_equal(zn_proc_per_node(&pe, 8, 5), 4);   /* rank 5 is local 1 of node 1 */
    assert_int_equal(zn_proc_per_node(&pe, 8, 6), 0);   /* local 1 but 6 % 4 = 2: not consecutive */
    assert_int_equal(zn_proc_per_node(&pe, 6, 5), 0);   /* 4 does not divide 6 */
    pe.local_world = 0;                                  /* not given (Slurm) */
    assert_int_equal(zn_proc_per_node(&pe, 8, 5), 0);
}

typedef struct {
    ZnWorld seen[8];
} Seen;

static int record_world(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    (void)err;
    Seen *s = arg;
    s->seen[rank] = comm->world;
    return 0;
}

/* spec: Z-WORLD-001 every simulated rank's communicator carries its world:
   the size, its rank, one node */
static void test_sim_world(void **st) {
    (void)st;
    ZnErr err = {0};
    for (int W = 1; W <= 8; W++) {
        Seen s;
        memset(&s, 0xff, sizeof s);
        assert_int_equal(zt_sim_run(W, record_world, &s, 30, &err), 0);
        for (int r = 0; r < W; r++) {
            assert_int_equal(s.seen[r].size, W);
            assert_int_equal(s.seen[r].rank, r);
            assert_int_equal(s.seen[r].per_node, W);
        }
    }
}

typedef struct {
    ZnConfig cfg;
    ZnModel model;
    ZnData data;
    ZnWorld engine[4];
} EngineCtx;

static int engine_world(int rank, ZnComm *comm, void *arg, ZnErr *err) {
    EngineCtx *c = arg;
    ZnEngine E;
    ZnDevice dev;
    ZnEngineHooks hooks = {0};
    hooks.quiet = 1;
    int rc = zt_host_engine(&E, &dev, &c->cfg, &c->model, &c->data, comm, &hooks, err);
    if (rc) return rc;
    c->engine[rank] = E.world;
    zn_engine_free(&E);
    return 0;
}

/* spec: Z-WORLD-001 the engine reads its world from its communicator */
static void test_engine_world(void **st) {
    (void)st;
    ZnErr err = {0};
    EngineCtx c;
    memset(&c, 0, sizeof c);
    assert_int_equal(zn_model_parse("mlp:6,8,4", &c.model, &err), 0);
    assert_int_equal(zn_data_init(&c.data, 6, 4, 1234), 0);
    ZnConfigArgs args = zt_args(4, 3, 2, 1, -1);
    zt_config(&c.cfg, "{}", &args);
    assert_int_equal(zt_sim_run(4, engine_world, &c, 30, &err), 0);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(c.engine[r].size, 4);
        assert_int_equal(c.engine[r].rank, r);
        assert_int_equal(c.engine[r].per_node, 4);
    }
    zn_data_free(&c.data);
}

ZT_MAIN(
    cmocka_unit_test(test_world_shape),
    cmocka_unit_test(test_per_node_from_launcher),
    cmocka_unit_test(test_sim_world),
    cmocka_unit_test(test_engine_world))
