/* test_topo.c: the one world (spec Z-WORLD-001): ZnWorld, the simulator's
 * communicators, the engine and the launcher's ranks per node. */
#include "testutil.h"
#include "core/topo.h"
#include "app/proc.h"
#include "comm/coll.h"

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

/* spec: Z-GRP-001 groups of consecutive and of strided ranks: members,
   index, and the shapes that do not cut the world */
static void test_group_shape(void **st) {
    (void)st;
    ZnWorld w = zn_world(12, 7, 4);   /* node 1, local rank 3 */
    ZnGroup node = zn_group(4, 1), cross = zn_group(3, 4), hp = zn_group(2, 1);
    assert_int_equal(zn_group_index(&w, node), 3);
    assert_int_equal(zn_group_member(&w, node, 0), 4);
    assert_int_equal(zn_group_index(&w, cross), 1);
    int want[3] = {3, 7, 11};
    for (int j = 0; j < 3; j++) assert_int_equal(zn_group_member(&w, cross, j), want[j]);
    assert_int_equal(zn_group_member(&w, hp, 0), 6);
    assert_int_equal(zn_group_index(&w, hp), 1);
    ZnGroup all = zn_group_resolve(&w, zn_group(0, 0));
    assert_int_equal(all.size, 12);
    assert_int_equal(all.stride, 1);
    ZnErr err = {0};
    assert_int_equal(zn_group_check(&w, zn_group(5, 1), &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "groups of 5 ranks with stride 1 do not divide a world of 12 ranks");
    assert_int_equal(zn_group_check(&w, zn_group(2, 0), &err), ZN_E_USAGE);
    assert_string_equal(err.msg, "a group of 2 ranks with stride 0: both must be at least 1");
    assert_int_equal(zn_group_check(&w, cross, &err), 0);
}

/* Each rank's value v(r, i) = 1000 r + i. */
static int group_rank(int rank, ZnComm *c, void *arg, ZnErr *err) {
    (void)arg;
    c->world.per_node = 2;   /* 6 ranks: 3 nodes of 2 */
    ZnGroup cross = zn_group(3, 2);   /* local rank l on each node */
    float send[6], recv[6];
    for (int i = 0; i < 6; i++) send[i] = (float)(1000 * rank + i);
    /* all-to-all: piece j (2 values) to member j */
    int rc = zn_group_all_to_all(c, cross, send, recv, 2, ZN_F32, "a2a", err);
    if (rc) return rc;
    const int me = zn_group_index(&c->world, cross);
    for (int j = 0; j < 3; j++) {
        int q = zn_group_member(&c->world, cross, j);
        for (int i = 0; i < 2; i++)
            if (recv[2 * j + i] != (float)(1000 * q + 2 * me + i))
                return zn_err(err, ZN_E_INTERNAL, "rank %d a2a piece %d[%d] = %g", rank, j, i, recv[2 * j + i]);
    }
    /* all-reduce inside the node: the sum of the two ranks' values */
    float x[3] = {(float)rank, 1.0f, (float)(rank * rank)};
    if ((rc = zn_group_all_reduce(c, zn_group(2, 1), x, 3, ZN_F32, ZN_SUM, "ar", err))) return rc;
    int a = rank - rank % 2;
    if (x[0] != (float)(2 * a + 1) || x[1] != 2.0f || x[2] != (float)(a * a + (a + 1) * (a + 1)))
        return zn_err(err, ZN_E_INTERNAL, "rank %d all_reduce %g %g %g", rank, x[0], x[1], x[2]);
    /* the bytes: the a2a sends 2 pieces of 8 bytes, both to other nodes;
       the node's all-reduce crosses no node */
    long calls, sent, recvd;
    zn_comm_tag_totals(&c->stats, "a2a", &calls, &sent, &recvd);
    if (sent != 16 || zn_comm_tag_inter(&c->stats, "a2a") != 16 || zn_comm_tag_inter(&c->stats, "ar") != 0)
        return zn_err(err, ZN_E_INTERNAL, "rank %d bytes %ld inter %ld", rank, sent, zn_comm_tag_inter(&c->stats, "a2a"));
    /* a group broadcast is refused */
    ZnCollCall k = {.op = ZN_OP_BROADCAST, .dt = ZN_F32, .count = 1, .tag = "b", .send = x, .recv = x,
                    .grp = zn_group(2, 1)};
    ZnErr e2 = {0};
    if (c->group(c, &k, &e2) != ZN_E_USAGE || !strstr(e2.msg, "cannot run in a group"))
        return zn_err(err, ZN_E_INTERNAL, "group broadcast: %s", e2.msg);
    return 0;
}

/* spec: Z-GRP-003 Z-GRP-004 group collectives on the simulator: the
   all-to-all's pieces, a node's all-reduce, their bytes and node
   crossings, a group broadcast refused */
static void test_group_collectives(void **st) {
    (void)st;
    ZnErr err = {0};
    if (zt_sim_run(6, group_rank, NULL, 30, &err)) fail_msg("%s", err.msg);
}

ZT_MAIN(
    cmocka_unit_test(test_world_shape),
    cmocka_unit_test(test_per_node_from_launcher),
    cmocka_unit_test(test_sim_world),
    cmocka_unit_test(test_engine_world),
    cmocka_unit_test(test_group_shape),
    cmocka_unit_test(test_group_collectives))
