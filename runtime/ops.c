/* The op table built from ops.def, op lookup by TensorFlow name, the shared output-count rules and
 * the attribute helpers kernels use to read their node's attrs with errors that name the node.
 */
#include "runtime/runtime-impl.h"

#include <stdio.h>
#include <string.h>

const struct tfs_op_def tfs__ops[TFS_OP_COUNT] = {
#define TFS_OP(e, name, kernel, nout, flags, sig) [TFS_OP_##e] = {name, kernel, nout, flags},
#include "runtime/ops.def"
#undef TFS_OP
};

const struct tfs_op_def *tfs__op_lookup(const char *op_type)
{
    if (!op_type)
        return NULL;
    /* A linear scan: the table is small and lookups happen once per node at finalize. */
    for (int i = 0; i < TFS_OP_COUNT; i++)
        if (!strcmp(tfs__ops[i].name, op_type))
            return &tfs__ops[i];
    return NULL;
}

/* ---- output-count rules --------------------------------------------------------------------- */

int tfs__nout_zero(const tfs_node *n)
{
    (void)n;
    return 0;
}

/* Length of a list(type) attr, or -1 when it is missing or of another kind. */
static int type_list_len(const tfs_node *n, const char *name)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    if (!v || v->kind != TFS_ATTR_LIST)
        return -1;
    if (v->list.n > 0 && v->list.kind != TFS_ATTR_TYPE)
        return -1;
    return v->list.n;
}

int tfs__nout_list_T(const tfs_node *n)
{
    return type_list_len(n, "T");
}

int tfs__nout_list_dtypes(const tfs_node *n)
{
    return type_list_len(n, "dtypes");
}

int tfs__nout_list_output_types(const tfs_node *n)
{
    return type_list_len(n, "output_types");
}

/* ---- attributes ----------------------------------------------------------------------------- */

const tfs_attr_value *tfs__attr(const tfs_node *n, const char *name)
{
    if (!n || !name)
        return NULL;
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attr_names[i], name))
            return &n->attrs[i];
    return NULL;
}

static const char *kind_name(enum tfs_attr_kind kind)
{
    switch (kind) {
    case TFS_ATTR_S:      return "string";
    case TFS_ATTR_I:      return "int";
    case TFS_ATTR_F:      return "float";
    case TFS_ATTR_B:      return "bool";
    case TFS_ATTR_TYPE:   return "type";
    case TFS_ATTR_SHAPE:  return "shape";
    case TFS_ATTR_TENSOR: return "tensor";
    case TFS_ATTR_FUNC:   return "func";
    case TFS_ATTR_LIST:   return "list";
    default:              return "none";
    }
}

/* The attr `name` of kind `kind`, or an INVALID_ARGUMENT naming the node and the attr. */
static enum tfs_code attr_of_kind(const tfs_node *n, const char *name, enum tfs_attr_kind kind,
                                  const tfs_attr_value **out, tfs_status *st)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    *out = NULL;
    if (!v)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "missing attr '%s'", name);
    if (v->kind != kind)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr '%s' has kind %s, expected %s", name,
                             kind_name(v->kind), kind_name(kind));
    *out = v;
    return TFS_OK;
}

enum tfs_code tfs__attr_type(const tfs_node *n, const char *name, enum tfs_dtype *out,
                             tfs_status *st)
{
    const tfs_attr_value *v;
    enum tfs_code rc = attr_of_kind(n, name, TFS_ATTR_TYPE, &v, st);
    if (rc == TFS_OK)
        *out = v->type;
    return rc;
}

enum tfs_code tfs__attr_int(const tfs_node *n, const char *name, int64_t *out, tfs_status *st)
{
    const tfs_attr_value *v;
    enum tfs_code rc = attr_of_kind(n, name, TFS_ATTR_I, &v, st);
    if (rc == TFS_OK)
        *out = v->i;
    return rc;
}

enum tfs_code tfs__attr_bool(const tfs_node *n, const char *name, bool *out, tfs_status *st)
{
    const tfs_attr_value *v;
    enum tfs_code rc = attr_of_kind(n, name, TFS_ATTR_B, &v, st);
    if (rc == TFS_OK)
        *out = v->b;
    return rc;
}

const char *tfs__attr_str(const tfs_node *n, const char *name, const char *dflt)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    if (!v || v->kind != TFS_ATTR_S)
        return dflt;
    return v->s.data ? v->s.data : "";   /* graph.c stores attr bytes NUL-terminated */
}

enum tfs_code tfs__attr_list(const tfs_node *n, const char *name, enum tfs_attr_kind kind,
                             const tfs_attr_list **out, tfs_status *st)
{
    const tfs_attr_value *v;
    enum tfs_code rc = attr_of_kind(n, name, TFS_ATTR_LIST, &v, st);
    if (rc != TFS_OK)
        return rc;
    if (v->list.n > 0 && v->list.kind != kind) {
        *out = NULL;
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr '%s' is a list of %s, expected %s",
                             name, kind_name(v->list.kind), kind_name(kind));
    }
    *out = &v->list;
    return TFS_OK;
}

enum tfs_code tfs__node_err(const tfs_node *n, tfs_status *st, enum tfs_code code,
                            const char *fmt, ...)
{
    if (!st)
        return code;
    char msg[TFS_STATUS_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tfs_status_set(st, code, "node '%s' (%s): %s", n->name, n->op_type, msg);
}
