/* The CUDA backend (backend-impl.h): opening a GPU, its executors, copies between host and
 * device, kept constants, and the end of a run.
 *
 * DESIGN. A GPU is opened once per process, the first time a session asks for it (model load),
 * and never closed: that is when its device memory is reserved (memory_fraction of the device,
 * one cudaMalloc) and its executors are made, each with a stream, a cuBLAS and a cuDNN handle, a
 * workspace from the pool and a pinned staging buffer. The request path therefore never calls
 * cudaMalloc/cudaMallocHost; running out of pool is RESOURCE_EXHAUSTED for that run.
 *
 * A run holds one executor. Device memory its values release is held for that executor (its
 * stream may take it again at once: work on one stream runs in order) and becomes free for all
 * only after exec_end has synchronized the stream, because a kernel queued on it may still read
 * that memory and another executor's stream must not be handed it meanwhile. Host->device copies go through the staging buffer, used front to back within
 * a run and rewound only after a synchronization; device->host copies synchronize (the caller
 * needs the values).
 *
 * Constants (a Const node's value) are uploaded once, synchronously, and kept keyed by the host
 * tensor, of which the cache holds a reference, so the key cannot be reused by another tensor
 * while the entry lives. sweep() drops entries whose host tensor nobody else references (its
 * graph is gone); tfs_session_free calls it. */
#include <stdio.h>
#include <string.h>

#include "runtime/cuda/gpu-api.h"
#include "runtime/cuda/gpu-impl.h"

#define MAX_GPUS 16
/* cuBLAS + cuDNN workspace per executor: an eighth of the pool's share of each executor, from
 * 16 to 512 MiB. cuDNN's faster convolution algorithms need it: on an H200, ResNet-50 at batch
 * 256 ran faster with 512 MiB than with 64 MiB (figures in bench/README.md). */
#define WORKSPACE_MIN ((size_t)16 << 20)
#define WORKSPACE_MAX ((size_t)512 << 20)
#define STAGING_BYTES ((size_t)16 << 20)     /* pinned host memory per executor */
#define LOG_MODULE "gpu"

typedef struct const_entry {
    tfs_tensor *host;   /* a reference */
    tfs_tensor *dev;    /* its device copy (pool memory released by const_free) */
} const_entry;

struct tfs_gpu_dev {
    tfs_backend          b;
    int                  id;
    char                 name[16];    /* "gpu:0" */
    tfs_cuda_device_info info;
    void                *d_base;      /* the pool's one device allocation */
    tfs_gpu_pool         pool;
    pthread_mutex_t      mu;          /* idle executors */
    pthread_cond_t       cv;
    tfs_gpu_exec        *idle;
    tfs_gpu_exec        *execs;       /* [n_exec] */
    int                  n_exec;
    pthread_mutex_t      const_mu;    /* constants */
    const_entry         *consts;
    int                  n_consts, cap_consts;
};

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;
static tfs_gpu_dev *devs[MAX_GPUS];

/* ---- device memory of a run ------------------------------------------------------------------- */

/* tfs_tensor deallocator of run tensors and scratch: the block is held for this executor until
 * exec_end has synchronized its stream (pool.c's DESIGN). */
static void run_free(void *data, void *arg)
{
    tfs_gpu_exec *x = arg;
    tfs__gpu_pool_release(&x->dev->pool, data, x);
}

static void *pool_alloc_or_err(tfs_gpu_exec *x, size_t n, tfs_status *st)
{
    void *p = tfs__gpu_pool_alloc(&x->dev->pool, n, x);
    if (!p)
        TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                "%s: out of GPU pool memory for %zu bytes (%zu of %zu in use); raise "
                "--per_process_gpu_memory_fraction", x->dev->name, n,
                tfs__gpu_pool_in_use(&x->dev->pool), x->dev->pool.size);
    return p;
}

enum tfs_code tfs__gpu_tensor_new(tfs_gpu_exec *x, enum tfs_dtype dt, int rank,
                                  const int64_t *dims, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    int64_t nelem = tfs_shape_nelem(rank, dims);
    size_t esz = tfs_dtype_size(dt);
    if (rank < 0 || rank > TFS_MAX_RANK || nelem < 0 || esz == 0 || dt == TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: cannot hold a %s tensor of rank %d",
                       x->dev->name, tfs_dtype_short_name(dt), rank);
    if ((uint64_t)nelem > TFS_TENSOR_MAX_BYTES / esz)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: tensor too large", x->dev->name);
    size_t n = (size_t)nelem * esz;
    void *d = NULL;
    if (n && !(d = pool_alloc_or_err(x, n, st)))
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    enum tfs_code rc = tfs_tensor_wrap(dt, rank, dims, d, run_free, x, out, st);
    if (rc != TFS_OK)
        run_free(d, x);
    return rc;
}

enum tfs_code tfs__gpu_scratch(tfs_gpu_exec *x, size_t n, void **out, tfs_status *st)
{
    *out = NULL;
    if (n == 0)
        return TFS_OK;
    if (!(*out = pool_alloc_or_err(x, n, st)))
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    run_free(*out, x);   /* held for this run's stream: usable now, by it alone */
    return TFS_OK;
}

enum tfs_code tfs__gpu_fail(const tfs_kernel_ctx *k, const tfs_cuda_status *cs, tfs_status *st)
{
    const tfs_gpu_exec *x = k->exec;
    return tfs__node_err(k->node, st, TFS_INTERNAL, "on %s: %s", x->dev->name, cs->msg);
}

/* ---- copies ----------------------------------------------------------------------------------- */

static enum tfs_code cuda_err(const tfs_gpu_exec *x, const char *what, const tfs_cuda_status *cs,
                              tfs_status *st)
{
    return TFS_ERR(st, TFS_INTERNAL, "%s: %s: %s", x->dev->name, what, cs->msg);
}

/* Copies n bytes of host memory to d_dst on x's stream. */
static enum tfs_code copy_in(tfs_gpu_exec *x, void *d_dst, const void *src, size_t n,
                             tfs_status *st)
{
    tfs_cuda_status cs;
    if (n == 0)
        return TFS_OK;
    if (n > x->staging_bytes) {   /* pageable: CUDA stages it itself, synchronously */
        if (tfs__cuda->copy_h2d(x->stream, d_dst, src, n, &cs))
            return cuda_err(x, "copy to device", &cs, st);
        return TFS_OK;
    }
    if (n > x->staging_bytes - x->staging_used) {   /* rewind once earlier copies are done */
        if (tfs__cuda->sync(x->stream, &cs))
            return cuda_err(x, "copy to device", &cs, st);
        x->staging_used = 0;
    }
    char *stage = (char *)x->staging + x->staging_used;
    memcpy(stage, src, n);
    x->staging_used += (n + 255) & ~(size_t)255;
    if (x->staging_used > x->staging_bytes)
        x->staging_used = x->staging_bytes;
    if (tfs__cuda->copy_h2d(x->stream, d_dst, stage, n, &cs))
        return cuda_err(x, "copy to device", &cs, st);
    return TFS_OK;
}

static void const_free(void *data, void *arg)
{
    tfs_gpu_dev *d = arg;
    tfs__gpu_pool_free(&d->pool, data);
}

/* The kept device copy of constant t (a new reference), uploading it on first use. */
static enum tfs_code upload_const(tfs_gpu_exec *x, tfs_tensor *t, tfs_tensor **out,
                                  tfs_status *st)
{
    tfs_gpu_dev *d = x->dev;
    *out = NULL;
    pthread_mutex_lock(&d->const_mu);
    for (int i = 0; i < d->n_consts && !*out; i++)
        if (d->consts[i].host == t)
            *out = tfs_tensor_ref(d->consts[i].dev);
    pthread_mutex_unlock(&d->const_mu);
    if (*out)
        return TFS_OK;
    void *p = NULL;
    tfs_tensor *dev = NULL;
    tfs_cuda_status cs;
    enum tfs_code rc;
    if (t->nbytes && !(p = pool_alloc_or_err(x, t->nbytes, st)))
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    if ((rc = tfs_tensor_wrap(t->dtype, t->rank, t->dims, p, const_free, d, &dev, st)) != TFS_OK) {
        tfs__gpu_pool_free(&d->pool, p);
        return rc;
    }
    if ((rc = copy_in(x, p, t->data, t->nbytes, st)) != TFS_OK)
        goto fail;
    /* Complete before other executors' streams may read it. */
    if (tfs__cuda->sync(x->stream, &cs)) {
        rc = cuda_err(x, "copy a constant to the device", &cs, st);
        goto fail;
    }
    x->staging_used = 0;
    pthread_mutex_lock(&d->const_mu);
    for (int i = 0; i < d->n_consts; i++) {
        if (d->consts[i].host == t) {   /* another run got there first: use that one */
            *out = tfs_tensor_ref(d->consts[i].dev);
            break;
        }
    }
    if (!*out && d->n_consts == d->cap_consts) {
        int cap = d->cap_consts ? 2 * d->cap_consts : 32;
        const_entry *c = tfs_realloc(d->consts, (size_t)cap * sizeof *c);
        if (c) {
            d->consts = c;
            d->cap_consts = cap;
        }
    }
    if (!*out && d->n_consts < d->cap_consts) {
        d->consts[d->n_consts++] = (const_entry){tfs_tensor_ref(t), tfs_tensor_ref(dev)};
        *out = tfs_tensor_ref(dev);
    }
    pthread_mutex_unlock(&d->const_mu);
    if (!*out)   /* no room to keep it: this run uses it all the same */
        *out = tfs_tensor_ref(dev);
    tfs_tensor_unref(dev);
    return TFS_OK;
fail:
    tfs_tensor_unref(dev);
    return rc;
}

static enum tfs_code gpu_upload(tfs_backend *b, void *exec, tfs_tensor *t, bool constant,
                                tfs_tensor **out, tfs_status *st)
{
    tfs_gpu_exec *x = exec;
    *out = NULL;
    if (t->dtype == TFS_DTYPE_STRING || t->dtype >= TFS_DTYPE_REF_OFFSET ||
        t->dtype == TFS_DTYPE_RESOURCE || t->dtype == TFS_DTYPE_VARIANT)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "%s: cannot copy a %s tensor to the device",
                       x->dev->name, tfs_dtype_short_name(t->dtype));
    if (constant)
        return upload_const(x, t, out, st);
    tfs_tensor *dev = NULL;
    enum tfs_code rc = tfs__gpu_tensor_new(x, t->dtype, t->rank, t->dims, &dev, st);
    if (rc == TFS_OK)
        rc = copy_in(x, dev->data, t->data, t->nbytes, st);
    if (rc != TFS_OK) {
        tfs_tensor_unref(dev);
        return rc;
    }
    *out = dev;
    return TFS_OK;
}

static enum tfs_code gpu_download(tfs_backend *b, void *exec, const tfs_tensor *t,
                                  tfs_tensor **out, tfs_status *st)
{
    tfs_gpu_exec *x = exec;
    tfs_cuda_status cs;
    tfs_tensor *h = NULL;
    *out = NULL;
    enum tfs_code rc = tfs_tensor_new(t->dtype, t->rank, t->dims, &h, st);
    if (rc != TFS_OK)
        return rc;
    if (t->nbytes > x->staging_bytes) {
        if (tfs__cuda->copy_d2h(x->stream, h->data, t->data, t->nbytes, &cs) ||
            tfs__cuda->sync(x->stream, &cs))
            goto fail;
    } else if (t->nbytes) {
        /* Staging past earlier uploads of this run, which may still be in flight. */
        if (t->nbytes > x->staging_bytes - x->staging_used) {
            if (tfs__cuda->sync(x->stream, &cs))
                goto fail;
            x->staging_used = 0;
        }
        char *stage = (char *)x->staging + x->staging_used;
        if (tfs__cuda->copy_d2h(x->stream, stage, t->data, t->nbytes, &cs) ||
            tfs__cuda->sync(x->stream, &cs))
            goto fail;
        memcpy(h->data, stage, t->nbytes);
        x->staging_used = 0;   /* the stream is idle now */
    }
    *out = h;
    return TFS_OK;
fail:
    tfs_tensor_unref(h);
    if (x->last_node)
        return TFS_ERR(st, TFS_INTERNAL, "%s: copy to the host after node '%s' (%s): %s",
                       x->dev->name, x->last_node->name, x->last_node->op_type, cs.msg);
    return cuda_err(x, "copy to the host", &cs, st);
}

/* ---- runs ------------------------------------------------------------------------------------- */

static enum tfs_code gpu_exec_begin(tfs_backend *b, void **exec, tfs_status *st)
{
    tfs_gpu_dev *d = b->ctx;
    pthread_mutex_lock(&d->mu);
    while (!d->idle)
        pthread_cond_wait(&d->cv, &d->mu);
    tfs_gpu_exec *x = d->idle;
    d->idle = x->next;
    pthread_mutex_unlock(&d->mu);
    x->next = NULL;
    x->last_node = NULL;
    x->staging_used = 0;
    tfs_cuda_status cs;
    if (tfs__cuda->stream_begin(x->stream, &cs)) {
        pthread_mutex_lock(&d->mu);
        x->next = d->idle;
        d->idle = x;
        pthread_cond_signal(&d->cv);
        pthread_mutex_unlock(&d->mu);
        *exec = NULL;
        return cuda_err(x, "starting a run", &cs, st);
    }
    *exec = x;
    return TFS_OK;
}

static enum tfs_code gpu_exec_end(tfs_backend *b, void *exec, enum tfs_code run_rc,
                                  tfs_status *st)
{
    tfs_gpu_dev *d = b->ctx;
    tfs_gpu_exec *x = exec;
    enum tfs_code rc = run_rc;
    tfs_cuda_status cs;
    if (tfs__cuda->sync(x->stream, &cs) && run_rc == TFS_OK) {
        if (x->last_node)
            rc = TFS_ERR(st, TFS_INTERNAL, "node '%s' (%s) or a GPU node before it, on %s: %s",
                         x->last_node->name, x->last_node->op_type, d->name, cs.msg);
        else
            rc = cuda_err(x, "finishing a run", &cs, st);
    }
    tfs__gpu_pool_flush(&d->pool, x);
    pthread_mutex_lock(&d->mu);
    x->next = d->idle;
    d->idle = x;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static void gpu_exec_node(void *exec, const tfs_node *n)
{
    ((tfs_gpu_exec *)exec)->last_node = n;
}

static void gpu_sweep(tfs_backend *b)
{
    tfs_gpu_dev *d = b->ctx;
    pthread_mutex_lock(&d->const_mu);
    int keep = 0;
    for (int i = 0; i < d->n_consts; i++) {
        const_entry e = d->consts[i];
        if (atomic_load(&e.host->refs) == 1) {   /* only the cache holds it */
            tfs_tensor_unref(e.host);
            tfs_tensor_unref(e.dev);
        } else {
            d->consts[keep++] = e;
        }
    }
    d->n_consts = keep;
    pthread_mutex_unlock(&d->const_mu);
}

static const char *gpu_name(const tfs_backend *b)
{
    return ((const tfs_gpu_dev *)b->ctx)->name;
}

static const struct tfs_backend_i gpu_iface = {
    .name = gpu_name,
    .supports_op = tfs__gpu_supports_op,
    .host_inputs = tfs__gpu_host_inputs,
    .exec_begin = gpu_exec_begin,
    .exec_end = gpu_exec_end,
    .exec_node = gpu_exec_node,
    .upload = gpu_upload,
    .download = gpu_download,
    .sweep = gpu_sweep,
};

/* ---- opening a device ------------------------------------------------------------------------- */

int tfs__cuda_gpu_count(char *why, size_t n)
{
    int count = 0;
    tfs_cuda_status cs;
    tfs_status st;
    if (tfs__cuda_module_open(&st) != TFS_OK) {
        if (why && n)
            snprintf(why, n, "no GPU: %s", st.msg);
        return 0;
    }
    if (tfs__cuda->device_count(&count, &cs)) {
        if (why && n)
            snprintf(why, n, "no GPU: %s", cs.msg);
        return 0;
    }
    if (count == 0 && why && n)
        snprintf(why, n, "no GPU: cudaGetDeviceCount found no device");
    return count;
}

/* Frees a device that failed to open (never one that was published). */
static void dev_free(tfs_gpu_dev *d)
{
    if (!d)
        return;
    for (int i = 0; d->execs && i < d->n_exec; i++) {
        tfs_gpu_exec *x = &d->execs[i];
        tfs__cuda->stream_free(x->stream);
        tfs__cuda->host_free(d->id, x->staging);
    }
    tfs_free(d->execs);
    tfs__gpu_pool_destroy(&d->pool);
    tfs__cuda->free(d->id, d->d_base);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->const_mu);
    tfs_free(d);
}

static enum tfs_code dev_open(int id, const tfs_device_opts *o, tfs_gpu_dev **out,
                              tfs_status *st)
{
    tfs_cuda_status cs;
    enum tfs_code rc;
    *out = NULL;
    tfs_gpu_dev *d = tfs_calloc(1, sizeof *d);
    if (!d)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory opening gpu:%d", id);
    d->id = id;
    snprintf(d->name, sizeof d->name, "gpu:%d", id);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    pthread_mutex_init(&d->const_mu, NULL);
    if (tfs__cuda->device_info(id, &d->info, &cs)) {
        rc = TFS_ERR(st, TFS_FAILED_PRECONDITION, "gpu:%d: %s", id, cs.msg);
        goto fail;
    }
    double frac = o->memory_fraction > 0 && o->memory_fraction <= 1 ? o->memory_fraction
                                                                     : TFS_DEVICE_MEMORY_FRACTION;
    size_t bytes = (size_t)((double)d->info.total_bytes * frac) & ~(((size_t)2 << 20) - 1);
    int n_exec = o->executors > 0 ? o->executors : TFS_DEVICE_EXECUTORS;
    size_t ws = bytes / 8 / (size_t)(n_exec > 0 ? n_exec : 1) & ~(((size_t)1 << 20) - 1);
    ws = ws < WORKSPACE_MIN ? WORKSPACE_MIN : ws > WORKSPACE_MAX ? WORKSPACE_MAX : ws;
    if (bytes < (size_t)n_exec * ws * 2) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "gpu:%d: a pool of %zu bytes (fraction %g of "
                     "%zu) is too small for %d executors", id, bytes, frac, d->info.total_bytes,
                     n_exec);
        goto fail;
    }
    if (tfs__cuda->malloc(id, bytes, &d->d_base, &cs)) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "gpu:%d: reserving %zu bytes: %s", id, bytes,
                     cs.msg);
        goto fail;
    }
    if ((rc = tfs__gpu_pool_init(&d->pool, d->d_base, bytes, st)) != TFS_OK)
        goto fail;
    if (!(d->execs = tfs_calloc((size_t)n_exec, sizeof *d->execs))) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory opening gpu:%d", id);
        goto fail;
    }
    for (int i = 0; i < n_exec; i++) {
        tfs_gpu_exec *x = &d->execs[i];
        x->dev = d;
        d->n_exec = i + 1;
        x->ws_bytes = ws;
        x->d_ws = tfs__gpu_pool_alloc(&d->pool, ws, NULL);
        if (tfs__cuda->host_alloc(id, STAGING_BYTES, &x->staging, &cs) ||
            tfs__cuda->stream_new(id, o->allow_tf32, x->d_ws, x->ws_bytes, &x->stream, &cs)) {
            rc = TFS_ERR(st, TFS_FAILED_PRECONDITION, "gpu:%d: creating executor %d: %s", id,
                         i, cs.msg);
            goto fail;
        }
        x->staging_bytes = STAGING_BYTES;
        x->next = d->idle;
        d->idle = x;
    }
    d->b = (tfs_backend){TFS_BACKEND_API_VERSION, &gpu_iface, tfs__gpu_kernels, d};
    TFS_LOG_INFO(LOG_MODULE, "%s: %s (compute %d.%d), CUDA runtime %d.%d, driver %d.%d, cuDNN "
                 "%zu.%zu.%zu; pool %zu MiB (%.2f of %zu MiB), %d executors with %zu MiB of "
                 "workspace each, TF32 %s",
                 d->name, d->info.name, d->info.cc_major, d->info.cc_minor,
                 d->info.runtime_version / 1000, d->info.runtime_version % 1000 / 10,
                 d->info.driver_version / 1000, d->info.driver_version % 1000 / 10,
                 d->info.cudnn_version / 10000, d->info.cudnn_version / 100 % 100,
                 d->info.cudnn_version % 100, bytes >> 20, frac, d->info.total_bytes >> 20,
                 n_exec, ws >> 20, o->allow_tf32 ? "allowed" : "off");
    *out = d;
    return TFS_OK;
fail:
    dev_free(d);
    return rc;
}

enum tfs_code tfs__cuda_backend_open(int id, const tfs_device_opts *o, tfs_backend **out,
                                     tfs_status *st)
{
    *out = NULL;
    char why[256];
    int count = tfs__cuda_gpu_count(why, sizeof why);
    if (count == 0)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s", why);
    if (id < 0 || id >= count || id >= MAX_GPUS)
        return TFS_ERR(st, TFS_NOT_FOUND, "gpu:%d: %d GPU%s present", id, count,
                       count == 1 ? "" : "s");
    enum tfs_code rc = TFS_OK;
    pthread_mutex_lock(&open_mu);
    if (!devs[id])
        rc = dev_open(id, o, &devs[id], st);
    if (rc == TFS_OK)
        *out = &devs[id]->b;
    pthread_mutex_unlock(&open_mu);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}
