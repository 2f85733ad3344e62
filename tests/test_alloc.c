/* test_alloc.c: host allocations by category (spec Z-ERR-002).
 *
 * Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (Makefile), so
 * the test can make the next allocation of core/alloc.c fail on demand,
 * the way a machine out of memory would. */
#include "testutil.h"
#include <pthread.h>
#include "core/alloc.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);

static _Thread_local int fail_next;   /* 1: the next call returns NULL */

static int failing(void) {
    int f = fail_next;
    fail_next = 0;
    return f;
}
void *__wrap_malloc(size_t n) { return failing() ? NULL : __real_malloc(n); }
/* an overflowing product fails here, as glibc's calloc does (ASan's would
   stop the process instead) */
void *__wrap_calloc(size_t k, size_t n) {
    if (failing() || (n && k > SIZE_MAX / n)) return NULL;
    return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) { return failing() ? NULL : __real_realloc(p, n); }

/* spec: Z-ERR-002 every call and byte requested is counted in its category */
static void test_counts_by_category(void **state) {
    (void)state;
    ZnHostAllocStats io0 = zn_host_alloc_stats(ZN_HOST_IO), app0 = zn_host_alloc_stats(ZN_HOST_APP);
    char *p = zn_malloc(ZN_HOST_IO, 100);
    long *q = zn_calloc(ZN_HOST_IO, 3, sizeof *q);
    p = zn_realloc(ZN_HOST_IO, p, 200);
    char *s = zn_strdup(ZN_HOST_IO, "abc");
    char *t = zn_strndup(ZN_HOST_IO, "abcdef", 3);
    char *u = zn_strndup(ZN_HOST_IO, "ab", 9);
    assert_non_null(p);
    assert_non_null(q);
    assert_int_equal(q[0] | q[1] | q[2], 0);
    assert_string_equal(s, "abc");
    assert_string_equal(t, "abc");
    assert_string_equal(u, "ab");
    ZnHostAllocStats io1 = zn_host_alloc_stats(ZN_HOST_IO), app1 = zn_host_alloc_stats(ZN_HOST_APP);
    assert_int_equal(io1.calls - io0.calls, 6);
    assert_int_equal(io1.bytes - io0.bytes, 100 + 3 * sizeof(long) + 200 + 4 + 4 + 3);
    assert_int_equal(io1.failed, io0.failed);
    assert_int_equal(app1.calls, app0.calls);   /* other categories untouched */
    ZN_FREE_ALL(p, q, s, t, u, NULL);
    assert_string_equal(zn_host_cat_name(ZN_HOST_CORE), "core");
    assert_string_equal(zn_host_cat_name(ZN_HOST_ENGINE), "engine");
    assert_string_equal(zn_host_cat_name(ZN_HOST_COMM), "comm");
    assert_string_equal(zn_host_cat_name(ZN_HOST_IO), "io");
    assert_string_equal(zn_host_cat_name(ZN_HOST_APP), "app");
    assert_string_equal(zn_host_cat_name(ZN_HOST_NCAT), "?");
}

/* spec: Z-ERR-002 a failed allocation is counted, and the next
   out-of-memory error names its size and category, once */
static void test_failure_named_once(void **state) {
    (void)state;
    ZnHostAllocStats c0 = zn_host_alloc_stats(ZN_HOST_COMM);
    fail_next = 1;
    assert_null(zn_malloc(ZN_HOST_COMM, 4096));
    assert_int_equal(zn_host_alloc_stats(ZN_HOST_COMM).failed - c0.failed, 1);
    ZnErr e = {0};
    assert_int_equal(zn_nomem(&e), ZN_E_NOMEM);
    assert_string_equal(e.msg, "out of host memory (4096 bytes for comm)");
    assert_non_null(strstr(e.file, "test_alloc.c"));
    assert_int_equal(zn_nomem(&e), ZN_E_NOMEM);
    assert_string_equal(e.msg, "out of host memory");
    /* realloc: a failure keeps the old block, as realloc does */
    char *p = zn_malloc(ZN_HOST_ENGINE, 8);
    assert_non_null(p);
    fail_next = 1;
    assert_null(zn_realloc(ZN_HOST_ENGINE, p, 1 << 20));
    zn_nomem(&e);
    assert_string_equal(e.msg, "out of host memory (1048576 bytes for engine)");
    free(p);
    /* an overflowing calloc is a request of SIZE_MAX bytes */
    assert_null(zn_calloc(ZN_HOST_CORE, SIZE_MAX / 2 + 1, 4));
    zn_nomem(&e);
    char want[96];
    snprintf(want, sizeof want, "out of host memory (%zu bytes for core)", (size_t)SIZE_MAX);
    assert_string_equal(e.msg, want);
    fail_next = 1;
    assert_null(zn_strdup(ZN_HOST_APP, "x"));
    zn_nomem(&e);
    assert_string_equal(e.msg, "out of host memory (2 bytes for app)");
}

static void *fail_in_thread(void *arg) {
    (void)arg;
    fail_next = 1;
    return zn_malloc(ZN_HOST_IO, 77);
}

/* spec: Z-ERR-002 the pending failure is the calling thread's: a rank's
   failure is not reported by another rank */
static void test_failure_is_per_thread(void **state) {
    (void)state;
    pthread_t th;
    void *got = (void *)1;
    assert_int_equal(pthread_create(&th, NULL, fail_in_thread, NULL), 0);
    assert_int_equal(pthread_join(th, &got), 0);
    assert_null(got);
    ZnErr e = {0};
    zn_nomem(&e);
    assert_string_equal(e.msg, "out of host memory");
}

ZT_MAIN(
    cmocka_unit_test(test_counts_by_category),
    cmocka_unit_test(test_failure_named_once),
    cmocka_unit_test(test_failure_is_per_thread))
