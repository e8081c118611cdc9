/* The runtime's op registry against TensorFlow's own op list (an OpList in text format, the
 * ops.pbtxt of TensorFlow's source tree): every op tfserve implements must have the same input
 * and output arguments (names, types, type/number/type-list attrs, refs) and the same attrs
 * (names, kinds, defaults, minimums, allowed values) in the same order, since the importer
 * resolves "node:arg:index" names and puts back stripped defaults from them.
 *
 *   op-registry-test PATH/tf-ops.pbtxt
 *
 * Exit 77 (skipped, saying so) when the file is absent; prints "N passed, M failed". */
#include <stdio.h>
#include <string.h>

#include "proto/textformat.h"
#include "tensorflow/core/framework/op_def.pb-c.h"
#include "runtime/runtime.h"
#include "savedmodel/savedmodel-impl.h"

/* Ops newer than the reference's commit, or internal ones it does not list. */
static const char *const not_in_reference[] = {"DisableCopyOnRead", "BatchMatMulV3",
                                               "_FusedMatMul", "_FusedConv2D", "DenseBincount",
                                               "StatelessCase"};

static int passed, failed;

static void fail(const char *op, const char *what, const char *detail)
{
    failed++;
    printf("FAIL: %s: %s%s%s\n", op, what, detail ? ": " : "", detail ? detail : "");
}

static bool same_str(const char *a, const char *b)
{
    return !strcmp(a ? a : "", b ? b : "");
}

static bool same_value(const tfs_attr_value *a, const tfs_attr_value *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case TFS_ATTR_S:
        return a->s.len == b->s.len && !memcmp(a->s.data, b->s.data, a->s.len);
    case TFS_ATTR_I:     return a->i == b->i;
    case TFS_ATTR_F:     return a->f == b->f;
    case TFS_ATTR_B:     return a->b == b->b;
    case TFS_ATTR_TYPE:  return a->type == b->type;
    case TFS_ATTR_SHAPE:
        return a->shape.rank == b->shape.rank &&
               (a->shape.rank <= 0 ||
                !memcmp(a->shape.dims, b->shape.dims, (size_t)a->shape.rank * sizeof(int64_t)));
    case TFS_ATTR_LIST:
        if (a->list.n != b->list.n)
            return false;
        if (!a->list.n)
            return true;
        if (a->list.kind != b->list.kind)
            return false;
        for (int i = 0; i < a->list.n; i++) {
            tfs_attr_value x = {.kind = a->list.kind}, y = {.kind = b->list.kind};
            switch (a->list.kind) {
            case TFS_ATTR_S:     x.s = a->list.s[i]; y.s = b->list.s[i]; break;
            case TFS_ATTR_I:     x.i = a->list.i[i]; y.i = b->list.i[i]; break;
            case TFS_ATTR_F:     x.f = a->list.f[i]; y.f = b->list.f[i]; break;
            case TFS_ATTR_B:     x.b = a->list.b[i]; y.b = b->list.b[i]; break;
            case TFS_ATTR_TYPE:  x.type = a->list.type[i]; y.type = b->list.type[i]; break;
            case TFS_ATTR_SHAPE: x.shape = a->list.shape[i]; y.shape = b->list.shape[i]; break;
            default:             return false;
            }
            if (!same_value(&x, &y))
                return false;
        }
        return true;
    default:
        return true;
    }
}

static void compare_args(const char *op, const char *side, const tfs_op_arg *mine, int n_mine,
                         Tensorflow__OpDef__ArgDef **ref, size_t n_ref)
{
    if ((size_t)n_mine != n_ref) {
        char d[64];
        snprintf(d, sizeof d, "%d, reference %zu", n_mine, n_ref);
        fail(op, side, d);
        return;
    }
    for (int i = 0; i < n_mine; i++) {
        const tfs_op_arg *a = &mine[i];
        const Tensorflow__OpDef__ArgDef *r = ref[i];
        if (!same_str(a->name, r->name) || (int)a->type != (int)r->type ||
            !same_str(a->type_attr, r->type_attr) || !same_str(a->number_attr, r->number_attr) ||
            !same_str(a->type_list_attr, r->type_list_attr) || a->is_ref != r->is_ref)
            fail(op, side, r->name);
    }
}

static void compare_attrs(const char *op, const tfs_op_signature *sig, const Tensorflow__OpDef *ref)
{
    if ((size_t)sig->n_attrs != ref->n_attr) {
        char d[64];
        snprintf(d, sizeof d, "%d attrs, reference %zu", sig->n_attrs, ref->n_attr);
        fail(op, "attrs", d);
        return;
    }
    for (int i = 0; i < sig->n_attrs; i++) {
        const tfs_op_attr *a = &sig->attrs[i];
        const Tensorflow__OpDef__AttrDef *r = ref->attr[i];
        tfs_status st;
        if (!same_str(a->name, r->name) || !same_str(a->type, r->type) ||
            a->has_minimum != r->has_minimum || (a->has_minimum && a->minimum != r->minimum) ||
            a->has_default != (r->default_value != NULL)) {
            fail(op, "attr name, kind, minimum or default's presence", r->name);
            continue;
        }
        if (r->default_value) {
            tfs_attr_value want;
            if (tfs__attr_from_proto(r->default_value, &want, &st) != TFS_OK) {
                fail(op, "reference default unreadable", st.msg);
                continue;
            }
            if (!same_value(&a->default_value, &want))
                fail(op, "attr default", r->name);
            tfs_attr_value_clear(&want);
        }
        tfs_attr_value allowed = {0};
        if (r->allowed_values &&
            tfs__attr_from_proto(r->allowed_values, &allowed, &st) != TFS_OK) {
            fail(op, "reference allowed values unreadable", st.msg);
            continue;
        }
        if (!same_value(&a->allowed_values, &allowed))
            fail(op, "attr allowed values", r->name);
        tfs_attr_value_clear(&allowed);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH/tf-ops.pbtxt\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        printf("SKIP: op registry check: TensorFlow's op list %s is absent\n", argv[1]);
        return 77;
    }
    fclose(f);
    ProtobufCMessage *msg = NULL;
    tfs_status st;
    if (tfs_textformat_parse_file(&tensorflow__op_list__descriptor, argv[1], &msg, &st) != TFS_OK) {
        printf("FAIL: %s\n0 passed, 1 failed\n", st.msg);
        return 1;
    }
    const Tensorflow__OpList *list = (const Tensorflow__OpList *)msg;
    int absent = 0;
    for (int i = 0; i < tfs_op_signature_count(); i++) {
        const tfs_op_signature *sig = tfs_op_signature_at(i);
        if (!sig) {
            fail("(entry)", "signature text does not parse", NULL);
            continue;
        }
        const Tensorflow__OpDef *ref = NULL;
        for (size_t j = 0; j < list->n_op && !ref; j++)
            if (!strcmp(list->op[j]->name, sig->name))
                ref = list->op[j];
        if (!ref) {
            bool known = false;
            for (size_t j = 0; j < sizeof not_in_reference / sizeof *not_in_reference; j++)
                known = known || !strcmp(not_in_reference[j], sig->name);
            if (!known)
                fail(sig->name, "not in TensorFlow's op list", NULL);
            else
                absent++;
            continue;
        }
        int before = failed;
        compare_args(sig->name, "inputs", sig->inputs, sig->n_inputs, ref->input_arg,
                     ref->n_input_arg);
        compare_args(sig->name, "outputs", sig->outputs, sig->n_outputs, ref->output_arg,
                     ref->n_output_arg);
        compare_attrs(sig->name, sig, ref);
        if (failed == before)
            passed++;
    }
    printf("%d ops match TensorFlow's op list; %d are not in it (newer or internal)\n", passed,
           absent);
    protobuf_c_message_free_unpacked(msg, NULL);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
