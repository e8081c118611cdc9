/* savedmodel internals: conversions between TensorFlow's protobuf messages (protobuf-c generated
 * code) and runtime objects, and the GraphDef importer. Include only from savedmodel/ and tests. */
#ifndef TFS_SAVEDMODEL_SAVEDMODEL_IMPL_H
#define TFS_SAVEDMODEL_SAVEDMODEL_IMPL_H

#include "savedmodel/savedmodel.h"
#include "tensorflow/core/framework/attr_value.pb-c.h"
#include "tensorflow/core/framework/graph.pb-c.h"
#include "tensorflow/core/framework/tensor.pb-c.h"
#include "tensorflow/core/protobuf/meta_graph.pb-c.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"

/* Largest saved_model.pb we read (protobuf's own limit is 2 GiB). */
#define TFS_SAVED_MODEL_PB_MAX ((size_t)1 << 31)
/* Largest tensor a TensorProto may expand to by repeating its last value. */
#define TFS_PROTO_TENSOR_MAX_BYTES ((size_t)1 << 30)

/* ---- protobuf <-> runtime (proto-convert.c) ------------------------------------------------- */

/* TensorProto -> tensor: tensor_content when non-empty, else the typed field with TensorFlow's
 * last-value broadcast. INVALID_ARGUMENT for inconsistent sizes, UNIMPLEMENTED for dtypes the runtime
 * cannot hold. Caller owns *out. */
enum tfs_code tfs__tensor_from_proto(const Tensorflow__TensorProto *p, tfs_tensor **out,
                                     tfs_status *st);
/* Shape proto -> tfs_shape (unknown_rank -> rank -1). INVALID_ARGUMENT past TFS_MAX_RANK. */
enum tfs_code tfs__shape_from_proto(const Tensorflow__TensorShapeProto *p, tfs_shape *out,
                                    tfs_status *st);
/* AttrValue -> attr value. The result's arrays and tensors are owned by *out; release with
 * tfs_attr_value_clear. */
enum tfs_code tfs__attr_from_proto(const Tensorflow__AttrValue *p, tfs_attr_value *out,
                                   tfs_status *st);

/* tensor -> TensorProto (numeric: tensor_content; strings: string_val). The message and everything
 * it points to are allocated with tfs_malloc; free with tfs__tensor_proto_free. */
enum tfs_code tfs__tensor_to_proto(const tfs_tensor *t, Tensorflow__TensorProto **out,
                                   tfs_status *st);
void tfs__tensor_proto_free(Tensorflow__TensorProto *p);
/* shape -> TensorShapeProto, same ownership rules. */
Tensorflow__TensorShapeProto *tfs__shape_to_proto(const tfs_shape *s);
void tfs__shape_proto_free(Tensorflow__TensorShapeProto *p);

/* ---- GraphDef -> tfs_graph (import.c) ------------------------------------------------------- */

/* Imports mg->graph_def into a finalized graph: every StatefulPartitionedCall / PartitionedCall
 * (and any node whose op names a library function) is inlined, attrs stripped as defaults are put
 * back from mg->meta_info_def->stripped_op_list. Caller owns *out. */
enum tfs_code tfs__import_graph(const Tensorflow__MetaGraphDef *mg, tfs_graph **out,
                                tfs_status *st);

/* ---- tfs_graph -> GraphDef (export.c) ------------------------------------------------------- */

/* The serialized GraphDef of g, its nodes as tfs_savedmodel_write exports them. Caller owns *out
 * (tfs_free). RESOURCE_EXHAUSTED; UNIMPLEMENTED for an attr kind the exporter cannot write. */
enum tfs_code tfs__graph_def_pack(const tfs_graph *g, uint8_t **out, size_t *len,
                                  tfs_status *st);

/* ---- signatures (signature.c) --------------------------------------------------------------- */

/* Converts every SignatureDef of mg, sorted by key (inputs/outputs sorted by alias). */
enum tfs_code tfs__signatures_from_proto(const Tensorflow__MetaGraphDef *mg, tfs_signature **out,
                                         int *n, tfs_status *st);
void tfs__signatures_free(tfs_signature *sigs, int n);

/* ---- the serving graph (rewrite.c) ---------------------------------------------------------- */

/* What tfs__serving_graph_build makes: the rewritten graph and a session over it (both NULL when
 * no signature is served by one), which signatures it serves (served[i] for sigs[i]), and the
 * rewrite's counts. */
typedef struct tfs_serving_graph {
    tfs_graph        *graph;
    tfs_session      *session;
    bool             *served;
    tfs_rewrite_stats stats;
} tfs_serving_graph;

/* Rewrites g (whose restored variables `values` holds) for the usable signatures. Errors only for
 * running out of memory or a failed rewrite; *out is cleared then. */
enum tfs_code tfs__serving_graph_build(tfs_graph *g, tfs_session *values, const tfs_signature *sigs,
                                       int n_sigs, tfs_serving_graph *out, tfs_status *st);
void tfs__serving_graph_clear(tfs_serving_graph *sg);

/* ---- reading saved_model.pb (load.c) -------------------------------------------------------- */

/* Reads and unpacks <dir>/saved_model.pb. NOT_FOUND when absent, DATA_LOSS when not a SavedModel.
 * Free with tensorflow__saved_model__free_unpacked(sm, NULL). */
enum tfs_code tfs__saved_model_read(const char *dir, Tensorflow__SavedModel **out, tfs_status *st);
/* The MetaGraphDef whose tag set equals the comma-separated set (TensorFlow's rule: no superset, no
 * subset). NULL when none. Borrowed from sm. */
const Tensorflow__MetaGraphDef *tfs__saved_model_find_meta_graph(const Tensorflow__SavedModel *sm,
                                                                const char *tags);

#endif
