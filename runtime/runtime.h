/* runtime: tfserve's tensor and graph engine. It knows nothing of files, protobuf, JSON or HTTP:
 * the other modules (and users linking libtfserve) build graphs and run them through it.
 *
 *     tfs_graph *g; ... build or import ...; tfs_graph_finalize(g, &st);
 *     tfs_session *s; tfs_session_new(g, NULL, &s, &st);
 *     tfs_session_run(s, feeds, nfeeds, fetches, nfetches, NULL, 0, outputs, &st);
 *
 * Conventions: fallible functions return enum tfs_code and take tfs_status *st last; parameters
 * are borrowed unless a comment says "takes ownership" or "keeps a reference"; _new results are
 * owned by the caller; free/unref functions accept NULL.
 */
#ifndef TFS_RUNTIME_RUNTIME_H
#define TFS_RUNTIME_RUNTIME_H

#include "runtime/alloc.h"
#include "runtime/build.h"
#include "runtime/graph.h"
#include "runtime/log.h"
#include "runtime/rewrite.h"
#include "runtime/session.h"
#include "runtime/status.h"
#include "runtime/tensor.h"

#endif
