/* Lookup tables shared by kernels/lookup-table.c (the table and its session resource) and
 * kernels/lookup.c (the op kernels). Internal to runtime/kernels.
 *
 * DESIGN. A table is a session resource like a variable: it lives in the session's variable map
 * (tfs__session_variable) under the container "tables:" + container -- no TensorFlow container
 * name can contain ':', so it never meets a variable -- with dtype DT_VARIANT, and the variable's
 * value is a scalar DT_VARIANT tensor owning the table (freed with the session). HashTableV2 and
 * MutableHashTableV2 hand out that tfs_variable * in a DT_RESOURCE scalar, exactly as VarHandleOp
 * does, so handles pass through Identity and function calls; the legacy HashTable/MutableHashTable
 * give it as a DT_STRING_REF (TF's Ref(string) handle), and their consumers take reference inputs
 * (TFS_OPF_REF_INPUTS). A variable op fed a table handle fails on the dtype check (variant).
 * A table is read under a shared lock and written under an exclusive one. Entries are kept in
 * insertion order (export order) with an open-addressing index over them.
 */
#ifndef TFS_RUNTIME_KERNELS_LOOKUP_IMPL_H
#define TFS_RUNTIME_KERNELS_LOOKUP_IMPL_H

#include "runtime/runtime-impl.h"

typedef struct tfs_lookup_table {
    pthread_rwlock_t mu;
    char            *name;         /* for messages: the resource's shared name */
    enum tfs_dtype   key_dt;       /* int32, int64 or string */
    enum tfs_dtype   val_dt;       /* bool, int32, int64, float, double or string */
    bool             is_mutable;   /* MutableHashTable: insert/import replace, never initialized */
    bool             initialized;  /* HashTable: after its first successful initialization */
    tfs_shape        value_shape;  /* [] but for MutableHashTable's value_shape attr */
    int64_t          vdim;         /* elements per value */
    size_t           vsize;        /* bytes per value element */
    int64_t          n, cap;       /* entries */
    int64_t         *ikeys;        /* [cap] integer keys (int32 widened), or */
    tfs_string      *skeys;        /* [cap] string keys (owned) */
    char            *vals;         /* [cap * vdim] values (strings: tfs_string, owned) */
    int64_t         *slots;        /* [nslots] entry index + 1; 0 = empty */
    int64_t          nslots;       /* 0 or a power of two */
} tfs_lookup_table;

/* One key as the table compares it. */
typedef struct tfs_lookup_key {
    int64_t     i;
    const char *s;
    size_t      len;
} tfs_lookup_key;

/* Key i of a key tensor of the table's key dtype. */
tfs_lookup_key tfs__lookup_key_at(const tfs_tensor *keys, int64_t i);
/* Index of the entry with `key`, or -1. With the lock held (either mode). */
int64_t tfs__lookup_find(const tfs_lookup_table *t, tfs_lookup_key key);
/* Adds `key` with value elements src[si * vdim ...] of tensor `src` (the table's value dtype), or
 * replaces its value when `replace`; with `replace` false an existing key keeps its value and
 * *same reports whether the new value equals it (NULL: not asked). Exclusive lock held. */
enum tfs_code tfs__lookup_put(tfs_lookup_table *t, tfs_lookup_key key, const tfs_tensor *src,
                              int64_t si, bool replace, bool *same, tfs_status *st);
/* Removes the entries of the keys in `keys` (a tensor of the table's key dtype; keys not in the
 * table are ignored), keeping the others in insertion order. Exclusive lock held. */
enum tfs_code tfs__lookup_remove(tfs_lookup_table *t, const tfs_tensor *keys, tfs_status *st);
/* Removes every entry (exclusive lock held). */
void tfs__lookup_clear(tfs_lookup_table *t);
/* Copies entry e's value into dst elements [di * vdim, (di + 1) * vdim) (strings deep-copied). */
enum tfs_code tfs__lookup_copy_value(const tfs_lookup_table *t, int64_t e, tfs_tensor *dst,
                                     int64_t di, tfs_status *st);
/* Whether entry e's value equals src's value si (bitwise for numbers but +0 == -0 and NaN never
 * equal, as C's == compares; bytes for strings). */
bool tfs__lookup_value_equal(const tfs_lookup_table *t, int64_t e, const tfs_tensor *src,
                             int64_t si);

/* The table of a HashTable(V2)/MutableHashTable(V2) node, found or created in the session, and
 * the variable-map entry holding it (what handles carry): INVALID_ARGUMENT for unsupported
 * dtypes or when the name holds a table of other dtypes or kind. Borrowed; they live as long as
 * the session. */
enum tfs_code tfs__lookup_table_for_node(tfs_kernel_ctx *k, bool is_mutable, tfs_variable **var,
                                         tfs_lookup_table **out, tfs_status *st);
/* The table behind input i: a DT_RESOURCE handle or a DT_STRING_REF one; INVALID_ARGUMENT
 * naming the node otherwise. Borrowed. */
enum tfs_code tfs__lookup_table_input(tfs_kernel_ctx *k, int i, tfs_lookup_table **out,
                                      tfs_status *st);

#endif
