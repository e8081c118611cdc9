/* GraphDef -> tfs_graph.
 *
 * DESIGN. The runtime executes flat graphs, so TF2 function calls are inlined here. A call node C
 * (StatefulPartitionedCall, PartitionedCall, or a node whose op names a library function) calling
 * function F becomes:
 *   C/_ctrl           NoOp carrying C's control inputs (only when C has any); body nodes with no data
 *                     input and every argument node depend on it, so C's ordering is kept
 *   C/<arg>           Identity(C's i-th input) for each input arg of F (resources pass through)
 *   C/<node>          each node of F's body, inputs renamed; nested calls are inlined recursively
 *   C                 IdentityN of F's `ret` tensors in output-arg order (NoOp when F has none),
 *                     with control inputs on F's `control_ret` nodes, so fetching C:k or running ^C
 *                     behaves as the call did.
 * Function bodies name tensors "node:out_arg:index"; the flat output index is found from the op's
 * signature in the runtime's op registry (runtime/op-signature.h, TensorFlow's OpDef facts) or the
 * called function's signature, counting list-valued args by their number_attr / type_list_attr.
 * Attrs equal to their default may have been stripped on save (strip_default_attrs); they are put
 * back from the same registry, in the graph and in every function body. Like TensorFlow, the
 * importer does not need the model's stripped_op_list, which often leaves out the ops of function
 * bodies; it is read only for ops tfserve does not implement, so that their outputs still resolve
 * where no signature runs them. An op that neither describes imports as it is (it cannot run);
 * the loader fails the version, naming every such op, when anything it runs needs one.
 *
 * Functional control flow (While, StatelessWhile, If, StatelessIf, Case, StatelessCase) cannot be
 * inlined: its bodies run a data-dependent number of times. Such a node is imported as it is, and
 * each function its func attrs name (cond, body, then_branch, else_branch, every function of
 * Case's list(func) attr branches) becomes a function of the top-level
 * graph's library (runtime/graph.h), recursively, each once: function F becomes a graph of
 * Placeholders "F_input_<i>" (one per input arg, typed) feeding F's body inlined as a call named
 * F, so its results are "F:<i>"; calls and control flow inside F are handled as anywhere else.
 * A function that refers to itself (directly or through others) is imported once; the runtime
 * bounds the recursion when it runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel-impl.h"

#define MAX_CALL_DEPTH 64
#define MAX_NODES (1 << 22)

/* Names of the library functions being imported (outermost first), to stop on recursion. */
typedef struct fn_stack {
    const char *names[MAX_CALL_DEPTH + 2];
    int         n;
} fn_stack;

typedef struct importer {
    const Tensorflow__OpList             *ops;   /* may be NULL */
    const Tensorflow__FunctionDefLibrary *lib;   /* may be NULL */
    tfs_graph                            *g;     /* receives the nodes */
    tfs_graph                            *lib_g; /* the top-level graph: receives library functions */
    fn_stack                             *importing;
    int                                   n_nodes;
} importer;

static char *join(const char *a, const char *sep, const char *b)
{
    size_t la = strlen(a), ls = strlen(sep), lb = strlen(b);
    char *s = tfs_malloc(la + ls + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, sep, ls);
        memcpy(s + la + ls, b, lb + 1);
    }
    return s;
}

static const Tensorflow__OpDef *find_opdef(const importer *im, const char *op)
{
    if (!im->ops)
        return NULL;
    for (size_t i = 0; i < im->ops->n_op; i++)
        if (im->ops->op[i]->name && !strcmp(im->ops->op[i]->name, op))
            return im->ops->op[i];
    return NULL;
}

static const Tensorflow__FunctionDef *find_function(const importer *im, const char *name)
{
    if (!im->lib || !name)
        return NULL;
    for (size_t i = 0; i < im->lib->n_function; i++) {
        const Tensorflow__FunctionDef *f = im->lib->function[i];
        if (f->signature && f->signature->name && !strcmp(f->signature->name, name))
            return f;
    }
    return NULL;
}

static const Tensorflow__AttrValue *node_attr(const Tensorflow__NodeDef *nd, const char *name)
{
    for (size_t i = 0; i < nd->n_attr; i++)
        if (nd->attr[i]->key && !strcmp(nd->attr[i]->key, name))
            return nd->attr[i]->value;
    return NULL;
}

/* The function a node calls, or NULL when it is an ordinary op. */
static const Tensorflow__FunctionDef *called_function(const importer *im,
                                                      const Tensorflow__NodeDef *nd)
{
    if (!strcmp(nd->op, "StatefulPartitionedCall") || !strcmp(nd->op, "PartitionedCall")) {
        const Tensorflow__AttrValue *f = node_attr(nd, "f");
        if (f && f->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC && f->func)
            return find_function(im, f->func->name);
        return NULL;
    }
    return find_function(im, nd->op);
}

/* Value of an int attr of nd, else its OpDef default; -1 if neither. */
static int64_t attr_int_or_default(const Tensorflow__NodeDef *nd, const Tensorflow__OpDef *od,
                                   const char *name)
{
    const Tensorflow__AttrValue *v = node_attr(nd, name);
    for (size_t i = 0; !v && od && i < od->n_attr; i++)
        if (!strcmp(od->attr[i]->name, name))
            v = od->attr[i]->default_value;
    return v && v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_I ? v->i : -1;
}

static int64_t attr_list_len_or_default(const Tensorflow__NodeDef *nd, const Tensorflow__OpDef *od,
                                        const char *name)
{
    const Tensorflow__AttrValue *v = node_attr(nd, name);
    for (size_t i = 0; !v && od && i < od->n_attr; i++)
        if (!strcmp(od->attr[i]->name, name))
            v = od->attr[i]->default_value;
    if (!v || v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || !v->list)
        return v ? 0 : -1;
    return (int64_t)v->list->n_type;
}

/* The same two for an op of the runtime's registry. */
static int64_t sig_int_or_default(const Tensorflow__NodeDef *nd, const tfs_op_signature *sig,
                                  const char *name)
{
    const Tensorflow__AttrValue *v = node_attr(nd, name);
    if (v)
        return v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_I ? v->i : -1;
    const tfs_op_attr *a = tfs_op_signature_attr(sig, name);
    return a && a->has_default && a->default_value.kind == TFS_ATTR_I ? a->default_value.i : -1;
}

static int64_t sig_list_len_or_default(const Tensorflow__NodeDef *nd, const tfs_op_signature *sig,
                                       const char *name)
{
    const Tensorflow__AttrValue *v = node_attr(nd, name);
    if (v) {
        if (v->value_case != TENSORFLOW__ATTR_VALUE__VALUE_LIST || !v->list)
            return 0;
        return (int64_t)v->list->n_type;
    }
    const tfs_op_attr *a = tfs_op_signature_attr(sig, name);
    return a && a->has_default && a->default_value.kind == TFS_ATTR_LIST ? a->default_value.list.n
                                                                         : -1;
}

/* Output argument i of an op or function definition as node nd uses it: its name and how many
 * tensors it stands for (its number_attr's value or its type_list_attr's length, from nd or the
 * definition's default; -1 when neither says). */
typedef void (*out_arg_fn)(const void *def, const Tensorflow__NodeDef *nd, int i,
                           const char **name, int64_t *count);

static void registry_out_arg(const void *def, const Tensorflow__NodeDef *nd, int i,
                             const char **name, int64_t *count)
{
    const tfs_op_signature *sig = def;
    const tfs_op_arg       *a = &sig->outputs[i];
    *name = a->name;
    *count = a->number_attr      ? sig_int_or_default(nd, sig, a->number_attr)
             : a->type_list_attr ? sig_list_len_or_default(nd, sig, a->type_list_attr)
                                 : 1;
}

static void opdef_out_arg(const void *def, const Tensorflow__NodeDef *nd, int i, const char **name,
                          int64_t *count)
{
    const Tensorflow__OpDef        *od = def;
    const Tensorflow__OpDef__ArgDef *a = od->output_arg[i];
    *name = a->name;
    *count = a->number_attr && a->number_attr[0] ? attr_int_or_default(nd, od, a->number_attr)
             : a->type_list_attr && a->type_list_attr[0]
                 ? attr_list_len_or_default(nd, od, a->type_list_attr)
                 : 1;
}

/* Flat output index of `arg`:`idx` among def's n output arguments (read through arg_at);
 * `no_such` is the code for a name def does not have. */
static enum tfs_code flat_output_index(const Tensorflow__NodeDef *nd, const void *def, int n,
                                       out_arg_fn arg_at, enum tfs_code no_such, const char *arg,
                                       int64_t idx, int64_t *out, tfs_status *st)
{
    int64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const char *name;
        int64_t     count;
        arg_at(def, nd, i, &name, &count);
        if (count < 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': cannot size output list '%s'",
                           nd->name, name);
        if (!strcmp(name, arg)) {
            if (idx < 0 || idx >= count)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': output '%s:%lld' out of range",
                               nd->name, arg, (long long)idx);
            *out = offset + idx;
            return TFS_OK;
        }
        offset += count;
    }
    return TFS_ERR(st, no_such, "node '%s': op %s has no output named '%s'", nd->name, nd->op,
                   arg);
}

/* Flat output index of `arg`:`idx` of body node nd: from the registry's signature of its op, or
 * the called function's signature, or the model's stripped_op_list for ops tfserve lacks. */
static enum tfs_code output_index(const importer *im, const Tensorflow__NodeDef *nd,
                                  const char *arg, int64_t idx, int64_t *out, tfs_status *st)
{
    const Tensorflow__FunctionDef *callee = find_function(im, nd->op);
    const tfs_op_signature *sig = callee ? NULL : tfs_op_signature_find(nd->op);
    if (sig)
        return flat_output_index(nd, sig, sig->n_outputs, registry_out_arg, TFS_NOT_FOUND, arg,
                                 idx, out, st);
    const Tensorflow__OpDef *od = callee ? callee->signature : find_opdef(im, nd->op);
    if (!od) {
        /* An op that neither tfserve nor the model describes: it cannot run, so which output
         * this is matters only to graph parts that never run (a SavedModel's save function, with
         * SaveV2 and StringJoin). The loader names the op if a signature, the restore or the
         * init op needs it. */
        *out = idx;
        return TFS_OK;
    }
    return flat_output_index(nd, od, (int)od->n_output_arg, opdef_out_arg, TFS_INVALID_ARGUMENT,
                             arg, idx, out, st);
}

/* Renames a tensor reference inside function body f to its inlined graph name under `prefix`. */
static enum tfs_code translate_input(const importer *im, const Tensorflow__FunctionDef *f,
                                     const char *prefix, const char *text, char **out,
                                     tfs_status *st)
{
    *out = NULL;
    if (text[0] == '^') {
        *out = join("^", prefix, "");
        char *tmp = *out ? join(*out, "/", text + 1) : NULL;
        tfs_free(*out);
        *out = tmp;
        return *out ? TFS_OK : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    }
    const char *c1 = strchr(text, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) {   /* "arg" or "node:idx": same name under the prefix */
        *out = join(prefix, "/", text);
        return *out ? TFS_OK : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
    }
    char node[512], arg[256];
    size_t ln = (size_t)(c1 - text), la = (size_t)(c2 - c1 - 1);
    if (ln == 0 || ln >= sizeof node || la == 0 || la >= sizeof arg)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "function %s: bad tensor name '%s'",
                       f->signature->name, text);
    memcpy(node, text, ln);
    node[ln] = 0;
    memcpy(arg, c1 + 1, la);
    arg[la] = 0;
    char *end;
    long long idx = strtoll(c2 + 1, &end, 10);
    if (*end || end == c2 + 1 || idx < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "function %s: bad tensor name '%s'",
                       f->signature->name, text);
    const Tensorflow__NodeDef *nd = NULL;
    for (size_t i = 0; i < f->n_node_def && !nd; i++)
        if (!strcmp(f->node_def[i]->name, node))
            nd = f->node_def[i];
    if (!nd)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "function %s: input '%s' names no node",
                       f->signature->name, text);
    int64_t flat = 0;
    if (output_index(im, nd, arg, idx, &flat, st) != TFS_OK)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    char buf[64];
    snprintf(buf, sizeof buf, ":%lld", (long long)flat);
    char *base = join(prefix, "/", node);
    *out = base ? join(base, "", buf) : NULL;
    tfs_free(base);
    return *out ? TFS_OK : TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory");
}

/* Adds a node and counts it against the limit. */
static int add_node(importer *im, const char *name, const char *op, tfs_status *st)
{
    if (++im->n_nodes > MAX_NODES) {
        TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "graph has more than %d nodes after inlining", MAX_NODES);
        return -1;
    }
    int id = tfs_graph_add_node(im->g, name, op);
    if (id < 0)
        TFS_ERR(st, TFS_INVALID_ARGUMENT, "cannot add node '%s' (duplicate name?)", name);
    return id;
}

/* Copies nd's attrs, then the defaults it lacks: from the registry for ops tfserve implements,
 * else from the model's stripped_op_list. */
static enum tfs_code copy_attrs(importer *im, int id, const Tensorflow__NodeDef *nd, tfs_status *st)
{
    for (size_t i = 0; i < nd->n_attr; i++) {
        tfs_attr_value v;
        if (tfs__attr_from_proto(nd->attr[i]->value, &v, st) != TFS_OK)
            return tfs_status_prefix(st, "node '%s' attr '%s'", nd->name, nd->attr[i]->key);
        tfs_graph_set_attr(im->g, id, nd->attr[i]->key, &v);
        tfs_attr_value_clear(&v);
    }
    const tfs_op_signature *sig = tfs_op_signature_find(nd->op);
    for (int i = 0; sig && i < sig->n_attrs; i++)
        if (sig->attrs[i].has_default && !node_attr(nd, sig->attrs[i].name))
            tfs_graph_set_attr(im->g, id, sig->attrs[i].name, &sig->attrs[i].default_value);
    const Tensorflow__OpDef *od = sig ? NULL : find_opdef(im, nd->op);
    for (size_t i = 0; od && i < od->n_attr; i++) {
        const Tensorflow__OpDef__AttrDef *ad = od->attr[i];
        if (!ad->default_value || node_attr(nd, ad->name))
            continue;
        tfs_attr_value v;
        if (tfs__attr_from_proto(ad->default_value, &v, st) != TFS_OK)
            return tfs_status_prefix(st, "op %s default of attr '%s'", nd->op, ad->name);
        tfs_graph_set_attr(im->g, id, ad->name, &v);
        tfs_attr_value_clear(&v);
    }
    return TFS_OK;
}

static enum tfs_code inline_call(importer *im, const char *call, const Tensorflow__FunctionDef *f,
                                 char **data, int n_data, char **ctrl, int n_ctrl, int depth,
                                 tfs_status *st);
static enum tfs_code import_function(importer *im, const char *node, const char *fname, int depth,
                                     tfs_status *st);

static bool is_control_flow(const char *op)
{
    return !strcmp(op, "While") || !strcmp(op, "StatelessWhile") || !strcmp(op, "If") ||
           !strcmp(op, "StatelessIf") || !strcmp(op, "Case") || !strcmp(op, "StatelessCase");
}

/* The functions attr value v names: 1 for a func, the list's length for a list(func) (Case's
 * branches), else 0; func_name gives the i-th name (NULL when the entry has none). */
static size_t func_count(const Tensorflow__AttrValue *v)
{
    if (v && v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC && v->func)
        return 1;
    if (v && v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && v->list)
        return v->list->n_func;
    return 0;
}

static const char *func_name(const Tensorflow__AttrValue *v, size_t i)
{
    const Tensorflow__NameAttrList *f =
        v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_FUNC ? v->func : v->list->func[i];
    return f ? f->name : NULL;
}

/* A While's cond and body, and an If's or a Case's branches, must take and return what the node
 * passes and expects: checked here so that such a version fails to load, naming the node, rather
 * than at each request. */
static enum tfs_code check_arity(const importer *im, const char *name,
                                 const Tensorflow__NodeDef *nd, int n_data, tfs_status *st)
{
    bool loop = strstr(nd->op, "While") != NULL;
    const Tensorflow__AttrValue *tout = node_attr(nd, "Tout");
    for (size_t i = 0; i < nd->n_attr; i++) {
        const Tensorflow__AttrValue *v = nd->attr[i]->value;
        size_t n_funcs = func_count(v);
        for (size_t j = 0; j < n_funcs; j++) {
            const char *fname = func_name(v, j);
            const Tensorflow__FunctionDef *f = find_function(im, fname);
            if (!f || !f->signature)
                continue;   /* import_function names what is missing */
            char role[300];
            if (v->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST)
                snprintf(role, sizeof role, "%s[%zu]", nd->attr[i]->key, j);
            else
                snprintf(role, sizeof role, "%s", nd->attr[i]->key);
            long want_in = loop ? n_data : n_data - 1, want_out = -1;
            if (loop)
                want_out = !strcmp(role, "cond") ? 1 : n_data;
            else if (tout && tout->value_case == TENSORFLOW__ATTR_VALUE__VALUE_LIST && tout->list)
                want_out = (long)tout->list->n_type;
            if ((long)f->signature->n_input_arg != want_in ||
                (want_out >= 0 && (long)f->signature->n_output_arg != want_out))
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s' (%s): its %s function '%s' "
                               "takes %zu inputs and returns %zu results, but the node passes %ld "
                               "and expects %ld", name, nd->op, role, fname,
                               f->signature->n_input_arg, f->signature->n_output_arg, want_in,
                               want_out);
        }
    }
    return TFS_OK;
}

/* Emits one node (under `prefix` when inside a function body, with inputs already translated),
 * inlining it when it is a call. */
static enum tfs_code emit(importer *im, const char *name, const Tensorflow__NodeDef *nd,
                          char **inputs, int n_inputs, const char *barrier, int depth,
                          tfs_status *st)
{
    const Tensorflow__FunctionDef *callee = called_function(im, nd);
    int n_data = 0;
    while (n_data < n_inputs && inputs[n_data][0] != '^')
        n_data++;
    if (callee)
        return inline_call(im, name, callee, inputs, n_data, inputs + n_data, n_inputs - n_data,
                           depth + 1, st);
    for (int i = n_data; i < n_inputs; i++)
        if (inputs[i][0] != '^')
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "node '%s': data input '%s' after a control input", name, inputs[i]);
    int id = add_node(im, name, nd->op, st);
    if (id < 0)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    for (int i = 0; i < n_inputs; i++)
        tfs_graph_add_input(im->g, id, inputs[i]);
    if (barrier && n_data == 0)
        tfs_graph_add_input(im->g, id, barrier);
    if (copy_attrs(im, id, nd, st) != TFS_OK)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    if (is_control_flow(nd->op) && check_arity(im, name, nd, n_data, st) != TFS_OK)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    for (size_t i = 0; is_control_flow(nd->op) && i < nd->n_attr; i++) {
        const Tensorflow__AttrValue *v = nd->attr[i]->value;
        for (size_t j = 0; j < func_count(v); j++)
            if (import_function(im, name, func_name(v, j), depth + 1, st) != TFS_OK)
                return st ? st->code : TFS_INVALID_ARGUMENT;
    }
    return TFS_OK;
}

static void free_strings(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        tfs_free(v[i]);
    tfs_free(v);
}

static const char *map_get_ret(const Tensorflow__FunctionDef *f, const char *key)
{
    for (size_t i = 0; i < f->n_ret; i++)
        if (!strcmp(f->ret[i]->key, key))
            return f->ret[i]->value;
    return NULL;
}

static enum tfs_code inline_call(importer *im, const char *call, const Tensorflow__FunctionDef *f,
                                 char **data, int n_data, char **ctrl, int n_ctrl, int depth,
                                 tfs_status *st)
{
    const Tensorflow__OpDef *sig = f->signature;
    char *barrier = NULL, *name = NULL, **ins = NULL;
    int n_ins = 0;
    enum tfs_code rc = TFS_OK;
    if (depth > MAX_CALL_DEPTH)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': function calls nest deeper than %d",
                       call, MAX_CALL_DEPTH);
    if ((size_t)n_data != sig->n_input_arg)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': function %s takes %zu inputs, got %d",
                       call, sig->name, sig->n_input_arg, n_data);

    if (n_ctrl > 0) {   /* the call's control inputs, as one barrier node */
        if (!(name = join(call, "/", "_ctrl")))
            goto oom;
        int id = add_node(im, name, "NoOp", st);
        if (id < 0)
            goto fail;
        for (int i = 0; i < n_ctrl; i++)
            tfs_graph_add_input(im->g, id, ctrl[i]);
        if (!(barrier = join("^", name, "")))
            goto oom;
        tfs_free(name);
        name = NULL;
    }
    for (size_t i = 0; i < sig->n_input_arg; i++) {   /* arguments */
        const Tensorflow__OpDef__ArgDef *a = sig->input_arg[i];
        if (!(name = join(call, "/", a->name)))
            goto oom;
        int id = add_node(im, name, "Identity", st);
        if (id < 0)
            goto fail;
        tfs_graph_add_input(im->g, id, data[i]);
        if (barrier)
            tfs_graph_add_input(im->g, id, barrier);
        if (a->type != TENSORFLOW__DATA_TYPE__DT_INVALID)
            tfs_graph_set_attr_type(im->g, id, "T", (enum tfs_dtype)a->type);
        tfs_free(name);
        name = NULL;
    }
    for (size_t i = 0; i < f->n_node_def; i++) {       /* body */
        const Tensorflow__NodeDef *nd = f->node_def[i];
        if (!(ins = tfs_calloc(nd->n_input + 1, sizeof *ins)))
            goto oom;
        for (n_ins = 0; (size_t)n_ins < nd->n_input; n_ins++)
            if (translate_input(im, f, call, nd->input[n_ins], &ins[n_ins], st) != TFS_OK)
                goto fail;
        if (!(name = join(call, "/", nd->name)))
            goto oom;
        if (emit(im, name, nd, ins, n_ins, barrier, depth, st) != TFS_OK)
            goto fail;
        free_strings(ins, n_ins);
        ins = NULL;
        tfs_free(name);
        name = NULL;
    }
    /* results */
    int id = add_node(im, call, sig->n_output_arg ? "IdentityN" : "NoOp", st);
    if (id < 0)
        goto fail;
    if (sig->n_output_arg) {
        enum tfs_dtype *types = tfs_calloc(sig->n_output_arg, sizeof *types);
        if (!types)
            goto oom;
        for (size_t i = 0; i < sig->n_output_arg; i++) {
            const Tensorflow__OpDef__ArgDef *a = sig->output_arg[i];
            const char *ret = map_get_ret(f, a->name);
            char *t = NULL;
            if (!ret) {
                tfs_free(types);
                rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "function %s: no ret for output '%s'",
                             sig->name, a->name);
                goto fail;
            }
            if (translate_input(im, f, call, ret, &t, st) != TFS_OK) {
                tfs_free(types);
                goto fail;
            }
            tfs_graph_add_input(im->g, id, t);
            tfs_free(t);
            types[i] = (enum tfs_dtype)a->type;
        }
        tfs_attr_value v = {.kind = TFS_ATTR_LIST};
        v.list.kind = TFS_ATTR_TYPE;
        v.list.n = (int)sig->n_output_arg;
        v.list.type = types;
        tfs_graph_set_attr(im->g, id, "T", &v);
        tfs_free(types);
    }
    for (size_t i = 0; i < f->n_control_ret; i++) {
        char *t = NULL;
        char *ref = join("^", f->control_ret[i]->value, "");
        if (!ref)
            goto oom;
        rc = translate_input(im, f, call, ref, &t, st);
        tfs_free(ref);
        if (rc != TFS_OK)
            goto fail;
        tfs_graph_add_input(im->g, id, t);
        tfs_free(t);
    }
    if (barrier)
        tfs_graph_add_input(im->g, id, barrier);
    tfs_free(barrier);
    return TFS_OK;
oom:
    TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory inlining '%s'", call);
fail:
    free_strings(ins, n_ins);
    tfs_free(name);
    tfs_free(barrier);
    return st ? st->code : TFS_INTERNAL;
}

/* Imports library function fname (named by a func attr of control-flow node `node`) into
 * im->lib_g's library as described at the top, unless it is there or being imported already. */
static enum tfs_code import_function(importer *im, const char *node, const char *fname, int depth,
                                     tfs_status *st)
{
    if (!fname || !fname[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': func attr without a function name",
                       node);
    if (tfs_graph_has_function(im->lib_g, fname))
        return TFS_OK;
    for (int i = 0; i < im->importing->n; i++)
        if (!strcmp(im->importing->names[i], fname))
            return TFS_OK;   /* recursion: added when its outer import finishes */
    const Tensorflow__FunctionDef *f = find_function(im, fname);
    if (!f || !f->signature)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': function '%s' is not in the graph's "
                       "function library", node, fname);
    if (depth > MAX_CALL_DEPTH || im->importing->n > MAX_CALL_DEPTH)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': functions nest deeper than %d", node,
                       MAX_CALL_DEPTH);
    const Tensorflow__OpDef *sig = f->signature;
    importer sub = *im;
    char **inputs = NULL, **outputs = NULL;
    size_t n_in = sig->n_input_arg, n_out = sig->n_output_arg, made_in = 0, made_out = 0;
    enum tfs_code rc = TFS_OK;
    sub.g = NULL;
    im->importing->names[im->importing->n++] = fname;
    if (tfs_graph_new(&sub.g, st) != TFS_OK)
        goto fail;
    if (!(inputs = tfs_calloc(n_in + 1, sizeof *inputs)) ||
        !(outputs = tfs_calloc(n_out + 1, sizeof *outputs)))
        goto oom;
    for (; made_in < n_in; made_in++) {
        char idx[32];
        snprintf(idx, sizeof idx, "_input_%zu", made_in);
        if (!(inputs[made_in] = join(fname, "", idx)))
            goto oom;
        int id = add_node(&sub, inputs[made_in], "Placeholder", st);
        if (id < 0)
            goto fail;
        if (sig->input_arg[made_in]->type != TENSORFLOW__DATA_TYPE__DT_INVALID)
            tfs_graph_set_attr_type(sub.g, id, "dtype",
                                    (enum tfs_dtype)sig->input_arg[made_in]->type);
    }
    if (inline_call(&sub, fname, f, inputs, (int)n_in, NULL, 0, depth, st) != TFS_OK)
        goto fail;
    for (; made_out < n_out; made_out++) {
        char idx[32];
        snprintf(idx, sizeof idx, ":%zu", made_out);
        if (!(outputs[made_out] = join(fname, "", idx)))
            goto oom;
    }
    if (tfs_graph_finalize(sub.g, st) != TFS_OK) {
        tfs_status_prefix(st, "function '%s'", fname);
        goto fail;
    }
    tfs_graph_add_function(im->lib_g, fname, sub.g, (int)n_in, (const char *const *)inputs,
                           (int)n_out, (const char *const *)outputs);
    im->n_nodes = sub.n_nodes;
    goto done;
oom:
    TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory importing function '%s'", fname);
fail:
    rc = st ? st->code : TFS_INTERNAL;
    if (rc == TFS_OK)
        rc = TFS_INTERNAL;
done:
    im->importing->n--;
    free_strings(inputs, (int)made_in);
    free_strings(outputs, (int)made_out);
    tfs_graph_unref(sub.g);
    return rc;
}

enum tfs_code tfs__import_graph(const Tensorflow__MetaGraphDef *mg, tfs_graph **out,
                                tfs_status *st)
{
    *out = NULL;
    importer im = {0};
    char **ins = NULL;
    size_t n_ins = 0;
    const Tensorflow__GraphDef *gd = mg->graph_def;
    if (!gd)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "MetaGraphDef has no graph_def");
    im.ops = mg->meta_info_def ? mg->meta_info_def->stripped_op_list : NULL;
    im.lib = gd->library;
    if (tfs_graph_new(&im.g, st) != TFS_OK)
        return st ? st->code : TFS_RESOURCE_EXHAUSTED;
    fn_stack importing = {.n = 0};
    im.lib_g = im.g;
    im.importing = &importing;
    for (size_t i = 0; i < gd->n_node; i++) {
        const Tensorflow__NodeDef *nd = gd->node[i];
        if (!nd->name || !nd->name[0] || !nd->op || !nd->op[0]) {
            TFS_ERR(st, TFS_INVALID_ARGUMENT, "graph node %zu has no name or op", i);
            goto fail;
        }
        /* Top-level inputs are already graph names; copy so emit() can treat all nodes alike. */
        if (!(ins = tfs_calloc(nd->n_input + 1, sizeof *ins)))
            goto oom;
        for (n_ins = 0; n_ins < nd->n_input; n_ins++)
            if (!(ins[n_ins] = tfs_strdup(nd->input[n_ins])))
                goto oom;
        if (emit(&im, nd->name, nd, ins, (int)n_ins, NULL, 0, st) != TFS_OK)
            goto fail;
        free_strings(ins, (int)n_ins);
        ins = NULL;
    }
    if (tfs_graph_finalize(im.g, st) != TFS_OK)
        goto fail;
    *out = im.g;
    return TFS_OK;
oom:
    TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory importing the graph");
fail:
    free_strings(ins, (int)n_ins);
    tfs_graph_unref(im.g);
    return st ? st->code : TFS_INTERNAL;
}
