/* CPU kernels of StaticRegexReplace, RegexReplace, StaticRegexFullMatch and RegexFullMatch: RE2
 * itself does the matching (kernels/regex-impl.h), with the options TensorFlow's kernels use, so
 * every pattern TensorFlow accepts works here and means the same: RE2 syntax (named groups
 * (?P<name>...), flags (?i) (?s) (?m) (?U), Unicode classes \pL \p{Greek}, [[:alpha:]], \Q...\E,
 * {n,m} up to 1000, lazy quantifiers), leftmost-first matching, UTF-8 text.
 *
 * TensorFlow's behaviour kept exactly:
 *  - a pattern RE2 refuses is INVALID_ARGUMENT "Invalid pattern: PATTERN, error: RE2'S MESSAGE"
 *    (the pattern cut at 200 bytes here, so that RE2's message fits in a status);
 *  - replace_global (default true) picks RE2::GlobalReplace, else RE2::Replace: the rewrite takes
 *    \0-\9 and \\, and TensorFlow does not check it first: RE2 leaves the text as it was for a
 *    group the pattern lacks, and for another bad escape cuts each match's rewrite there
 *    (GlobalReplace) or leaves the text as it was (Replace);
 *  - the pattern and rewrite inputs of RegexReplace / RegexFullMatch must be scalars
 *    ("Pattern must be scalar, but received [2]").
 * Linear time in the text whatever the pattern (RE2 has no backtracking), and each compiled
 * pattern's memory is bounded by RE2's max_mem (TFS_REGEX_MAX_MEM, 8 MiB, as in TensorFlow).
 * The pattern is compiled on every run: TensorFlow compiles the static ops' once per kernel and
 * the others' when the pattern changes, which only saves time.
 */
#include <string.h>

#include "runtime/kernels/regex-impl.h"
#include "runtime/runtime-impl.h"

/* The most of a pattern an error message quotes. */
#define REGEX_MSG_PATTERN 200

typedef struct regex_job {
    const tfs_regex  *re;
    const tfs_tensor *in;
    tfs_tensor       *out;
    const char       *rewrite;   /* NULL: full match */
    size_t            rewrite_len;
    bool              global;
    _Atomic bool      oom;
} regex_job;

static void regex_range(void *arg, int64_t begin, int64_t end)
{
    regex_job *j = arg;
    const tfs_string *s = j->in->data;
    for (int64_t i = begin; i < end && !j->oom; i++) {
        const char *text = s[i].data ? s[i].data : "";
        if (!j->rewrite) {
            int m = tfs__regex_full_match(j->re, text, s[i].len);
            if (m < 0)
                j->oom = true;
            ((bool *)j->out->data)[i] = m > 0;
            continue;
        }
        tfs_string *o = &((tfs_string *)j->out->data)[i];
        if (!tfs__regex_replace(j->re, text, s[i].len, j->rewrite, j->rewrite_len, j->global,
                                &o->data, &o->len))
            j->oom = true;
    }
}

/* The op on k->in[0] with `pattern`; `rewrite` NULL: full match (bool output). */
static enum tfs_code run_regex(tfs_kernel_ctx *k, const tfs_string *pattern,
                               const tfs_string *rewrite, bool global, tfs_status *st)
{
    const tfs_node *n = k->node;
    const tfs_tensor *in = k->in[0];
    if (in->dtype != TFS_DTYPE_STRING)
        return tfs__node_err(n, st, TFS_INVALID_ARGUMENT, "input must be a string tensor, got %s",
                             tfs_dtype_short_name(in->dtype));
    const char *pat = pattern->data ? pattern->data : "";
    char *error;
    tfs_regex *re = tfs__regex_new(pat, pattern->len, &error);
    if (!re && error) {
        enum tfs_code rc = tfs__node_err(
            n, st, TFS_INVALID_ARGUMENT, "Invalid pattern: %.*s, error: %s",
            (int)(pattern->len > REGEX_MSG_PATTERN ? REGEX_MSG_PATTERN : pattern->len), pat, error);
        tfs_free(error);
        return rc;
    }
    if (!re)
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory compiling a pattern");
    tfs_tensor *out;
    enum tfs_code rc = tfs__arr_new_like(n, rewrite ? TFS_DTYPE_STRING : TFS_DTYPE_BOOL, in->rank,
                                         in->dims, &out, st);
    if (rc != TFS_OK) {
        tfs__regex_free(re);
        return rc;
    }
    regex_job j = {re, in, out, NULL, 0, global, false};
    if (rewrite) {
        j.rewrite = rewrite->data ? rewrite->data : "";
        j.rewrite_len = rewrite->len;
    }
    tfs__parallel_for(in->nelem, 64, regex_range, &j);
    tfs__regex_free(re);
    if (j.oom) {
        tfs_tensor_unref(out);
        return tfs__node_err(n, st, TFS_RESOURCE_EXHAUSTED, "out of memory matching pattern %.*s",
                             (int)(pattern->len > REGEX_MSG_PATTERN ? REGEX_MSG_PATTERN
                                                                     : pattern->len),
                             pat);
    }
    k->out[0] = out;
    return TFS_OK;
}

/* Input i of RegexReplace / RegexFullMatch, a string scalar; TensorFlow's message otherwise. */
static enum tfs_code scalar_input(tfs_kernel_ctx *k, int i, const char *what,
                                  const tfs_string **out, tfs_status *st)
{
    const tfs_tensor *t = k->in[i];
    if (t->dtype != TFS_DTYPE_STRING)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "%s must be a string, got %s",
                             what, tfs_dtype_short_name(t->dtype));
    if (t->rank != 0) {
        char shape[128];
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "%s must be scalar, but received %s", what,
                             tfs_shape_str(t->rank, t->dims, shape, sizeof shape));
    }
    *out = t->data;
    return TFS_OK;
}

static tfs_string attr_bytes(const tfs_node *n, const char *name, bool *present)
{
    const tfs_attr_value *v = tfs__attr(n, name);
    *present = v && v->kind == TFS_ATTR_S;
    return *present ? v->s : (tfs_string){0, NULL};
}

static bool replace_global_attr(const tfs_node *n)
{
    const tfs_attr_value *v = tfs__attr(n, "replace_global");
    return !v || v->kind != TFS_ATTR_B || v->b;
}

/* StaticRegexReplace(input) attrs pattern, rewrite, replace_global = true. */
enum tfs_code tfs__k_static_regex_replace(tfs_kernel_ctx *k, tfs_status *st)
{
    bool hp, hr;
    tfs_string pat = attr_bytes(k->node, "pattern", &hp);
    tfs_string rw = attr_bytes(k->node, "rewrite", &hr);
    if (k->n_in != 1 || !hp || !hr)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "expects 1 input and string attrs pattern and rewrite");
    return run_regex(k, &pat, &rw, replace_global_attr(k->node), st);
}

/* RegexReplace(input, pattern, rewrite) attr replace_global = true. */
enum tfs_code tfs__k_regex_replace(tfs_kernel_ctx *k, tfs_status *st)
{
    if (k->n_in != 3)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects 3 inputs, got %d",
                             k->n_in);
    const tfs_string *pat, *rw;
    enum tfs_code rc;
    if ((rc = scalar_input(k, 1, "Pattern", &pat, st)) != TFS_OK ||
        (rc = scalar_input(k, 2, "Rewrite", &rw, st)) != TFS_OK)
        return rc;
    return run_regex(k, pat, rw, replace_global_attr(k->node), st);
}

/* StaticRegexFullMatch(input) attr pattern -> bool: the whole string matches. */
enum tfs_code tfs__k_static_regex_full_match(tfs_kernel_ctx *k, tfs_status *st)
{
    bool hp;
    tfs_string pat = attr_bytes(k->node, "pattern", &hp);
    if (k->n_in != 1 || !hp)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT,
                             "expects 1 input and a string attr pattern");
    return run_regex(k, &pat, NULL, false, st);
}

/* RegexFullMatch(input, pattern) -> bool. */
enum tfs_code tfs__k_regex_full_match(tfs_kernel_ctx *k, tfs_status *st)
{
    if (k->n_in != 2)
        return tfs__node_err(k->node, st, TFS_INVALID_ARGUMENT, "expects 2 inputs, got %d",
                             k->n_in);
    const tfs_string *pat;
    enum tfs_code rc = scalar_input(k, 1, "Pattern", &pat, st);
    if (rc != TFS_OK)
        return rc;
    return run_regex(k, pat, NULL, false, st);
}
