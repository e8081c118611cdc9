/* loader: the model registry. Models have a name and a base path holding integer version folders;
 * the loader loads versions into tfs_savedmodels and hands out counted handles (tfs_servable) that
 * keep a version alive while a request uses it.
 *
 *     tfs_model_config mc = {"half_plus_two", "/models/half_plus_two"};
 *     tfs_loader *l;  tfs_loader_new(&mc, 1, NULL, &l, &st);
 *     tfs_servable *s;
 *     if (tfs_loader_acquire(l, "half_plus_two", -1, NULL, &s, &st) == TFS_OK) {
 *         const tfs_signature *sig = tfs_savedmodel_signature(tfs_servable_model(s), "serving_default");
 *         tfs_servable_run(s, sig, inputs, n, outputs, &st);
 *         tfs_servable_release(s);
 *     }
 *
 * Now: each model's highest version is loaded once, synchronously, at tfs_loader_new; a failed load
 * is recorded in that version's status (state END + error) and the loader still starts.
 * Thread-safety: every function may be called from any thread.
 */
#ifndef TFS_LOADER_LOADER_H
#define TFS_LOADER_LOADER_H

#include <stdint.h>

#include "runtime/runtime.h"
#include "savedmodel/savedmodel.h"

typedef struct tfs_loader   tfs_loader;
typedef struct tfs_servable tfs_servable;

typedef struct tfs_model_config {
    const char *name;
    const char *base_path;
} tfs_model_config;

typedef struct tfs_loader_opts {
    const char *tags;     /* MetaGraphDef tags, default "serve" */
} tfs_loader_opts;

tfs_loader_opts tfs_loader_opts_default(void);

/* TensorFlow Serving's ModelVersionStatus.State values. */
enum tfs_version_state {
    TFS_VERSION_UNKNOWN   = 0,
    TFS_VERSION_START     = 10,
    TFS_VERSION_LOADING   = 20,
    TFS_VERSION_AVAILABLE = 30,
    TFS_VERSION_UNLOADING = 40,
    TFS_VERSION_END       = 50,
};
const char *tfs_version_state_name(enum tfs_version_state s);   /* "AVAILABLE" */

typedef struct tfs_version_status {
    int64_t                version;
    enum tfs_version_state state;
    tfs_status             status;   /* the load error when state is END after a failure */
} tfs_version_status;

/* Copies configs; loads each model's highest version. Fails only for bad configs (empty or duplicate
 * names, relative base paths: INVALID_ARGUMENT) or out of memory. Caller owns *out. */
enum tfs_code tfs_loader_new(const tfs_model_config *models, int n_models,
                             const tfs_loader_opts *opts, tfs_loader **out, tfs_status *st);
/* Waits for no one: call after every handle has been released. NULL-safe. */
void tfs_loader_free(tfs_loader *l);

/* Status of every version of a model (newest first), or of one version when version >= 0.
 * NOT_FOUND "Could not find any versions of model NAME" / "Could not find version N of model NAME".
 * *out is an array of *n records the caller frees with tfs_free. */
enum tfs_code tfs_loader_model_status(tfs_loader *l, const char *name, int64_t version,
                                      tfs_version_status **out, int *n, tfs_status *st);

/* A counted handle on an AVAILABLE version: version >= 0 for a specific one, -1 for the latest;
 * label non-NULL selects by version label. NOT_FOUND with TF Serving's texts
 * "Servable not found for request: Latest(NAME)" / "Specific(NAME, N)"; INVALID_ARGUMENT
 * "Unrecognized servable version label: L". Release with tfs_servable_release. */
enum tfs_code tfs_loader_acquire(tfs_loader *l, const char *name, int64_t version,
                                 const char *label, tfs_servable **out, tfs_status *st);
void tfs_servable_release(tfs_servable *s);    /* NULL-safe */

const char           *tfs_servable_name(const tfs_servable *s);
int64_t               tfs_servable_version(const tfs_servable *s);
const tfs_savedmodel *tfs_servable_model(const tfs_servable *s);

/* Runs a signature of this version. Same contract as tfs_savedmodel_run. (The batching issue
 * routes this through batching/.) */
enum tfs_code tfs_servable_run(const tfs_servable *s, const tfs_signature *sig,
                               const tfs_named_tensor *inputs, int n_inputs, tfs_tensor **outputs,
                               tfs_status *st);

#endif
