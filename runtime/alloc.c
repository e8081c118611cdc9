/* The one heap allocator of tfserve (see alloc.h): a thin layer over malloc that counts the bytes
 * in use and can be told to fail the N-th allocation, which is how fault-injection tests walk every
 * out-of-memory path.
 *
 * The counter uses malloc_usable_size() rather than a size header in front of each block, so a
 * block from tfs_malloc stays an ordinary malloc block: a library that frees it with free() (or
 * hands us one to tfs_free) does not corrupt the heap, it only makes the count approximate.
 * Counts are usable sizes, so they may exceed the requested bytes slightly.
 *
 * DESIGN. The count is kept per thread and summed when asked for. One shared counter made every
 * allocation and free of every thread a read-modify-write of the same cache line; with two
 * server threads allocating a dozen blocks per request each, that line moving between cores
 * cost about half a microsecond per REST predict. A thread's counter is net (a block freed on
 * another thread than it was allocated on counts there), so only the sum means anything; it is
 * exact whenever the threads are quiet, which is when tests read it. An exiting thread folds its
 * count into `retired`.
 */
#include "runtime/alloc.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One cache line each: two threads' counters sharing a line would bounce it as before. */
typedef struct thread_count {
    _Alignas(64) atomic_llong bytes;
    struct thread_count *next;
} thread_count;

static pthread_mutex_t       counts_mu = PTHREAD_MUTEX_INITIALIZER;
static thread_count         *counts;       /* every live thread's, under counts_mu */
static atomic_llong          retired;      /* exited threads' counts, and threads without one */
static pthread_key_t         counts_key;
static pthread_once_t        counts_once = PTHREAD_ONCE_INIT;
static bool                  counts_key_ok;
static _Thread_local thread_count *my_count;
static _Thread_local bool          my_count_gone;   /* this thread's was retired: use `retired` */
/* This thread's counter's high-water mark and its value at the last reset (a test hook). */
static _Thread_local long long     my_peak, my_peak_base;

/* > 0: allocations left before the injected failure; 0: no failure scheduled. */
static atomic_llong fail_countdown;

static void retire_count(void *arg)
{
    thread_count *c = arg;
    pthread_mutex_lock(&counts_mu);
    for (thread_count **pp = &counts; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    atomic_fetch_add_explicit(&retired, atomic_load_explicit(&c->bytes, memory_order_relaxed),
                              memory_order_relaxed);
    pthread_mutex_unlock(&counts_mu);
    my_count = NULL;
    my_count_gone = true;
    free(c);
}

static void counts_init(void)
{
    counts_key_ok = pthread_key_create(&counts_key, retire_count) == 0;
}

/* This thread's counter, registered on first use; `retired` itself when there cannot be one
 * (no memory for it, or the thread is exiting). */
static atomic_llong *count_for_thread(void)
{
    if (my_count)
        return &my_count->bytes;
    if (my_count_gone)
        return &retired;
    pthread_once(&counts_once, counts_init);
    thread_count *c = counts_key_ok ? aligned_alloc(64, sizeof *c) : NULL;
    if (!c)
        return &retired;
    atomic_init(&c->bytes, 0);
    if (pthread_setspecific(counts_key, c) != 0) {
        free(c);
        return &retired;
    }
    pthread_mutex_lock(&counts_mu);
    c->next = counts;
    counts = c;
    pthread_mutex_unlock(&counts_mu);
    my_count = c;
    return &c->bytes;
}

static void count_bytes(long long n)
{
    atomic_llong *c = count_for_thread();
    if (c == &retired) {
        atomic_fetch_add_explicit(c, n, memory_order_relaxed);   /* shared: a real add */
        return;
    }
    /* Only this thread writes its own counter, so a plain load and store is an exact add and
     * needs no locked instruction; readers still see whole values (both are atomic). */
    long long now = atomic_load_explicit(c, memory_order_relaxed) + n;
    atomic_store_explicit(c, now, memory_order_relaxed);
    if (now > my_peak)
        my_peak = now;
}

/* True when this allocation is the one the test hook wants to fail. */
static int inject_failure(void)
{
    if (atomic_load_explicit(&fail_countdown, memory_order_relaxed) <= 0)
        return 0;
    return atomic_fetch_sub(&fail_countdown, 1) == 1;
}

static void *account(void *p)
{
    if (p)
        count_bytes((long long)malloc_usable_size(p));
    return p;
}

void *tfs_malloc(size_t n)
{
    if (inject_failure())
        return NULL;
    return account(malloc(n ? n : 1));
}

void *tfs_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (inject_failure())
        return NULL;
    if (count == 0 || size == 0)
        count = size = 1;
    /* glibc's calloc bypasses the per-thread cache and takes the arena lock; malloc + memset of
     * a small block does neither, and small blocks are what a request allocates by the dozen.
     * Large ones keep calloc, which gets fresh zero pages without writing them. */
    size_t n = count * size;
    if (n <= 4096) {
        void *p = malloc(n);
        if (p)
            memset(p, 0, n);
        return account(p);
    }
    return account(calloc(count, size));
}

void *tfs_realloc(void *p, size_t n)
{
    if (!p)
        return tfs_malloc(n);
    if (inject_failure())
        return NULL;
    size_t old = malloc_usable_size(p);
    void *q = realloc(p, n ? n : 1);
    if (!q)
        return NULL;
    count_bytes(-(long long)old);
    return account(q);
}

void tfs_free(void *p)
{
    if (!p)
        return;
    count_bytes(-(long long)malloc_usable_size(p));
    free(p);
}

char *tfs_strdup(const char *s)
{
    if (!s)
        return NULL;
    return tfs_strndup(s, strlen(s));
}

char *tfs_strndup(const char *s, size_t n)
{
    if (!s)
        return NULL;
    size_t len = strnlen(s, n);
    char *d = tfs_malloc(len + 1);
    if (!d)
        return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

int64_t tfs_alloc_bytes_in_use(void)
{
    pthread_mutex_lock(&counts_mu);
    long long sum = atomic_load_explicit(&retired, memory_order_relaxed);
    for (thread_count *c = counts; c; c = c->next)
        sum += atomic_load_explicit(&c->bytes, memory_order_relaxed);
    pthread_mutex_unlock(&counts_mu);
    return sum;
}

void tfs_alloc_fail_after(int64_t n)
{
    atomic_store(&fail_countdown, n > 0 ? (long long)n : 0);
}

void tfs_alloc_thread_peak_reset(void)
{
    atomic_llong *c = count_for_thread();
    my_peak = my_peak_base = atomic_load_explicit(c, memory_order_relaxed);
}

int64_t tfs_alloc_thread_peak(void)
{
    return my_peak - my_peak_base;
}

void tfs_alloc_release_free_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
