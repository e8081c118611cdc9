/* Stand-ins for libtfserve-cuda.so, for cuda_module_test.py: the same table (cuda-impl.h) under
 * the same symbol, built three ways (tests/server/CMakeLists.txt):
 *
 *   STUB_FAKE_DEVICE  one "GPU" whose memory is host memory: copies are memcpy and the broadcasting
 *                     binary ops (all half_plus_two needs on a device) are host loops; every
 *                     other kernel fails, naming itself. tfserve places nodes on it and serves
 *                     through it exactly as through the real module, on machines without a GPU.
 *                     While the file TFS_FAKE_GPU_GONE names exists, cudaGetDeviceCount fails
 *                     as it does when a GPU has fallen off the bus.
 *                     Linked against a library that is not on the loader's path, it is the
 *                     module whose dependency is missing (as the real one without libcudnn).
 *   STUB_ABI          exports the table with another ABI version and nothing behind it.
 * STUB_DEPENDENCY builds the library STUB_NEEDS depends on (kept off the loader's path). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cuda/cuda-impl.h"

#if defined(STUB_NEEDS) || defined(STUB_DEPENDENCY)
int tfs_test_absent_dependency(void);
#endif

#if defined(STUB_DEPENDENCY)

int tfs_test_absent_dependency(void)
{
    return 0;
}

#elif defined(STUB_ABI)

__attribute__((visibility("default"))) const tfs_cuda_api tfs_cuda_module = {
    .abi_version = TFS_CUDA_ABI_VERSION + STUB_ABI,
    .size = sizeof(tfs_cuda_api),
};

#else

#ifdef STUB_NEEDS
/* Defined by the library the loader cannot find: the reference makes it a dependency. */
int (*const tfs_test_keep)(void) = tfs_test_absent_dependency;
#endif

struct tfs_cuda_stream {
    int dev;
};

static int fail(tfs_cuda_status *cs, const char *what)
{
    snprintf(cs->msg, sizeof cs->msg, "%s: not in the fake CUDA module", what);
    return 1;
}

static int device_count(int *count, tfs_cuda_status *cs)
{
    const char *gone = getenv("TFS_FAKE_GPU_GONE");
    *count = 0;
    if (gone && access(gone, F_OK) == 0) {
        snprintf(cs->msg, sizeof cs->msg, "cudaGetDeviceCount: the fake device is gone");
        return 1;
    }
    *count = 1;
    return 0;
}

static int device_info(int dev, tfs_cuda_device_info *out, tfs_cuda_status *cs)
{
    (void)cs;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fake device %d", dev);
    out->total_bytes = out->free_bytes = (size_t)512 << 20;   /* malloc'd, never all touched */
    out->cc_major = 9;
    return 0;
}

static int mem_alloc(int dev, size_t n, void **out, tfs_cuda_status *cs)
{
    (void)dev;
    *out = malloc(n ? n : 1);
    return *out ? 0 : fail(cs, "malloc");
}

static void mem_free(int dev, void *p)
{
    (void)dev;
    free(p);
}

static int stream_new(int dev, bool tf32, void *ws, size_t ws_bytes, tfs_cuda_stream **out,
                      tfs_cuda_status *cs)
{
    (void)tf32;
    (void)ws;
    (void)ws_bytes;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return fail(cs, "stream");
    (*out)->dev = dev;
    return 0;
}

static void stream_free(tfs_cuda_stream *s)
{
    free(s);
}

static int stream_ok(tfs_cuda_stream *s, tfs_cuda_status *cs)
{
    (void)s;
    (void)cs;
    return 0;
}

static int copy(tfs_cuda_stream *s, void *dst, const void *src, size_t n, tfs_cuda_status *cs)
{
    (void)s;
    (void)cs;
    memcpy(dst, src, n);
    return 0;
}

static int mem_set(tfs_cuda_stream *s, void *dst, int byte, size_t n, tfs_cuda_status *cs)
{
    (void)s;
    (void)cs;
    memset(dst, byte, n);
    return 0;
}

static int binary(tfs_cuda_stream *s, enum tfs_cuda_binop op, int rank, const int64_t *dims,
                  const int64_t *as, const int64_t *bs, const float *a, const float *b, float *y,
                  int64_t n, tfs_cuda_status *cs)
{
    (void)s;
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, ia = 0, ib = 0;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t k = rest % dims[d];
            rest /= dims[d];
            ia += k * as[d];
            ib += k * bs[d];
        }
        float x = a[ia], z = b[ib];
        switch (op) {
        case TFS_CUDA_ADD: y[i] = x + z; break;
        case TFS_CUDA_SUB: y[i] = x - z; break;
        case TFS_CUDA_MUL: y[i] = x * z; break;
        case TFS_CUDA_DIV: y[i] = x / z; break;
        default: return fail(cs, "binary op");
        }
    }
    return 0;
}

static int sgemm(tfs_cuda_stream *s, bool ta, bool tb, int m, int n, int k, const float *a,
                 const float *b, float *c, tfs_cuda_status *cs)
{
    (void)s, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)a, (void)b, (void)c;
    return fail(cs, "sgemm");
}

static int bias_act(tfs_cuda_stream *s, const float *x, const float *bias, float *y, int64_t n,
                    int64_t c, enum tfs_cuda_act act, float alpha, tfs_cuda_status *cs)
{
    (void)s, (void)x, (void)bias, (void)y, (void)n, (void)c, (void)act, (void)alpha;
    return fail(cs, "bias_act");
}

static int batch_norm(tfs_cuda_stream *s, const float *x, const float *scale, const float *offset,
                      const float *mean, const float *var, float eps, float *y, int64_t n,
                      int64_t c, float *fac, tfs_cuda_status *cs)
{
    (void)s, (void)x, (void)scale, (void)offset, (void)mean, (void)var, (void)eps, (void)y;
    (void)n, (void)c, (void)fac;
    return fail(cs, "batch_norm");
}

static int reduce(tfs_cuda_stream *s, enum tfs_cuda_reduce op, int rank, const int64_t *dims,
                  const bool *red, const float *x, float *y, tfs_cuda_status *cs)
{
    (void)s, (void)op, (void)rank, (void)dims, (void)red, (void)x, (void)y;
    return fail(cs, "reduce");
}

static int softmax(tfs_cuda_stream *s, const float *x, float *y, int rows, int cols,
                   tfs_cuda_status *cs)
{
    (void)s, (void)x, (void)y, (void)rows, (void)cols;
    return fail(cs, "softmax");
}

static size_t conv2d_scratch(const tfs_cuda_window *g)
{
    (void)g;
    return 0;
}

static int conv2d(tfs_cuda_stream *s, const tfs_cuda_window *g, const float *x, const float *f,
                  float *y, void *scratch, tfs_cuda_status *cs)
{
    (void)s, (void)g, (void)x, (void)f, (void)y, (void)scratch;
    return fail(cs, "conv2d");
}

static int pool(tfs_cuda_stream *s, bool max, const tfs_cuda_window *g, const float *x, float *y,
                tfs_cuda_status *cs)
{
    (void)s, (void)max, (void)g, (void)x, (void)y;
    return fail(cs, "pool");
}

__attribute__((visibility("default"))) const tfs_cuda_api tfs_cuda_module = {
    .abi_version = TFS_CUDA_ABI_VERSION,
    .size = sizeof(tfs_cuda_api),
    .device_count = device_count,
    .device_info = device_info,
    .malloc = mem_alloc,
    .free = mem_free,
    .host_alloc = mem_alloc,
    .host_free = mem_free,
    .stream_new = stream_new,
    .stream_free = stream_free,
    .stream_begin = stream_ok,
    .sync = stream_ok,
    .copy_h2d = copy,
    .copy_d2h = copy,
    .copy_d2d = copy,
    .memset = mem_set,
    .sgemm = sgemm,
    .bias_act = bias_act,
    .binary = binary,
    .batch_norm = batch_norm,
    .reduce = reduce,
    .softmax = softmax,
    .conv2d_scratch = conv2d_scratch,
    .conv2d = conv2d,
    .pool = pool,
};

#endif
