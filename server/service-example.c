/* Classify and Regress, protocol-neutral: what TF Serving's
 * classifier.cc and regressor.cc do once a front end has turned its request into serialized
 * tf.Examples. Resolve the servable and the signature, check the signature's contract (one input,
 * "classes"/"scores" or "outputs"), feed the batch of serialized Examples as a DT_STRING [N]
 * tensor to the signature's input, run, and check the outputs' dtypes and shapes before turning
 * them into plain C results. Checks come in TF Serving's order with its texts, because clients and
 * tests match on them; the method_name of the signature is not checked (TF Serving's
 * --enable_signature_method_name_check is off by default, and TF2 exports say "predict").
 */
#include <string.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

#define DEFAULT_SIGNATURE "serving_default"

/* ---- SignatureDef text, for the messages that quote it -------------------------------------- */

/* Protobuf's DebugString of the tensor infos (sorted by key, as text format prints maps). */
static void tensor_infos_text(tfs__buf *b, const char *field, const tfs_tensor_info *ti, int n)
{
    for (int i = 0; i < n; i++) {
        tfs__buf_printf(b, "%s {\n  key: \"%s\"\n  value {\n", field, ti[i].alias);
        if (ti[i].tensor_name)
            tfs__buf_printf(b, "    name: \"%s\"\n", ti[i].tensor_name);
        if (ti[i].dtype != TFS_DTYPE_INVALID)
            tfs__buf_printf(b, "    dtype: %s\n", tfs_dtype_name(ti[i].dtype));
        tfs__buf_puts(b, "    tensor_shape {\n");
        if (ti[i].shape.rank < 0)
            tfs__buf_puts(b, "      unknown_rank: true\n");
        for (int d = 0; d < ti[i].shape.rank; d++) {
            if (ti[i].shape.dims[d] != 0)
                tfs__buf_printf(b, "      dim {\n        size: %lld\n      }\n",
                                (long long)ti[i].shape.dims[d]);
            else
                tfs__buf_puts(b, "      dim {\n      }\n");
        }
        tfs__buf_puts(b, "    }\n  }\n}\n");
    }
}

static void signature_text(tfs__buf *b, const tfs_signature *sig)
{
    tensor_infos_text(b, "inputs", sig->inputs, sig->n_inputs);
    tensor_infos_text(b, "outputs", sig->outputs, sig->n_outputs);
    if (sig->method_name && *sig->method_name)
        tfs__buf_printf(b, "method_name: \"%s\"\n", sig->method_name);
}

/* INVALID_ARGUMENT "<lead><SignatureDef text>". */
static enum tfs_code signature_error(tfs_status *st, const char *lead, const tfs_signature *sig)
{
    tfs__buf b;
    tfs__buf_init(&b);
    signature_text(&b, sig);
    TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s%s", lead, b.data ? b.data : "");
    tfs__buf_deinit(&b);
    return TFS_INVALID_ARGUMENT;
}

static int find_alias(const tfs_tensor_info *ti, int n, const char *alias)
{
    for (int i = 0; i < n; i++)
        if (strcmp(ti[i].alias, alias) == 0)
            return i;
    return -1;
}

/* ---- the shared part ------------------------------------------------------------------------ */

enum kind { CLASSIFY, REGRESS };

static void free_outputs(tfs_tensor **outs, int n)
{
    if (!outs)
        return;
    for (int i = 0; i < n; i++)
        tfs_tensor_unref(outs[i]);
    tfs_free(outs);
}

/* What a classify/regress runs on: a servable handle (requests), or a loaded model that is not
 * served yet (warmup), run directly. */
typedef struct target {
    const tfs_servable   *servable;   /* NULL for a bare model */
    const tfs_savedmodel *model;
} target;

/* Find the signature, check its contract (PreProcessClassification / PreProcessRegression), run.
 * On success *sig_out (borrowed from the model) and outputs[0..sig->n_outputs-1] (caller owns)
 * are set. */
static enum tfs_code run_examples(const target *t, const char *signature_name, enum kind kind,
                                  const tfs_string *examples, int64_t n,
                                  const tfs_signature **sig_out, tfs_tensor ***outputs,
                                  tfs_status *st)
{
    const tfs_signature *sig;
    tfs_tensor          *in = NULL;
    tfs_tensor         **outs = NULL;
    int                  n_outs = 0;
    enum tfs_code        code;
    const char          *name =
        signature_name && *signature_name ? signature_name : DEFAULT_SIGNATURE;

    sig = tfs_savedmodel_signature(t->model, name);
    if (!sig) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "No signature was found with the name: %s", name);
        goto fail;
    }
    if (sig->n_inputs != 1) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected one input Tensor.");
        goto fail;
    }
    if (kind == CLASSIFY) {
        if (sig->n_outputs != 1 && sig->n_outputs != 2) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected one or two output Tensors, found %d",
                           sig->n_outputs);
            goto fail;
        }
        if (find_alias(sig->inputs, sig->n_inputs, "inputs") < 0) {
            code = signature_error(st, "No classification inputs found in SignatureDef: ", sig);
            goto fail;
        }
        if (find_alias(sig->outputs, sig->n_outputs, "classes") < 0 &&
            find_alias(sig->outputs, sig->n_outputs, "scores") < 0) {
            code = signature_error(st,
                                   "Expected classification signature outputs to contain at "
                                   "least one of \"classes\" or \"scores\". Signature was: ",
                                   sig);
            goto fail;
        }
    } else {
        if (sig->n_outputs != 1) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected one output Tensor.");
            goto fail;
        }
        if (find_alias(sig->inputs, sig->n_inputs, "inputs") < 0) {
            code = signature_error(st, "No regression inputs found in SignatureDef: ", sig);
            goto fail;
        }
        if (find_alias(sig->outputs, sig->n_outputs, "outputs") < 0) {
            code = signature_error(st, "No regression outputs found in SignatureDef: ", sig);
            goto fail;
        }
    }
    /* InputToSerializedExampleTensor */
    if (n <= 0) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "Input is empty.");
        goto fail;
    }
    if ((code = tfs_tensor_new(TFS_DTYPE_STRING, 1, &n, &in, st)) != TFS_OK)
        goto fail;
    for (int64_t i = 0; i < n; i++)
        if ((code = tfs_tensor_set_string(in, i, examples[i].data, examples[i].len, st)) != TFS_OK)
            goto fail;
    outs = tfs_calloc((size_t)sig->n_outputs, sizeof *outs);
    if (!outs) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory running signature %s", name);
        goto fail;
    }
    n_outs = sig->n_outputs;
    tfs_named_tensor feed = {sig->inputs[0].alias, in};
    code = t->servable ? tfs_service_run(t->servable, sig, &feed, 1, outs, st)
                       : tfs__service_run_model(t->model, sig, &feed, 1, outs, st);
    if (code != TFS_OK)
        goto fail;
    tfs_tensor_unref(in);
    *sig_out = sig;
    *outputs = outs;
    return TFS_OK;
fail:
    free_outputs(outs, n_outs);
    tfs_tensor_unref(in);
    return code;
}

static const char *shape_text(const tfs_tensor *t, char *buf, size_t n)
{
    return tfs_shape_str(t->rank, t->dims, buf, n);
}

/* ---- classify ------------------------------------------------------------------------------- */

/* PostProcessClassificationResult's checks on one of the two outputs. */
static enum tfs_code check_class_output(const tfs_tensor *t, const char *what, enum tfs_dtype want,
                                        int64_t n, tfs_status *st)
{
    char shape[96];
    if (t->rank != 2)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Expected Tensor shape: [batch_size num_classes] but got %s",
                       shape_text(t, shape, sizeof shape));
    if (t->dtype != want)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected %s Tensor of %s.  Got: %s", what,
                       tfs_dtype_name(want), tfs_dtype_name(t->dtype));
    if (t->dims[0] != n)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Expected %s output batch size of %lld.  Got: %lld", what, (long long)n,
                       (long long)t->dims[0]);
    return TFS_OK;
}

static enum tfs_code classify(const target *t, const char *signature_name,
                              const tfs_string *examples, int64_t n_examples,
                              tfs__classify_result *res, tfs_status *st)
{
    const tfs_signature *sig = NULL;
    tfs_tensor         **outs = NULL;
    enum tfs_code        code;

    if ((code = run_examples(t, signature_name, CLASSIFY, examples, n_examples, &sig, &outs,
                             st)) != TFS_OK)
        return code;
    int         ci = find_alias(sig->outputs, sig->n_outputs, "classes");
    int         si = find_alias(sig->outputs, sig->n_outputs, "scores");
    tfs_tensor *classes = ci >= 0 ? outs[ci] : NULL, *scores = si >= 0 ? outs[si] : NULL;
    if (classes &&
        (code = check_class_output(classes, "classes", TFS_DTYPE_STRING, n_examples, st)) != TFS_OK)
        goto fail;
    if (scores &&
        (code = check_class_output(scores, "scores", TFS_DTYPE_FLOAT, n_examples, st)) != TFS_OK)
        goto fail;
    if (classes && scores && classes->dims[1] != scores->dims[1]) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Tensors class and score should match in dim_size(1). Got %lld vs. %lld",
                       (long long)classes->dims[1], (long long)scores->dims[1]);
        goto fail;
    }
    res->n_examples = n_examples;
    res->n_classes = classes ? classes->dims[1] : scores->dims[1];
    res->classes_t = tfs_tensor_ref(classes);
    res->scores_t = tfs_tensor_ref(scores);
    res->labels = classes ? tfs_tensor_strings(classes) : NULL;
    res->scores = scores ? (const float *)scores->data : NULL;
    free_outputs(outs, sig->n_outputs);
    tfs_status_clear(st);
    return TFS_OK;
fail:
    free_outputs(outs, sig->n_outputs);
    return code;
}

enum tfs_code tfs__service_classify(tfs_loader *l, const tfs_model_spec *spec,
                                    const tfs_string *examples, int64_t n_examples,
                                    tfs__classify_result *res, tfs_status *st)
{
    tfs_servable *s = NULL;
    enum tfs_code code;

    memset(res, 0, sizeof *res);
    if ((code = tfs_service_acquire(l, spec, &s, st)) != TFS_OK)
        return code;
    target t = {s, tfs_servable_model(s)};
    if ((code = classify(&t, spec->signature_name, examples, n_examples, res, st)) == TFS_OK)
        res->version = tfs_servable_version(s);
    tfs_servable_release(s);
    return code;
}

enum tfs_code tfs__service_classify_model(const tfs_savedmodel *m, const char *signature_name,
                                          const tfs_string *examples, int64_t n_examples,
                                          tfs__classify_result *res, tfs_status *st)
{
    target t = {NULL, m};
    memset(res, 0, sizeof *res);
    return classify(&t, signature_name, examples, n_examples, res, st);
}

void tfs__classify_result_deinit(tfs__classify_result *res)
{
    if (!res)
        return;
    tfs_tensor_unref(res->classes_t);
    tfs_tensor_unref(res->scores_t);
    memset(res, 0, sizeof *res);
}

/* ---- regress -------------------------------------------------------------------------------- */

/* PostProcessRegressionResult's checks, in its order. */
static enum tfs_code check_regress_output(const tfs_tensor *t, int64_t n, tfs_status *st)
{
    char shape[96];
    if (!(t->rank == 1 || (t->rank == 2 && t->dims[1] == 1)))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] "
                       "but got %s",
                       shape_text(t, shape, sizeof shape));
    if (t->dims[0] != n)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "Input batch size did not match output batch size: %lld vs. %lld",
                       (long long)n, (long long)t->dims[0]);
    if (t->dtype != TFS_DTYPE_FLOAT)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Expected output Tensor of DT_FLOAT.  Got: %s",
                       tfs_dtype_name(t->dtype));
    return TFS_OK;
}

static enum tfs_code regress(const target *t, const char *signature_name,
                             const tfs_string *examples, int64_t n_examples,
                             tfs__regress_result *res, tfs_status *st)
{
    const tfs_signature *sig = NULL;
    tfs_tensor         **outs = NULL;
    enum tfs_code        code;

    if ((code = run_examples(t, signature_name, REGRESS, examples, n_examples, &sig, &outs, st)) !=
        TFS_OK)
        return code;
    if ((code = check_regress_output(outs[0], n_examples, st)) != TFS_OK)
        goto fail;
    res->values = tfs_malloc((size_t)n_examples * sizeof *res->values);
    if (!res->values) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory copying %lld regressions",
                       (long long)n_examples);
        goto fail;
    }
    memcpy(res->values, outs[0]->data, (size_t)n_examples * sizeof *res->values);
    res->n_examples = n_examples;
    free_outputs(outs, sig->n_outputs);
    tfs_status_clear(st);
    return TFS_OK;
fail:
    free_outputs(outs, sig->n_outputs);
    return code;
}

enum tfs_code tfs__service_regress(tfs_loader *l, const tfs_model_spec *spec,
                                   const tfs_string *examples, int64_t n_examples,
                                   tfs__regress_result *res, tfs_status *st)
{
    tfs_servable *s = NULL;
    enum tfs_code code;

    memset(res, 0, sizeof *res);
    if ((code = tfs_service_acquire(l, spec, &s, st)) != TFS_OK)
        return code;
    target t = {s, tfs_servable_model(s)};
    if ((code = regress(&t, spec->signature_name, examples, n_examples, res, st)) == TFS_OK)
        res->version = tfs_servable_version(s);
    tfs_servable_release(s);
    return code;
}

enum tfs_code tfs__service_regress_model(const tfs_savedmodel *m, const char *signature_name,
                                         const tfs_string *examples, int64_t n_examples,
                                         tfs__regress_result *res, tfs_status *st)
{
    target t = {NULL, m};
    memset(res, 0, sizeof *res);
    return regress(&t, signature_name, examples, n_examples, res, st);
}

void tfs__regress_result_deinit(tfs__regress_result *res)
{
    if (!res)
        return;
    tfs_free(res->values);
    memset(res, 0, sizeof *res);
}
