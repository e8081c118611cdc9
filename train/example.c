/* tf.Example decoding for datasets, by the runtime's own ParseExample kernel, and TFRecord files of
 * tf.Example read into memory.
 *
 * DESIGN. The parser is a five-kind-of-node graph run by a session, built once per feature spec:
 *     serialized  Placeholder (string [B])      names     Placeholder (string [B] or [0])
 *     key<j>      Const (string scalar)         default<j> Const (empty, or the full default)
 *     parse       ParseExample(serialized, names, key..., default...; Nsparse 0, Ndense n,
 *                              Tdense, dense_shapes as TensorFlow's tf.io.parse_example makes it)
 * so a training pipeline decodes its Examples with exactly the code that decodes them in a served
 * model's graph; there is no second parser to drift. Each Example's name is "file:record N", so
 * ParseExample's own messages ("Name: a.tfrecord:record 7, Key: x, Index: 3. ...") say where a bad
 * Example is. The session allows concurrent runs, so one parser serves any number of threads.
 */
#include <stdio.h>
#include <string.h>

#include "runtime/alloc.h"
#include "savedmodel/savedmodel.h"
#include "train/train-impl.h"

struct tfs_example_parser {
    tfs_graph   *g;
    tfs_session *s;
    int          n;
    char       (*fetch)[24];   /* "parse:j" */
    const char **fetch_ptrs;   /* -> fetch[j] */
};

static enum tfs_code check_spec(const tfs_feature_spec *spec, int n, tfs_status *st)
{
    char a[160], b[160];
    if (n < 1)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature spec: no features");
    for (int j = 0; j < n; j++) {
        const tfs_feature_spec *f = &spec[j];
        if (!f->name || !*f->name)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature spec %d: empty name", j);
        for (int k = 0; k < j; k++)
            if (strcmp(spec[k].name, f->name) == 0)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature '%s' appears twice in the spec",
                               f->name);
        if (f->dtype != TFS_DTYPE_FLOAT && f->dtype != TFS_DTYPE_INT64 &&
            f->dtype != TFS_DTYPE_STRING)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "feature '%s': dtype %s (tf.Example holds float, int64 or string)",
                           f->name, tfs_dtype_short_name(f->dtype));
        if (f->rank < 0 || f->rank > TFS_MAX_RANK - 1)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature '%s': rank %d not in [0, %d]",
                           f->name, f->rank, TFS_MAX_RANK - 1);
        int64_t nelem = tfs_shape_nelem(f->rank, f->dims);
        if (nelem < 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "feature '%s': bad shape %s (fixed, "
                           "non-negative dims)", f->name, tfs_shape_str(f->rank, f->dims, a, sizeof a));
        const tfs_tensor *d = f->default_value;
        if (d && (d->dtype != f->dtype || (d->nelem != 1 && d->nelem != nelem)))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                           "feature '%s': default of %s %s does not fit %s %s (give one element "
                           "or the whole shape)", f->name, tfs_dtype_short_name(d->dtype),
                           tfs_shape_str(d->rank, d->dims, a, sizeof a),
                           tfs_dtype_short_name(f->dtype),
                           tfs_shape_str(f->rank, f->dims, b, sizeof b));
    }
    return TFS_OK;
}

/* The default as ParseExample wants it: empty (required) or the feature's full shape. */
static enum tfs_code default_tensor(const tfs_feature_spec *f, tfs_tensor **out, tfs_status *st)
{
    int64_t zero = 0;
    const tfs_tensor *d = f->default_value;
    if (!d)
        return tfs_tensor_new(f->dtype, 1, &zero, out, st);
    enum tfs_code code = tfs_tensor_new(f->dtype, f->rank, f->dims, out, st);
    if (code != TFS_OK)
        return code;
    tfs_tensor *t = *out;
    size_t es = tfs_dtype_size(f->dtype);
    for (int64_t i = 0; i < t->nelem; i++) {
        int64_t k = d->nelem == 1 ? 0 : i;
        if (f->dtype == TFS_DTYPE_STRING) {
            const tfs_string *s = &tfs_tensor_strings((tfs_tensor *)d)[k];
            if ((code = tfs_tensor_set_string(t, i, s->data, s->len, st)) != TFS_OK) {
                tfs_tensor_unref(t);
                *out = NULL;
                return code;
            }
        } else {
            memcpy((char *)t->data + (size_t)i * es, (const char *)d->data + (size_t)k * es, es);
        }
    }
    return TFS_OK;
}

static void add_const(tfs_graph *g, const char *name, tfs_tensor *t)
{
    int id = tfs_graph_add_node(g, name, "Const");
    tfs_graph_set_attr_type(g, id, "dtype", t->dtype);
    tfs_graph_set_attr_tensor(g, id, "value", t);
}

static void set_list(tfs_graph *g, int node, const char *name, enum tfs_attr_kind kind, int n,
                     void *items)
{
    tfs_attr_value v;
    memset(&v, 0, sizeof v);
    v.kind = TFS_ATTR_LIST;
    v.list.kind = n ? kind : TFS_ATTR_NONE;
    v.list.n = n;
    if (kind == TFS_ATTR_TYPE)
        v.list.type = items;
    else
        v.list.shape = items;
    tfs_graph_set_attr(g, node, name, &v);
}

enum tfs_code tfs_example_parser_new(const tfs_feature_spec *spec, int n, tfs_example_parser **out,
                                     tfs_status *st)
{
    tfs_example_parser *p = NULL;
    tfs_tensor         *key = NULL, *dflt = NULL;
    enum tfs_dtype     *types = NULL;
    tfs_shape          *shapes = NULL;
    enum tfs_code       code;
    char                name[32];
    *out = NULL;
    if ((code = check_spec(spec, n, st)) != TFS_OK)
        return code;
    if (!(p = tfs_calloc(1, sizeof *p)) || !(p->fetch = tfs_calloc((size_t)n, sizeof *p->fetch)) ||
        !(p->fetch_ptrs = tfs_calloc((size_t)n, sizeof *p->fetch_ptrs)) ||
        !(types = tfs_calloc((size_t)n, sizeof *types)) ||
        !(shapes = tfs_calloc((size_t)n, sizeof *shapes))) {
        code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "example parser: out of memory");
        goto fail;
    }
    p->n = n;
    if ((code = tfs_graph_new(&p->g, st)) != TFS_OK)
        goto fail;
    tfs_graph *g = p->g;
    tfs_graph_set_attr_type(g, tfs_graph_add_node(g, "serialized", "Placeholder"), "dtype",
                            TFS_DTYPE_STRING);
    tfs_graph_set_attr_type(g, tfs_graph_add_node(g, "names", "Placeholder"), "dtype",
                            TFS_DTYPE_STRING);
    for (int j = 0; j < n; j++) {
        if ((code = tfs_tensor_new_scalar(TFS_DTYPE_STRING, &key, st)) != TFS_OK ||
            (code = tfs_tensor_set_string(key, 0, spec[j].name, strlen(spec[j].name), st)) !=
                TFS_OK ||
            (code = default_tensor(&spec[j], &dflt, st)) != TFS_OK)
            goto fail;
        snprintf(name, sizeof name, "key%d", j);
        add_const(g, name, key);
        snprintf(name, sizeof name, "default%d", j);
        add_const(g, name, dflt);
        tfs_tensor_unref(key);
        tfs_tensor_unref(dflt);
        key = dflt = NULL;
        types[j] = spec[j].dtype;
        shapes[j].rank = spec[j].rank;
        memcpy(shapes[j].dims, spec[j].dims, sizeof shapes[j].dims);
        snprintf(p->fetch[j], sizeof p->fetch[j], "parse:%d", j);
        p->fetch_ptrs[j] = p->fetch[j];
    }
    int pe = tfs_graph_add_node(g, "parse", "ParseExample");
    tfs_graph_add_input(g, pe, "serialized");
    tfs_graph_add_input(g, pe, "names");
    for (int j = 0; j < n; j++) {
        snprintf(name, sizeof name, "key%d", j);
        tfs_graph_add_input(g, pe, name);
    }
    for (int j = 0; j < n; j++) {
        snprintf(name, sizeof name, "default%d", j);
        tfs_graph_add_input(g, pe, name);
    }
    tfs_graph_set_attr_int(g, pe, "Nsparse", 0);
    tfs_graph_set_attr_int(g, pe, "Ndense", n);
    set_list(g, pe, "sparse_types", TFS_ATTR_TYPE, 0, NULL);
    set_list(g, pe, "Tdense", TFS_ATTR_TYPE, n, types);
    set_list(g, pe, "dense_shapes", TFS_ATTR_SHAPE, n, shapes);
    if ((code = tfs_graph_finalize(g, st)) != TFS_OK ||
        (code = tfs_session_new(g, NULL, &p->s, st)) != TFS_OK)
        goto fail;
    tfs_free(types);
    tfs_free(shapes);
    *out = p;
    return TFS_OK;
fail:
    tfs_tensor_unref(key);
    tfs_tensor_unref(dflt);
    tfs_free(types);
    tfs_free(shapes);
    tfs_example_parser_free(p);
    return code;
}

void tfs_example_parser_free(tfs_example_parser *p)
{
    if (!p)
        return;
    tfs_session_free(p->s);
    tfs_graph_unref(p->g);
    tfs_free(p->fetch);
    tfs_free(p->fetch_ptrs);
    tfs_free(p);
}

static enum tfs_code run_batch(const tfs_example_parser *p, int64_t n,
                               const uint8_t *const *data, const size_t *lens,
                               const char *const *names, tfs_tensor **out, tfs_status *st)
{
    tfs_tensor   *ser = NULL, *nm = NULL;
    enum tfs_code code;
    int64_t       nn = names ? n : 0;
    for (int j = 0; j < p->n; j++)
        out[j] = NULL;
    if ((code = tfs_tensor_new(TFS_DTYPE_STRING, 1, &n, &ser, st)) != TFS_OK ||
        (code = tfs_tensor_new(TFS_DTYPE_STRING, 1, &nn, &nm, st)) != TFS_OK)
        goto done;
    for (int64_t i = 0; i < n; i++)
        if ((code = tfs_tensor_set_string(ser, i, data[i], lens[i], st)) != TFS_OK ||
            (names && (code = tfs_tensor_set_string(nm, i, names[i], strlen(names[i]), st)) !=
                          TFS_OK))
            goto done;
    tfs_feed feeds[2] = {{"serialized:0", ser}, {"names:0", nm}};
    code = tfs_session_run(p->s, feeds, 2, p->fetch_ptrs, p->n, NULL, 0, out, st);
    /* The kernel's message says which Example and key; the node's name adds nothing. */
    static const char head[] = "node 'parse': ";
    if (code != TFS_OK && st && strncmp(st->msg, head, sizeof head - 1) == 0)
        memmove(st->msg, st->msg + sizeof head - 1, strlen(st->msg) - (sizeof head - 1) + 1);
done:
    tfs_tensor_unref(ser);
    tfs_tensor_unref(nm);
    return code;
}

enum tfs_code tfs_example_parser_parse(const tfs_example_parser *p, int64_t n,
                                       const uint8_t *const *data, const size_t *lens,
                                       const char *const *names, tfs_tensor **out, tfs_status *st)
{
    tfs_status    local;
    tfs_status   *s = st ? st : &local;
    enum tfs_code code = run_batch(p, n, data, lens, names, out, s);
    if (code == TFS_OK || code == TFS_RESOURCE_EXHAUSTED || !names)
        return code;
    for (int64_t i = 0; i < n; i++)
        if (strstr(s->msg, names[i]))
            return code;   /* ParseExample named the Example itself */
    if (n == 1)
        return tfs_status_prefix(s, "%s", names[0]);
    /* Some of ParseExample's messages ("Could not parse example input") do not say which
     * Example; find it by parsing one at a time (the error path only) and name it. */
    for (int64_t i = 0; i < n; i++) {
        tfs_tensor   *one[1];
        tfs_tensor  **o = p->n <= 1 ? one : tfs_calloc((size_t)p->n, sizeof *o);
        tfs_status    st1;
        if (!o)
            break;
        enum tfs_code c1 = run_batch(p, 1, data + i, lens + i, names + i, o, &st1);
        for (int j = 0; c1 == TFS_OK && j < p->n; j++)
            tfs_tensor_unref(o[j]);
        if (o != one)
            tfs_free(o);
        if (c1 != TFS_OK) {
            tfs_status_set(s, c1, "%s: %s", names[i], st1.msg);
            return c1;
        }
    }
    return code;
}

/* ---- TFRecord files into memory ------------------------------------------------------------- */

#define READ_BATCH 512

/* Concatenates parts[0..np) (each [b_i, ...], same dtype and inner shape) along dim 0. */
static enum tfs_code concat0(tfs_tensor **parts, int np, const tfs_feature_spec *f,
                             tfs_tensor **out, tfs_status *st)
{
    int64_t dims[TFS_MAX_RANK], n = 0;
    for (int i = 0; i < np; i++)
        n += parts[i]->dims[0];
    dims[0] = n;
    memcpy(dims + 1, f->dims, (size_t)f->rank * sizeof *dims);
    enum tfs_code code = tfs_tensor_new(f->dtype, f->rank + 1, dims, out, st);
    if (code != TFS_OK)
        return code;
    tfs_tensor *t = *out;
    int64_t     at = 0;
    for (int i = 0; i < np; i++) {
        if (f->dtype == TFS_DTYPE_STRING) {
            const tfs_string *s = tfs_tensor_strings(parts[i]);
            for (int64_t k = 0; k < parts[i]->nelem; k++)
                if ((code = tfs_tensor_set_string(t, at + k, s[k].data, s[k].len, st)) != TFS_OK) {
                    tfs_tensor_unref(t);
                    *out = NULL;
                    return code;
                }
        } else if (parts[i]->nbytes) {
            memcpy((char *)t->data + (size_t)at * tfs_dtype_size(f->dtype), parts[i]->data,
                   parts[i]->nbytes);
        }
        at += parts[i]->nelem;
    }
    return TFS_OK;
}

enum tfs_code tfs_tfrecord_examples_read(const char *const *paths, int n_paths,
                                         const tfs_feature_spec *spec, int n_spec,
                                         tfs_tensor **out, tfs_status *st)
{
    tfs_example_parser  *p = NULL;
    tfs_tfrecord_reader *r = NULL;
    tfs__buf             bytes = {0}, namebuf = {0};
    tfs_tensor         **parts = NULL;   /* [nparts][n_spec] */
    int                  nparts = 0, capparts = 0, nb = 0;
    size_t               offs[READ_BATCH + 1], noffs[READ_BATCH];
    enum tfs_code        code;
    for (int j = 0; j < n_spec; j++)
        out[j] = NULL;
    if ((code = tfs_example_parser_new(spec, n_spec, &p, st)) != TFS_OK)
        return code;
    for (int fi = 0; fi <= n_paths; fi++) {
        bool flush_only = fi == n_paths;
        if (!flush_only && (code = tfs_tfrecord_reader_open(paths[fi], &r, st)) != TFS_OK)
            goto fail;
        for (int64_t recno = 0;; recno++) {
            const uint8_t *rec;
            size_t         len;
            bool           have = false;
            if (!flush_only) {
                code = tfs_tfrecord_reader_next(r, &rec, &len, st);
                if (code != TFS_OK && code != TFS_OUT_OF_RANGE)
                    goto fail;
                have = code == TFS_OK;
            }
            if (have) {
                offs[nb] = bytes.len;
                tfs__buf_append(&bytes, rec, len);
                noffs[nb] = namebuf.len;
                /* Each name keeps its NUL: they are read in place as C strings. */
                tfs__buf_printf(&namebuf, "%s:record %lld", paths[fi], (long long)recno);
                tfs__buf_putc(&namebuf, 0);
                if (bytes.oom || namebuf.oom)
                    goto oom;
                nb++;
            }
            if (nb == READ_BATCH || (!have && nb > 0)) {
                const uint8_t *data[READ_BATCH];
                size_t         lens[READ_BATCH];
                const char    *nm[READ_BATCH];
                offs[nb] = bytes.len;
                for (int i = 0; i < nb; i++) {
                    data[i] = (const uint8_t *)bytes.data + offs[i];
                    lens[i] = offs[i + 1] - offs[i];
                    nm[i] = namebuf.data + noffs[i];
                }
                if (nparts == capparts) {
                    int cap = capparts ? capparts * 2 : 16;
                    tfs_tensor **q = tfs_realloc(parts, (size_t)cap * (size_t)n_spec * sizeof *q);
                    if (!q)
                        goto oom;
                    parts = q;
                    capparts = cap;
                }
                if ((code = tfs_example_parser_parse(p, nb, data, lens, nm,
                                                     parts + (size_t)nparts * (size_t)n_spec,
                                                     st)) != TFS_OK)
                    goto fail;
                nparts++;
                nb = 0;
                bytes.len = 0;
                namebuf.len = 0;
            }
            if (!have)
                break;
        }
        tfs_tfrecord_reader_close(r);
        r = NULL;
    }
    for (int j = 0; j < n_spec; j++) {
        tfs_tensor *col[1];
        tfs_tensor **pj = tfs_calloc((size_t)(nparts ? nparts : 1), sizeof *pj);
        if (!pj)
            goto oom;
        for (int i = 0; i < nparts; i++)
            pj[i] = parts[(size_t)i * (size_t)n_spec + (size_t)j];
        code = concat0(pj, nparts, &spec[j], col, st);
        tfs_free(pj);
        if (code != TFS_OK)
            goto fail;
        out[j] = col[0];
    }
    code = TFS_OK;
    tfs_status_clear(st);
    goto done;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "reading tf.Examples: out of memory");
fail:
    for (int j = 0; j < n_spec; j++) {
        tfs_tensor_unref(out[j]);
        out[j] = NULL;
    }
done:
    for (size_t i = 0; i < (size_t)nparts * (size_t)n_spec; i++)
        tfs_tensor_unref(parts[i]);
    tfs_free(parts);
    tfs__buf_deinit(&bytes);
    tfs__buf_deinit(&namebuf);
    tfs_tfrecord_reader_close(r);
    tfs_example_parser_free(p);
    return code;
}
