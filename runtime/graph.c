/* Graphs (see graph.h): the builder with sticky errors, the node-name hash, deep-copied attributes,
 * finalize (which resolves the GraphDef-style input strings into edges and control dependencies and
 * binds each node to its op), and the read accessors.
 *
 * DESIGN. Nodes live in one growable array and are referred to by index; the name hash is open
 * addressing over those indices. Builder calls latch the first error in g->err and become no-ops,
 * so an importer can add a whole GraphDef and check once at finalize. After finalize the graph is
 * never written again, which is what lets sessions on several threads share it without locks.
 */
#include "runtime/runtime-impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lifetime ------------------------------------------------------------------------------- */

enum tfs_code tfs_graph_new(tfs_graph **out, tfs_status *st)
{
    *out = NULL;
    tfs_graph *g = tfs_calloc(1, sizeof *g);
    if (!g)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory allocating a graph");
    atomic_init(&g->refs, 1);
    tfs_status_clear(&g->err);
    *out = g;
    tfs_status_clear(st);
    return TFS_OK;
}

tfs_graph *tfs_graph_ref(tfs_graph *g)
{
    if (g)
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void tfs_attr_value_clear(tfs_attr_value *v)
{
    if (!v)
        return;
    switch (v->kind) {
    case TFS_ATTR_S:
        tfs_free(v->s.data);
        break;
    case TFS_ATTR_TENSOR:
        tfs_tensor_unref(v->tensor);
        break;
    case TFS_ATTR_FUNC:
        tfs_free(v->func);
        break;
    case TFS_ATTR_LIST:
        for (int i = 0; i < v->list.n; i++) {
            if (v->list.kind == TFS_ATTR_S)
                tfs_free(v->list.s[i].data);
            else if (v->list.kind == TFS_ATTR_TENSOR)
                tfs_tensor_unref(v->list.tensor[i]);
            else if (v->list.kind == TFS_ATTR_FUNC)
                tfs_free(v->list.func[i]);
        }
        tfs_free(v->list.s);   /* every member of the union is the same array pointer */
        break;
    default:
        break;
    }
    memset(v, 0, sizeof *v);
}

static void node_clear(tfs_node *n)
{
    tfs_free(n->name);
    tfs_free(n->op_type);
    for (int i = 0; i < n->n_text_inputs; i++)
        tfs_free(n->text_inputs[i]);
    tfs_free(n->text_inputs);
    tfs_free(n->inputs);
    tfs_free(n->ctrl);
    for (int i = 0; i < n->n_attrs; i++) {
        tfs_free(n->attr_names[i]);
        tfs_attr_value_clear(&n->attrs[i]);
    }
    tfs_free(n->attr_names);
    tfs_free(n->attrs);
}

static void free_names(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        tfs_free(v[i]);
    tfs_free(v);
}

static void function_clear(tfs_graph_function *f)
{
    tfs_free(f->name);
    tfs_graph_unref(f->body);
    free_names(f->inputs, f->n_in);
    free_names(f->outputs, f->n_out);
    memset(f, 0, sizeof *f);
}

void tfs_graph_unref(tfs_graph *g)
{
    if (!g)
        return;
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (int i = 0; i < g->n_funcs; i++)
        function_clear(&g->funcs[i]);
    tfs_free(g->funcs);
    tfs__build_state_free(g);
    for (int i = 0; i < g->n_nodes; i++)
        node_clear(&g->nodes[i]);
    tfs_free(g->nodes);
    tfs_free(g->hash);
    tfs_free(g);
}

/* ---- name hash ------------------------------------------------------------------------------ */

static uint32_t hash_str(const char *s, size_t len)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* The node with this name (first len bytes of name), or -1. */
static int hash_find(const tfs_graph *g, const char *name, size_t len)
{
    if (g->hash_cap == 0)
        return -1;
    uint32_t mask = (uint32_t)g->hash_cap - 1;
    for (uint32_t i = hash_str(name, len) & mask;; i = (i + 1) & mask) {
        int id = g->hash[i];
        if (id < 0)
            return -1;
        const char *nm = g->nodes[id].name;
        if (strlen(nm) == len && !memcmp(nm, name, len))
            return id;
    }
}

static void hash_insert(int *hash, int cap, const char *name, int id)
{
    uint32_t mask = (uint32_t)cap - 1;
    uint32_t i = hash_str(name, strlen(name)) & mask;
    while (hash[i] >= 0)
        i = (i + 1) & mask;
    hash[i] = id;
}

/* Keeps the table at most half full so probes stay short. */
static bool hash_reserve(tfs_graph *g, int n_nodes)
{
    if (g->hash_cap >= 2 * n_nodes)
        return true;
    int cap = g->hash_cap ? g->hash_cap : 64;
    while (cap < 2 * n_nodes) {
        if (cap > INT_MAX / 2)
            return false;
        cap *= 2;
    }
    int *hash = tfs_malloc((size_t)cap * sizeof *hash);
    if (!hash)
        return false;
    for (int i = 0; i < cap; i++)
        hash[i] = -1;
    for (int id = 0; id < g->n_nodes; id++)
        hash_insert(hash, cap, g->nodes[id].name, id);
    tfs_free(g->hash);
    g->hash = hash;
    g->hash_cap = cap;
    return true;
}

/* ---- building ------------------------------------------------------------------------------- */

void tfs_graph_set_error(tfs_graph *g, enum tfs_code code, const char *fmt, ...)
{
    if (!g || g->finalized || g->err.code != TFS_OK)   /* a finalized graph is immutable */
        return;
    va_list ap;
    va_start(ap, fmt);
    tfs_status_vset(&g->err, code, fmt, ap);
    va_end(ap);
}

enum tfs_code tfs_graph_status(const tfs_graph *g, tfs_status *st)
{
    if (!g)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "no graph");
    if (g->err.code != TFS_OK) {
        if (st)
            *st = g->err;
        return g->err.code;
    }
    tfs_status_clear(st);
    return TFS_OK;
}

#define OOM(g, what) tfs_graph_set_error((g), TFS_RESOURCE_EXHAUSTED, "out of memory %s", (what))

/* True when builder calls may proceed on node `id` (or on the graph, when id is -2). */
static bool can_build(tfs_graph *g, int id)
{
    if (!g)
        return false;
    TFS_ASSERT(!g->finalized);   /* building a finalized graph is a bug in our code */
    if (g->err.code != TFS_OK)
        return false;
    if (id != -2 && (id < 0 || id >= g->n_nodes)) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node id %d does not exist (%d nodes)", id,
                            g->n_nodes);
        return false;
    }
    return true;
}

int tfs_graph_add_node(tfs_graph *g, const char *name, const char *op_type)
{
    if (!can_build(g, -2))
        return -1;
    if (!name || !*name) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node %d has an empty name", g->n_nodes);
        return -1;
    }
    if (!op_type || !*op_type) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s' has an empty op type", name);
        return -1;
    }
    if (hash_find(g, name, strlen(name)) >= 0) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "duplicate node name '%s'", name);
        return -1;
    }
    if (g->n_nodes == INT_MAX / 4) {
        tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "too many nodes in graph");
        return -1;
    }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 16;
        tfs_node *nodes = tfs_realloc(g->nodes, (size_t)cap * sizeof *nodes);
        if (!nodes) {
            OOM(g, "growing the node array");
            return -1;
        }
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    if (!hash_reserve(g, g->n_nodes + 1)) {
        OOM(g, "growing the node name table");
        return -1;
    }
    tfs_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->name = tfs_strdup(name);
    n->op_type = tfs_strdup(op_type);
    n->n_outputs = -1;
    if (!n->name || !n->op_type) {
        node_clear(n);
        OOM(g, "copying a node name");
        return -1;
    }
    int id = g->n_nodes++;
    hash_insert(g->hash, g->hash_cap, n->name, id);
    return id;
}

void tfs_graph_add_input(tfs_graph *g, int node, const char *input)
{
    if (!can_build(g, node))
        return;
    tfs_node *n = &g->nodes[node];
    if (!input) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s': NULL input", n->name);
        return;
    }
    char **ins = tfs_realloc(n->text_inputs, (size_t)(n->n_text_inputs + 1) * sizeof *ins);
    if (!ins) {
        OOM(g, "adding an input");
        return;
    }
    n->text_inputs = ins;
    ins[n->n_text_inputs] = tfs_strdup(input);
    if (!ins[n->n_text_inputs]) {
        OOM(g, "adding an input");
        return;
    }
    n->n_text_inputs++;
}

/* A NUL-terminated copy of a byte string (the terminator lets tfs__attr_str hand out C strings). */
static bool copy_bytes(tfs_string *dst, const tfs_string *src)
{
    dst->len = src->len;
    dst->data = tfs_malloc(src->len + 1);
    if (!dst->data)
        return false;
    if (src->len)
        memcpy(dst->data, src->data, src->len);
    dst->data[src->len] = '\0';
    return true;
}

static size_t list_elem_size(enum tfs_attr_kind kind)
{
    switch (kind) {
    case TFS_ATTR_S:      return sizeof(tfs_string);
    case TFS_ATTR_I:      return sizeof(int64_t);
    case TFS_ATTR_F:      return sizeof(float);
    case TFS_ATTR_B:      return sizeof(bool);
    case TFS_ATTR_TYPE:   return sizeof(enum tfs_dtype);
    case TFS_ATTR_SHAPE:  return sizeof(tfs_shape);
    case TFS_ATTR_TENSOR: return sizeof(tfs_tensor *);
    case TFS_ATTR_FUNC:   return sizeof(char *);
    default:              return 0;
    }
}

/* Deep copy of a list whose element kind has a known size (checked by the caller). */
static bool attr_list_copy(tfs_attr_list *dst, const tfs_attr_list *src)
{
    memset(dst, 0, sizeof *dst);
    if (src->n <= 0)
        return true;   /* an empty list keeps kind NONE */
    size_t es = list_elem_size(src->kind);
    void *arr = tfs_calloc((size_t)src->n, es);
    if (!arr)
        return false;
    dst->kind = src->kind;
    dst->s = arr;   /* every member of the union is the same array pointer */
    for (int i = 0; i < src->n; i++) {
        switch (src->kind) {
        case TFS_ATTR_S:
            if (!copy_bytes(&dst->s[i], &src->s[i]))
                return false;
            break;
        case TFS_ATTR_TENSOR:
            dst->tensor[i] = tfs_tensor_ref(src->tensor[i]);
            break;
        case TFS_ATTR_FUNC:
            dst->func[i] = tfs_strdup(src->func[i] ? src->func[i] : "");
            if (!dst->func[i])
                return false;
            break;
        default:
            memcpy((char *)arr + (size_t)i * es, (const char *)src->s + (size_t)i * es, es);
            break;
        }
        dst->n = i + 1;   /* how many elements attr_value_clear must release on failure */
    }
    return true;
}

/* Deep copy; on failure dst holds nothing and false is returned. */
static bool attr_value_copy(tfs_attr_value *dst, const tfs_attr_value *src)
{
    *dst = *src;
    bool ok = true;
    switch (src->kind) {
    case TFS_ATTR_S:
        ok = copy_bytes(&dst->s, &src->s);
        break;
    case TFS_ATTR_TENSOR:
        tfs_tensor_ref(dst->tensor);
        break;
    case TFS_ATTR_FUNC:
        dst->func = tfs_strdup(src->func ? src->func : "");
        ok = dst->func != NULL;
        break;
    case TFS_ATTR_LIST:
        ok = attr_list_copy(&dst->list, &src->list);
        break;
    default:
        break;
    }
    if (!ok)
        tfs_attr_value_clear(dst);
    return ok;
}

void tfs_graph_set_attr(tfs_graph *g, int node, const char *name, const tfs_attr_value *v)
{
    if (!can_build(g, node))
        return;
    tfs_node *n = &g->nodes[node];
    if (!name || !*name || !v) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s': attr without a name or value",
                            n->name);
        return;
    }
    if (v->kind == TFS_ATTR_LIST && v->list.n > 0 && list_elem_size(v->list.kind) == 0) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s': attr '%s' is a list of kind %d",
                            n->name, name, (int)v->list.kind);
        return;
    }
    tfs_attr_value copy;
    if (!attr_value_copy(&copy, v)) {
        OOM(g, "copying an attribute");
        return;
    }
    for (int i = 0; i < n->n_attrs; i++) {
        if (!strcmp(n->attr_names[i], name)) {
            tfs_attr_value_clear(&n->attrs[i]);
            n->attrs[i] = copy;
            return;
        }
    }
    char *nm = tfs_strdup(name);
    char **names = nm ? tfs_realloc(n->attr_names, (size_t)(n->n_attrs + 1) * sizeof *names) : NULL;
    if (names)
        n->attr_names = names;
    tfs_attr_value *attrs =
        names ? tfs_realloc(n->attrs, (size_t)(n->n_attrs + 1) * sizeof *attrs) : NULL;
    if (!attrs) {
        tfs_free(nm);
        tfs_attr_value_clear(&copy);
        OOM(g, "adding an attribute");
        return;
    }
    n->attrs = attrs;
    n->attr_names[n->n_attrs] = nm;
    n->attrs[n->n_attrs] = copy;
    n->n_attrs++;
}

void tfs_graph_set_attr_type(tfs_graph *g, int node, const char *name, enum tfs_dtype dt)
{
    tfs_attr_value v = {.kind = TFS_ATTR_TYPE, .type = dt};
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_int(tfs_graph *g, int node, const char *name, int64_t i)
{
    tfs_attr_value v = {.kind = TFS_ATTR_I, .i = i};
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_float(tfs_graph *g, int node, const char *name, float f)
{
    tfs_attr_value v = {.kind = TFS_ATTR_F, .f = f};
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_bool(tfs_graph *g, int node, const char *name, bool b)
{
    tfs_attr_value v = {.kind = TFS_ATTR_B, .b = b};
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_string(tfs_graph *g, int node, const char *name, const char *s)
{
    tfs_attr_value v = {.kind = TFS_ATTR_S};
    v.s.data = (char *)(s ? s : "");
    v.s.len = strlen(v.s.data);
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_shape(tfs_graph *g, int node, const char *name, const tfs_shape *shape)
{
    if (shape && (shape->rank < -1 || shape->rank > TFS_MAX_RANK)) {
        if (can_build(g, node))
            tfs_graph_set_error(g, TFS_INVALID_ARGUMENT,
                                "node '%s': attr '%s' has rank %d (supported: up to %d)",
                                g->nodes[node].name, name ? name : "", shape->rank, TFS_MAX_RANK);
        return;
    }
    tfs_attr_value v = {.kind = TFS_ATTR_SHAPE};
    if (shape)
        v.shape = *shape;
    else
        v.shape.rank = -1;
    tfs_graph_set_attr(g, node, name, &v);
}

void tfs_graph_set_attr_tensor(tfs_graph *g, int node, const char *name, tfs_tensor *t)
{
    tfs_attr_value v = {.kind = TFS_ATTR_TENSOR, .tensor = t};
    if (!t) {
        if (can_build(g, node))
            tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "node '%s': attr '%s' is a NULL tensor",
                                g->nodes[node].name, name ? name : "");
        return;
    }
    tfs_graph_set_attr(g, node, name, &v);
}

/* ---- function library ----------------------------------------------------------------------- */

int tfs__graph_function_index(const tfs_graph *g, const char *name)
{
    /* A linear scan: libraries hold the few functions control flow refers to, and sessions
     * resolve names once per run of a control-flow node, not per loop iteration. */
    for (int i = 0; g && name && i < g->n_funcs; i++)
        if (!strcmp(g->funcs[i].name, name))
            return i;
    return -1;
}

bool tfs_graph_has_function(const tfs_graph *g, const char *name)
{
    return tfs__graph_function_index(g, name) >= 0;
}

int tfs_graph_function_count(const tfs_graph *g)
{
    return g ? g->n_funcs : 0;
}

/* A tfs_malloc'ed copy of n names, or NULL (also for n == 0: *ok tells them apart). */
static char **copy_names(const char *const *v, int n, bool *ok)
{
    *ok = true;
    if (n == 0)
        return NULL;
    char **c = tfs_calloc((size_t)n, sizeof *c);
    for (int i = 0; c && i < n; i++) {
        if (!(c[i] = tfs_strdup(v[i] ? v[i] : ""))) {
            free_names(c, i);
            c = NULL;
        }
    }
    *ok = c != NULL;
    return c;
}

void tfs_graph_add_function(tfs_graph *g, const char *name, tfs_graph *body, int n_inputs,
                            const char *const *inputs, int n_outputs, const char *const *outputs)
{
    if (!can_build(g, -2))
        return;
    if (!name || !*name) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "library function with an empty name");
        return;
    }
    if (tfs__graph_function_index(g, name) >= 0) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "duplicate library function '%s'", name);
        return;
    }
    if (!body || body == g || !body->finalized || body->n_funcs > 0) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT,
                            "library function '%s': its body must be another, finalized graph "
                            "without a library of its own", name);
        return;
    }
    if (n_inputs < 0 || n_outputs < 0 || (n_inputs > 0 && !inputs) ||
        (n_outputs > 0 && !outputs)) {
        tfs_graph_set_error(g, TFS_INVALID_ARGUMENT, "library function '%s': bad input or output "
                            "list", name);
        return;
    }
    if (g->n_funcs == INT_MAX / 4) {
        tfs_graph_set_error(g, TFS_RESOURCE_EXHAUSTED, "too many library functions");
        return;
    }
    tfs_graph_function f = {0};
    bool ok_in, ok_out;
    f.name = tfs_strdup(name);
    f.inputs = copy_names(inputs, n_inputs, &ok_in);
    f.n_in = ok_in ? n_inputs : 0;
    f.outputs = copy_names(outputs, n_outputs, &ok_out);
    f.n_out = ok_out ? n_outputs : 0;
    tfs_graph_function *funcs =
        f.name && ok_in && ok_out
            ? tfs_realloc(g->funcs, (size_t)(g->n_funcs + 1) * sizeof *funcs)
            : NULL;
    if (!funcs) {
        function_clear(&f);
        OOM(g, "adding a library function");
        return;
    }
    f.body = tfs_graph_ref(body);
    g->funcs = funcs;
    g->funcs[g->n_funcs++] = f;
}

/* ---- finalize ------------------------------------------------------------------------------- */

/* Splits "name", "name:3" or "^name" without copying; false when malformed. */
static bool split_input(const char *text, const char **name, size_t *len, int *index, bool *control)
{
    if (!text || !*text)
        return false;
    *control = text[0] == '^';
    *name = *control ? text + 1 : text;
    *len = strlen(*name);
    *index = *control ? -1 : 0;
    const char *colon = *control ? NULL : strrchr(*name, ':');
    if (colon) {
        const char *d = colon + 1;
        if (!*d)
            return false;
        long idx = 0;
        for (; *d; d++) {
            if (*d < '0' || *d > '9' || idx > (INT_MAX - 9) / 10)
                return false;
            idx = idx * 10 + (*d - '0');
        }
        *index = (int)idx;
        *len = (size_t)(colon - *name);
    }
    return *len > 0;
}

bool tfs_tensor_name_parse(const char *text, char *name_out, size_t n, int *index, bool *control)
{
    const char *name;
    size_t len;
    int idx;
    bool ctrl;
    if (!split_input(text, &name, &len, &idx, &ctrl) || len >= n)
        return false;
    memcpy(name_out, name, len);
    name_out[len] = '\0';
    if (index)
        *index = idx;
    if (control)
        *control = ctrl;
    return true;
}

/* Resolves node n's text inputs into data edges and control inputs. */
static enum tfs_code resolve_inputs(tfs_graph *g, tfs_node *n, tfs_status *st)
{
    int n_data = 0, n_ctrl = 0;
    for (int i = 0; i < n->n_text_inputs; i++)
        (n->text_inputs[i][0] == '^') ? n_ctrl++ : n_data++;
    n->inputs = n_data ? tfs_calloc((size_t)n_data, sizeof *n->inputs) : NULL;
    n->ctrl = n_ctrl ? tfs_calloc((size_t)n_ctrl, sizeof *n->ctrl) : NULL;
    if ((n_data && !n->inputs) || (n_ctrl && !n->ctrl))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory resolving inputs of node '%s'",
                       n->name);
    for (int i = 0; i < n->n_text_inputs; i++) {
        const char *text = n->text_inputs[i];
        const char *name;
        size_t len;
        int idx;
        bool ctrl;
        if (!split_input(text, &name, &len, &idx, &ctrl))
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "node '%s': malformed input '%s'", n->name,
                           text);
        int src = hash_find(g, name, len);
        if (src < 0)
            return TFS_ERR(st, TFS_NOT_FOUND, "node '%s': input '%s' not found", n->name, text);
        if (ctrl)
            n->ctrl[n->n_ctrl++] = src;
        else
            n->inputs[n->n_inputs++] = (tfs_edge){src, idx};
    }
    return TFS_OK;
}

enum tfs_code tfs_graph_finalize(tfs_graph *g, tfs_status *st)
{
    if (g->finalized) {
        tfs_status_clear(st);
        return TFS_OK;
    }
    if (g->err.code != TFS_OK) {
        if (st)
            *st = g->err;
        return g->err.code;
    }
    enum tfs_code rc = TFS_OK;
    tfs_status local;
    /* Pass 1: bind ops and output counts. */
    for (int id = 0; id < g->n_nodes; id++) {
        tfs_node *n = &g->nodes[id];
        n->op = tfs__op_lookup(n->op_type);
        if (!n->op) {
            n->n_outputs = -1;
            continue;
        }
        n->n_outputs = n->op->nout ? n->op->nout(n) : 1;
        if (n->n_outputs < 0) {
            rc = TFS_ERR(&local, TFS_INVALID_ARGUMENT,
                         "node '%s' (%s): cannot tell its number of outputs: a list attr is "
                         "missing or invalid", n->name, n->op_type);
            goto fail;
        }
    }
    /* Pass 2: resolve inputs and check output indices against known producers. */
    for (int id = 0; id < g->n_nodes; id++) {
        tfs_node *n = &g->nodes[id];
        tfs_free(n->inputs);
        tfs_free(n->ctrl);
        n->inputs = NULL;
        n->ctrl = NULL;
        n->n_inputs = n->n_ctrl = 0;
        rc = resolve_inputs(g, n, &local);
        if (rc != TFS_OK)
            goto fail;
        for (int i = 0; i < n->n_inputs; i++) {
            const tfs_node *p = &g->nodes[n->inputs[i].node];
            if (p->n_outputs >= 0 && n->inputs[i].index >= p->n_outputs) {
                rc = TFS_ERR(&local, TFS_INVALID_ARGUMENT,
                             "node '%s': input '%s' refers to output %d, but node '%s' (%s) has "
                             "%d output%s", n->name, n->text_inputs[i], n->inputs[i].index,
                             p->name, p->op_type, p->n_outputs, p->n_outputs == 1 ? "" : "s");
                goto fail;
            }
        }
    }
    g->finalized = true;
    tfs_status_clear(st);
    return TFS_OK;
fail:
    g->err = local;   /* a failed graph stays failed */
    if (st)
        *st = local;
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

int tfs__graph_data_input_count(const tfs_graph *g, int node)
{
    const tfs_node *n = tfs__graph_node(g, node);
    if (!n)
        return 0;
    if (g->finalized)
        return n->n_inputs;
    int k = 0;
    for (int i = 0; i < n->n_text_inputs; i++)
        k += n->text_inputs[i][0] != '^';
    return k;
}

bool tfs__graph_input_edge(const tfs_graph *g, int node, int i, tfs_edge *e)
{
    const tfs_node *n = tfs__graph_node(g, node);
    if (!n || i < 0)
        return false;
    if (g->finalized) {
        if (i >= n->n_inputs)
            return false;
        *e = n->inputs[i];
        return true;
    }
    for (int t = 0, k = 0; t < n->n_text_inputs; t++) {
        const char *name;
        size_t len;
        int idx;
        bool ctrl;
        if (n->text_inputs[t][0] == '^' || k++ != i)
            continue;
        if (!split_input(n->text_inputs[t], &name, &len, &idx, &ctrl))
            return false;
        int src = hash_find(g, name, len);
        if (src < 0)
            return false;
        *e = (tfs_edge){src, idx};
        return true;
    }
    return false;
}

const tfs_node *tfs__graph_node(const tfs_graph *g, int id)
{
    return g && id >= 0 && id < g->n_nodes ? &g->nodes[id] : NULL;
}

int tfs_graph_node_count(const tfs_graph *g)
{
    return g ? g->n_nodes : 0;
}

int tfs_graph_find_node(const tfs_graph *g, const char *name)
{
    return g && name ? hash_find(g, name, strlen(name)) : -1;
}

const char *tfs_graph_node_name(const tfs_graph *g, int node)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n ? n->name : NULL;
}

const char *tfs_graph_node_op(const tfs_graph *g, int node)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n ? n->op_type : NULL;
}

int tfs_graph_node_input_count(const tfs_graph *g, int node)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n ? n->n_text_inputs : 0;
}

const char *tfs_graph_node_input(const tfs_graph *g, int node, int i)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n && i >= 0 && i < n->n_text_inputs ? n->text_inputs[i] : NULL;
}

int tfs_graph_node_attr_count(const tfs_graph *g, int node)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n ? n->n_attrs : 0;
}

const char *tfs_graph_node_attr_name(const tfs_graph *g, int node, int i)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n && i >= 0 && i < n->n_attrs ? n->attr_names[i] : NULL;
}

const tfs_attr_value *tfs_graph_node_attr_at(const tfs_graph *g, int node, int i)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n && i >= 0 && i < n->n_attrs ? &n->attrs[i] : NULL;
}

const tfs_attr_value *tfs_graph_node_attr(const tfs_graph *g, int node, const char *name)
{
    const tfs_node *n = tfs__graph_node(g, node);
    return n ? tfs__attr(n, name) : NULL;
}

bool tfs_op_is_supported(const char *op_type)
{
    const struct tfs_op_def *op = tfs__op_lookup(op_type);
    return op && op->kernel;
}
