/* Model config files and reloads (server/config-file.c, server/config-poll.c): TensorFlow Serving's
 * ModelServerConfig, read from --model_config_file (text format) or received by
 * ModelService/HandleReloadConfigRequest, turned into the loader's tfs_model_config array; and the
 * thread that re-reads the file every --model_config_file_poll_wait_seconds.
 */
#ifndef TFS_SERVER_CONFIG_IMPL_H
#define TFS_SERVER_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/loader.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

/* Where a model's `config {` block starts in its file (1-based; 0 when unknown). */
typedef struct tfs__config_where {
    int line, col;
} tfs__config_where;

/* A converted model list. models[i]'s strings and arrays point into the message it came from
 * (and into the labels block), so the list must not outlive that message; a list read from a file
 * owns its message. */
typedef struct tfs__model_list {
    tfs_model_config  *models;
    int                n_models;
    bool               config_unset;   /* ModelServerConfig with neither member set */
    tfs_version_label *labels;         /* every model's labels, one block */
    tfs__config_where *where;          /* per model, for lists read from a file; else NULL */
    /* What it was converted from. Owned (freed with protobuf-c's default allocator) by lists from
     * tfs__config_read_file, borrowed otherwise. */
    const Tensorflow__Serving__ModelServerConfig *cfg;
    bool                                          owns_cfg;
} tfs__model_list;

/* Converts a ModelServerConfig (borrowed; it must outlive *out) as TensorFlow Serving's ServerCore
 * reads it. `source` names where it came from in messages ("models.config"). Errors:
 * INVALID_ARGUMENT "<source>: custom_model_config is not supported ..."; per model, prefixed with
 * "<source>: model 'NAME': ", TF Serving's platform rules (FAILED_PRECONDITION when both or
 * neither of model_type and model_platform are set, INVALID_ARGUMENT for model_type OTHER) and
 * num_versions above INT_MAX. An unset config gives zero models and config_unset. Names, paths,
 * duplicates, labels and the platform's value are the loader's to validate. Caller frees *out. */
enum tfs_code tfs__config_convert(const Tensorflow__Serving__ModelServerConfig *cfg,
                                  const char *source, tfs__model_list **out, tfs_status *st);

/* Reads, converts and validates (tfs_loader_validate) a text-format ModelServerConfig file.
 * Parse errors are "<path>:<line>:<col>: ..." (tfs_textformat_parse_file); conversion errors as
 * above with the path as source; the loader's errors (duplicate names, relative base paths, bad
 * policies or labels) "<path>:<line>:<col>: ..." at the offending model's `config {`. Caller
 * frees *out. */
enum tfs_code tfs__config_read_file(const char *path, tfs__model_list **out, tfs_status *st);

void tfs__config_free(tfs__model_list *list);   /* NULL-safe */

/* Logs a warning for each model whose base path cannot be listed now (missing, not a folder, a
 * symlink loop, no permission): "<source>:<line>:<col>: model 'M': base path P cannot be read:
 * REASON; ..." (at the model's `config {` when list->where is known). Such a model is still
 * configured (TF Serving waits for its base path to appear); the others serve as usual.
 * Returns how many were warned about. */
int tfs__config_warn_base_paths(const tfs__model_list *list, const char *source);

/* ---- polling (config-poll.c) -------------------------------------------------------------- */

typedef struct tfs__config_poll tfs__config_poll;

/* Starts a thread that every period_s seconds re-reads path and, when its content (the parsed
 * message, so comments and spacing do not count) differs from the last one seen, applies it with
 * tfs_loader_reload. `current` is the config the loader started with (borrowed; only compared).
 * A file that does not parse, or a reload that fails, is logged with its error and changes
 * nothing until the file changes again. An unset config is ignored (TF Serving takes no action
 * for an empty ModelServerConfig). The loader must outlive the poller. */
enum tfs_code tfs__config_poll_start(tfs_loader *l, const char *path, double period_s,
                                     const tfs__model_list *current, tfs__config_poll **out,
                                     tfs_status *st);
/* Stops the thread (waiting for a reload in progress) and frees. NULL-safe. */
void tfs__config_poll_stop(tfs__config_poll *p);
/* How many reloads the poller has applied successfully (tests). */
int64_t tfs__config_poll_reloads(const tfs__config_poll *p);

/* ---- batching parameters (batching-config.c) -------------------------------------------------- */

/* Reads a BatchingParameters text file into *out (unset fields: tfs_batching_params_default()).
 * Parse errors are "<path>:<line>:<col>: ..."; INVALID_ARGUMENT "<path>: ..." for values tfserve
 * refuses (the queue checks of the loader come later, at start). */
enum tfs_code tfs__batching_read_file(const char *path, tfs_batching_params *out, tfs_status *st);
/* A tfs_batching_params_fn (ctx unused): <dir>/batching_params.pbtxt when present. */
enum tfs_code tfs__batching_per_model(void *ctx, const char *dir, tfs_batching_params *out,
                                      bool *found, tfs_status *st);

#endif
