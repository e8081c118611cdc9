/* CPU kernels of the lookup-table ops, as TensorFlow's lookup_table_op.cc and
 * lookup_table_init_op.cc define them: HashTable(V2) and MutableHashTable(V2) (create or find the
 * table resource), InitializeTable(V2), InitializeTableFromTextFile(V2), LookupTableFind(V2),
 * LookupTableImport(V2), LookupTableInsert(V2), LookupTableRemoveV2, LookupTableSize(V2) and
 * LookupTableExport(V2).
 * The table itself and how it lives in the session: kernels/lookup-table.c, lookup-impl.h.
 *
 * A HashTable is initialized once: its first successful initialization (InitializeTable, a
 * vocabulary file, or LookupTableImport) fills it and makes it read-only; a later one with the
 * same data succeeds, with other data fails with FAILED_PRECONDITION, and a file initializer on an
 * initialized table succeeds without changing it. Finding in a table not initialized yet is
 * FAILED_PRECONDITION "Table not initialized.". A MutableHashTable is never "initialized": import
 * replaces its contents, insert adds or overwrites. A failed initialization leaves the table
 * empty and uninitialized. Vocabulary files are read through the session's file hook
 * (tfs_checkpoint_reader.read_file): runtime/ itself opens no files.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kernels/lookup-impl.h"

#define LINE_NUMBER (-1)
#define WHOLE_LINE  (-2)

/* ---- helpers -------------------------------------------------------------------------------- */

static enum tfs_code table_handle(tfs_kernel_ctx *k, bool is_mutable, enum tfs_dtype handle_dt,
                                  tfs_status *st)
{
    tfs_variable *v;
    tfs_lookup_table *t;
    enum tfs_code rc = tfs__lookup_table_for_node(k, is_mutable, &v, &t, st);
    if (rc == TFS_OK)
        rc = tfs_tensor_new_scalar(handle_dt, &k->out[0], st);
    if (rc == TFS_OK)
        *(tfs_variable **)k->out[0]->data = v;
    return rc;
}

/* Input i's value (a new reference): the legacy ops take reference inputs. */
static enum tfs_code value_in(tfs_kernel_ctx *k, int i, tfs_tensor **out, tfs_status *st)
{
    *out = NULL;
    if (i >= k->n_in)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "input %d is missing", i);
    return tfs__value_input(k, i, out, st);
}

static enum tfs_code check_dtypes(const tfs_node *n, const tfs_lookup_table *t,
                                  const tfs_tensor *keys, const tfs_tensor *vals, tfs_status *st)
{
    if (keys && keys->dtype != t->key_dt)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Key must be type %s but got %s",
                             tfs_dtype_name(t->key_dt), tfs_dtype_name(keys->dtype));
    if (vals && vals->dtype != t->val_dt)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Value must be type %s but got %s",
                             tfs_dtype_name(t->val_dt), tfs_dtype_name(vals->dtype));
    return TFS_OK;
}

/* keys.shape + value_shape into dims; false when the rank is too large. */
static bool value_dims(const tfs_lookup_table *t, const tfs_tensor *keys, int *rank,
                       int64_t *dims)
{
    *rank = keys->rank + t->value_shape.rank;
    if (*rank > TFS_MAX_RANK)
        return false;
    memcpy(dims, keys->dims, (size_t)keys->rank * sizeof *dims);
    memcpy(dims + keys->rank, t->value_shape.dims, (size_t)t->value_shape.rank * sizeof *dims);
    return true;
}

/* values.shape == keys.shape + value_shape, as TF's CheckKeyAndValueTensorsForInsert. */
static enum tfs_code check_value_shape(const tfs_node *n, const tfs_lookup_table *t,
                                       const tfs_tensor *keys, const tfs_tensor *vals,
                                       tfs_status *st)
{
    int rank;
    int64_t dims[2 * TFS_MAX_RANK];
    char a[128], b[128];
    if (value_dims(t, keys, &rank, dims) && tfs_shape_equal(rank, dims, vals->rank, vals->dims))
        return TFS_OK;
    return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Expected shape %s for value, got %s",
                         rank <= TFS_MAX_RANK ? tfs_shape_str(rank, dims, a, sizeof a) : "(rank>8)",
                         tfs_shape_str(vals->rank, vals->dims, b, sizeof b));
}

/* "Key K" / "value V" text for messages. */
static const char *fmt_elem(const tfs_tensor *t, int64_t i, char *buf, size_t n)
{
    switch (t->dtype) {
    case TFS_DTYPE_STRING: {
        const tfs_string *s = &((const tfs_string *)t->data)[i];
        snprintf(buf, n, "%.*s", (int)(s->len > 64 ? 64 : s->len), s->data ? s->data : "");
        break;
    }
    case TFS_DTYPE_INT32:  snprintf(buf, n, "%" PRId32, ((const int32_t *)t->data)[i]); break;
    case TFS_DTYPE_INT64:  snprintf(buf, n, "%" PRId64, ((const int64_t *)t->data)[i]); break;
    case TFS_DTYPE_FLOAT:  snprintf(buf, n, "%.9g", ((const float *)t->data)[i]); break;
    case TFS_DTYPE_DOUBLE: snprintf(buf, n, "%.17g", ((const double *)t->data)[i]); break;
    case TFS_DTYPE_BOOL:   snprintf(buf, n, "%d", ((const bool *)t->data)[i]); break;
    default:               snprintf(buf, n, "?");
    }
    return buf;
}

/* Fills an uninitialized HashTable from keys[i] -> vals[i] (TF's InitializableLookupTable::
 * Initialize), or, when it is initialized already, checks that these are its entries (from_file:
 * succeeds whatever they are). */
static enum tfs_code hash_init(const tfs_node *n, tfs_lookup_table *t, const tfs_tensor *keys,
                               const tfs_tensor *vals, bool from_file, tfs_status *st)
{
    enum tfs_code rc = TFS_OK;
    pthread_rwlock_wrlock(&t->mu);
    if (t->initialized) {
        bool same = from_file || keys->nelem == t->n;
        for (int64_t i = 0; same && i < keys->nelem; i++) {
            int64_t e = tfs__lookup_find(t, tfs__lookup_key_at(keys, i));
            same = e >= 0 && tfs__lookup_value_equal(t, e, vals, i);
        }
        if (!same)
            rc = tfs__node_err(n, st, TFS_FAILED_PRECONDITION,
                               "Table was already initialized with different data.");
        goto done;
    }
    for (int64_t i = 0; i < keys->nelem; i++) {
        bool same;
        tfs_lookup_key key = tfs__lookup_key_at(keys, i);
        if ((rc = tfs__lookup_put(t, key, vals, i, false, &same, st)) != TFS_OK) {
            tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
            break;
        }
        if (!same) {
            char kb[80], old[80], nw[80];
            int64_t e = tfs__lookup_find(t, key);
            tfs_tensor view = {.dtype = t->val_dt, .data = t->vals};
            rc = tfs__node_err(n, st, TFS_FAILED_PRECONDITION,
                               "HashTable has different value for same key. Key %s has %s and "
                               "trying to add value %s", fmt_elem(keys, i, kb, sizeof kb),
                               fmt_elem(&view, e, old, sizeof old),
                               fmt_elem(vals, i, nw, sizeof nw));
            break;
        }
    }
    if (rc == TFS_OK)
        t->initialized = true;
    else
        tfs__lookup_clear(t);
done:
    pthread_rwlock_unlock(&t->mu);
    return rc;
}

/* Checks attr `name` (a type, when present) against the dtype the table or input has. */
static enum tfs_code check_type_attr(const tfs_node *n, const char *name, enum tfs_dtype want,
                                     tfs_status *st)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    if (v && v->kind == TFS_ATTR_TYPE && v->type != want)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "attr %s is %s, but the table has %s",
                             name, tfs_dtype_short_name(v->type), tfs_dtype_short_name(want));
    return TFS_OK;
}

/* ---- creation ------------------------------------------------------------------------------- */

enum tfs_code tfs__k_hash_table(tfs_kernel_ctx *k, tfs_status *st)
{
    return table_handle(k, false, TFS_DTYPE_STRING + TFS_DTYPE_REF_OFFSET, st);
}

enum tfs_code tfs__k_hash_table_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    return table_handle(k, false, TFS_DTYPE_RESOURCE, st);
}

enum tfs_code tfs__k_mutable_hash_table(tfs_kernel_ctx *k, tfs_status *st)
{
    return table_handle(k, true, TFS_DTYPE_STRING + TFS_DTYPE_REF_OFFSET, st);
}

enum tfs_code tfs__k_mutable_hash_table_v2(tfs_kernel_ctx *k, tfs_status *st)
{
    return table_handle(k, true, TFS_DTYPE_RESOURCE, st);
}

/* ---- InitializeTable(V2)(table_handle, keys, values) ----------------------------------------- */

static enum tfs_code initializable(const tfs_node *n, const tfs_lookup_table *t, tfs_status *st)
{
    if (t->is_mutable)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "Table %s is not initializable",
                             t->name);
    return TFS_OK;
}

enum tfs_code tfs__k_initialize_table(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_lookup_table *t;
    tfs_tensor *keys = NULL, *vals = NULL;
    char buf[128];
    enum tfs_code rc;
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = initializable(n, t, st)) != TFS_OK || (rc = value_in(k, 1, &keys, st)) != TFS_OK ||
        (rc = value_in(k, 2, &vals, st)) != TFS_OK ||
        (rc = check_dtypes(n, t, keys, vals, st)) != TFS_OK)
        goto done;
    if (keys->rank != 1) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Keys must be a vector, but received shape%s",
                           tfs_shape_str(keys->rank, keys->dims, buf, sizeof buf));
    } else if (vals->rank != 1) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Values must be a vector, but received shape%s",
                           tfs_shape_str(vals->rank, vals->dims, buf, sizeof buf));
    } else if (keys->nelem != vals->nelem) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Keys and values must have the same size %" PRId64 " vs %" PRId64,
                           keys->nelem, vals->nelem);
    } else {
        rc = hash_init(n, t, keys, vals, false, st);
    }
done:
    tfs_tensor_unref(keys);
    tfs_tensor_unref(vals);
    return rc;
}

/* ---- InitializeTableFromTextFile(V2)(table_handle, filename) -------------------------------- */

typedef struct text_init {
    const tfs_node *n;
    const char     *file;
    int64_t         key_index, value_index, vocab_size, offset;
    char            delim;
} text_init;

/* TF's safe_strto32/64: optional whitespace, sign, decimal digits, whitespace; no overflow. */
static bool parse_int(const char *s, size_t len, int64_t lo, int64_t hi, int64_t *out)
{
    size_t i = 0;
    while (i < len && isspace((unsigned char)s[i]))
        i++;
    while (len > i && isspace((unsigned char)s[len - 1]))
        len--;
    bool neg = false;
    if (i < len && (s[i] == '+' || s[i] == '-'))
        neg = s[i++] == '-';
    if (i == len)
        return false;
    uint64_t v = 0, lim = neg ? (uint64_t)(-(lo + 1)) + 1 : (uint64_t)hi;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (lim - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Decimal floats (strtod's syntax without hex), whitespace around allowed. */
static bool parse_double(const char *s, size_t len, double *out)
{
    char buf[128];
    size_t i = 0;
    while (i < len && isspace((unsigned char)s[i]))
        i++;
    while (len > i && isspace((unsigned char)s[len - 1]))
        len--;
    if (i == len || len - i >= sizeof buf)
        return false;
    memcpy(buf, s + i, len - i);
    buf[len - i] = 0;
    const char *p = buf + (buf[0] == '+' || buf[0] == '-');
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return false;
    char *end;
    *out = strtod(buf, &end);
    return end == buf + (len - i);
}

/* TF's TextFileLineIterator::SetValue: field `index` of the line (or the whole line, or the line
 * number) into element i of t. */
static enum tfs_code set_field(const text_init *ti, const char *line, size_t len,
                               const char *const *tok, const size_t *tok_len, int64_t index,
                               int64_t line_no, tfs_tensor *t, int64_t i, tfs_status *st)
{
    if (index == LINE_NUMBER) {
        ((int64_t *)t->data)[i] = line_no + ti->offset;
        return TFS_OK;
    }
    const char *f = index == WHOLE_LINE ? line : tok[index];
    size_t fl = index == WHOLE_LINE ? len : tok_len[index];
    int64_t iv;
    double dv;
    const char *what;
    switch (t->dtype) {
    case TFS_DTYPE_INT32:
        if (!parse_int(f, fl, INT32_MIN, INT32_MAX, &iv)) {
            what = "int32";
            break;
        }
        ((int32_t *)t->data)[i] = (int32_t)(uint32_t)(uint64_t)(iv + ti->offset);
        return TFS_OK;
    case TFS_DTYPE_INT64:
        if (!parse_int(f, fl, INT64_MIN, INT64_MAX, &iv)) {
            what = "int64";
            break;
        }
        ((int64_t *)t->data)[i] = iv;
        return TFS_OK;
    case TFS_DTYPE_FLOAT:
    case TFS_DTYPE_DOUBLE:
        if (!parse_double(f, fl, &dv)) {
            what = t->dtype == TFS_DTYPE_FLOAT ? "float" : "double";
            break;
        }
        if (t->dtype == TFS_DTYPE_FLOAT)
            ((float *)t->data)[i] = (float)dv;
        else
            ((double *)t->data)[i] = dv;
        return TFS_OK;
    case TFS_DTYPE_STRING:
        return tfs_tensor_set_string(t, i, f, fl, st);
    default:
        return tfs__node_err(ti->n, st, TFS_INVALID_ARGUMENT, "Data type %s not supported.",
                             tfs_dtype_name(t->dtype));
    }
    return tfs__node_err(ti->n, st, TFS_INVALID_ARGUMENT,
                         "Field %.*s in line %" PRId64 " is not a valid %s.",
                         (int)(fl > 200 ? 200 : fl), f, line_no, what);
}

/* Parses the file's lines into keys[n] and vals[n] by TF's rules (see the file comment of
 * kernels/lookup.c and TextFileLineIterator). */
static enum tfs_code parse_text(const text_init *ti, const tfs_lookup_table *t, const char *data,
                                size_t len, tfs_tensor **keys, tfs_tensor **vals, tfs_status *st)
{
    const tfs_node *n = ti->n;
    *keys = *vals = NULL;
    int64_t lines = 0;
    for (size_t p = 0; p < len; lines++) {
        const char *nl = memchr(data + p, '\n', len - p);
        p = nl ? (size_t)(nl - data) + 1 : len;
    }
    int64_t count = ti->vocab_size >= 0 && ti->vocab_size < lines ? ti->vocab_size : lines;
    if (count == 0) {
        if (ti->vocab_size > 0)
            return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                 "Invalid vocab_size in %s: expected %" PRId64 " but got 0",
                                 ti->file, ti->vocab_size);
        return tfs__node_err(n, st, TFS_OUT_OF_RANGE, "%s: no line to read (%s)", ti->file,
                             lines ? "vocab_size is 0" : "empty file");
    }
    int64_t max_index = ti->key_index > ti->value_index ? ti->key_index : ti->value_index;
    int ntok = max_index >= 0 ? (int)max_index + 1 : 0;
    const char **tok = NULL;
    size_t *tok_len = NULL;
    enum tfs_code rc;
    if ((rc = tfs__arr_new_like(n, t->key_dt, 1, &count, keys, st)) != TFS_OK ||
        (rc = tfs__arr_new_like(n, t->val_dt, 1, &count, vals, st)) != TFS_OK)
        goto fail;
    if (ntok && (!(tok = tfs_malloc((size_t)ntok * sizeof *tok)) ||
                 !(tok_len = tfs_malloc((size_t)ntok * sizeof *tok_len)))) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto fail;
    }
    size_t p = 0;
    for (int64_t i = 0; i < count; i++) {
        const char *line = data + p, *nl = memchr(line, '\n', len - p);
        size_t ll = nl ? (size_t)(nl - line) : len - p;
        p += ll + (nl != NULL);
        if (ll > 0 && line[ll - 1] == '\r')
            ll--;
        if (ll == 0) {
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                               "Invalid content in %s: empty line found at position %zu.",
                               ti->file, p);
            goto fail;
        }
        if (ntok) {
            int got = 0;
            size_t start = 0;
            for (size_t j = 0; j <= ll; j++) {   /* every field, empty ones included */
                if (j < ll && line[j] != ti->delim)
                    continue;
                if (got < ntok) {
                    tok[got] = line + start;
                    tok_len[got] = j - start;
                }
                got++;
                start = j + 1;
            }
            if (got < ntok) {
                rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                                   "Invalid number of columns in %s line %" PRId64
                                   " (%.*s) : expected at least %d got %d", ti->file, i,
                                   (int)(ll > 200 ? 200 : ll), line, ntok, got);
                goto fail;
            }
        }
        if ((rc = set_field(ti, line, ll, tok, tok_len, ti->key_index, i, *keys, i, st)) !=
                TFS_OK ||
            (rc = set_field(ti, line, ll, tok, tok_len, ti->value_index, i, *vals, i, st)) !=
                TFS_OK)
            goto fail;
    }
    if (ti->vocab_size >= 0 && lines < ti->vocab_size) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Invalid vocab_size in %s: expected %" PRId64 " but got %" PRId64,
                           ti->file, ti->vocab_size, lines);
        goto fail;
    }
    tfs_free(tok);
    tfs_free(tok_len);
    return TFS_OK;
fail:
    tfs_free(tok);
    tfs_free(tok_len);
    tfs_tensor_unref(*keys);
    tfs_tensor_unref(*vals);
    *keys = *vals = NULL;
    return rc;
}

static enum tfs_code int_attr_or(const tfs_node *n, const char *name, bool required,
                                 int64_t dflt, int64_t *out, tfs_status *st)
{
    if (!required && !tfs__attr(n, name)) {
        *out = dflt;
        return TFS_OK;
    }
    return tfs__attr_int(n, name, out, st);
}

/* TF's InitializeTableFromTextFile checks of the indices against the table's dtypes. */
static enum tfs_code check_indices(const text_init *ti, const tfs_lookup_table *t,
                                   tfs_status *st)
{
    const tfs_node *n = ti->n;
    bool int_key = t->key_dt == TFS_DTYPE_INT32 || t->key_dt == TFS_DTYPE_INT64;
    bool int_val = t->val_dt == TFS_DTYPE_INT32 || t->val_dt == TFS_DTYPE_INT64;
    if (ti->key_index < WHOLE_LINE || ti->value_index < WHOLE_LINE)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "key_index and value_index must be >= -2, got %" PRId64 " and %"
                             PRId64, ti->key_index, ti->value_index);
    if (ti->vocab_size < -1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "vocab_size must be >= -1, got %" PRId64,
                             ti->vocab_size);
    if (ti->key_index == LINE_NUMBER && t->key_dt != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Key index for line number requires table key dtype of int64, got %s",
                             tfs_dtype_name(t->key_dt));
    if (ti->key_index == WHOLE_LINE && !int_key && t->key_dt != TFS_DTYPE_STRING)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Key index for whole line requires string or integer table key, "
                             "got %s", tfs_dtype_name(t->key_dt));
    if (ti->value_index == LINE_NUMBER && t->val_dt != TFS_DTYPE_INT64)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Value index for line number requires table value dtype of int64, "
                             "got %s", tfs_dtype_name(t->val_dt));
    if (ti->value_index == WHOLE_LINE && !int_val && t->val_dt != TFS_DTYPE_STRING)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                             "Value index for whole line requires table value dtype of integer "
                             "or string, got %s", tfs_dtype_name(t->val_dt));
    return TFS_OK;
}

enum tfs_code tfs__k_initialize_table_from_text_file(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    text_init ti = {.n = n};
    tfs_lookup_table *t;
    tfs_tensor *fname = NULL, *keys = NULL, *vals = NULL;
    char *path = NULL, *data = NULL, buf[128];
    size_t len = 0;
    enum tfs_code rc;
    if ((rc = tfs__run_check_file_ops(n, st)) != TFS_OK ||
        (rc = int_attr_or(n, "key_index", true, 0, &ti.key_index, st)) != TFS_OK ||
        (rc = int_attr_or(n, "value_index", true, 0, &ti.value_index, st)) != TFS_OK ||
        (rc = int_attr_or(n, "vocab_size", false, -1, &ti.vocab_size, st)) != TFS_OK ||
        (rc = int_attr_or(n, "offset", false, 0, &ti.offset, st)) != TFS_OK)
        return rc;
    const char *delim = tfs__attr_str(n, "delimiter", "\t");
    if (strlen(delim) != 1)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "delimiter should be only 1 char");
    ti.delim = delim[0];
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = initializable(n, t, st)) != TFS_OK || (rc = value_in(k, 1, &fname, st)) != TFS_OK)
        goto done;
    if (fname->dtype != TFS_DTYPE_STRING || fname->rank != 0) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "filename should be a single string, but got %s %s",
                           tfs_dtype_short_name(fname->dtype),
                           tfs_shape_str(fname->rank, fname->dims, buf, sizeof buf));
        goto done;
    }
    const tfs_string *fs = fname->data;
    if (fs->len == 0) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filename cannot be empty.");
        goto done;
    }
    if ((rc = check_indices(&ti, t, st)) != TFS_OK)
        goto done;
    const tfs_checkpoint_reader *r = tfs__session_checkpoint(k->sess);
    if (!r || !r->read_file) {
        rc = tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                           "no file reader was given to the session to read %.*s",
                           (int)(fs->len > 200 ? 200 : fs->len), fs->data);
        goto done;
    }
    if (!(path = tfs_strndup(fs->data, fs->len))) {
        rc = tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory");
        goto done;
    }
    if (memchr(fs->data, 0, fs->len)) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "filename contains a NUL byte");
        goto done;
    }
    ti.file = path;
    if ((rc = r->read_file(r->user, path, &data, &len, st)) != TFS_OK) {
        tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
        goto done;
    }
    if ((rc = parse_text(&ti, t, data, len, &keys, &vals, st)) == TFS_OK)
        rc = hash_init(n, t, keys, vals, true, st);
done:
    tfs_free(data);
    tfs_free(path);
    tfs_tensor_unref(fname);
    tfs_tensor_unref(keys);
    tfs_tensor_unref(vals);
    return rc;
}

/* ---- LookupTableFind(V2)(table_handle, keys, default_value) --------------------------------- */

typedef struct find_job {
    const tfs_lookup_table *t;
    const tfs_tensor       *keys, *dflt;
    tfs_tensor             *out;
} find_job;

static void find_range(void *arg, int64_t begin, int64_t end)
{
    const find_job *j = arg;
    size_t vb = (size_t)j->t->vdim * j->t->vsize;
    for (int64_t i = begin; i < end; i++) {
        int64_t e = tfs__lookup_find(j->t, tfs__lookup_key_at(j->keys, i));
        void *dst = (char *)j->out->data + (size_t)i * vb;
        if (e >= 0)
            memcpy(dst, j->t->vals + (size_t)e * vb, vb);
        else
            memcpy(dst, j->dflt->data, vb);
    }
}

enum tfs_code tfs__k_lookup_table_find(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_lookup_table *t;
    tfs_tensor *keys = NULL, *dflt = NULL, *out = NULL;
    char a[128], b[128];
    enum tfs_code rc;
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = value_in(k, 1, &keys, st)) != TFS_OK || (rc = value_in(k, 2, &dflt, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tin", t->key_dt, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tout", t->val_dt, st)) != TFS_OK)
        goto done;
    pthread_rwlock_rdlock(&t->mu);
    if (!t->is_mutable && !t->initialized) {
        rc = tfs__node_err(n, st, TFS_FAILED_PRECONDITION, "Table not initialized.");
    } else if ((rc = check_dtypes(n, t, keys, dflt, st)) != TFS_OK) {
    } else if (!tfs_shape_equal(dflt->rank, dflt->dims, t->value_shape.rank,
                                t->value_shape.dims)) {
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT,
                           "Expected shape %s for default value, got %s",
                           tfs_shape_str(t->value_shape.rank, t->value_shape.dims, a, sizeof a),
                           tfs_shape_str(dflt->rank, dflt->dims, b, sizeof b));
    } else {
        int rank;
        int64_t dims[2 * TFS_MAX_RANK];
        if (!value_dims(t, keys, &rank, dims))
            rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "the result would have rank %d > %d",
                               rank, TFS_MAX_RANK);
        else
            rc = tfs__arr_output(k, 0, t->val_dt, rank, dims, false, &out, st);
    }
    if (rc == TFS_OK && t->val_dt != TFS_DTYPE_STRING) {
        find_job j = {t, keys, dflt, out};
        tfs__parallel_for(keys->nelem, 4096, find_range, &j);
    } else if (rc == TFS_OK) {
        const tfs_string *d = dflt->data;
        for (int64_t i = 0; rc == TFS_OK && i < keys->nelem; i++) {
            int64_t e = tfs__lookup_find(t, tfs__lookup_key_at(keys, i));
            if (e >= 0) {
                rc = tfs__lookup_copy_value(t, e, out, i, st);
            } else {
                for (int64_t c = 0; rc == TFS_OK && c < t->vdim; c++)
                    rc = tfs_tensor_set_string(out, i * t->vdim + c, d[c].data, d[c].len, st);
            }
        }
    }
    pthread_rwlock_unlock(&t->mu);
    if (rc == TFS_OK) {
        k->out[0] = out;
        out = NULL;
    }
done:
    tfs_tensor_unref(out);
    tfs_tensor_unref(keys);
    tfs_tensor_unref(dflt);
    return rc;
}

/* ---- LookupTableImport(V2), LookupTableInsert(V2)(table_handle, keys, values) ---------------- */

static enum tfs_code import_or_insert(tfs_kernel_ctx *k, bool import, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_lookup_table *t;
    tfs_tensor *keys = NULL, *vals = NULL;
    enum tfs_code rc;
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = value_in(k, 1, &keys, st)) != TFS_OK || (rc = value_in(k, 2, &vals, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tin", t->key_dt, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tout", t->val_dt, st)) != TFS_OK ||
        (rc = check_dtypes(n, t, keys, vals, st)) != TFS_OK ||
        (rc = check_value_shape(n, t, keys, vals, st)) != TFS_OK)
        goto done;
    if (!t->is_mutable) {
        if (import)
            rc = hash_init(n, t, keys, vals, false, st);
        else
            rc = tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                               "Insert not supported by InitializableLookupTable implementations");
        goto done;
    }
    pthread_rwlock_wrlock(&t->mu);
    if (import)
        tfs__lookup_clear(t);
    for (int64_t i = 0; rc == TFS_OK && i < keys->nelem; i++)
        rc = tfs__lookup_put(t, tfs__lookup_key_at(keys, i), vals, i, true, NULL, st);
    pthread_rwlock_unlock(&t->mu);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
done:
    tfs_tensor_unref(keys);
    tfs_tensor_unref(vals);
    return rc;
}

enum tfs_code tfs__k_lookup_table_import(tfs_kernel_ctx *k, tfs_status *st)
{
    return import_or_insert(k, true, st);
}

enum tfs_code tfs__k_lookup_table_insert(tfs_kernel_ctx *k, tfs_status *st)
{
    return import_or_insert(k, false, st);
}

/* ---- LookupTableRemoveV2(table_handle, keys) ------------------------------------------------ */

enum tfs_code tfs__k_lookup_table_remove(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_lookup_table *t;
    tfs_tensor *keys = NULL;
    enum tfs_code rc;
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = value_in(k, 1, &keys, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tin", t->key_dt, st)) != TFS_OK ||
        (rc = check_dtypes(n, t, keys, NULL, st)) != TFS_OK)
        goto done;
    if (!t->is_mutable) {
        rc = tfs__node_err(n, st, TFS_UNIMPLEMENTED,
                           "Remove not supported by InitializableLookupTable implementations");
        goto done;
    }
    pthread_rwlock_wrlock(&t->mu);
    rc = tfs__lookup_remove(t, keys, st);
    pthread_rwlock_unlock(&t->mu);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "node '%s' (%s)", n->name, n->op_type);
done:
    tfs_tensor_unref(keys);
    return rc;
}

/* ---- LookupTableSize(V2), LookupTableExport(V2)(table_handle) ------------------------------- */

enum tfs_code tfs__k_lookup_table_size(tfs_kernel_ctx *k, tfs_status *st)
{
    tfs_lookup_table *t;
    enum tfs_code rc = tfs__lookup_table_input(k, 0, &t, st);
    if (rc == TFS_OK)
        rc = tfs_tensor_new_scalar(TFS_DTYPE_INT64, &k->out[0], st);
    if (rc != TFS_OK)
        return rc;
    pthread_rwlock_rdlock(&t->mu);
    *(int64_t *)k->out[0]->data = t->is_mutable || t->initialized ? t->n : 0;
    pthread_rwlock_unlock(&t->mu);
    return TFS_OK;
}

enum tfs_code tfs__k_lookup_table_export(tfs_kernel_ctx *k, tfs_status *st)
{
    const tfs_node *n = k->node;
    tfs_lookup_table *t;
    tfs_tensor *keys = NULL, *vals = NULL;
    enum tfs_code rc;
    if ((rc = tfs__lookup_table_input(k, 0, &t, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tkeys", t->key_dt, st)) != TFS_OK ||
        (rc = check_type_attr(n, "Tvalues", t->val_dt, st)) != TFS_OK)
        return rc;
    if (k->n_out != 2)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "expects 2 outputs");
    pthread_rwlock_rdlock(&t->mu);
    int64_t cnt = t->is_mutable || t->initialized ? t->n : 0;
    int64_t vd[TFS_MAX_RANK + 1] = {cnt};
    memcpy(vd + 1, t->value_shape.dims, (size_t)t->value_shape.rank * sizeof *vd);
    if (t->value_shape.rank + 1 > TFS_MAX_RANK)
        rc = tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "values would have rank > %d",
                           TFS_MAX_RANK);
    if (rc == TFS_OK)
        rc = tfs__arr_new_like(n, t->key_dt, 1, &cnt, &keys, st);
    if (rc == TFS_OK)
        rc = tfs__arr_new_like(n, t->val_dt, t->value_shape.rank + 1, vd, &vals, st);
    for (int64_t e = 0; rc == TFS_OK && e < cnt; e++) {
        if (t->key_dt == TFS_DTYPE_STRING)
            rc = tfs_tensor_set_string(keys, e, t->skeys[e].data, t->skeys[e].len, st);
        else if (t->key_dt == TFS_DTYPE_INT32)
            ((int32_t *)keys->data)[e] = (int32_t)t->ikeys[e];
        else
            ((int64_t *)keys->data)[e] = t->ikeys[e];
        if (rc == TFS_OK)
            rc = tfs__lookup_copy_value(t, e, vals, e, st);
    }
    pthread_rwlock_unlock(&t->mu);
    if (rc != TFS_OK) {
        tfs_tensor_unref(keys);
        tfs_tensor_unref(vals);
        return rc;
    }
    k->out[0] = keys;
    k->out[1] = vals;
    return TFS_OK;
}
