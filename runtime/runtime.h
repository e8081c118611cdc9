/* runtime: tfserve's tensor and graph engine. It knows nothing of files, protobuf, JSON or HTTP:
 * the other modules (and users linking libtfserve) build graphs and run them through it.
 *
 *     tfs_graph *g; ... build or import ...; tfs_graph_finalize(g, &st);
 *     tfs_session *s; tfs_session_new(g, NULL, &s, &st);
 *     tfs_session_run(s, feeds, nfeeds, fetches, nfetches, NULL, 0, outputs, &st);
 *
 * Conventions: fallible functions return enum tfs_code and take tfs_status *st last; parameters
 * are borrowed unless a comment says "takes ownership" or "keeps a reference"; _new results are
 * owned by the caller; free/unref functions accept NULL.
 */
#ifndef TFS_RUNTIME_RUNTIME_H
#define TFS_RUNTIME_RUNTIME_H

#include "runtime/alloc.h"
#include "runtime/buf.h"
#include "runtime/build.h"
#include "runtime/device.h"
#include "runtime/file.h"
#include "runtime/graph.h"
#include "runtime/op-signature.h"
#include "runtime/log.h"
#include "runtime/rewrite.h"
#include "runtime/session.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

/* ---- CPU: intra-op threads ------------------------------------------------------------------ */

/* The kernels' parallel loops (and float matrix products) run on one process-wide pool of n
 * threads: the thread that runs the session plus n - 1 workers. n <= 0 means the default,
 * tfs_runtime_cpu_count(). OpenBLAS (float64 products only) is kept at one thread so that it never
 * competes with the pool. When several threads run sessions at once, together they use no more
 * than n threads for loops (each runs its loops inline while the pool is in use). Thread-safe: a
 * change waits for loops in progress to end, and the workers are restarted with the new size on
 * the next loop. Set it once at startup (tfserve: --tensorflow_intra_op_parallelism). */
void tfs_runtime_set_num_threads(int n);
/* The pool's size now (>= 1). Thread-safe. */
int tfs_runtime_num_threads(void);
/* The CPUs the calling thread may run on (>= 1): its affinity mask, which taskset, a container's
 * cpuset and mpirun's binding narrow, as TensorFlow counts them; the online CPUs where the mask
 * cannot be read. The default of every "one per CPU" setting. */
int tfs_runtime_cpu_count(void);
/* The instruction set of the float GEMM kernels chosen for this CPU: "avx512", "avx2" or "c". */
const char *tfs_runtime_gemm_kernel(void);

/* ---- memory: the largest tensor ------------------------------------------------------------- */

/* The most bytes the runtime allocates for one tensor: a kernel's output, a tensor decoded from
 * a request, a variable read from a checkpoint. A larger one fails with RESOURCE_EXHAUSTED
 * ("... exceeds the N-byte limit on one tensor") before anything is allocated. This is what
 * stops a request whose values decide a shape (Fill's dims, Tile's multiples, Range's limit, a
 * num_segments, a gRPC tensor whose one value is broadcast to a large shape) from taking more
 * memory than the machine has: Linux lets such an allocation succeed and kills the process when
 * its pages are touched. n = 0 restores the default, half the memory the process may use
 * (physical memory, or its cgroup v2 memory.max when lower); every value is capped at
 * TFS_TENSOR_MAX_BYTES. Tensors wrapping memory that exists already are not limited by it.
 * Thread-safe; set it once at startup (tfserve: --max_tensor_bytes). */
void tfs_runtime_set_max_tensor_bytes(size_t n);
/* The limit now. Thread-safe. */
size_t tfs_runtime_max_tensor_bytes(void);
/* A lower limit for the tensors the calling thread allocates while it is set (0: none), e.g. what
 * is left of a model memory budget while the model loads. tfs_runtime_max_tensor_bytes() then
 * returns the lower of the two on this thread. Returns the previous value, to put back. */
size_t tfs_runtime_set_thread_max_tensor_bytes(size_t n);

#endif
