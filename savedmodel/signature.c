/* SignatureDefs -> tfs_signature records (sorted by key; inputs and outputs sorted by alias), so the
 * server can describe and call them without touching protobuf. */
#include <stdlib.h>
#include <string.h>

#include "savedmodel/savedmodel-impl.h"

static int cmp_info(const void *a, const void *b)
{
    return strcmp(((const tfs_tensor_info *)a)->alias, ((const tfs_tensor_info *)b)->alias);
}

static int cmp_sig(const void *a, const void *b)
{
    return strcmp(((const tfs_signature *)a)->key, ((const tfs_signature *)b)->key);
}

static enum tfs_code infos_from_proto(Tensorflow__SignatureDef__InputsEntry **entries, size_t n,
                                      tfs_tensor_info **out, int *n_out, tfs_status *st)
{
    /* InputsEntry and OutputsEntry have the same layout (key, value TensorInfo). */
    *out = NULL;
    *n_out = 0;
    if (n == 0)
        return TFS_OK;
    tfs_tensor_info *v = tfs_calloc(n, sizeof *v);
    if (!v)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
    *out = v;
    for (size_t i = 0; i < n; i++) {
        /* Counted before it is filled: a failure part way leaves it for infos_free. */
        *n_out = (int)i + 1;
        const Tensorflow__TensorInfo *ti = entries[i]->value;
        v[i].alias = tfs_strdup(entries[i]->key ? entries[i]->key : "");
        if (!v[i].alias)
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
        v[i].shape.rank = -1;
        if (!ti)
            continue;
        v[i].dtype = (enum tfs_dtype)ti->dtype;
        if (ti->encoding_case == TENSORFLOW__TENSOR_INFO__ENCODING_NAME && ti->name) {
            if (!(v[i].tensor_name = tfs_strdup(ti->name)))
                return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
        }
        if (ti->tensor_shape &&
            tfs__shape_from_proto(ti->tensor_shape, &v[i].shape, st) != TFS_OK)
            return tfs_status_prefix(st, "tensor '%s'", v[i].alias);
    }
    qsort(v, n, sizeof *v, cmp_info);
    return TFS_OK;
}

static void infos_free(tfs_tensor_info *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        tfs_free(v[i].alias);
        tfs_free(v[i].tensor_name);
    }
    tfs_free(v);
}

static void sig_clear(tfs_signature *s)
{
    tfs_free(s->key);
    tfs_free(s->method_name);
    infos_free(s->inputs, s->n_inputs);
    infos_free(s->outputs, s->n_outputs);
    for (int j = 0; j < s->n_defaults; j++) {
        tfs_free(s->default_names[j]);
        tfs_tensor_unref(s->defaults[j]);
    }
    tfs_free(s->default_names);
    tfs_free(s->defaults);
    memset(s, 0, sizeof *s);
}

/* Fills s; on failure s holds only what was complete, for sig_clear. */
static enum tfs_code sig_from_proto(const char *key, const Tensorflow__SignatureDef *sd,
                                    tfs_signature *s, tfs_status *st)
{
    if (!(s->key = tfs_strdup(key)) ||
        !(s->method_name = tfs_strdup(sd && sd->method_name ? sd->method_name : "")))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
    if (!sd)
        return TFS_OK;
    if (infos_from_proto(sd->inputs, sd->n_inputs, &s->inputs, &s->n_inputs, st) != TFS_OK ||
        infos_from_proto((Tensorflow__SignatureDef__InputsEntry **)sd->outputs, sd->n_outputs,
                         &s->outputs, &s->n_outputs, st) != TFS_OK)
        return tfs_status_prefix(st, "signature '%s'", key);
    if (sd->n_defaults == 0)
        return TFS_OK;
    s->default_names = tfs_calloc(sd->n_defaults, sizeof *s->default_names);
    s->defaults = tfs_calloc(sd->n_defaults, sizeof *s->defaults);
    if (!s->default_names || !s->defaults)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
    for (size_t i = 0; i < sd->n_defaults; i++) {
        const Tensorflow__SignatureDef__DefaultsEntry *e = sd->defaults[i];
        const char *name = e->key ? e->key : "";
        tfs_tensor *t = NULL;
        if (!e->value)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "signature '%s': default '%s' is empty", key,
                           name);
        if (tfs__tensor_from_proto(e->value, &t, st) != TFS_OK)
            return tfs_status_prefix(st, "signature '%s' default '%s'", key, name);
        if (!(s->default_names[i] = tfs_strdup(name))) {
            tfs_tensor_unref(t);
            return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for a signature");
        }
        s->defaults[i] = t;
        s->n_defaults++;
    }
    return TFS_OK;
}

enum tfs_code tfs__signatures_from_proto(const Tensorflow__MetaGraphDef *mg, tfs_signature **out,
                                         int *n, tfs_status *st)
{
    *out = NULL;
    *n = 0;
    tfs_status_clear(st);
    if (mg->n_signature_def == 0)
        return TFS_OK;
    tfs_signature *v = tfs_calloc(mg->n_signature_def, sizeof *v);
    if (!v)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory for signatures");
    int count = 0;
    for (size_t i = 0; i < mg->n_signature_def; i++) {
        const char *key = mg->signature_def[i]->key ? mg->signature_def[i]->key : "";
        /* A map key sent twice: protobuf keeps the last one. */
        int slot = count;
        for (int j = 0; j < count; j++)
            if (!strcmp(v[j].key, key))
                slot = j;
        sig_clear(&v[slot]);
        if (sig_from_proto(key, mg->signature_def[i]->value, &v[slot], st) != TFS_OK) {
            tfs__signatures_free(v, slot == count ? count + 1 : count);
            return st ? st->code : TFS_INTERNAL;
        }
        if (slot == count)
            count++;
    }
    qsort(v, (size_t)count, sizeof *v, cmp_sig);
    *out = v;
    *n = count;
    return TFS_OK;
}

void tfs__signatures_free(tfs_signature *sigs, int n)
{
    for (int i = 0; sigs && i < n; i++)
        sig_clear(&sigs[i]);
    tfs_free(sigs);
}
