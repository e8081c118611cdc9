/* Heap allocation for all of tfserve. Every allocation goes through these so that usage can be
 * reported and tests can inject failures (fail the N-th allocation).
 * tfs_free(NULL) is a no-op. Thread-safe.
 */
#ifndef TFS_RUNTIME_ALLOC_H
#define TFS_RUNTIME_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *tfs_malloc(size_t n);
void *tfs_calloc(size_t count, size_t size);   /* NULL on overflow of count*size */
void *tfs_realloc(void *p, size_t n);
void  tfs_free(void *p);
char *tfs_strdup(const char *s);               /* NULL in, NULL out */
char *tfs_strndup(const char *s, size_t n);    /* copies at most n bytes and terminates */

/* Bytes currently allocated through tfs_malloc and friends. */
int64_t tfs_alloc_bytes_in_use(void);

/* Hands the C library's free memory back to the system (glibc's malloc_trim): for after a large
 * release such as a model version's unload, whose pages glibc's per-thread arenas would otherwise
 * keep mapped. */
void tfs_alloc_release_free_memory(void);

/* Test hook: the most bytes this thread has held allocated at once since
 * tfs_alloc_thread_peak_reset, above what it held then (its own allocations net of its frees). */
void    tfs_alloc_thread_peak_reset(void);
int64_t tfs_alloc_thread_peak(void);

/* Test hook: the n-th allocation from now fails (returns NULL), n >= 1; 0 disables. */
void tfs_alloc_fail_after(int64_t n);

#endif
