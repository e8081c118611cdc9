/* runtime internals shared by the files of runtime/: the graph's node layout, the op table and the
 * kernel interface. Include only from runtime/ (and tests).
 *
 * DESIGN. The op set is closed and listed once in runtime/ops.def; including it with different
 * TFS_OP definitions yields enum tfs_op, the op table (TensorFlow name, CPU kernel, output-count
 * rule, flags) and the kernel prototypes. A kernel reads its node's attributes and input tensors
 * and stores one new reference per output in k->out[]; outputs it computes are best allocated
 * with tfs__kernel_output, which places them by the run's memory plan (see the reuse rule there). Reference-typed tensors (VariableV2 outputs,
 * dtype base+100) carry a tfs_variable*; the session replaces them by the variable's value before a
 * kernel sees them unless the op has TFS_OPF_REF_INPUTS (Assign). DT_RESOURCE handles
 * (VarHandleOp) pass through every op untouched; ReadVariableOp and friends dereference them.
 * Scalar DT_VARIANT tensors hold TensorLists (kernels/tensorlist.c) and optionals
 * (kernels/optional.c). Ops with TFS_OPF_FUNCTIONS
 * run library functions named by their func attrs through tfs__session_call (kernels/control.c).
 */
#ifndef TFS_RUNTIME_RUNTIME_IMPL_H
#define TFS_RUNTIME_RUNTIME_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "runtime/runtime.h"

/* ---- graph layout --------------------------------------------------------------------------- */

typedef struct tfs_edge {
    int node;    /* producer node id */
    int index;   /* output index */
} tfs_edge;

struct tfs_op_def;

typedef struct tfs_node {
    char                    *name;
    char                    *op_type;
    const struct tfs_op_def *op;        /* NULL: no kernel for this op type */
    int                      n_text_inputs;
    char                   **text_inputs; /* as added: "src:1", "^src" */
    int                      n_inputs;    /* data inputs, resolved at finalize */
    tfs_edge                *inputs;
    int                      n_ctrl;      /* control inputs, resolved at finalize */
    int                     *ctrl;
    int                      n_attrs;
    char                   **attr_names;
    tfs_attr_value          *attrs;
    int                      n_outputs;   /* from op->nout at finalize; -1 when the op is unknown */
} tfs_node;

/* One function of a graph's library (graph.h). Owned by the graph. */
typedef struct tfs_graph_function {
    char      *name;
    tfs_graph *body;       /* finalized; a reference */
    int        n_in;
    char     **inputs;     /* [n_in] body node names fed with the arguments */
    int        n_out;
    char     **outputs;    /* [n_out] body tensor names returned */
} tfs_graph_function;

struct tfs_graph {
    atomic_int  refs;
    int                 n_funcs;
    tfs_graph_function *funcs;   /* the function library (flat; bodies have none) */
    int         n_nodes;
    int         cap_nodes;
    tfs_node   *nodes;
    int        *hash;          /* open addressing over node ids, -1 = empty; size hash_cap */
    int         hash_cap;
    bool        finalized;
    tfs_status  err;           /* sticky builder error */
    /* Builder state (build.c): the name-scope prefix, and its length before each push. */
    char       *scope;
    int         scope_depth;
    size_t     *scope_lens;
};

const tfs_node *tfs__graph_node(const tfs_graph *g, int id);
/* Data input i of a node as an edge, also before finalize (parsed from the text input); false
 * when there is no such input or it names no node. */
bool tfs__graph_input_edge(const tfs_graph *g, int node, int i, tfs_edge *e);
/* Number of data (non-control) inputs of a node, also before finalize. */
int tfs__graph_data_input_count(const tfs_graph *g, int node);
/* Builder state of build.c, freed with the graph. */
void tfs__build_state_free(tfs_graph *g);
/* Index of the library function `name` in g->funcs, or -1. */
int tfs__graph_function_index(const tfs_graph *g, const char *name);

/* ---- kernels -------------------------------------------------------------------------------- */

typedef struct tfs_mem_run tfs_mem_run;   /* a run's memory plan state (memplan-impl.h) */

typedef struct tfs_kernel_ctx {
    tfs_session       *sess;
    const tfs_graph   *graph;
    const tfs_node    *node;
    tfs_tensor *const *in;     /* n_in borrowed inputs (refs already dereferenced, see above) */
    int                n_in;
    tfs_tensor       **out;    /* n_out slots, NULL on entry; kernel stores new references */
    int                n_out;
    tfs_mem_run       *mem;    /* NULL: tfs__kernel_output allocates from the heap */
    int                mem_out0;   /* the run's number for output 0 (memplan-impl.h) */
    void              *exec;       /* the backend executor running the node (backend-impl.h);
                                    * NULL for CPU kernels */
    /* The run the node is in (session.c), for tfs__kernel_take_input; NULL: no input may be
     * taken (kernels run outside a session's plan). */
    const struct run_plan *plan;
    struct run_state      *run;
} tfs_kernel_ctx;

typedef enum tfs_code (*tfs_kernel_fn)(tfs_kernel_ctx *k, tfs_status *st);

/* Output j (< k->n_out) of dtype dt and shape [rank, dims] for the kernel to fill: a new
 * reference the kernel stores in k->out[j]. Errors as tfs_tensor_new's (bad rank or dims, too
 * large, out of memory).
 *
 * The contents are UNDEFINED: the kernel must write every element (tfs__kernel_output_zeroed
 * gives zeros, for kernels that accumulate into their output or leave elements out). When the
 * session has a memory plan for this run (runtime/memplan.c) the tensor lies in a region of the
 * run's arena that other values of the run use at other times; otherwise it is a heap tensor.
 * Kernels may treat both alike: keep references to the tensor, return it, alias it (views via
 * tfs_tensor_reshape, passing it through as an output) -- reuse is the planner's business.
 *
 * THE REUSE RULE. A planned region is handed out only when no tensor over an overlapping region
 * is alive: every planned tensor marks its region dead from its deallocator, i.e. when its last
 * reference goes (including the reference a view holds on its source), and tfs__kernel_output
 * falls back to the heap when any overlapping region is still live. So a fetched output, a value
 * assigned to a variable, a tensor stored in a TensorList or returned from a function, or an
 * Identity/Reshape/Squeeze/ExpandDims/Snapshot alias of any of them keeps its region to itself
 * for as long as it is referenced, whatever the plan assumed; a run never has to predict aliases.
 * What the planner learns about lifetimes (values alive at the end of a run are not planned next
 * time) only decides how often the fallback is needed. Nothing may write into a tensor's data
 * through a pointer kept after releasing its last reference. Strings and other dtypes that own
 * per-element memory are never planned. */
enum tfs_code tfs__kernel_output(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                                 const int64_t *dims, tfs_tensor **out, tfs_status *st);
enum tfs_code tfs__kernel_output_zeroed(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                                        const int64_t *dims, tfs_tensor **out, tfs_status *st);
/* Input i itself as an output to write over in place (a new reference), when the session let go
 * of it: this node is its last use in the run (no later consumer, not fetched), it was not fed,
 * and nothing else references it (no alias, variable or Const), so no one can see the writes;
 * and when it has dtype dt and shape [rank, dims]. NULL otherwise (the kernel then allocates as
 * usual). A kernel that takes an input must read each of its elements before writing it. Saves
 * the output's buffer and, for an output that does not fit in cache, a stream to memory:
 * ResNet-50's residual convolutions write over the tensor they add (kernels/nn-conv.c). */
tfs_tensor *tfs__kernel_take_input(tfs_kernel_ctx *k, int i, enum tfs_dtype dt, int rank,
                                   const int64_t *dims);

/* Plan-cache and memory-plan counters of a session (and the function bodies it runs), since
 * tfs_session_new. For tests and benchmarks. */
typedef struct tfs_plan_stats {
    int64_t plan_hits;         /* tfs_session_run calls that found their run plan cached */
    int64_t plan_misses;       /* ... that built one (errors included) */
    int64_t mem_hits;          /* runs (function bodies included) with a memory plan for their
                                * feed shapes */
    int64_t mem_misses;        /* runs that learned one (buffer reuse on) */
    int64_t planned_outputs;   /* tfs__kernel_output results in a planned region */
    int64_t heap_outputs;      /* tfs__kernel_output results on the heap (reuse on) */
    int64_t arenas_created;    /* arenas allocated; flat in a steady state */
    int64_t taken_inputs;      /* tfs__kernel_take_input results (outputs written in place) */
} tfs_plan_stats;
void tfs__session_plan_stats(const tfs_session *s, tfs_plan_stats *out);

/* Test hooks, process-wide, read when a session is created (NO_REUSE) or per output:
 *   NO_REUSE      sessions behave as if tfs_session_opts.disable_buffer_reuse were set;
 *   POISON        tfs__kernel_output fills undefined outputs with 0xff bytes (NaN, -1), so a
 *                 kernel that relies on zeroed outputs fails its tests;
 *   PLAN_ESCAPED  values alive at the end of a run are planned too (each in a region of its
 *                 own), so single-op test graphs, whose only output is fetched, exercise
 *                 kernels writing into arenas. Safe by the reuse rule, only wasteful. */
enum {
    TFS_PLAN_TEST_NO_REUSE = 1u << 0,
    TFS_PLAN_TEST_POISON = 1u << 1,
    TFS_PLAN_TEST_PLAN_ESCAPED = 1u << 2,
};
void tfs__plan_set_test_flags(unsigned flags);
unsigned tfs__plan_test_flags(void);
/* Bytes of idle (pooled) arenas all memory plans of the process may keep together; an arena
 * beyond it is freed when its run ends. Negative: the default, 512 MiB. */
void tfs__plan_set_idle_budget(int64_t bytes);
/* Number of outputs given the node's attrs; -1 when they are missing or invalid. NULL = 1. */
typedef int (*tfs_nout_fn)(const tfs_node *n);

enum {
    TFS_OPF_REF_INPUTS = 1u << 0,   /* inputs stay reference-typed (Assign, AssignAdd) */
    TFS_OPF_STATEFUL   = 1u << 1,   /* never constant-folded, never deduplicated */
    TFS_OPF_FUNCTIONS  = 1u << 2,   /* func attrs name library functions it runs (While, If) */
    TFS_OPF_RANDOM     = 1u << 3,   /* keeps a generator in the session (rng-impl.h) */
};

struct tfs_op_def {
    const char   *name;      /* TensorFlow op type */
    tfs_kernel_fn kernel;    /* CPU kernel */
    tfs_nout_fn   nout;
    unsigned      flags;
};

enum tfs_op {
#define TFS_OP(e, name, kernel, nout, flags, sig) TFS_OP_##e,
#include "runtime/ops.def"
#undef TFS_OP
    TFS_OP_COUNT
};

#define TFS_OP(e, name, kernel, nout, flags, sig) \
    enum tfs_code kernel(tfs_kernel_ctx *k, tfs_status *st);
#include "runtime/ops.def"
#undef TFS_OP

extern const struct tfs_op_def tfs__ops[TFS_OP_COUNT];
const struct tfs_op_def *tfs__op_lookup(const char *op_type);   /* NULL when unknown */

/* Output-count rules shared by ops.def entries. */
int tfs__nout_zero(const tfs_node *n);
int tfs__nout_list_T(const tfs_node *n);        /* IdentityN: len(attr T) */
int tfs__nout_list_dtypes(const tfs_node *n);   /* RestoreV2: len(attr dtypes) */
int tfs__nout_list_output_types(const tfs_node *n);   /* OptionalGetValue: len(output_types) */
int tfs__nout_parse_example(const tfs_node *n);    /* 3*Nsparse + Ndense */
int tfs__nout_parse_example_v2(const tfs_node *n); /* 3*num_sparse + len(Tdense) + 2*len(ragged_value_types) */

/* Decodes one serialized tf.Example completely (every feature's values, not only the requested
 * ones), by the rules the ParseExample kernels use (kernels/parsing.c). OK, or INVALID_ARGUMENT for
 * malformed bytes. *n_features gets the number of distinct keys, *n_values the values they hold
 * (either may be NULL). For tests and the fuzz target. */
enum tfs_code tfs__example_check(const void *data, size_t len, int64_t *n_features,
                                 int64_t *n_values, tfs_status *st);

/* nn (helper nn): shared by runtime/kernels/nn-*.c (defined in nn-util.c) */
int tfs__nn_nout_batch_norm(const tfs_node *n);      /* FusedBatchNorm, V2, and the Grads: 5 */
int tfs__nn_nout_batch_norm_v3(const tfs_node *n);   /* FusedBatchNormV3: 6 */
/* Optional attrs with TensorFlow's default when absent (stripped default attrs). */
enum tfs_code tfs__nn_attr_bool(const tfs_node *n, const char *name, bool dflt, bool *out,
                                tfs_status *st);
enum tfs_code tfs__nn_attr_float(const tfs_node *n, const char *name, float dflt, float *out,
                                 tfs_status *st);
/* A list(int) attr of exactly `count` values; when absent, `dflt` (NULL: the attr is required). */
enum tfs_code tfs__nn_attr_ints(const tfs_node *n, const char *name, int count,
                                const int64_t *dflt, int64_t *out, tfs_status *st);

/* A 2-D product's operands (MatMul, _FusedMatMul, on the CPU and the GPU; kernels/nn-matmul.c):
 * the attrs transpose_a and transpose_b (default false) and the product's m x n with inner size
 * k. INVALID_ARGUMENT as TensorFlow words it when a or b is not a matrix or their inner sizes
 * differ; UNIMPLEMENTED for a dimension beyond INT_MAX (BLAS and cuBLAS take int sizes). */
typedef struct tfs_nn_matmul {
    bool    ta, tb;
    int64_t m, n, k;
} tfs_nn_matmul;
enum tfs_code tfs__nn_matmul_dims(const tfs_node *node, const tfs_tensor *a, const tfs_tensor *b,
                                  tfs_nn_matmul *mm, tfs_status *st);
/* One product C[m, n] = op(A)[m, k] x op(B)[k, n], row-major with leading dimensions lda and
 * ldb (ldc = n), as MatMul computes it: float and double through tfs__sgemm/tfs__dgemm, int32
 * and int64 wrapping around; b_const as tfs__sgemm_const_b's (NULL: none). C must hold zeros when
 * k is 0 (no product is made then). The caller has checked that m, n, k, lda and ldb fit in an
 * int. False, with nothing done, for another dtype (kernels/nn-matmul.c; Einsum uses it). */
bool tfs__nn_gemm(enum tfs_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  const void *a, int64_t lda, const tfs_tensor *b_const, const void *b,
                  int64_t ldb, void *c);
/* The geometry of a 2-D NHWC window op (Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool). */
typedef struct tfs_nn_geom {
    int64_t batch, in_h, in_w, in_c;
    int64_t k_h, k_w, stride_h, stride_w, dil_h, dil_w;
    int64_t pad_top, pad_left;             /* the extra SAME pixel goes at the bottom/right */
    int64_t out_h, out_w;
} tfs_nn_geom;
/* Fills g from a rank-4 NHWC input, the window size and the node's attrs strides, dilations
 * (when `dilations` is true), padding (SAME, VALID, EXPLICIT with explicit_paddings) and
 * data_format (NHWC only), by TensorFlow's rules; INVALID_ARGUMENT naming the node otherwise. */
enum tfs_code tfs__nn_geom_init(const tfs_node *n, const tfs_tensor *in, int64_t k_h, int64_t k_w,
                                bool dilations, tfs_nn_geom *g, tfs_status *st);
/* The same from an NHWC shape alone (the gradient ops get the input's shape as a tensor). */
enum tfs_code tfs__nn_geom_init_shape(const tfs_node *n, int rank, const int64_t *dims, int64_t k_h,
                                      int64_t k_w, bool dilations, tfs_nn_geom *g, tfs_status *st);
/* Conv2D's patch matrix (kernels/nn-conv.c): rows [r0, r0 + rows) of the flattened (n, oh, ow)
 * space, each the k_h*k_w*in_c input values under that output pixel's window (zeros in the
 * padding), elements of esz bytes, into P. */
void tfs__nn_im2col(const tfs_nn_geom *g, const void *in, size_t esz, int64_t r0, int64_t rows,
                    void *P);
/* What a float product's caller would otherwise do in a pass over C after it (a fused bias,
 * residual Add and activation): tfs__sgemm_epi (below) has its micro-kernel apply it to each
 * value of C between computing and storing it, instead of writing the output, reading it back
 * and writing it again (ResNet-50's first stage at batch 8 has outputs of 25.7 MB). In this
 * order, with the very expressions of the BiasAdd, Add, Relu and Relu6 kernels, so the bits are
 * those of the separate pass:
 *   c = c + bias[j];  c = c + side[i * ld_side + j];  c = c < 0 ? 0 : c (> 6 ? 6 : c for Relu6)
 * the bias always, the added tensor only where side is set, the clamp only for an activation. */
enum tfs_gemm_act { TFS_GEMM_ACT_NONE, TFS_GEMM_ACT_RELU, TFS_GEMM_ACT_RELU6 };
typedef struct tfs_gemm_epi {
    const float      *bias;      /* [n]; required (a fused op always has one) */
    const float      *side;      /* [m, ld_side], row i of C's own rows; or NULL */
    int64_t           ld_side;
    enum tfs_gemm_act act;
} tfs_gemm_epi;
/* Called on each chunk of Conv2D output rows ([n_rows, n_cols], row-major) right after its GEMM;
 * row0: the chunk's first row in the whole output [batch * out_h * out_w, out_c]. */
typedef void (*tfs_nn_rows_fn)(void *arg, void *rows, int64_t row0, int64_t n_rows,
                               int64_t n_cols);
/* Float convolution with dilation 1 without patches (kernels/nn-conv-direct.c): whether g (and
 * out_c filter columns) suits it, reading the filter in place or (only a Const's: filter_const)
 * from a packed copy, and the convolution of in [batch, in_h, in_w, in_c] with f ([k_h * k_w *
 * in_c, out_c] row-major; packed: NULL, or f's tfs__gemm_whole_k_panels, read instead) into out
 * [batch, out_h, out_w, out_c], applying epi (NULL: none; its rows are output pixels) to each
 * tile once final and passing each output row (out_w pixels) to rows_fn (NULL: none) once
 * written. False, nothing written, when the lanes' padded blocks cannot be allocated. */
enum tfs_nn_direct { TFS_NN_DIRECT_NONE, TFS_NN_DIRECT_IN_PLACE, TFS_NN_DIRECT_PACKED };
enum tfs_nn_direct tfs__nn_conv2d_direct_choice(const tfs_nn_geom *g, int64_t out_c,
                                                bool filter_const);
bool tfs__nn_conv2d_direct(const tfs_nn_geom *g, const float *in, const float *f, int64_t out_c,
                           float *out, tfs_nn_rows_fn rows_fn, void *arg,
                           const tfs_gemm_epi *epi, const float *packed);
/* Float 3x3 convolution with stride 1 by Winograd's F(2x2, 3x3) (kernels/nn-conv-winograd.c):
 * whether g (and out_c filter columns, filter_const: a Const's filter) suits it, and the
 * convolution of in [batch, in_h, in_w, in_c] with the filter tensor f [3, 3, in_c, out_c] into
 * out [batch, out_h, out_w, out_c], applying epi (NULL: none; its rows are output pixels) to each
 * value before its store. False, nothing written, when memory runs out or f's tensor keeps a
 * transform made for another micro-kernel (tests that switch kernels). */
bool tfs__nn_conv2d_winograd_ok(const tfs_nn_geom *g, int64_t out_c, bool filter_const);
bool tfs__nn_conv2d_winograd(const tfs_nn_geom *g, const float *in, const tfs_tensor *f,
                             int64_t out_c, float *out, const tfs_gemm_epi *epi);
void tfs__nn_winograd_free(void *packed);   /* a tensor's wino_packed; NULL-safe */
/* Conv2D on k's inputs 0 (input) and 1 (filter) with k's node's attrs (T, strides, padding, ...),
 * with an epilogue on the output [batch * out_h * out_w, out_c]: epi (NULL: none), which the float
 * products apply to each tile as it is final, or else rows_fn (NULL: none), called on each chunk
 * of output rows right after its product -- also on an all-zero output when the input has no
 * channels. A caller whose epilogue epi can express passes both (the same epilogue): rows_fn
 * serves float64 and the outputs no product writes. rows_fn may run on several threads at once,
 * for disjoint chunks. side_input: the input whose tensor is epi's added tensor (-1: none); the
 * output is written over it in place where the session lets it go (tfs__kernel_take_input) and
 * the product reads each of its elements before writing it. Stores the output in k->out[0].
 * Errors as Conv2D's (kernels/nn-conv.c). */
enum tfs_code tfs__nn_conv2d(tfs_kernel_ctx *k, tfs_nn_rows_fn rows_fn, void *arg,
                             const tfs_gemm_epi *epi, int side_input, tfs_status *st);
/* control flow and TensorLists (helper control): kernels/control.c, kernels/tensorlist.c */
int tfs__nout_list_Tout(const tfs_node *n);     /* If: len(attr Tout) */
int tfs__nout_two(const tfs_node *n);           /* TensorListPopBack: 2 */
/* A new scalar DT_VARIANT tensor holding obj (kernels/tensorlist.c): the tensor takes ownership
 * of obj, and dealloc(obj, NULL) runs when its last reference goes, also here when out of memory
 * (then NULL). obj must start with a uint32_t magic number naming its kind (the TensorList and
 * optional kernels check it before use). Only kernels make variant tensors: tfs_tensor_new
 * refuses the dtype, and nbytes 0 keeps anything copying tensor bytes from forging one. */
tfs_tensor *tfs__variant_tensor_new(void *obj, tfs_tensor_dealloc dealloc);
/* Resolves a func attr's value to a prepared library function (index for tfs__session_call);
 * NOT_FOUND naming the function when the library lacks it. */
enum tfs_code tfs__session_function(const tfs_session *s, const char *name, int *fn,
                                    tfs_status *st);
/* Runs library function fn on n_args borrowed arguments; results[i] receive new references
 * (all NULL on failure). Errors of the body name its node; counts must match the function's. */
enum tfs_code tfs__session_call(tfs_session *s, int fn, tfs_tensor *const *args, int n_args,
                                tfs_tensor **results, int n_results, tfs_status *st);
/* tfs_session_opts.max_loop_iterations as the session applies it (default filled in). */
int64_t tfs__session_max_loop_iterations(const tfs_session *s);
/* On a loop-heavy kernel function: also compiled for AVX-512 and AVX2, the copy the CPU runs
 * chosen once at load (GCC/clang function multiversioning). The runtime is built for baseline
 * x86-64 (SSE2, 4 floats per instruction); elementwise passes over activations, such as the
 * fused bias + ReLU epilogue and MaxPool, run much faster at 16 (bench/README.md). Only for
 * code whose results do not depend on the instruction set (no contraction into FMA: -std=c11
 * turns it off in GCC; selects, adds and compares are exact). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define TFS_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TFS_SIMD_CLONES
#endif
/* array, indexing and string ops (helper ops-array): kernels/array-util.c */
#define TFS_ARR_MAX_LOOP 16   /* axes of tfs__arr_strided_copy's index space */
int tfs__nout_attr_num(const tfs_node *n);    /* Unpack: attr num */
int tfs__nout_attr_N(const tfs_node *n);      /* ShapeN: attr N */
int tfs__nout_num_split(const tfs_node *n);   /* Split, SplitV: attr num_split */
/* Element i of an int32 or int64 tensor. */
int64_t tfs__arr_int_at(const tfs_tensor *t, int64_t i);
/* An int32/int64 scalar (or one-element vector) input; errors name the node and `what`. */
enum tfs_code tfs__arr_int_scalar(const tfs_node *n, const tfs_tensor *t, const char *what,
                                  int64_t *out, tfs_status *st);
/* An int32/int64 1-D input of at most max_len elements into out[]. */
enum tfs_code tfs__arr_int_vector(const tfs_node *n, const tfs_tensor *t, const char *what,
                                  int64_t max_len, int64_t *out, int *len, tfs_status *st);
/* axis in [-rank, rank) -> [0, rank). */
enum tfs_code tfs__arr_axis(const tfs_node *n, int64_t axis, int rank, const char *what,
                            int *out, tfs_status *st);
/* t's dtype equals attr `attr` when the node has it, and is one the runtime holds (not resource). */
enum tfs_code tfs__arr_check_T(const tfs_node *n, const tfs_tensor *t, const char *attr,
                               const char *what, tfs_status *st);
/* Row-major element strides of a shape. */
void tfs__arr_strides(int rank, const int64_t *dims, int64_t *strides);
/* Copies count elements src[si..] -> dst[di..] (same dtype; strings deep-copied). */
enum tfs_code tfs__arr_copy(tfs_tensor *dst, int64_t di, const tfs_tensor *src, int64_t si,
                            int64_t count, tfs_status *st);
/* dst[dbase + i.dstride] = src[sbase + i.sstride] over the index space dims (rank <= 16). */
enum tfs_code tfs__arr_strided_copy(tfs_tensor *dst, int64_t dbase, const int64_t *dstride,
                                    const tfs_tensor *src, int64_t sbase, const int64_t *sstride,
                                    int rank, const int64_t *dims, tfs_status *st);
/* tfs_tensor_new with errors naming the node (rank, negative dims, overflow). */
enum tfs_code tfs__arr_new_like(const tfs_node *n, enum tfs_dtype dt, int rank, const int64_t *dims,
                                tfs_tensor **out, tfs_status *st);
/* The same checks, then output j through tfs__kernel_output (contents undefined) or, when
 * `zeroed`, tfs__kernel_output_zeroed. */
enum tfs_code tfs__arr_output(tfs_kernel_ctx *k, int j, enum tfs_dtype dt, int rank,
                              const int64_t *dims, bool zeroed, tfs_tensor **out, tfs_status *st);
/* farmhash Fingerprint64 (farmhashna::Hash64), as TensorFlow's Fingerprint64; kernels/array-string.c */
uint64_t tfs__fingerprint64(const void *data, size_t len);
/* tables, sparse, strings (tier 3; helper ops-tier3) */
int tfs__nout_three(const tfs_node *n);       /* StringSplitV2: 3 (kernels/sparse.c) */
int tfs__nout_four(const tfs_node *n);        /* SparseFillEmptyRows: 4 (kernels/sparse.c) */
int tfs__nout_num_features(const tfs_node *n);   /* BoostedTreesBucketize: attr num_features */

/* ---- CPU compute seams (runtime/cpu.c) -------------------------------------------------------- */

/* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, row-major; op transposes when ta/tb.
 * Every float/double matrix product the kernels make goes through these two, so the GEMM
 * implementation (and its threads) is chosen in one place. Callers check that the sizes and
 * leading dimensions fit in an int; m, n or k of 0 only scales C by beta. With beta = 0, C is
 * not read (BLAS's rule): kernels pass outputs from tfs__kernel_output, whose contents are
 * undefined (NaN in the test suites' poisoned arenas). */
void tfs__sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void tfs__dgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
                int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
/* tfs__sgemm where B lies in b_const, a tensor whose contents never change while it lives (a
 * Const's value; NULL: none). Where the product would pack B (several slivers of rows, or any
 * rows of a B over 4 MiB; see gemm.c), the packed panels are made once, kept on b_const (freed
 * with it) and reused by later calls with the same B: a served model's weights are packed at
 * their first use instead of at every batch. Same results, bit for bit, as tfs__sgemm. */
void tfs__sgemm_const_b(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float *a, int64_t lda, const tfs_tensor *b_const, const float *b,
                        int64_t ldb, float beta, float *c, int64_t ldc);
/* tfs__sgemm_const_b with alpha 1 and beta 0, then epi (NULL: none; else with a bias) on every
 * element of C. */
void tfs__sgemm_epi(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                    int64_t lda, const tfs_tensor *b_const, const float *b, int64_t ldb, float *c,
                    int64_t ldc, const tfs_gemm_epi *epi);
/* Whether tfs__sgemm_epi with this k writes each element of C once, after reading the added
 * tensor's element at the same place (one block of k), so that epi->side may be C itself. */
bool tfs__sgemm_epi_in_place(int64_t k);
/* A constant B [k, n] (row-major, ldb n) packed for the current kernel set in one block of k:
 * panel jp (columns jp * NR ..) at result + jp * k * NR, row p of it at + p * NR, zero-padded
 * past n. Made on first use and kept on b_const like tfs__sgemm_const_b's panels (freed with
 * it); NULL when it cannot be kept (memory, size, or the tensor keeps another layout). The
 * direct convolution's filters (kernels/nn-conv-direct.c). */
const float *tfs__gemm_whole_k_panels(const tfs_tensor *b_const, const float *b, int64_t k,
                                      int64_t n);
/* Frees what tfs__sgemm_const_b kept on a tensor (tensor.c, when the tensor goes). NULL-safe. */
void tfs__gemm_packed_free(void *packed);
/* A const tensor's cache slot (gemm_packed, wino_packed): stores `mine` there unless the slot
 * holds a value already, and returns what it holds then: mine, or another thread's, first (mine
 * then freed with free_fn). (runtime/tensor.c) */
void *tfs__tensor_cache_keep(void *_Atomic *slot, void *mine, void (*free_fn)(void *));
/* Whether input i of k's node is the tensor a Const holds (not a value fed in its place): one
 * that never changes, which tfs__sgemm_const_b may keep packed (kernels/array.c). */
bool tfs__input_is_const(const tfs_kernel_ctx *k, int i);

/* Calls fn(arg, begin, end) over disjoint ranges covering [0, n), each at least `grain` long
 * (except the last), possibly from several threads, and returns when all calls are done. The
 * ranges' results must not depend on how [0, n) is split (bit-identical output either way).
 * n <= grain, a pool of one thread, or a call from inside a range runs fn(arg, 0, n) inline.
 * Safe from several threads at once (threadpool.c says how the pool is shared). */
typedef void (*tfs_range_fn)(void *arg, int64_t begin, int64_t end);
void tfs__parallel_for(int64_t n, int64_t grain, tfs_range_fn fn, void *arg);
/* The threads a tfs__parallel_for started here could use: the pool's size
 * (tfs_runtime_num_threads), or 1 inside a loop (where loops run inline). */
int tfs__parallel_threads(void);
/* Once per process, idempotent and thread-safe: the pool's default size, and OpenBLAS set to one
 * thread (logged). Every entry point of threadpool.c calls it; tfs__dgemm does too. */
void tfs__cpu_init(void);

/* ---- attribute access for kernels (errors name the node and the attr) ------------------------ */

const tfs_attr_value *tfs__attr(const tfs_node *n, const char *name);
enum tfs_code tfs__attr_type(const tfs_node *n, const char *name, enum tfs_dtype *out, tfs_status *st);
enum tfs_code tfs__attr_int(const tfs_node *n, const char *name, int64_t *out, tfs_status *st);
enum tfs_code tfs__attr_bool(const tfs_node *n, const char *name, bool *out, tfs_status *st);
/* Borrowed; a missing attr gives `dflt` (which may be NULL). */
const char *tfs__attr_str(const tfs_node *n, const char *name, const char *dflt);
/* A list attr of the given element kind (an empty list of any kind matches). */
enum tfs_code tfs__attr_list(const tfs_node *n, const char *name, enum tfs_attr_kind kind,
                             const tfs_attr_list **out, tfs_status *st);

/* Sets st to `code` with "node 'NAME' (OP): <message>". Returns code. */
/* The value of a dead output (the untaken side of a Switch): one shared sentinel that is never
 * freed. Only Merge's kernel ever sees it as an input; a fetch of it is an error. */
tfs_tensor *tfs__dead_tensor(void);

/* PERMISSION_DENIED naming n when the thread's runs may not read files their inputs name
 * (tfs_session_set_thread_file_ops); the kernels of such ops call it first. */
enum tfs_code tfs__run_check_file_ops(const tfs_node *n, tfs_status *st);
enum tfs_code tfs__node_err(const tfs_node *n, tfs_status *st, enum tfs_code code,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- variables ------------------------------------------------------------------------------ */

/* A mutable tensor slot owned by a session. Readers take a reference to the current value under the
 * lock; writers swap the value, so a reader never sees a half-written tensor. */
typedef struct tfs_variable {
    pthread_mutex_t mu;
    char           *name;      /* "shared_name", or "container/shared_name" when a container is set */
    enum tfs_dtype  dtype;
    tfs_tensor     *value;     /* NULL until initialized */
    tfs_shape       shape;     /* declared shape (attr `shape` of the creating op); rank -1 = unknown.
                                * Set once under mu by the first VariableV2/VarHandleOp that runs. */
} tfs_variable;

/* Finds or creates the variable named by (container, shared_name). Borrowed; lives as long as s. */
enum tfs_code tfs__session_variable(tfs_session *s, const char *container, const char *shared_name,
                                    enum tfs_dtype dtype, tfs_variable **out, tfs_status *st);
/* New reference to the value, or FAILED_PRECONDITION "Attempting to use uninitialized value NAME". */
enum tfs_code tfs__variable_read(tfs_variable *v, tfs_tensor **out, tfs_status *st);
/* Replaces the value; keeps a reference to `value`. */
void tfs__variable_assign(tfs_variable *v, tfs_tensor *value);

/* Updating a variable without copying it (optimizers, AssignAdd). With v->mu held and v->value
 * set: *dst = v->value itself when nothing else references it (tfs_tensor_exclusive: readers take
 * their references under v->mu, so none can appear meanwhile), else a copy of it (copy-on-write:
 * whoever holds the old value keeps seeing it unchanged). The caller updates *dst's elements in
 * place, then tfs__variable_update_commit (v->mu still held) installs *dst and returns the tensor
 * it replaced (NULL after an in-place update) for the caller to unref after unlocking. */
enum tfs_code tfs__variable_update_begin(tfs_variable *v, tfs_tensor **dst, tfs_status *st);
tfs_tensor *tfs__variable_update_commit(tfs_variable *v, tfs_tensor *dst);

/* For kernels (kernels/state.c): the variable behind input i, which must be a reference tensor
 * (a VariableV2 output; want_ref) or a DT_RESOURCE handle; INVALID_ARGUMENT naming the node
 * otherwise. */
enum tfs_code tfs__variable_input(tfs_kernel_ctx *k, int i, bool want_ref, tfs_variable **out,
                                  tfs_status *st);
/* A new reference to input i's value: the tensor itself, or the variable's current value when it
 * is a reference tensor (ops with TFS_OPF_REF_INPUTS see all inputs as references). */
enum tfs_code tfs__value_input(tfs_kernel_ctx *k, int i, tfs_tensor **out, tfs_status *st);

/* The session's checkpoint reader (for RestoreV2). */
const tfs_checkpoint_reader *tfs__session_checkpoint(const tfs_session *s);

#endif
