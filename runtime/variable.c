/* Session variables: the map (container + "/" + shared_name) -> tfs_variable that a session owns,
 * and the locked read and swap of a variable's value (see runtime-impl.h and variable-impl.h).
 *
 * DESIGN. The map is an open-addressing hash guarded by its own mutex; it is touched once per
 * VariableV2/VarHandleOp execution. Readers take a reference to the value under v->mu; writers
 * swap the pointer under v->mu, so a reader never sees a half-written tensor. Updates that read the
 * old value (optimizers, AssignAdd) write in place while holding v->mu when no one else holds a
 * reference to the value -- no reader can take one without the lock -- and copy it first
 * otherwise, so a reader's tensor never changes under it (tfs__variable_update_begin).
 */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime-impl.h"
#include "runtime/variable-impl.h"

typedef struct var_entry {
    char         *key;   /* container + "/" + shared_name; NULL = empty slot */
    tfs_variable *var;
} var_entry;

struct tfs_var_map {
    pthread_mutex_t mu;   /* guards everything below */
    var_entry      *vars;
    int             vars_cap;   /* 0 or a power of two */
    int             n_vars;
};

enum tfs_code tfs__var_map_new(tfs_var_map **out, tfs_status *st)
{
    *out = NULL;
    tfs_var_map *m = tfs_calloc(1, sizeof *m);
    if (!m)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory creating a variable table");
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        tfs_free(m);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "cannot create a variable table mutex");
    }
    *out = m;
    return TFS_OK;
}

static void variable_free(tfs_variable *v)
{
    if (!v)
        return;
    pthread_mutex_destroy(&v->mu);
    tfs_tensor_unref(v->value);
    tfs_free(v->name);
    tfs_free(v);
}

void tfs__var_map_free(tfs_var_map *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->vars_cap; i++) {
        tfs_free(m->vars[i].key);
        variable_free(m->vars[i].var);
    }
    tfs_free(m->vars);
    pthread_mutex_destroy(&m->mu);
    tfs_free(m);
}

size_t tfs__var_map_bytes(tfs_var_map *m)
{
    size_t total = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->vars_cap; i++) {
        tfs_variable *v = m->vars[i].var;
        if (!v)
            continue;
        pthread_mutex_lock(&v->mu);
        if (v->value)
            total += v->value->nbytes;
        pthread_mutex_unlock(&v->mu);
    }
    pthread_mutex_unlock(&m->mu);
    return total;
}

static uint32_t hash_key(const char *s)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

/* Doubles the table (m->mu held). */
static bool vars_grow(tfs_var_map *m)
{
    int cap = m->vars_cap ? 2 * m->vars_cap : 32;
    var_entry *vars = tfs_calloc((size_t)cap, sizeof *vars);
    if (!vars)
        return false;
    for (int i = 0; i < m->vars_cap; i++) {
        if (!m->vars[i].key)
            continue;
        uint32_t j = hash_key(m->vars[i].key) & (uint32_t)(cap - 1);
        while (vars[j].key)
            j = (j + 1) & (uint32_t)(cap - 1);
        vars[j] = m->vars[i];
    }
    tfs_free(m->vars);
    m->vars = vars;
    m->vars_cap = cap;
    return true;
}

static tfs_variable *variable_new(const char *container, const char *shared_name,
                                  enum tfs_dtype dtype)
{
    tfs_variable *v = tfs_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    size_t lc = strlen(container), ls = strlen(shared_name);
    v->name = tfs_malloc(lc + ls + 2);
    if (!v->name || pthread_mutex_init(&v->mu, NULL) != 0) {
        tfs_free(v->name);
        tfs_free(v);
        return NULL;
    }
    if (lc)
        snprintf(v->name, lc + ls + 2, "%s/%s", container, shared_name);
    else
        memcpy(v->name, shared_name, ls + 1);
    v->dtype = dtype;
    v->shape.rank = -1;
    return v;
}

enum tfs_code tfs__var_map_get(tfs_var_map *m, const char *container, const char *shared_name,
                               enum tfs_dtype dtype, tfs_variable **out, tfs_status *st)
{
    *out = NULL;
    container = container ? container : "";
    shared_name = shared_name ? shared_name : "";
    size_t lc = strlen(container), ls = strlen(shared_name);
    char *key = tfs_malloc(lc + ls + 2);
    if (!key)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory looking up a variable");
    memcpy(key, container, lc);
    key[lc] = '/';
    memcpy(key + lc + 1, shared_name, ls + 1);

    enum tfs_code rc = TFS_OK;
    pthread_mutex_lock(&m->mu);
    if (2 * (m->n_vars + 1) > m->vars_cap && !vars_grow(m)) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory adding variable '%s'", key);
        goto done;
    }
    uint32_t mask = (uint32_t)m->vars_cap - 1, j = hash_key(key) & mask;
    for (; m->vars[j].key; j = (j + 1) & mask) {
        if (strcmp(m->vars[j].key, key) != 0)
            continue;
        tfs_variable *v = m->vars[j].var;
        if (v->dtype != dtype) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT,
                         "variable '%s' has dtype %s, but an op asks for it as %s", v->name,
                         tfs_dtype_short_name(v->dtype), tfs_dtype_short_name(dtype));
            goto done;
        }
        *out = v;
        goto done;
    }
    tfs_variable *v = variable_new(container, shared_name, dtype);
    if (!v) {
        rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory adding variable '%s'", key);
        goto done;
    }
    m->vars[j].key = key;
    m->vars[j].var = v;
    m->n_vars++;
    key = NULL;
    *out = v;
done:
    pthread_mutex_unlock(&m->mu);
    tfs_free(key);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}

enum tfs_code tfs__variable_read(tfs_variable *v, tfs_tensor **out, tfs_status *st)
{
    pthread_mutex_lock(&v->mu);
    *out = tfs_tensor_ref(v->value);
    pthread_mutex_unlock(&v->mu);
    if (!*out)
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "Attempting to use uninitialized value %s",
                       v->name);
    return TFS_OK;
}

void tfs__variable_assign(tfs_variable *v, tfs_tensor *value)
{
    tfs_tensor_ref(value);
    pthread_mutex_lock(&v->mu);
    tfs_tensor *old = v->value;
    v->value = value;
    pthread_mutex_unlock(&v->mu);
    tfs_tensor_unref(old);
}

enum tfs_code tfs__variable_update_begin(tfs_variable *v, tfs_tensor **dst, tfs_status *st)
{
    TFS_ASSERT(v->value);
    if (tfs_tensor_exclusive(v->value)) {
        *dst = v->value;
        return TFS_OK;
    }
    enum tfs_code rc = tfs_tensor_copy(v->value, dst, st);
    if (rc != TFS_OK)
        tfs_status_prefix(st, "updating variable %s", v->name);
    return rc;
}

tfs_tensor *tfs__variable_update_commit(tfs_variable *v, tfs_tensor *dst)
{
    if (dst == v->value)
        return NULL;
    tfs_tensor *old = v->value;
    v->value = dst;
    return old;
}
