/* Tensors: a dtype, a shape and a refcounted buffer of row-major elements.
 *
 * enum tfs_dtype equals TensorFlow's DataType numerically, so TensorProto.dtype maps without a table.
 * DT_STRING elements are tfs_string records whose bytes the tensor owns. DT_RESOURCE elements are
 * borrowed pointers to runtime resources (variables) owned by a session.
 *
 *     int64_t dims[] = {3, 1};
 *     tfs_tensor *t;
 *     if (tfs_tensor_new(TFS_DTYPE_FLOAT, 2, dims, &t, &st) != TFS_OK) return st.code;
 *     float *x = t->data;  x[0] = 1.0f; ...
 *     tfs_tensor_unref(t);
 *
 * Ownership: _new/_wrap/_view return a tensor with one reference, which the caller owns. Tensors
 * handed to other threads are treated as immutable; refcounting is atomic. The struct fields are
 * public for reading; write `data` only while you hold the only reference.
 */
#ifndef TFS_RUNTIME_TENSOR_H
#define TFS_RUNTIME_TENSOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

enum tfs_dtype {
    TFS_DTYPE_INVALID    = 0,
    TFS_DTYPE_FLOAT      = 1,
    TFS_DTYPE_DOUBLE     = 2,
    TFS_DTYPE_INT32      = 3,
    TFS_DTYPE_UINT8      = 4,
    TFS_DTYPE_INT16      = 5,
    TFS_DTYPE_INT8       = 6,
    TFS_DTYPE_STRING     = 7,
    TFS_DTYPE_COMPLEX64  = 8,
    TFS_DTYPE_INT64      = 9,
    TFS_DTYPE_BOOL       = 10,
    TFS_DTYPE_QINT8      = 11,
    TFS_DTYPE_QUINT8     = 12,
    TFS_DTYPE_QINT32     = 13,
    TFS_DTYPE_BFLOAT16   = 14,
    TFS_DTYPE_QINT16     = 15,
    TFS_DTYPE_QUINT16    = 16,
    TFS_DTYPE_UINT16     = 17,
    TFS_DTYPE_COMPLEX128 = 18,
    TFS_DTYPE_HALF       = 19,
    TFS_DTYPE_RESOURCE   = 20,
    TFS_DTYPE_VARIANT    = 21,
    TFS_DTYPE_UINT32     = 22,
    TFS_DTYPE_UINT64     = 23,
    TFS_DTYPE_COUNT,
    /* TensorFlow's reference dtypes are base + 100 (DT_FLOAT_REF = 101). */
    TFS_DTYPE_REF_OFFSET = 100
};

#define TFS_MAX_RANK 8
/* Upper bound on one tensor's buffer; larger shapes are refused with RESOURCE_EXHAUSTED. */
#define TFS_TENSOR_MAX_BYTES ((size_t)1 << 36)

/* One DT_STRING element. `data` is owned by the tensor holding the element (may be NULL if len 0). */
typedef struct tfs_string {
    size_t len;
    char  *data;
} tfs_string;

typedef void (*tfs_tensor_dealloc)(void *data, void *arg);

typedef struct tfs_tensor {
    enum tfs_dtype dtype;
    int            rank;
    int64_t        dims[TFS_MAX_RANK];
    int64_t        nelem;
    size_t         nbytes;   /* nelem * tfs_dtype_size(dtype) */
    void          *data;     /* may be NULL when nbytes == 0 */
    /* private */
    atomic_int         refs;
    tfs_tensor_dealloc dealloc;
    void              *dealloc_arg;
    void *_Atomic      gemm_packed;   /* a constant's matrix packed for the GEMM (runtime/gemm.c),
                                       * made on first use and freed with the tensor */
    void *_Atomic      wino_packed;   /* a constant 3x3 filter transformed for Winograd's
                                       * convolution (runtime/kernels/nn-conv-winograd.c), alike */
} tfs_tensor;

/* Bytes per element; for DT_STRING sizeof(tfs_string), for DT_RESOURCE sizeof(void *);
 * 0 for dtypes the runtime cannot hold (complex, quantized, variant, invalid). */
size_t tfs_dtype_size(enum tfs_dtype dt);
/* "DT_FLOAT", "DT_FLOAT_REF", ...; "DT_INVALID" for unknown values. Never NULL. */
const char *tfs_dtype_name(enum tfs_dtype dt);
/* Short names as TensorFlow prints them in messages: "float", "int64", "string". */
const char *tfs_dtype_short_name(enum tfs_dtype dt);
/* DT_X_REF -> DT_X; other values unchanged. */
enum tfs_dtype tfs_dtype_base(enum tfs_dtype dt);
/* Parses "DT_FLOAT" (and "DT_FLOAT_REF"); returns TFS_DTYPE_INVALID when unknown. */
enum tfs_dtype tfs_dtype_from_name(const char *name);
/* Parses a short name ("float", "int64"); TFS_DTYPE_INVALID when unknown. */
enum tfs_dtype tfs_dtype_from_short_name(const char *name);

/* A new zero-filled tensor (string elements empty). Fails with INVALID_ARGUMENT for a negative
 * dim or rank out of [0, TFS_MAX_RANK], UNIMPLEMENTED for a dtype of size 0, RESOURCE_EXHAUSTED when
 * the size overflows or exceeds TFS_TENSOR_MAX_BYTES or memory runs out. Caller owns the result. */
enum tfs_code tfs_tensor_new(enum tfs_dtype dtype, int rank, const int64_t *dims, tfs_tensor **out,
                             tfs_status *st);
/* tfs_tensor_new without the zero fill, for a caller that writes every element before anyone
 * reads them (a kernel's output, a batch's rows): the bytes are undefined until then. DT_STRING
 * elements still start empty. Same errors. Caller owns the result. */
enum tfs_code tfs_tensor_new_uninit(enum tfs_dtype dtype, int rank, const int64_t *dims,
                                    tfs_tensor **out, tfs_status *st);
/* A rank-0 tensor. */
enum tfs_code tfs_tensor_new_scalar(enum tfs_dtype dtype, tfs_tensor **out, tfs_status *st);
/* Wraps existing memory of exactly nelem*size bytes without copying; `dealloc(data, arg)` runs when
 * the last reference goes (NULL: the memory is not freed). Not for DT_STRING. Caller owns result. */
enum tfs_code tfs_tensor_wrap(enum tfs_dtype dtype, int rank, const int64_t *dims, void *data,
                              tfs_tensor_dealloc dealloc, void *arg, tfs_tensor **out, tfs_status *st);
/* A tensor with a new shape (same element count) sharing src's buffer; keeps a reference to src.
 * Not for DT_STRING (copies instead). */
enum tfs_code tfs_tensor_reshape(tfs_tensor *src, int rank, const int64_t *dims, tfs_tensor **out,
                                 tfs_status *st);
/* A deep copy (strings included). Caller owns the result. */
enum tfs_code tfs_tensor_copy(const tfs_tensor *src, tfs_tensor **out, tfs_status *st);

tfs_tensor *tfs_tensor_ref(tfs_tensor *t);   /* returns t; NULL-safe */
void        tfs_tensor_unref(tfs_tensor *t); /* frees at zero; NULL-safe */
/* True when the caller's reference is the only one and t owns its buffer (made by tfs_tensor_new
 * or _copy, not a view or a wrapper), so writing t->data in place is seen by no one else. The
 * caller must keep others from taking new references meanwhile (a variable's value: under its
 * lock, see runtime-impl.h). */
bool        tfs_tensor_exclusive(const tfs_tensor *t);

/* String elements. The setter copies `len` bytes; fails only on allocation. */
tfs_string   *tfs_tensor_strings(tfs_tensor *t);
enum tfs_code tfs_tensor_set_string(tfs_tensor *t, int64_t i, const void *data, size_t len,
                                    tfs_status *st);

/* A tensor with a name, as signatures feed and fetch them (savedmodel/) and as batching/ carries a
 * task's inputs. Both fields are borrowed. */
typedef struct tfs_named_tensor {
    const char *name;
    tfs_tensor *tensor;          /* borrowed */
} tfs_named_tensor;

/* Element count of a shape; -1 on a negative dim or overflow. */
int64_t tfs_shape_nelem(int rank, const int64_t *dims);
bool    tfs_shape_equal(int rank_a, const int64_t *a, int rank_b, const int64_t *b);
/* Writes "[3,1]" (a dim of -1 prints as -1) into buf; returns buf. */
char *tfs_shape_str(int rank, const int64_t *dims, char *buf, size_t n);

/* A possibly partial shape as signatures and attrs carry it: rank -1 = unknown rank, dim -1 = unknown. */
typedef struct tfs_shape {
    int     rank;
    int64_t dims[TFS_MAX_RANK];
} tfs_shape;

#endif
