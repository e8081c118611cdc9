/* The backend interface: how a session runs some of a plan's nodes somewhere other than the CPU
 * kernels of ops.def. Internal to runtime/ (and the backend folders under it, runtime/cuda/).
 *
 * DESIGN. The CPU is not a backend object: its kernels are the op table (tfs__ops[].kernel), and
 * a session without an accelerator never reaches a backend (session.c's step loop calls the
 * device hooks of session-gpu.c only for plans placed on one). A session
 * made with a device (tfs_session_opts.device) holds one tfs_backend; for each run plan, the
 * placement pass (session-gpu.c) puts every node the backend supports on it and leaves the rest
 * on the CPU. Values then live where their producer ran ("device tensors": a tfs_tensor whose
 * data is device memory, made only by the backend); a consumer on the other side gets a copy made
 * once per run and value, and fetches are copied back to the host. A run takes one executor of
 * the backend for its whole duration (exec_begin .. exec_end): its stream, library handles and
 * staging memory belong to that run alone. Kernels see the executor in tfs_kernel_ctx.exec.
 *
 * The vtable is versioned (api_version) as style.md 3.8 asks; slots are all required.
 */
#ifndef TFS_RUNTIME_BACKEND_IMPL_H
#define TFS_RUNTIME_BACKEND_IMPL_H

#include "runtime/runtime-impl.h"

#define TFS_BACKEND_API_VERSION 1

typedef struct tfs_backend tfs_backend;

/* What the backend says about a node (placement). */
enum tfs_placement {
    TFS_PLACE_CPU = 0,      /* not supported: the CPU runs it */
    TFS_PLACE_DEVICE,       /* supported: runs on the backend */
    TFS_PLACE_FOLLOW,       /* a view or pass-through (Identity, Reshape): on the backend only
                             * when its input 0 is produced there, else on the CPU */
};

struct tfs_backend_i {
    /* "gpu:0". Never NULL. */
    const char *(*name)(const tfs_backend *b);
    /* Placement of a node by its op and attrs (shapes are not known before a run). */
    enum tfs_placement (*supports_op)(const tfs_backend *b, const tfs_node *n);
    /* Bit i set: input i of this (placed) node is read on the host (Reshape's shape). */
    unsigned (*host_inputs)(const tfs_backend *b, const tfs_node *n);
    /* Takes an idle executor for one run (waits while all are busy) and makes its device
     * current on the calling thread. */
    enum tfs_code (*exec_begin)(tfs_backend *b, void **exec, tfs_status *st);
    /* Ends the run: waits for the executor's stream, releases the device memory the run's
     * values held, returns the executor. A device error found while waiting is returned as
     * INTERNAL (when the run had not failed already), naming the last node launched. */
    enum tfs_code (*exec_end)(tfs_backend *b, void *exec, enum tfs_code run_rc, tfs_status *st);
    /* Notes the node about to run (for messages about asynchronous device errors). */
    void (*exec_node)(void *exec, const tfs_node *n);
    /* A device copy of host tensor t (new reference). `constant`: t is immutable and may be
     * kept on the device, keyed by t, for later runs (a Const's value). */
    enum tfs_code (*upload)(tfs_backend *b, void *exec, tfs_tensor *t, bool constant,
                            tfs_tensor **out, tfs_status *st);
    /* A host copy of device tensor t (new reference), complete when this returns. */
    enum tfs_code (*download)(tfs_backend *b, void *exec, const tfs_tensor *t, tfs_tensor **out,
                              tfs_status *st);
    /* Drops kept constants no one else references any more (their graph was freed). */
    void (*sweep)(tfs_backend *b);
};

struct tfs_backend {
    int                         api_version;   /* TFS_BACKEND_API_VERSION */
    const struct tfs_backend_i *iface;
    const tfs_kernel_fn        *kernels;       /* [TFS_OP_COUNT]; NULL = unsupported */
    void                       *ctx;           /* backend-private */
};

/* ---- registry (backend-reg.c) ---------------------------------------------------------------- */

/* The backend of GPU `id`, opened on first use with the process's device settings
 * (tfs_runtime_set_device) and kept for the life of the process (borrowed). FAILED_PRECONDITION
 * when there is no usable GPU, with the reason: "no GPU: cudaGetDeviceCount: ..." or "built
 * without CUDA"; NOT_FOUND for an id past the devices present; RESOURCE_EXHAUSTED when the
 * memory pool cannot be reserved. Thread-safe. */
enum tfs_code tfs__backend_gpu(int id, tfs_backend **out, tfs_status *st);

/* Tests only: while b is set (NULL clears it), tfs__backend_gpu returns b for every id, so the
 * placement and crossing logic runs against a fake device on machines without a GPU. */
void tfs__backend_set_fake(tfs_backend *b);

/* The process's device settings (tfs_runtime_set_device; defaults before that). */
void tfs__device_settings(tfs_device_opts *out);

#endif
