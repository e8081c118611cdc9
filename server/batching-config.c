/* --batching_parameters_file and --enable_per_model_batching_params: TensorFlow Serving's
 * BatchingParameters text files read with the shared text-format parser and handed to the loader
 * as plain values (the loader never sees protobuf).
 *
 * As TF Serving (server.cc, bundle_factory_util.cc): with --enable_batching and no file the
 * defaults are tfs_batching_params_default(); a per-model file <version>/batching_params.pbtxt
 * replaces the global parameters of that version entirely (its unset fields take the defaults,
 * not the global file's values), and the batch threads stay the global ones. thread_pool_name
 * names TF's shared thread pool and is accepted and ignored; batch_padding_policy other than
 * "PAD_UP" (TF's only policy for this path) is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/textformat.h"
#include "runtime/alloc.h"
#include "server/config-impl.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb-c.h"

#define LOG_MODULE "batching"

static enum tfs_code convert(const Tensorflow__Serving__BatchingParameters *m, const char *path,
                             tfs_batching_params *out, tfs_status *st)
{
    if (m->max_batch_size)
        out->max_batch_size = m->max_batch_size->value;
    if (m->batch_timeout_micros)
        out->batch_timeout_micros = m->batch_timeout_micros->value;
    if (m->max_enqueued_batches)
        out->max_enqueued_batches = m->max_enqueued_batches->value;
    if (m->num_batch_threads)
        out->num_batch_threads = m->num_batch_threads->value;
    if (m->n_allowed_batch_sizes > TFS_BATCHING_MAX_ALLOWED)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: allowed_batch_sizes has %zu entries; at "
                       "most %d are supported", path, m->n_allowed_batch_sizes,
                       TFS_BATCHING_MAX_ALLOWED);
    out->n_allowed_batch_sizes = (int)m->n_allowed_batch_sizes;
    for (size_t i = 0; i < m->n_allowed_batch_sizes; i++)
        out->allowed_batch_sizes[i] = m->allowed_batch_sizes[i];
    out->pad_variable_length_inputs = m->pad_variable_length_inputs;
    if (m->enable_large_batch_splitting)
        out->enable_large_batch_splitting = m->enable_large_batch_splitting->value;
    if (m->max_execution_batch_size)
        out->max_execution_batch_size = m->max_execution_batch_size->value;
    if (m->batch_padding_policy && m->batch_padding_policy->value &&
        *m->batch_padding_policy->value && strcmp(m->batch_padding_policy->value, "PAD_UP") != 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: batch_padding_policy \"%s\" is not "
                       "supported (only PAD_UP)", path, m->batch_padding_policy->value);
    if (out->num_batch_threads < 0 || out->num_batch_threads > 1024)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: num_batch_threads %lld is not in [0, 1024]",
                       path, (long long)out->num_batch_threads);
    return TFS_OK;
}

enum tfs_code tfs__batching_read_file(const char *path, tfs_batching_params *out, tfs_status *st)
{
    Tensorflow__Serving__BatchingParameters *m = NULL;
    *out = tfs_batching_params_default();
    enum tfs_code code = tfs_textformat_parse_file(
        &tensorflow__serving__batching_parameters__descriptor, path, (ProtobufCMessage **)&m, st);
    if (code != TFS_OK)
        return code;
    code = convert(m, path, out, st);
    protobuf_c_message_free_unpacked(&m->base, NULL);
    return code;
}

enum tfs_code tfs__batching_per_model(void *ctx, const char *dir, tfs_batching_params *out,
                                      bool *found, tfs_status *st)
{
    char        path[4096];
    struct stat sb;
    (void)ctx;
    *found = false;
    if (snprintf(path, sizeof path, "%s/batching_params.pbtxt", dir) >= (int)sizeof path)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "version folder path too long: %s", dir);
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT)
            return TFS_OK;
        return TFS_ERR(st, tfs_code_from_errno(errno), "cannot read %s: %s", path,
                       strerror(errno));
    }
    int64_t threads = out->num_batch_threads;
    enum tfs_code code = tfs__batching_read_file(path, out, st);
    out->num_batch_threads = threads;   /* the batch threads are shared: only the global count */
    *found = code == TFS_OK;
    return code;
}
