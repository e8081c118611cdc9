/* Devices: where sessions run their kernels. The CPU always; a CUDA GPU when tfserve was built
 * with CUDA (TFS_USE_CUDA), the CUDA module libtfserve-cuda.so can be opened (runtime/cuda/
 * module.c: only once a session asks for a GPU), a GPU is present and the session asks for one.
 *
 *     tfs_device_opts d = tfs_device_opts_default();
 *     tfs_device_parse("auto", &d.device, &d.gpu_id, &st);     // "cpu", "gpu", "gpu:1"
 *     tfs_runtime_set_device(&d, &st);                          // once, at startup
 *     tfs_session_opts so = tfs_session_opts_default();
 *     so.device = TFS_DEVICE_SERVING;                           // take the process's choice
 *
 * With a GPU, a session runs the nodes the GPU supports there (float MatMul, Conv2D, pooling,
 * BiasAdd, activations, broadcasting arithmetic, Softmax, inference FusedBatchNorm, the fused
 * products) and everything else (strings, parsing, shapes, variables) on the CPU, copying values
 * across once per run where a CPU node feeds a GPU node or back; fetched values always come back
 * in host memory. A GPU reserves its memory pool (memory_fraction of the device) the first time
 * a session uses it, so runs never allocate device memory. Thread-safe.
 */
#ifndef TFS_RUNTIME_DEVICE_H
#define TFS_RUNTIME_DEVICE_H

#include <stdbool.h>

#include "runtime/status.h"

enum tfs_device {
    TFS_DEVICE_CPU = 0,   /* the CPU kernels only (the default) */
    TFS_DEVICE_AUTO,      /* GPU gpu_id when present and the graph has nodes it supports, else
                           * the CPU; the session logs which and why */
    TFS_DEVICE_GPU,       /* GPU gpu_id; creating the session fails without it */
    TFS_DEVICE_SERVING,   /* sessions only: the device tfs_runtime_set_device chose */
};

/* Default of tfs_device_opts.memory_fraction and .executors. */
#define TFS_DEVICE_MEMORY_FRACTION 0.5
#define TFS_DEVICE_EXECUTORS 4

typedef struct tfs_device_opts {
    enum tfs_device device;   /* what TFS_DEVICE_SERVING sessions use; CPU, AUTO or GPU */
    int             gpu_id;   /* >= 0 */
    /* Share of each GPU's memory reserved as its pool when first used, in (0, 1]; 0: the
     * default. tfserve: --per_process_gpu_memory_fraction. */
    double memory_fraction;
    /* Let cuBLAS/cuDNN use TF32 tensor cores for float products (faster, ~1e-3 relative
     * error); off by default, so GPU results match the CPU's to float rounding. */
    bool allow_tf32;
    /* Runs one GPU executes at once (one stream and cuBLAS/cuDNN handle set each); <= 0: the
     * default. */
    int executors;
} tfs_device_opts;

tfs_device_opts tfs_device_opts_default(void);

/* Sets the process's device settings, used by TFS_DEVICE_SERVING sessions and by every GPU
 * the first time it is opened (a GPU already opened keeps its pool and executors).
 * INVALID_ARGUMENT for a device other than CPU/AUTO/GPU, a negative gpu_id, or a fraction
 * outside [0, 1]. Thread-safe; meant for startup. */
enum tfs_code tfs_runtime_set_device(const tfs_device_opts *o, tfs_status *st);

/* Parses "auto", "cpu", "gpu" (= gpu:0) or "gpu:N"; INVALID_ARGUMENT naming the text
 * otherwise. */
enum tfs_code tfs_device_parse(const char *text, enum tfs_device *device, int *gpu_id,
                               tfs_status *st);

/* Number of usable GPUs (opens the CUDA module when it is not open yet). 0 when there are none,
 * with the reason in `why` (n bytes, may be 0): "no GPU: cudaGetDeviceCount: CUDA driver version
 * is insufficient ...", "no GPU: no CUDA module: ...", "no GPU: CUDA module PATH: <the loader's
 * message>", "no GPU: CUDA module PATH has ABI version ...", "no GPU: no CUDA driver: ..." (device
 * auto) or "no GPU: tfserve was built without CUDA". Never touches a device's memory. */
int tfs_runtime_gpu_count(char *why, size_t n);

/* Whether TFS_DEVICE_SERVING sessions may put nodes on a GPU: the device setting is not CPU and
 * this process has a usable GPU. Graph rewrites that produce CPU-only kernels ask this. */
bool tfs_runtime_serving_may_use_gpu(void);

#endif
