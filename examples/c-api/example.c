/* Embedding tfserve from C: load a SavedModel version directory, look up a signature, feed its
 * float input with numbers from the command line and print every output.
 *
 *     cc example.c $(pkg-config --static --cflags --libs tfserve-savedmodel) -o example
 *     ./example /models/half_plus_two/1 1,2,5          # prints y: 2.5,3,4.5
 *
 * usage: example SAVED_MODEL_DIR VALUES [SIGNATURE]   (VALUES: comma-separated; SIGNATURE:
 * default serving_default). The signature must have one input, of dtype float; the values fill
 * its declared shape, the first dimension taking what the others leave ([-1] -> [3] for three
 * values, [-1,2] -> [2,2] for four). Exit 0 on success, 1 on an error, 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel.h"

/* Parses "1,2,5" into a float tensor shaped by the signature input's declared shape (unknown
 * dimensions after the first are 1). Caller owns *out. */
static enum tfs_code input_tensor(const tfs_tensor_info *in, const char *text, tfs_tensor **out,
                                  tfs_status *st)
{
    float   vals[1024];
    int64_t n = 0;
    for (const char *p = text; *p;) {
        char *end;
        if (n == (int64_t)(sizeof vals / sizeof vals[0]))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "more than %zu values",
                           sizeof vals / sizeof vals[0]);
        vals[n++] = strtof(p, &end);
        if (end == p || (*end && *end != ','))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "'%s' is not a list of numbers", text);
        p = *end ? end + 1 : end;
    }
    int     rank = in->shape.rank < 0 ? 1 : in->shape.rank;
    int64_t dims[TFS_MAX_RANK], inner = 1;
    for (int i = 1; i < rank; i++) {
        dims[i] = in->shape.dims[i] < 0 ? 1 : in->shape.dims[i];
        inner *= dims[i];
    }
    if (rank == 0 ? n != 1 : inner == 0 || n % inner)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%lld values do not fill input '%s'",
                       (long long)n, in->alias);
    if (rank > 0)
        dims[0] = n / inner;
    if (tfs_tensor_new(TFS_DTYPE_FLOAT, rank, dims, out, st) != TFS_OK)
        return st->code;
    memcpy((*out)->data, vals, (size_t)n * sizeof(float));
    return TFS_OK;
}

/* "alias: v,v,v" for the dtypes a model usually returns; others by dtype and shape. */
static void print_output(const char *alias, const tfs_tensor *t)
{
    printf("%s: ", alias);
    for (int64_t i = 0; i < t->nelem; i++) {
        const char *sep = i ? "," : "";
        switch (t->dtype) {
        case TFS_DTYPE_FLOAT:  printf("%s%g", sep, (double)((const float *)t->data)[i]); break;
        case TFS_DTYPE_DOUBLE: printf("%s%g", sep, ((const double *)t->data)[i]); break;
        case TFS_DTYPE_INT32:  printf("%s%d", sep, ((const int32_t *)t->data)[i]); break;
        case TFS_DTYPE_INT64:  printf("%s%lld", sep, (long long)((const int64_t *)t->data)[i]); break;
        default: {
            char shape[128];
            printf("(%s %s)", tfs_dtype_name(t->dtype), tfs_shape_str(t->rank, t->dims, shape,
                                                                     sizeof shape));
            i = t->nelem;
        }
        }
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s SAVED_MODEL_DIR VALUES [SIGNATURE]\n", argv[0]);
        return 2;
    }
    const char          *key = argc == 4 ? argv[3] : "serving_default";
    tfs_status           st;
    tfs_savedmodel      *m = NULL;
    const tfs_signature *sig = NULL;
    tfs_tensor          *x = NULL, **outs = NULL;
    int                  rc = 1;

    if (tfs_savedmodel_load(argv[1], NULL, &m, &st) != TFS_OK)
        goto fail;
    if (!(sig = tfs_savedmodel_signature(m, key))) {
        TFS_ERR(&st, TFS_NOT_FOUND, "no signature '%s' (the model has %d)", key,
                tfs_savedmodel_signature_count(m));
        goto fail;
    }
    if (sig->n_inputs != 1 || tfs_dtype_base(sig->inputs[0].dtype) != TFS_DTYPE_FLOAT) {
        TFS_ERR(&st, TFS_INVALID_ARGUMENT, "signature '%s' does not take one float input", key);
        goto fail;
    }
    if (input_tensor(&sig->inputs[0], argv[2], &x, &st) != TFS_OK)
        goto fail;
    if (!(outs = calloc((size_t)sig->n_outputs + 1, sizeof *outs))) {
        TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    tfs_named_tensor feed = {sig->inputs[0].alias, x};
    if (tfs_savedmodel_run(m, sig, &feed, 1, outs, &st) != TFS_OK)
        goto fail;
    for (int i = 0; i < sig->n_outputs; i++)
        print_output(sig->outputs[i].alias, outs[i]);
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "%s: %s: %s\n", argv[0], tfs_code_name(st.code), st.msg);
    for (int i = 0; outs && i < sig->n_outputs; i++)
        tfs_tensor_unref(outs[i]);
    free(outs);
    tfs_tensor_unref(x);
    tfs_savedmodel_free(m);
    return rc;
}
