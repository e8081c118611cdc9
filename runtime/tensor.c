/* Tensors (see tensor.h): the dtype table, allocation with overflow-checked sizes, wrapping and
 * views over shared buffers, string elements, and shape helpers.
 *
 * Every tensor releases its buffer through `dealloc(data, dealloc_arg)`: tfs_tensor_new uses
 * tfs_free, a view (tfs_tensor_reshape) drops its reference to the source tensor, and a wrapper
 * calls the owner's deallocator. DT_STRING tensors always own their element bytes (they cannot be
 * wrapped or viewed), so the last unref frees each element first.
 */
#include "runtime/tensor.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "runtime/runtime-impl.h"

/* ---- dtypes --------------------------------------------------------------------------------- */

typedef struct dtype_info {
    size_t      size;    /* 0: the runtime cannot hold elements of this type */
    const char *name;
    const char *short_name;
} dtype_info;

static const dtype_info dtypes[TFS_DTYPE_COUNT] = {
    [TFS_DTYPE_INVALID]    = {0, "DT_INVALID", "invalid"},
    [TFS_DTYPE_FLOAT]      = {4, "DT_FLOAT", "float"},
    [TFS_DTYPE_DOUBLE]     = {8, "DT_DOUBLE", "double"},
    [TFS_DTYPE_INT32]      = {4, "DT_INT32", "int32"},
    [TFS_DTYPE_UINT8]      = {1, "DT_UINT8", "uint8"},
    [TFS_DTYPE_INT16]      = {2, "DT_INT16", "int16"},
    [TFS_DTYPE_INT8]       = {1, "DT_INT8", "int8"},
    [TFS_DTYPE_STRING]     = {sizeof(tfs_string), "DT_STRING", "string"},
    [TFS_DTYPE_COMPLEX64]  = {0, "DT_COMPLEX64", "complex64"},
    [TFS_DTYPE_INT64]      = {8, "DT_INT64", "int64"},
    [TFS_DTYPE_BOOL]       = {1, "DT_BOOL", "bool"},
    [TFS_DTYPE_QINT8]      = {0, "DT_QINT8", "qint8"},
    [TFS_DTYPE_QUINT8]     = {0, "DT_QUINT8", "quint8"},
    [TFS_DTYPE_QINT32]     = {0, "DT_QINT32", "qint32"},
    /* 16-bit floats are held as raw bits; no kernel computes on them yet. */
    [TFS_DTYPE_BFLOAT16]   = {2, "DT_BFLOAT16", "bfloat16"},
    [TFS_DTYPE_QINT16]     = {0, "DT_QINT16", "qint16"},
    [TFS_DTYPE_QUINT16]    = {0, "DT_QUINT16", "quint16"},
    [TFS_DTYPE_UINT16]     = {2, "DT_UINT16", "uint16"},
    [TFS_DTYPE_COMPLEX128] = {0, "DT_COMPLEX128", "complex128"},
    [TFS_DTYPE_HALF]       = {2, "DT_HALF", "half"},
    [TFS_DTYPE_RESOURCE]   = {sizeof(void *), "DT_RESOURCE", "resource"},
    [TFS_DTYPE_VARIANT]    = {0, "DT_VARIANT", "variant"},
    [TFS_DTYPE_UINT32]     = {4, "DT_UINT32", "uint32"},
    [TFS_DTYPE_UINT64]     = {8, "DT_UINT64", "uint64"},
};
_Static_assert(TFS_DTYPE_COUNT == 24, "dtypes[] must list every enum tfs_dtype value");

/* Reference dtypes: TensorFlow spells them "DT_FLOAT_REF" and "float_ref". */
static const char *const ref_names[TFS_DTYPE_COUNT] = {
    [TFS_DTYPE_FLOAT] = "DT_FLOAT_REF",       [TFS_DTYPE_DOUBLE] = "DT_DOUBLE_REF",
    [TFS_DTYPE_INT32] = "DT_INT32_REF",       [TFS_DTYPE_UINT8] = "DT_UINT8_REF",
    [TFS_DTYPE_INT16] = "DT_INT16_REF",       [TFS_DTYPE_INT8] = "DT_INT8_REF",
    [TFS_DTYPE_STRING] = "DT_STRING_REF",     [TFS_DTYPE_COMPLEX64] = "DT_COMPLEX64_REF",
    [TFS_DTYPE_INT64] = "DT_INT64_REF",       [TFS_DTYPE_BOOL] = "DT_BOOL_REF",
    [TFS_DTYPE_QINT8] = "DT_QINT8_REF",       [TFS_DTYPE_QUINT8] = "DT_QUINT8_REF",
    [TFS_DTYPE_QINT32] = "DT_QINT32_REF",     [TFS_DTYPE_BFLOAT16] = "DT_BFLOAT16_REF",
    [TFS_DTYPE_QINT16] = "DT_QINT16_REF",     [TFS_DTYPE_QUINT16] = "DT_QUINT16_REF",
    [TFS_DTYPE_UINT16] = "DT_UINT16_REF",     [TFS_DTYPE_COMPLEX128] = "DT_COMPLEX128_REF",
    [TFS_DTYPE_HALF] = "DT_HALF_REF",         [TFS_DTYPE_RESOURCE] = "DT_RESOURCE_REF",
    [TFS_DTYPE_VARIANT] = "DT_VARIANT_REF",   [TFS_DTYPE_UINT32] = "DT_UINT32_REF",
    [TFS_DTYPE_UINT64] = "DT_UINT64_REF",
};
static const char *const ref_short_names[TFS_DTYPE_COUNT] = {
    [TFS_DTYPE_FLOAT] = "float_ref",          [TFS_DTYPE_DOUBLE] = "double_ref",
    [TFS_DTYPE_INT32] = "int32_ref",          [TFS_DTYPE_UINT8] = "uint8_ref",
    [TFS_DTYPE_INT16] = "int16_ref",          [TFS_DTYPE_INT8] = "int8_ref",
    [TFS_DTYPE_STRING] = "string_ref",        [TFS_DTYPE_COMPLEX64] = "complex64_ref",
    [TFS_DTYPE_INT64] = "int64_ref",          [TFS_DTYPE_BOOL] = "bool_ref",
    [TFS_DTYPE_QINT8] = "qint8_ref",          [TFS_DTYPE_QUINT8] = "quint8_ref",
    [TFS_DTYPE_QINT32] = "qint32_ref",        [TFS_DTYPE_BFLOAT16] = "bfloat16_ref",
    [TFS_DTYPE_QINT16] = "qint16_ref",        [TFS_DTYPE_QUINT16] = "quint16_ref",
    [TFS_DTYPE_UINT16] = "uint16_ref",        [TFS_DTYPE_COMPLEX128] = "complex128_ref",
    [TFS_DTYPE_HALF] = "half_ref",            [TFS_DTYPE_RESOURCE] = "resource_ref",
    [TFS_DTYPE_VARIANT] = "variant_ref",      [TFS_DTYPE_UINT32] = "uint32_ref",
    [TFS_DTYPE_UINT64] = "uint64_ref",
};

static bool is_base(enum tfs_dtype dt)
{
    return dt > TFS_DTYPE_INVALID && dt < TFS_DTYPE_COUNT;
}

static bool is_ref(enum tfs_dtype dt)
{
    return dt > TFS_DTYPE_REF_OFFSET && dt < TFS_DTYPE_REF_OFFSET + TFS_DTYPE_COUNT;
}

enum tfs_dtype tfs_dtype_base(enum tfs_dtype dt)
{
    return is_ref(dt) ? (enum tfs_dtype)(dt - TFS_DTYPE_REF_OFFSET) : dt;
}

size_t tfs_dtype_size(enum tfs_dtype dt)
{
    if (is_ref(dt))
        return sizeof(void *);   /* a reference element is the tfs_variable * it points at */
    return is_base(dt) ? dtypes[dt].size : 0;
}

const char *tfs_dtype_name(enum tfs_dtype dt)
{
    if (is_ref(dt))
        return ref_names[dt - TFS_DTYPE_REF_OFFSET];
    return is_base(dt) ? dtypes[dt].name : "DT_INVALID";
}

const char *tfs_dtype_short_name(enum tfs_dtype dt)
{
    if (is_ref(dt))
        return ref_short_names[dt - TFS_DTYPE_REF_OFFSET];
    return is_base(dt) ? dtypes[dt].short_name : "invalid";
}

enum tfs_dtype tfs_dtype_from_name(const char *name)
{
    if (!name)
        return TFS_DTYPE_INVALID;
    for (int dt = 1; dt < TFS_DTYPE_COUNT; dt++) {
        if (!strcmp(name, dtypes[dt].name))
            return (enum tfs_dtype)dt;
        if (!strcmp(name, ref_names[dt]))
            return (enum tfs_dtype)(dt + TFS_DTYPE_REF_OFFSET);
    }
    return TFS_DTYPE_INVALID;
}

enum tfs_dtype tfs_dtype_from_short_name(const char *name)
{
    for (int dt = 1; name && dt < TFS_DTYPE_COUNT; dt++)
        if (!strcmp(name, dtypes[dt].short_name))
            return (enum tfs_dtype)dt;
    return TFS_DTYPE_INVALID;
}

/* ---- shapes --------------------------------------------------------------------------------- */

int64_t tfs_shape_nelem(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return -1;
        if (dims[i] != 0 && n > INT64_MAX / dims[i])
            return -1;
        n *= dims[i];
    }
    return n;
}

bool tfs_shape_equal(int rank_a, const int64_t *a, int rank_b, const int64_t *b)
{
    if (rank_a != rank_b)
        return false;
    for (int i = 0; i < rank_a; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* Appends printf output to buf[*used..n), never past the end. */
static void append(char *buf, size_t n, size_t *used, const char *fmt, int64_t v)
{
    if (*used >= n)
        return;
    int w = snprintf(buf + *used, n - *used, fmt, v);
    if (w > 0)
        *used += (size_t)w;
}

char *tfs_shape_str(int rank, const int64_t *dims, char *buf, size_t n)
{
    if (!buf || n == 0)
        return buf;
    buf[0] = '\0';
    if (rank < 0) {
        snprintf(buf, n, "<unknown>");
        return buf;
    }
    size_t used = 0;
    append(buf, n, &used, "[", 0);
    for (int i = 0; i < rank; i++)
        append(buf, n, &used, i ? ",%" PRId64 : "%" PRId64, dims[i]);
    append(buf, n, &used, "]", 0);
    return buf;
}

/* ---- tensors -------------------------------------------------------------------------------- */

static void free_buffer(void *data, void *arg)
{
    (void)arg;
    tfs_free(data);
}

static void unref_source(void *data, void *arg)
{
    (void)data;
    tfs_tensor_unref(arg);
}

/* ---- the largest tensor -------------------------------------------------------------------- */

static _Atomic size_t max_tensor_bytes;   /* 0: not decided yet (the default on first use) */

/* Half of the memory this process may use: physical memory, or its cgroup v2 memory.max when
 * that is lower (a container's limit); TFS_TENSOR_MAX_BYTES when neither can be read. */
static size_t default_max_tensor_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t mem = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");   /* "max" when unlimited */
    if (f) {
        unsigned long long v;
        if (fscanf(f, "%llu", &v) == 1 && v > 0 && (mem == 0 || v < mem))
            mem = v;
        fclose(f);
    }
    uint64_t half = mem / 2;
    return half == 0 || half > TFS_TENSOR_MAX_BYTES ? TFS_TENSOR_MAX_BYTES : (size_t)half;
}

void tfs_runtime_set_max_tensor_bytes(size_t n)
{
    if (n == 0)
        n = default_max_tensor_bytes();
    atomic_store_explicit(&max_tensor_bytes, n > TFS_TENSOR_MAX_BYTES ? TFS_TENSOR_MAX_BYTES : n,
                          memory_order_relaxed);
}

static _Thread_local size_t thread_max_tensor_bytes;   /* 0: none */

size_t tfs_runtime_set_thread_max_tensor_bytes(size_t n)
{
    size_t old = thread_max_tensor_bytes;
    thread_max_tensor_bytes = n;
    return old;
}

size_t tfs_runtime_max_tensor_bytes(void)
{
    size_t n = atomic_load_explicit(&max_tensor_bytes, memory_order_relaxed);
    if (n == 0) {   /* racing first uses compute the same default */
        n = default_max_tensor_bytes();
        atomic_store_explicit(&max_tensor_bytes, n, memory_order_relaxed);
    }
    return thread_max_tensor_bytes && thread_max_tensor_bytes < n ? thread_max_tensor_bytes : n;
}

/* ---- tensors ------------------------------------------------------------------------------- */

/* Validates dtype and shape and fills a new tensor header (no buffer). A buffer of more than
 * `limit` bytes is refused: tfs_runtime_max_tensor_bytes() where one is to be allocated,
 * TFS_TENSOR_MAX_BYTES where the memory exists already (wrap, reshape). */
static enum tfs_code tensor_header(enum tfs_dtype dtype, int rank, const int64_t *dims,
                                   size_t limit, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    if (rank < 0 || rank > TFS_MAX_RANK)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor rank %d is outside [0, %d]", rank,
                       TFS_MAX_RANK);
    size_t esize = tfs_dtype_size(dtype);
    if (esize == 0)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "tensors of dtype %s are not supported",
                       tfs_dtype_name(dtype));
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "tensor dimension %d is negative (%" PRId64 ")",
                           i, dims[i]);
    int64_t nelem = tfs_shape_nelem(rank, dims);
    if (nelem < 0 || (uint64_t)nelem > limit / esize) {
        char sh[128];
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED,
                       "tensor of shape %s and dtype %s exceeds the %zu-byte limit on one tensor",
                       tfs_shape_str(rank, dims, sh, sizeof sh), tfs_dtype_name(dtype), limit);
    }
    tfs_tensor *t = tfs_calloc(1, sizeof *t);
    if (!t)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory allocating a tensor");
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->nelem = nelem;
    t->nbytes = (size_t)nelem * esize;
    atomic_init(&t->refs, 1);
    *out = t;
    return TFS_OK;
}

static enum tfs_code tensor_new(enum tfs_dtype dtype, int rank, const int64_t *dims, bool zero,
                                tfs_tensor **out, tfs_status *st)
{
    tfs_tensor *t = NULL;
    *out = NULL;
    enum tfs_code rc = tensor_header(dtype, rank, dims, tfs_runtime_max_tensor_bytes(), &t, st);
    if (rc != TFS_OK)
        return rc;
    if (t->nbytes > 0) {
        /* zero bytes are also empty tfs_string records */
        zero |= dtype == TFS_DTYPE_STRING;
        t->data = zero ? tfs_calloc(1, t->nbytes) : tfs_malloc(t->nbytes);
        if (!t->data) {
            char sh[128];
            TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory allocating %zu bytes for tensor %s",
                    t->nbytes, tfs_shape_str(rank, dims, sh, sizeof sh));
            tfs_free(t);
            *out = NULL;
            return TFS_RESOURCE_EXHAUSTED;
        }
        t->dealloc = free_buffer;
    }
    *out = t;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_tensor_new(enum tfs_dtype dtype, int rank, const int64_t *dims, tfs_tensor **out,
                             tfs_status *st)
{
    return tensor_new(dtype, rank, dims, true, out, st);
}

enum tfs_code tfs_tensor_new_uninit(enum tfs_dtype dtype, int rank, const int64_t *dims,
                                    tfs_tensor **out, tfs_status *st)
{
    return tensor_new(dtype, rank, dims, false, out, st);
}

enum tfs_code tfs_tensor_new_scalar(enum tfs_dtype dtype, tfs_tensor **out, tfs_status *st)
{
    return tfs_tensor_new(dtype, 0, NULL, out, st);
}

enum tfs_code tfs_tensor_wrap(enum tfs_dtype dtype, int rank, const int64_t *dims, void *data,
                              tfs_tensor_dealloc dealloc, void *arg, tfs_tensor **out,
                              tfs_status *st)
{
    *out = NULL;
    if (dtype == TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "DT_STRING tensors cannot wrap external memory");
    tfs_tensor *t = NULL;
    enum tfs_code rc = tensor_header(dtype, rank, dims, TFS_TENSOR_MAX_BYTES, &t, st);
    if (rc != TFS_OK)
        return rc;
    t->data = data;
    t->dealloc = dealloc;
    t->dealloc_arg = arg;
    *out = t;
    tfs_status_clear(st);
    return TFS_OK;
}

enum tfs_code tfs_tensor_reshape(tfs_tensor *src, int rank, const int64_t *dims, tfs_tensor **out,
                                 tfs_status *st)
{
    *out = NULL;
    tfs_tensor *t = NULL;
    enum tfs_code rc = tensor_header(src->dtype, rank, dims, TFS_TENSOR_MAX_BYTES, &t, st);
    if (rc != TFS_OK)
        return rc;
    if (t->nelem != src->nelem) {
        char a[128], b[128];
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "cannot reshape a tensor of shape %s into shape %s",
                     tfs_shape_str(src->rank, src->dims, a, sizeof a),
                     tfs_shape_str(rank, dims, b, sizeof b));
        goto fail;
    }
    if (src->dtype == TFS_DTYPE_STRING) {
        /* Strings own their bytes per tensor, so a string "view" is a deep copy. */
        tfs_tensor *copy = NULL;
        rc = tfs_tensor_copy(src, &copy, st);
        if (rc != TFS_OK)
            goto fail;
        copy->rank = rank;
        for (int i = 0; i < rank; i++)
            copy->dims[i] = dims[i];
        tfs_free(t);
        *out = copy;
        return TFS_OK;
    }
    t->data = src->data;
    t->dealloc = unref_source;
    t->dealloc_arg = tfs_tensor_ref(src);
    *out = t;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    tfs_free(t);
    return rc;
}

enum tfs_code tfs_tensor_copy(const tfs_tensor *src, tfs_tensor **out, tfs_status *st)
{
    tfs_tensor *t = NULL;
    *out = NULL;
    enum tfs_code rc = tfs_tensor_new(src->dtype, src->rank, src->dims, &t, st);
    if (rc != TFS_OK)
        return rc;
    if (src->dtype == TFS_DTYPE_STRING) {
        const tfs_string *s = src->data;
        for (int64_t i = 0; i < src->nelem; i++) {
            rc = tfs_tensor_set_string(t, i, s[i].data, s[i].len, st);
            if (rc != TFS_OK) {
                tfs_tensor_unref(t);
                *out = NULL;
                return rc;
            }
        }
    } else if (src->nbytes > 0) {
        memcpy(t->data, src->data, src->nbytes);
    }
    *out = t;
    return TFS_OK;
}

tfs_tensor *tfs_tensor_ref(tfs_tensor *t)
{
    if (t)
        atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void tfs_tensor_unref(tfs_tensor *t)
{
    if (!t)
        return;
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (t->dtype == TFS_DTYPE_STRING && t->data) {
        tfs_string *s = t->data;
        for (int64_t i = 0; i < t->nelem; i++)
            tfs_free(s[i].data);
    }
    if (t->dealloc)
        t->dealloc(t->data, t->dealloc_arg);
    tfs__gemm_packed_free(atomic_load_explicit(&t->gemm_packed, memory_order_acquire));
    tfs__nn_winograd_free(atomic_load_explicit(&t->wino_packed, memory_order_acquire));
    tfs_free(t);
}

void *tfs__tensor_cache_keep(void *_Atomic *slot, void *mine, void (*free_fn)(void *))
{
    void *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(slot, &expected, mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return mine;
    free_fn(mine);   /* another thread kept its copy first */
    return expected;
}

bool tfs_tensor_exclusive(const tfs_tensor *t)
{
    if (!t || atomic_load_explicit(&((tfs_tensor *)t)->refs, memory_order_acquire) != 1)
        return false;
    return t->nbytes == 0 || t->dealloc == free_buffer;
}

/* ---- strings -------------------------------------------------------------------------------- */

tfs_string *tfs_tensor_strings(tfs_tensor *t)
{
    return t && t->dtype == TFS_DTYPE_STRING ? t->data : NULL;
}

enum tfs_code tfs_tensor_set_string(tfs_tensor *t, int64_t i, const void *data, size_t len,
                                    tfs_status *st)
{
    if (t->dtype != TFS_DTYPE_STRING)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "set_string on a tensor of dtype %s",
                       tfs_dtype_name(t->dtype));
    if (i < 0 || i >= t->nelem)
        return TFS_ERR(st, TFS_OUT_OF_RANGE, "string element %" PRId64 " outside [0, %" PRId64 ")",
                       i, t->nelem);
    char *copy = NULL;
    if (len > 0) {
        /* One spare byte keeps the element NUL-terminated, which C callers find convenient. */
        copy = tfs_malloc(len + 1);
        if (!copy)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory copying a %zu-byte string",
                           len);
        memcpy(copy, data, len);
        copy[len] = '\0';
    }
    tfs_string *s = t->data;
    tfs_free(s[i].data);
    s[i].data = copy;
    s[i].len = len;
    tfs_status_clear(st);
    return TFS_OK;
}
