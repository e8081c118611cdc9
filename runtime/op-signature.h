/* What TensorFlow's op registry says of each op tfserve implements: its input and output
 * arguments (names and how their types and counts are given) and its attrs (kinds, defaults,
 * allowed values, minimums). TensorFlow compiles its registry in, so SavedModels need not carry
 * these facts: exports strip attrs equal to their defaults and describe only some ops in their
 * stripped_op_list. The importer reads names like "node:out_arg:index" and fills stripped attrs
 * from here.
 *
 * Each op's facts are written once, next to its kernel, in runtime/ops.def, in the syntax of
 * TensorFlow's REGISTER_OP (see there); they are parsed on first use and kept for the process.
 */
#ifndef TFS_RUNTIME_OP_SIGNATURE_H
#define TFS_RUNTIME_OP_SIGNATURE_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/graph.h"
#include "runtime/tensor.h"

/* One input or output argument (OpDef.ArgDef). Exactly one of `type`, `type_attr` and
 * `type_list_attr` says its type; `number_attr` makes it a list of that many tensors of one type;
 * a `type_list_attr` argument is as many tensors as that attr has types. */
typedef struct tfs_op_arg {
    const char    *name;
    enum tfs_dtype type;             /* TFS_DTYPE_INVALID unless a fixed type */
    const char    *type_attr;        /* NULL when absent, as the other two */
    const char    *number_attr;
    const char    *type_list_attr;
    bool           is_ref;
} tfs_op_arg;

/* One attr (OpDef.AttrDef). `type` is TensorFlow's spelling: "int", "list(type)", ... */
typedef struct tfs_op_attr {
    const char    *name;
    const char    *type;
    bool           has_default;
    tfs_attr_value default_value;
    bool           has_minimum;
    int64_t        minimum;
    tfs_attr_value allowed_values;   /* TFS_ATTR_LIST of types or strings; TFS_ATTR_NONE: any */
} tfs_op_attr;

typedef struct tfs_op_signature {
    const char        *name;   /* TensorFlow op type */
    int                n_inputs, n_outputs, n_attrs;
    const tfs_op_arg  *inputs;
    const tfs_op_arg  *outputs;
    const tfs_op_attr *attrs;
} tfs_op_signature;

/* The signature of op type `op`, or NULL when tfserve does not implement it. Thread-safe; the
 * result lives as long as the process. */
const tfs_op_signature *tfs_op_signature_find(const char *op);
/* Every implemented op's signature, by index 0 .. count-1 (for tests and tfserve-inspect). An
 * entry whose text does not parse is NULL (a test checks there are none). */
int                     tfs_op_signature_count(void);
const tfs_op_signature *tfs_op_signature_at(int i);
/* The attr `name` of sig, or NULL. */
const tfs_op_attr *tfs_op_signature_attr(const tfs_op_signature *sig, const char *name);

/* Parses one signature text (the ops.def syntax) for op type `op` into *out, which the caller
 * frees with tfs_op_signature_free. INVALID_ARGUMENT names the offending text. */
enum tfs_code tfs_op_signature_parse(const char *op, const char *text, tfs_op_signature **out,
                                     tfs_status *st);
void          tfs_op_signature_free(tfs_op_signature *sig);

#endif
