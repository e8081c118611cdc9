/* The type attrs of the ops the graph builder knows (build.h): which attr each input's dtype
 * binds, and the dtype of each output. TensorFlow's op definitions require these attrs on every
 * NodeDef ("T" on Relu, "SrcT"/"DstT" on Cast, "Tidx" on Sum, ...), so filling them in here is
 * what makes a graph built in C one TensorFlow accepts; the same table tells autodiff an output's
 * dtype.
 *
 * DESIGN. One row per op type, as data: `ins` lists, per input position, the attr that input's
 * (base) dtype sets ("-": none); an entry ending in '*' also covers every following input except
 * as many as the entries after it (AddN "T*", ConcatV2 "T*,Tidx"). `outs` lists, per output, where
 * its dtype comes from: an attr name, "&attr" (reference of the attr's dtype: VariableV2, Assign),
 * or a literal "bool"/"int32"/"int64"/"float"; the last entry repeats for further outputs.
 * `n_attr` names the list-length attr ("N") set from the count of starred inputs. Ops absent from
 * the table get no attrs from the builder, and their outputs' dtype is attr "T", else "dtype".
 */
#include "runtime/build-impl.h"

#include <stdio.h>
#include <string.h>

typedef struct op_types {
    const char *op;
    const char *ins;
    const char *outs;
    const char *n_attr;
} op_types;

#define UNARY(op) {op, "T", "T", NULL}
#define BINARY(op) {op, "T,T", "T", NULL}
#define COMPARE(op) {op, "T,T", "bool", NULL}

static const op_types TABLE[] = {
    {"Placeholder", "", "dtype", NULL},
    {"PlaceholderWithDefault", "dtype", "dtype", NULL},
    {"Const", "", "dtype", NULL},
    {"VariableV2", "", "&dtype", NULL},
    {"Assign", "T,T", "&T", NULL},
    {"AssignAdd", "T,T", "&T", NULL},
    {"AssignSub", "T,T", "&T", NULL},
    {"Cast", "SrcT", "DstT", NULL},
    {"Shape", "T", "out_type", NULL},
    {"Size", "T", "out_type", NULL},
    {"Rank", "T", "int32", NULL},
    {"Reshape", "T,Tshape", "T", NULL},
    {"ExpandDims", "T,Tdim", "T", NULL},
    {"Transpose", "T,Tperm", "T", NULL},
    {"Tile", "T,Tmultiples", "T", NULL},
    {"Pad", "T,Tpaddings", "T", NULL},
    {"Fill", "index_type,T", "T", NULL},
    {"Slice", "T,Index,Index", "T", NULL},
    {"StridedSlice", "T,Index,Index,Index", "T", NULL},
    {"ConcatV2", "T*,Tidx", "T", "N"},
    {"Pack", "T*", "T", "N"},
    {"AddN", "T*", "T", "N"},
    {"Unpack", "T", "T", NULL},
    {"Range", "Tidx,Tidx,Tidx", "Tidx", NULL},
    {"GatherV2", "Tparams,Tindices,Taxis", "Tparams", NULL},
    {"OneHot", "TI,-,T,T", "T", NULL},
    {"Select", "-,T,T", "T", NULL},
    {"SelectV2", "-,T,T", "T", NULL},
    {"ClipByValue", "T,T,T", "T", NULL},
    {"Sum", "T,Tidx", "T", NULL},
    {"Mean", "T,Tidx", "T", NULL},
    {"Max", "T,Tidx", "T", NULL},
    {"Min", "T,Tidx", "T", NULL},
    {"Prod", "T,Tidx", "T", NULL},
    {"ArgMax", "T,Tidx", "output_type", NULL},
    {"ArgMin", "T,Tidx", "output_type", NULL},
    {"MatMul", "T,T", "T", NULL},
    {"BatchMatMulV2", "T,T", "T", NULL},
    {"BiasAdd", "T,T", "T", NULL},
    {"BiasAddV1", "T,T", "T", NULL},
    {"BiasAddGrad", "T", "T", NULL},
    {"Conv2D", "T,T", "T", NULL},
    {"Conv2DBackpropInput", "-,T,T", "T", NULL},
    {"Conv2DBackpropFilter", "T,-,T", "T", NULL},
    {"DepthwiseConv2dNative", "T,T", "T", NULL},
    {"DepthwiseConv2dNativeBackpropInput", "-,T,T", "T", NULL},
    {"DepthwiseConv2dNativeBackpropFilter", "T,-,T", "T", NULL},
    {"MaxPool", "T", "T", NULL},
    {"AvgPool", "T", "T", NULL},
    {"MaxPoolGrad", "T,T,T", "T", NULL},
    {"AvgPoolGrad", "-,T", "T", NULL},
    {"ResizeBilinear", "T,-", "float", NULL},
    {"ResizeNearestNeighbor", "T,-", "T", NULL},
    {"ResizeBilinearGrad", "-,T", "T", NULL},
    {"ResizeNearestNeighborGrad", "T,-", "T", NULL},
    {"FusedBatchNorm", "T*", "T", NULL},
    {"FusedBatchNormV2", "T,U,U,U,U", "T,U", NULL},
    {"FusedBatchNormV3", "T,U,U,U,U", "T,U", NULL},
    {"FusedBatchNormGradV3", "T,T,-,U,U,U", "T,U", NULL},
    {"SoftmaxCrossEntropyWithLogits", "T,T", "T", NULL},
    {"SparseSoftmaxCrossEntropyWithLogits", "T,Tlabels", "T", NULL},
    {"BroadcastGradientArgs", "T,T", "T", NULL},
    {"UnsortedSegmentSum", "T,Tindices,Tnumsegments", "T", NULL},
    {"InvertPermutation", "T", "T", NULL},
    {"RandomUniform", "T", "dtype", NULL},
    {"RandomStandardNormal", "T", "dtype", NULL},
    {"TruncatedNormal", "T", "dtype", NULL},
    {"LeakyRelu", "T", "T", NULL},
    {"LeakyReluGrad", "T,T", "T", NULL},
    {"L2Loss", "T", "T", NULL},
    {"ApplyGradientDescent", "T*", "&T", NULL},
    {"ApplyMomentum", "T*", "&T", NULL},
    {"ApplyAdam", "T*", "&T", NULL},
    {"ApplyRMSProp", "T*", "&T", NULL},
    {"ApplyCenteredRMSProp", "T*", "&T", NULL},
    {"ApplyAdagrad", "T*", "&T", NULL},
    {"ApplyAdagradV2", "T*", "&T", NULL},
    COMPARE("Less"), COMPARE("LessEqual"), COMPARE("Greater"), COMPARE("GreaterEqual"),
    COMPARE("Equal"), COMPARE("NotEqual"),
    {"IsNan", "T", "bool", NULL}, {"IsFinite", "T", "bool", NULL}, {"IsInf", "T", "bool", NULL},
    BINARY("Add"), BINARY("AddV2"), BINARY("Sub"), BINARY("Mul"), BINARY("RealDiv"),
    BINARY("Div"), BINARY("DivNoNan"), BINARY("Maximum"), BINARY("Minimum"), BINARY("Pow"),
    BINARY("SquaredDifference"), BINARY("FloorDiv"), BINARY("FloorMod"),
    BINARY("ReluGrad"), BINARY("Relu6Grad"), BINARY("EluGrad"), BINARY("SeluGrad"),
    BINARY("SoftplusGrad"), BINARY("SoftsignGrad"), BINARY("SigmoidGrad"), BINARY("TanhGrad"),
    BINARY("RsqrtGrad"), BINARY("SqrtGrad"), BINARY("ReciprocalGrad"),
    UNARY("Identity"), UNARY("StopGradient"), UNARY("PreventGradient"), UNARY("Snapshot"),
    UNARY("Squeeze"), UNARY("ZerosLike"), UNARY("OnesLike"), UNARY("Neg"), UNARY("Abs"),
    UNARY("Sign"), UNARY("Square"), UNARY("Sqrt"), UNARY("Rsqrt"), UNARY("Reciprocal"),
    UNARY("Inv"), UNARY("Rint"),
    UNARY("Exp"), UNARY("Expm1"), UNARY("Log"), UNARY("Log1p"), UNARY("Tanh"),
    UNARY("Sigmoid"), UNARY("Relu"), UNARY("Relu6"), UNARY("Elu"), UNARY("Selu"),
    UNARY("Softplus"), UNARY("Softsign"), UNARY("Softmax"), UNARY("LogSoftmax"), UNARY("Erf"),
    UNARY("Floor"), UNARY("Ceil"), UNARY("Round"), UNARY("Sin"), UNARY("Cos"),
    UNARY("CheckNumerics"),
};

static const op_types *find(const char *op)
{
    for (size_t i = 0; op && i < sizeof TABLE / sizeof TABLE[0]; i++)
        if (!strcmp(TABLE[i].op, op))
            return &TABLE[i];
    return NULL;
}

/* Copies entry k (0-based) of a comma list into buf; false when the list is shorter. */
static bool list_entry(const char *list, int k, char *buf, size_t n)
{
    const char *p = list;
    for (int i = 0; i < k; i++) {
        p = strchr(p, ',');
        if (!p)
            return false;
        p++;
    }
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= n)
        return false;
    memcpy(buf, p, len);
    buf[len] = '\0';
    return true;
}

static int list_len(const char *list)
{
    if (!*list)
        return 0;
    int k = 1;
    for (const char *p = list; *p; p++)
        k += *p == ',';
    return k;
}

/* The attr that input i of n_in binds into buf (false: none). *starred: i is a list member. */
static bool input_attr(const op_types *t, int i, int n_in, char *buf, size_t n, bool *starred)
{
    int entries = list_len(t->ins);
    *starred = false;
    for (int e = 0; e < entries; e++) {
        char name[32];
        list_entry(t->ins, e, name, sizeof name);
        size_t len = strlen(name);
        if (name[len - 1] == '*') {
            int after = entries - e - 1;   /* the star covers inputs e .. n_in - after - 1 */
            if (i >= e && i < n_in - after) {
                name[len - 1] = '\0';
                *starred = true;
                snprintf(buf, n, "%s", name);
                return true;
            }
            if (i >= n_in - after) {
                int k = e + 1 + (i - (n_in - after));
                return list_entry(t->ins, k, buf, n) && strcmp(buf, "-") != 0;
            }
            return false;
        }
        if (e == i)
            return strcmp(name, "-") != 0 && snprintf(buf, n, "%s", name) > 0;
    }
    return false;
}

void tfs__build_set_type_attrs(tfs_graph *g, int node, const char *op, int n_in,
                               const enum tfs_dtype *in_dtypes)
{
    const op_types *t = find(op);
    if (!t)
        return;
    int n_list = 0;
    for (int i = 0; i < n_in; i++) {
        char attr[32];
        bool starred;
        if (!input_attr(t, i, n_in, attr, sizeof attr, &starred))
            continue;
        n_list += starred;
        if (in_dtypes[i] != TFS_DTYPE_INVALID && !tfs_graph_node_attr(g, node, attr))
            tfs_graph_set_attr_type(g, node, attr, tfs_dtype_base(in_dtypes[i]));
    }
    if (t->n_attr)
        tfs_graph_set_attr_int(g, node, t->n_attr, n_list);
}

static enum tfs_dtype attr_dtype(const tfs_graph *g, int node, const char *name)
{
    const tfs_attr_value *a = tfs_graph_node_attr(g, node, name);
    return a && a->kind == TFS_ATTR_TYPE ? a->type : TFS_DTYPE_INVALID;
}

enum tfs_dtype tfs__build_output_dtype(const tfs_graph *g, int node, int index)
{
    const char *op = tfs_graph_node_op(g, node);
    if (!op || index < 0)
        return TFS_DTYPE_INVALID;
    const op_types *t = find(op);
    if (!t) {
        enum tfs_dtype dt = attr_dtype(g, node, "T");
        return dt != TFS_DTYPE_INVALID ? dt : attr_dtype(g, node, "dtype");
    }
    int entries = list_len(t->outs);
    char e[32];
    if (entries == 0 || !list_entry(t->outs, index < entries ? index : entries - 1, e, sizeof e))
        return TFS_DTYPE_INVALID;
    if (!strcmp(e, "bool"))
        return TFS_DTYPE_BOOL;
    if (!strcmp(e, "int32"))
        return TFS_DTYPE_INT32;
    if (!strcmp(e, "int64"))
        return TFS_DTYPE_INT64;
    if (!strcmp(e, "float"))
        return TFS_DTYPE_FLOAT;
    if (e[0] == '&') {
        enum tfs_dtype dt = attr_dtype(g, node, e + 1);
        return dt == TFS_DTYPE_INVALID ? dt : (enum tfs_dtype)(dt + TFS_DTYPE_REF_OFFSET);
    }
    if (!strcmp(e, "out_type") || !strcmp(e, "output_type")) {
        enum tfs_dtype dt = attr_dtype(g, node, e);
        return dt == TFS_DTYPE_INVALID ? TFS_DTYPE_INT32 : dt;   /* TensorFlow's default */
    }
    return attr_dtype(g, node, e);
}
