/* Tests of the intra-op thread pool (runtime/threadpool.c): tfs__parallel_for covers [0, n)
 * exactly once in ranges of at least `grain`, runs small loops and nested loops inline, survives
 * many concurrent callers and size changes, uses its workers (named tfs-pool-N; also in a child of
 * fork()) in the caller's floating-point mode, and holds OpenBLAS at one thread.
 */
#include <cblas.h>
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/runtime/helpers.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

Suite *suite_runtime_threadpool(void);

typedef struct cover {
    atomic_int *hits;
    int64_t     n, grain;
    atomic_int  calls, short_range, other_thread, running, max_running;
    pthread_t   caller;
    int         sleep_us;   /* per range, to make the loop last */
} cover;

static void cover_fn(void *arg, int64_t b, int64_t e)
{
    cover *c = arg;
    int r = atomic_fetch_add(&c->running, 1) + 1;
    int m = atomic_load(&c->max_running);
    while (r > m && !atomic_compare_exchange_weak(&c->max_running, &m, r))
        ;
    atomic_fetch_add(&c->calls, 1);
    if (b < 0 || e > c->n || b >= e || (e - b < c->grain && e != c->n))
        atomic_store(&c->short_range, 1);
    for (int64_t i = b; i < e && i >= 0 && i < c->n; i++)
        atomic_fetch_add(&c->hits[i], 1);
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_store(&c->other_thread, 1);
    if (c->sleep_us)
        usleep((useconds_t)c->sleep_us);
    atomic_fetch_sub(&c->running, 1);
}

static void cover_init(cover *c, int64_t n, int64_t grain)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->grain = grain;
    c->caller = pthread_self();
    c->hits = calloc((size_t)(n > 0 ? n : 1), sizeof *c->hits);
    ck_assert_ptr_nonnull(c->hits);
}

/* True when every index was hit once and no range was short; frees the hits. */
static bool cover_done(cover *c)
{
    bool ok = !atomic_load(&c->short_range);
    for (int64_t i = 0; i < c->n; i++)
        ok = ok && atomic_load(&c->hits[i]) == 1;
    free(c->hits);
    return ok;
}

START_TEST(test_pool_covers_once)
{
    static const int64_t ns[] = {1, 2, 7, 100, 1000, 12345}, grains[] = {1, 3, 64, 5000};
    for (int threads = 1; threads <= 3; threads++) {
        tfs_runtime_set_num_threads(threads);
        ck_assert_int_eq(tfs_runtime_num_threads(), threads);
        for (int i = 0; i < 6; i++)
            for (int g = 0; g < 4; g++) {
                cover c;
                cover_init(&c, ns[i], grains[g]);
                tfs__parallel_for(c.n, c.grain, cover_fn, &c);
                ck_assert_msg(cover_done(&c), "%d threads, n=%lld grain=%lld", threads,
                              (long long)ns[i], (long long)grains[g]);
            }
    }
    tfs__parallel_for(0, 1, cover_fn, NULL);   /* n = 0: fn is not called */
    tfs__parallel_for(-5, 1, cover_fn, NULL);
    tfs_runtime_set_num_threads(0);
}
END_TEST

START_TEST(test_pool_small_inline)
{
    /* n <= grain: one call (0, n) on the calling thread. */
    tfs_runtime_set_num_threads(2);
    cover c;
    cover_init(&c, 100, 100);
    tfs__parallel_for(100, 100, cover_fn, &c);
    ck_assert_int_eq(atomic_load(&c.calls), 1);
    ck_assert_int_eq(atomic_load(&c.other_thread), 0);
    ck_assert(cover_done(&c));
    cover_init(&c, 5, 1000);
    tfs__parallel_for(5, 1000, cover_fn, &c);
    ck_assert_int_eq(atomic_load(&c.calls), 1);
    ck_assert(cover_done(&c));
    tfs_runtime_set_num_threads(0);
}
END_TEST

START_TEST(test_pool_one_thread)
{
    /* A pool of one: every range on the caller. The default is the online CPUs. */
    tfs_runtime_set_num_threads(1);
    ck_assert_int_eq(tfs__parallel_threads(), 1);
    cover c;
    cover_init(&c, 5000, 1);
    c.sleep_us = 0;
    tfs__parallel_for(5000, 1, cover_fn, &c);
    ck_assert_int_eq(atomic_load(&c.other_thread), 0);
    ck_assert(cover_done(&c));
    tfs_runtime_set_num_threads(0);
    cpu_set_t mask;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    long cpus = CPU_COUNT(&mask);
    ck_assert_int_eq(tfs_runtime_num_threads(), cpus < 1 ? 1 : cpus > 256 ? 256 : cpus);
    tfs_runtime_set_num_threads(100000);
    ck_assert_int_eq(tfs_runtime_num_threads(), 256);
    tfs_runtime_set_num_threads(-3);
    ck_assert_int_eq(tfs_runtime_num_threads(), cpus < 1 ? 1 : cpus > 256 ? 256 : cpus);
    /* OpenBLAS (float64 products) never gets threads of its own. */
    ck_assert_int_eq(openblas_get_num_threads(), 1);
}
END_TEST

/* The default size counts the CPUs the thread may run on, as TensorFlow does: narrowed to one
 * (taskset, a cpuset, mpirun's binding), it is one, whatever the machine has. */
START_TEST(test_cpu_count_follows_affinity)
{
    cpu_set_t all, one;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    ck_assert_int_eq(tfs_runtime_cpu_count(), CPU_COUNT(&all));
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    int narrowed = tfs_runtime_cpu_count();
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
    ck_assert_int_eq(narrowed, 1);
}
END_TEST

/* True when a thread of this process has that name (/proc/self/task/TID/comm), as top and perf
 * show it. */
static bool has_thread_named(const char *want)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        char path[300], name[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof name, f))
            found = strncmp(name, want, strlen(want)) == 0 && name[strlen(want)] == '\n';
        fclose(f);
    }
    closedir(d);
    return found;
}

START_TEST(test_pool_uses_workers)
{
    /* 2 threads and 100 ranges of 1 ms (sleeping, so a loaded machine still runs the worker):
     * some run on the worker, never more than 2 at once. */
    tfs_runtime_set_num_threads(2);
    cover c;
    cover_init(&c, 100, 1);
    c.sleep_us = 1000;
    tfs__parallel_for(100, 1, cover_fn, &c);
    ck_assert_int_eq(atomic_load(&c.other_thread), 1);
    ck_assert_int_le(atomic_load(&c.max_running), 2);
    ck_assert(cover_done(&c));
    ck_assert_msg(has_thread_named("tfs-pool-1"), "no thread of this process is named tfs-pool-1");
    tfs_runtime_set_num_threads(0);
}
END_TEST

typedef struct nest {
    int64_t    n;
    atomic_int bad, inner_total;
} nest;

typedef struct inner {
    nest     *outer;
    pthread_t thread;
    atomic_int *hits;
} inner;

static void inner_fn(void *arg, int64_t b, int64_t e)
{
    inner *in = arg;
    if (!pthread_equal(pthread_self(), in->thread))
        atomic_store(&in->outer->bad, 1);
    for (int64_t i = b; i < e; i++)
        atomic_fetch_add(&in->hits[i], 1);
}

static void outer_fn(void *arg, int64_t b, int64_t e)
{
    nest *o = arg;
    for (int64_t r = b; r < e; r++) {
        if (tfs__parallel_threads() != 1)
            atomic_store(&o->bad, 1);
        atomic_int hits[1000];
        for (int i = 0; i < 1000; i++)
            atomic_init(&hits[i], 0);
        inner in = {o, pthread_self(), hits};
        tfs__parallel_for(1000, 1, inner_fn, &in);   /* inline: same thread, all of it */
        for (int i = 0; i < 1000; i++)
            if (atomic_load(&hits[i]) != 1)
                atomic_store(&o->bad, 1);
        atomic_fetch_add(&o->inner_total, 1);
    }
}

START_TEST(test_pool_nested)
{
    tfs_runtime_set_num_threads(2);
    nest o = {.n = 16};
    tfs__parallel_for(o.n, 1, outer_fn, &o);
    ck_assert_int_eq(atomic_load(&o.bad), 0);
    ck_assert_int_eq(atomic_load(&o.inner_total), 16);
    ck_assert_int_eq(tfs__parallel_threads(), 2);   /* outside any loop again */
    tfs_runtime_set_num_threads(0);
}
END_TEST

typedef struct caller_arg {
    int        id;
    atomic_int failures;
} caller_arg;

static void *caller_main(void *p)
{
    caller_arg *a = p;
    for (int it = 0; it < 200; it++) {
        int64_t n = 64 + (a->id * 977 + it * 131) % 4000, grain = 1 + (it % 5) * 16;
        cover c;
        memset(&c, 0, sizeof c);
        c.n = n;
        c.grain = grain;
        c.caller = pthread_self();
        c.hits = calloc((size_t)n, sizeof *c.hits);
        if (!c.hits)
            return NULL;
        tfs__parallel_for(n, grain, cover_fn, &c);
        bool ok = !atomic_load(&c.short_range);
        for (int64_t i = 0; i < n; i++)
            ok = ok && atomic_load(&c.hits[i]) == 1;
        free(c.hits);
        if (!ok)
            atomic_fetch_add(&a->failures, 1);
    }
    return NULL;
}

typedef struct resizer {
    atomic_int stop;
} resizer;

static void *resizer_main(void *p)
{
    resizer *r = p;
    for (int i = 0; !atomic_load(&r->stop); i++) {
        tfs_runtime_set_num_threads(1 + i % 4);
        usleep(500);
    }
    return NULL;
}

START_TEST(test_pool_concurrent_callers)
{
    /* 8 threads run loops at once (as the server's batch threads do), while another changes the
     * pool's size: every loop still covers its range exactly once, and all of them end. */
    tfs_runtime_set_num_threads(2);
    pthread_t th[8], rz;
    caller_arg args[8];
    resizer r = {0};
    ck_assert_int_eq(pthread_create(&rz, NULL, resizer_main, &r), 0);
    for (int i = 0; i < 8; i++) {
        args[i].id = i;
        atomic_init(&args[i].failures, 0);
        ck_assert_int_eq(pthread_create(&th[i], NULL, caller_main, &args[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    atomic_store(&r.stop, 1);
    pthread_join(rz, NULL);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(atomic_load(&args[i].failures), 0);
    tfs_runtime_set_num_threads(0);
}
END_TEST

START_TEST(test_pool_fork)
{
    /* A child of fork() (whose parent's workers do not exist there) starts its own workers. */
    tfs_runtime_set_num_threads(2);
    cover c;
    cover_init(&c, 50, 1);
    c.sleep_us = 1000;
    tfs__parallel_for(50, 1, cover_fn, &c);   /* the parent's worker is started */
    ck_assert(cover_done(&c));
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        cover_init(&c, 50, 1);
        c.sleep_us = 1000;
        tfs__parallel_for(50, 1, cover_fn, &c);
        bool used = atomic_load(&c.other_thread) == 1;
        _exit(cover_done(&c) && used ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tfs_runtime_set_num_threads(0);
}
END_TEST

#if defined(__x86_64__) || defined(__i386__)
typedef struct csr_seen {
    atomic_int ranges, with_flags, other_thread;
    pthread_t  caller;
} csr_seen;

static void csr_fn(void *arg, int64_t b, int64_t e)
{
    csr_seen *c = arg;
    (void)b, (void)e;
    atomic_fetch_add(&c->ranges, 1);
    if ((_mm_getcsr() & 0x8040u) == 0x8040u)
        atomic_fetch_add(&c->with_flags, 1);
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_store(&c->other_thread, 1);
    usleep(1000);
}

START_TEST(test_pool_fp_mode)
{
    /* Ranges run in the caller's MXCSR (sessions set flush-to-zero and denormals-are-zero), on
     * the workers too, and a later caller's mode replaces it there. */
    tfs_runtime_set_num_threads(2);
    unsigned saved = _mm_getcsr();
    for (int flush = 1; flush >= 0; flush--) {
        _mm_setcsr(flush ? saved | 0x8040u : saved & ~0x8040u);
        csr_seen c = {.caller = pthread_self()};
        tfs__parallel_for(60, 1, csr_fn, &c);
        ck_assert_int_eq(atomic_load(&c.other_thread), 1);
        ck_assert_int_eq(atomic_load(&c.with_flags), (flush ? atomic_load(&c.ranges) : 0));
    }
    _mm_setcsr(saved);
    tfs_runtime_set_num_threads(0);
}
END_TEST
#endif

Suite *suite_runtime_threadpool(void)
{
    Suite *s = suite_create("runtime_threadpool");
    TCase *tc = tcase_create("threadpool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_covers_once);
    tcase_add_test(tc, test_pool_small_inline);
    tcase_add_test(tc, test_pool_one_thread);
    tcase_add_test(tc, test_cpu_count_follows_affinity);
    tcase_add_test(tc, test_pool_uses_workers);
    tcase_add_test(tc, test_pool_nested);
    tcase_add_test(tc, test_pool_concurrent_callers);
    tcase_add_test(tc, test_pool_fork);
#if defined(__x86_64__) || defined(__i386__)
    tcase_add_test(tc, test_pool_fp_mode);
#endif
    suite_add_tcase(s, tc);
    return s;
}
