/* The runtime's one intra-op thread pool: tfs__parallel_for (runtime-impl.h) and the public
 * setting of its size (tfs_runtime_set_num_threads, runtime.h). Also where OpenBLAS is told to
 * stay single-threaded, once, so that its threads never compete with ours.
 *
 * DESIGN. A pool of N threads is the calling thread plus up to N-1 workers, started lazily. A
 * parallel_for cuts [0, n) into chunks of at least `grain` (about four per thread, for balance
 * under noise) that the caller and the workers it recruited claim from one atomic counter, so a
 * worker that wakes late costs nothing: the caller has simply taken more chunks. At the end the
 * caller takes back every recruited worker that has not started yet; it only ever waits for
 * workers that are running a chunk.
 *   Oversubscription: `busy` counts the threads running loop work (callers inside an outer loop
 * plus running workers); a caller recruits workers only while busy < N, and a worker leaves a
 * loop, between chunks, when busy has risen above N (another caller came in). So when the server's
 * batch threads run loops at once, each runs its own inline rather than N-1 more threads piling
 * on. A loop started from inside a loop (a worker, or a caller in its chunk) runs inline.
 *   A worker runs a caller's ranges in the caller's floating-point mode (MXCSR: sessions flush
 * denormals), so the thread a range lands on never changes its bits.
 *   Waiting: an idle worker spins on its own state word for SPIN_NS, then sleeps on it (futex);
 * a caller recruiting a sleeping worker wakes it. The caller waiting for running workers spins,
 * then sleeps on the job's count. Workers live in a static array (no heap: the allocator's byte
 * count and failure injection never see the pool) and stay until the size changes; they block
 * every signal. A child of fork() forgets its parent's workers and starts its own.
 *   Changing the size from inside a loop (a range of tfs__parallel_for) would deadlock: don't.
 */
#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "runtime/runtime-impl.h"

#define LOG_MODULE "runtime"

/* Upper bound of the setting (threads, the caller included). */
#define MAX_THREADS 256
/* How long an idle worker, and a caller waiting for workers, spin before sleeping. */
#define SPIN_NS 100000
/* Chunks per thread a loop is cut into when grain allows. */
#define CHUNKS_PER_THREAD 4

/* A worker's state word: a kind in the low 3 bits, and above them a count of the times it was
 * recruited, so that a caller taking back "its" assignment cannot take a later one (ABA). */
enum { W_SPIN, W_SLEEP, W_CLAIMING, W_ASSIGNED, W_RUNNING, W_STOP };
#define KIND(s)     ((s) & 7u)
#define WITH(s, k)  (((s) & ~7u) | (unsigned)(k))

#define REFS_WAITER (1 << 30)   /* in job.refs: the caller sleeps on it */

typedef struct job {
    tfs_range_fn fn;
    void        *arg;
    int64_t      n, chunk, nchunks;
    unsigned     fpmode;   /* the caller's MXCSR (denormal flushing, rounding), for the workers */
    atomic_llong next;   /* next chunk to claim */
    atomic_int   refs;   /* recruited workers not yet done with the job (| REFS_WAITER) */
} job;

typedef struct worker {
    _Alignas(64) atomic_uint state;
    job      *job;       /* set while W_ASSIGNED / W_RUNNING */
    pthread_t thread;
} worker;

static struct {
    pthread_once_t   once;
    pthread_rwlock_t rw;        /* loops hold it shared; a size change holds it exclusive */
    pthread_mutex_t  start_mu;  /* serialises starting workers */
    atomic_int       n;         /* the setting: threads per loop, the caller included */
    atomic_int       nworkers;  /* workers started (<= n - 1) */
    atomic_int       busy;      /* threads running loop work now */
    worker           w[MAX_THREADS - 1];
} pool = {.once = PTHREAD_ONCE_INIT,
          .rw = PTHREAD_RWLOCK_INITIALIZER,
          .start_mu = PTHREAD_MUTEX_INITIALIZER};

/* True on workers, and on a caller while it runs its chunks: loops started there run inline. */
static _Thread_local bool in_loop;

/* Sleeps while the 32-bit word at addr holds val (or until woken). */
static void futex_wait(void *addr, unsigned val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(void *addr, int count)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int tfs_runtime_cpu_count(void)
{
    cpu_set_t set;
    long      c = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        c = CPU_COUNT(&set);
    if (c < 1) /* more CPUs than a cpu_set_t holds, or no mask */
        c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > INT_MAX ? INT_MAX : (int)c;
}

static int online_cpus(void)
{
    int c = tfs_runtime_cpu_count();
    return c > MAX_THREADS ? MAX_THREADS : c;
}

/* Once per process: the default size, and OpenBLAS single-threaded (tfs__dgemm is the only
 * caller left, and our loops own the cores). An explicit OpenBLAS thread setting is overridden,
 * so that is said at info level; otherwise at debug. */
static void init_once(void)
{
    atomic_store(&pool.n, online_cpus());
    const char *vars[] = {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"};
    const char *set = NULL, *val = NULL;
    for (int i = 0; i < 3 && !set; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v && strcmp(v, "1") != 0) {
            set = vars[i];
            val = v;
        }
    }
    int had = openblas_get_num_threads();
    openblas_set_num_threads(1);
    if (set)
        TFS_LOG_INFO(LOG_MODULE, "OpenBLAS threads set to 1 (%s=%s is overridden): tfserve's "
                     "own pool of %d threads runs the parallel work",
                     set, val, atomic_load(&pool.n));
    else
        TFS_LOG_DEBUG(LOG_MODULE, "OpenBLAS threads set to 1 (was %d); intra-op pool: %d threads",
                      had, atomic_load(&pool.n));
}

/* In a child of fork() only the forking thread exists: forget the workers (and locks that a
 * thread which is gone may have held), so that the child starts its own. */
static void after_fork_child(void)
{
    pthread_rwlock_init(&pool.rw, NULL);
    pthread_mutex_init(&pool.start_mu, NULL);
    atomic_store(&pool.nworkers, 0);
    atomic_store(&pool.busy, 0);
    in_loop = false;
}

static void init_all(void)
{
    init_once();
    pthread_atfork(NULL, NULL, after_fork_child);
}

static void ensure_init(void)
{
    pthread_once(&pool.once, init_all);
}

void tfs__cpu_init(void)
{
    ensure_init();
}

/* Claims and runs chunks of j until none is left (or, for a worker, until the pool is
 * oversubscribed). */
static void run_chunks(job *j, bool on_worker)
{
    for (;;) {
        if (on_worker && atomic_load_explicit(&pool.busy, memory_order_relaxed) >
                          atomic_load_explicit(&pool.n, memory_order_relaxed))
            return;
        int64_t c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (c >= j->nchunks)
            return;
        int64_t b = c * j->chunk, e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->arg, b, e);
    }
}

/* The calling thread's floating-point mode, and setting it: a session flushes denormals
 * (session.c) on the thread that runs it, and the workers' ranges must compute the same bits. */
static unsigned fpmode_get(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return _mm_getcsr();
#else
    return 0;
#endif
}

static void fpmode_set(unsigned mode)
{
#if defined(__x86_64__) || defined(__i386__)
    if (_mm_getcsr() != mode)
        _mm_setcsr(mode);
#else
    (void)mode;
#endif
}

/* A worker is done with j (it must not touch j afterwards: the caller may return). */
static void release_job(job *j)
{
    int old = atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel);
    if (old == (1 | REFS_WAITER))
        futex_wake(&j->refs, 1);
}

static void *worker_main(void *p)
{
    worker *w = p;
    in_loop = true;
    int64_t idle_since = now_ns();
    int spins = 0;
    for (;;) {
        unsigned s = atomic_load_explicit(&w->state, memory_order_acquire);
        switch (KIND(s)) {
        case W_ASSIGNED:
            if (!atomic_compare_exchange_strong(&w->state, &s, WITH(s, W_RUNNING)))
                continue;   /* taken back by the caller */
            job *j = w->job;
            fpmode_set(j->fpmode);
            run_chunks(j, true);
            atomic_fetch_sub(&pool.busy, 1);
            atomic_store_explicit(&w->state, WITH(s, W_SPIN), memory_order_release);
            release_job(j);
            idle_since = now_ns();
            spins = 0;
            continue;
        case W_STOP:
            return NULL;
        case W_SPIN:
            cpu_relax();
            if (++spins % 256 != 0)
                continue;
            if (now_ns() - idle_since > SPIN_NS)
                atomic_compare_exchange_strong(&w->state, &s, WITH(s, W_SLEEP));
            else
                sched_yield();   /* a thread with real work (the server answering the request
                                  * this run was for) gets the core at once, not after our spin */
            continue;
        case W_SLEEP:
            futex_wait(&w->state, s);
            idle_since = now_ns();
            continue;
        default:   /* W_CLAIMING: a caller is filling in the job */
            cpu_relax();
            continue;
        }
    }
}

/* Starts workers up to n - 1 (called with the pool lock held shared). */
static void start_workers(int n)
{
    pthread_mutex_lock(&pool.start_mu);
    /* Workers take no asynchronous signals (they inherit the mask set around their creation). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int have = atomic_load(&pool.nworkers);
    for (int i = have; i < n - 1; i++) {
        worker *w = &pool.w[i];
        atomic_store(&w->state, (unsigned)W_SPIN);
        w->job = NULL;
        int rc = pthread_create(&w->thread, NULL, worker_main, w);
        if (rc != 0) {
            TFS_LOG_WARN(LOG_MODULE, "cannot start intra-op worker %d of %d: %s; running with "
                         "%d threads", i + 1, n - 1, strerror(rc), i + 1);
            break;
        }
        /* Named for top and perf: else a worker bears the name of whichever thread happened to
         * start it (a REST or batch thread), and its work reads as that thread's. */
        char name[16];
        snprintf(name, sizeof name, "tfs-pool-%hu", (unsigned short)(i + 1));   /* 15 chars max */
        pthread_setname_np(w->thread, name);
        atomic_store(&pool.nworkers, i + 1);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_unlock(&pool.start_mu);
}

/* A recruited worker: its index, the state word the caller stored, the kind it had before. */
typedef struct recruit_rec {
    int      idx;
    unsigned assigned, prev;
} recruit_rec;

/* Recruits up to `want` idle workers for j while busy < n; returns how many (in got[]). */
static int recruit(job *j, int want, int n, recruit_rec *got)
{
    int k = 0, nw = atomic_load(&pool.nworkers);
    for (int i = 0; i < nw && k < want; i++) {
        worker *w = &pool.w[i];
        unsigned s = atomic_load_explicit(&w->state, memory_order_relaxed);
        if (KIND(s) != W_SPIN && KIND(s) != W_SLEEP)
            continue;
        int b = atomic_load(&pool.busy);
        do {
            if (b >= n)
                return k;
        } while (!atomic_compare_exchange_weak(&pool.busy, &b, b + 1));
        unsigned claimed = WITH(s + 8u, W_CLAIMING);   /* the next recruitment count */
        if (!atomic_compare_exchange_strong(&w->state, &s, claimed)) {
            atomic_fetch_sub(&pool.busy, 1);
            continue;
        }
        w->job = j;
        atomic_fetch_add(&j->refs, 1);
        got[k] = (recruit_rec){i, WITH(claimed, W_ASSIGNED), KIND(s)};
        atomic_store_explicit(&w->state, got[k].assigned, memory_order_release);
        if (KIND(s) == W_SLEEP)
            futex_wake(&w->state, 1);
        k++;
    }
    return k;
}

/* Waits until every recruited worker is done with j, taking back those that have not started. */
static void finish(job *j, const recruit_rec *got, int k)
{
    for (int i = 0; i < k; i++) {
        worker *w = &pool.w[got[i].idx];
        unsigned s = got[i].assigned;
        if (atomic_compare_exchange_strong(&w->state, &s, WITH(s, got[i].prev))) {
            atomic_fetch_sub(&pool.busy, 1);
            atomic_fetch_sub(&j->refs, 1);
        }
    }
    int64_t deadline = 0;
    for (unsigned spins = 1;; spins++) {
        int r = atomic_load_explicit(&j->refs, memory_order_acquire);
        if ((r & ~REFS_WAITER) == 0)
            return;
        if (spins % 256 != 0 ||
            (deadline == 0 ? (deadline = now_ns() + SPIN_NS, true) : now_ns() < deadline)) {
            cpu_relax();
            continue;
        }
        if (!(r & REFS_WAITER) && !atomic_compare_exchange_strong(&j->refs, &r, r | REFS_WAITER))
            continue;
        futex_wait(&j->refs, (unsigned)(r | REFS_WAITER));
    }
}

int tfs__parallel_threads(void)
{
    if (in_loop)
        return 1;
    ensure_init();
    return atomic_load_explicit(&pool.n, memory_order_relaxed);
}

void tfs__parallel_for(int64_t n, int64_t grain, tfs_range_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    if (n <= grain || in_loop) {
        fn(arg, 0, n);
        return;
    }
    ensure_init();
    pthread_rwlock_rdlock(&pool.rw);
    int threads = atomic_load_explicit(&pool.n, memory_order_relaxed);
    int64_t max_chunks = (n + grain - 1) / grain;
    if (threads > max_chunks)
        threads = (int)max_chunks;
    if (threads <= 1) {
        pthread_rwlock_unlock(&pool.rw);
        fn(arg, 0, n);
        return;
    }
    if (atomic_load_explicit(&pool.nworkers, memory_order_relaxed) < threads - 1)
        start_workers(atomic_load(&pool.n));

    job j = {.fn = fn, .arg = arg, .n = n, .fpmode = fpmode_get()};
    int64_t want_chunks = (int64_t)threads * CHUNKS_PER_THREAD;
    if (want_chunks > max_chunks)
        want_chunks = max_chunks;
    j.chunk = (n + want_chunks - 1) / want_chunks;
    if (j.chunk < grain)
        j.chunk = grain;
    j.nchunks = (n + j.chunk - 1) / j.chunk;
    atomic_init(&j.next, 0);
    atomic_init(&j.refs, 0);

    recruit_rec got[MAX_THREADS];
    atomic_fetch_add(&pool.busy, 1);
    int k = recruit(&j, threads - 1, atomic_load(&pool.n), got);
    in_loop = true;
    run_chunks(&j, false);
    in_loop = false;
    finish(&j, got, k);
    atomic_fetch_sub(&pool.busy, 1);
    pthread_rwlock_unlock(&pool.rw);
}

/* Stops and joins every worker (called with the pool lock held exclusive: no loop is running). */
static void stop_workers(void)
{
    int nw = atomic_load(&pool.nworkers);
    for (int i = 0; i < nw; i++) {
        atomic_store(&pool.w[i].state, (unsigned)W_STOP);
        futex_wake(&pool.w[i].state, 1);
    }
    for (int i = 0; i < nw; i++)
        pthread_join(pool.w[i].thread, NULL);
    atomic_store(&pool.nworkers, 0);
}

void tfs_runtime_set_num_threads(int n)
{
    ensure_init();
    if (n <= 0)
        n = online_cpus();
    if (n > MAX_THREADS)
        n = MAX_THREADS;
    pthread_rwlock_wrlock(&pool.rw);
    if (n != atomic_load(&pool.n)) {
        stop_workers();
        atomic_store(&pool.n, n);
    }
    pthread_rwlock_unlock(&pool.rw);
}

int tfs_runtime_num_threads(void)
{
    ensure_init();
    return atomic_load(&pool.n);
}
