/* Internal to the C side of the CUDA backend (backend.c, ops.c, pool.c): the device, its memory
 * pool, its executors, device tensors and the kernel table. See backend-impl.h for the
 * interface the session sees and cuda-impl.h for the device layer below. */
#ifndef TFS_RUNTIME_CUDA_GPU_IMPL_H
#define TFS_RUNTIME_CUDA_GPU_IMPL_H

#include <pthread.h>

#include "runtime/backend-impl.h"
#include "runtime/cuda/cuda-impl.h"

/* ---- the module (module.c) -------------------------------------------------------------------- */

/* The open module's table; NULL until tfs__cuda_module_open succeeds, then never changes (the
 * module is never closed). Every call into the device layer goes through it. */
extern const tfs_cuda_api *tfs__cuda;

/* Opens libtfserve-cuda.so once (thread-safe; a failure is not remembered, so a later model load
 * tries again). FAILED_PRECONDITION with the reason: no module where it is looked for, the
 * loader's message (a CUDA library it needs is missing), a module of another ABI version, or,
 * when the process's device is auto and TFS_CUDA_MODULE is unset, no CUDA driver (checked before
 * the module is opened, so a machine without one never maps the CUDA libraries). */
enum tfs_code tfs__cuda_module_open(tfs_status *st);

/* ---- memory pool (pool.c) --------------------------------------------------------------------- */

struct pool_block;
typedef struct tfs_gpu_pool {
    pthread_mutex_t    mu;
    void              *base;     /* device memory, owned by the device */
    size_t             size, in_use;
    struct pool_block *head;
    bool               ready;
} tfs_gpu_pool;

enum tfs_code tfs__gpu_pool_init(tfs_gpu_pool *p, void *base, size_t size, tfs_status *st);
void          tfs__gpu_pool_destroy(tfs_gpu_pool *p);
/* n bytes (256-aligned) or NULL when no block free (or held by `owner`, which may be NULL) is
 * large enough. Thread-safe, as is everything here. */
void *tfs__gpu_pool_alloc(tfs_gpu_pool *p, size_t n, const void *owner);
/* Back to the pool for anyone (nothing may still use it). NULL-safe. */
void tfs__gpu_pool_free(tfs_gpu_pool *p, void *ptr);
/* Back to the pool for `owner` only, until tfs__gpu_pool_flush(p, owner): kernels queued on the
 * owner's stream may still read it (see pool.c's DESIGN). NULL-safe. */
void tfs__gpu_pool_release(tfs_gpu_pool *p, void *ptr, const void *owner);
/* Everything `owner` holds becomes free for all; call once its stream is idle. */
void tfs__gpu_pool_flush(tfs_gpu_pool *p, const void *owner);
/* Bytes used or held. */
size_t tfs__gpu_pool_in_use(tfs_gpu_pool *p);

/* ---- device and executors (backend.c) --------------------------------------------------------- */

typedef struct tfs_gpu_dev tfs_gpu_dev;

/* One executor: what one run uses, alone, from exec_begin to exec_end. */
typedef struct tfs_gpu_exec {
    tfs_gpu_dev     *dev;
    tfs_cuda_stream *stream;
    void            *d_ws;        /* cuBLAS/cuDNN workspace, from the pool */
    size_t           ws_bytes;
    void            *staging;     /* pinned host memory for copies */
    size_t           staging_bytes, staging_used;
    const tfs_node  *last_node;   /* the node launched last (for messages) */
    struct tfs_gpu_exec *next;    /* idle list */
} tfs_gpu_exec;

/* A device tensor for this run: dtype and shape as tfs_tensor_new, data in the pool (undefined
 * contents). RESOURCE_EXHAUSTED naming the device when the pool has no room. */
enum tfs_code tfs__gpu_tensor_new(tfs_gpu_exec *x, enum tfs_dtype dt, int rank,
                                  const int64_t *dims, tfs_tensor **out, tfs_status *st);
/* n bytes of device scratch memory for one kernel call. It is held for the executor at once
 * (the next allocations of this run may reuse it, safely since they run later on the same
 * stream), so it must be the kernel call's last allocation. */
enum tfs_code tfs__gpu_scratch(tfs_gpu_exec *x, size_t n, void **out, tfs_status *st);
/* INTERNAL "node 'NAME' (OP) on gpu:N: <cs->msg>". Returns the code. */
enum tfs_code tfs__gpu_fail(const tfs_kernel_ctx *k, const tfs_cuda_status *cs, tfs_status *st);

/* ---- kernels (ops.c) -------------------------------------------------------------------------- */

extern const tfs_kernel_fn tfs__gpu_kernels[TFS_OP_COUNT];
enum tfs_placement tfs__gpu_supports_op(const tfs_backend *b, const tfs_node *n);
unsigned tfs__gpu_host_inputs(const tfs_backend *b, const tfs_node *n);

#endif
