/* ModelServerConfig -> the loader's tfs_model_config array, shared by --model_config_file (read
 * here with the text-format parser) and ModelService/HandleReloadConfigRequest. The rules are
 * TensorFlow Serving's ServerCore (server_core.cc: GetPlatform, the default version policy):
 * the deprecated model_type and model_platform are exclusive and one is required, an unset
 * version policy means the latest version, num_versions 0 means 1. What the loader validates
 * itself (names, absolute paths, duplicates, labels) is left to it, so both paths get the same
 * texts.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "proto/textformat.h"
#include "runtime/alloc.h"
#include "runtime/log.h"
#include "server/config-impl.h"

#define LOG_MODULE "config"

typedef Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy policy_pb;

#define POLICY(x) TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_##x

static enum tfs_code model_error(tfs_status *st, enum tfs_code code, const char *source,
                                 const Tensorflow__Serving__ModelConfig *m, const char *what)
{
    return TFS_ERR(st, code, "%s: model '%s': %s", source, m->name ? m->name : "", what);
}

static enum tfs_code convert_platform(const Tensorflow__Serving__ModelConfig *m, const char *source,
                                      tfs_model_config *out, tfs_status *st)
{
    const char *platform = m->model_platform ? m->model_platform : "";
    if (m->model_type != TENSORFLOW__SERVING__MODEL_TYPE__MODEL_TYPE_UNSPECIFIED) {
        if (*platform)
            return model_error(st, TFS_FAILED_PRECONDITION, source, m,
                               "Illegal setting both ModelServerConfig::model_type (deprecated) "
                               "and ModelServerConfig::model_platform.");
        if (m->model_type != TENSORFLOW__SERVING__MODEL_TYPE__TENSORFLOW) {
            char what[96];
            snprintf(what, sizeof what, "ModelServerConfig::model_type choice %d not supported.",
                     (int)m->model_type);
            return model_error(st, TFS_INVALID_ARGUMENT, source, m, what);
        }
        platform = "tensorflow";
    }
    if (!*platform)
        return model_error(st, TFS_FAILED_PRECONDITION, source, m,
                           "Illegal setting neither ModelServerConfig::model_type (deprecated) "
                           "nor ModelServerConfig::model_platform.");
    out->platform = platform;
    return TFS_OK;
}

static enum tfs_code convert_policy(const Tensorflow__Serving__ModelConfig *m, const char *source,
                                    tfs_version_policy *out, tfs_status *st)
{
    const policy_pb *p = m->model_version_policy;
    memset(out, 0, sizeof *out);
    out->kind = TFS_POLICY_LATEST;
    out->num_versions = 1;
    if (!p)
        return TFS_OK;
    switch (p->policy_choice_case) {
    case POLICY(LATEST): {
        uint32_t n = p->latest ? p->latest->num_versions : 0;
        if (n > INT_MAX) {
            char what[96];
            snprintf(what, sizeof what, "model_version_policy latest num_versions %u is too large",
                     n);
            return model_error(st, TFS_INVALID_ARGUMENT, source, m, what);
        }
        out->num_versions = n == 0 ? 1 : (int)n;
        break;
    }
    case POLICY(ALL):
        out->kind = TFS_POLICY_ALL;
        out->num_versions = 0;
        break;
    case POLICY(SPECIFIC):
        out->kind = TFS_POLICY_SPECIFIC;
        out->num_versions = 0;
        if (p->specific && p->specific->n_versions > INT_MAX)
            return model_error(st, TFS_INVALID_ARGUMENT, source, m,
                               "model_version_policy specific lists too many versions");
        out->n_versions = p->specific ? (int)p->specific->n_versions : 0;
        out->versions = p->specific ? p->specific->versions : NULL;
        break;
    default:   /* an empty policy message: TF Serving's default, the latest version */
        break;
    }
    return TFS_OK;
}

void tfs__config_free(tfs__model_list *list)
{
    if (!list)
        return;
    if (list->owns_cfg && list->cfg)
        protobuf_c_message_free_unpacked((ProtobufCMessage *)&list->cfg->base, NULL);
    tfs_free(list->models);
    tfs_free(list->labels);
    tfs_free(list->where);
    tfs_free(list);
}

enum tfs_code tfs__config_convert(const Tensorflow__Serving__ModelServerConfig *cfg,
                                  const char *source, tfs__model_list **out, tfs_status *st)
{
    enum tfs_code    code;
    tfs__model_list *list = tfs_calloc(1, sizeof *list);
    *out = NULL;
    if (!list)
        goto oom;
    list->cfg = cfg;
    if (cfg->config_case == TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_CUSTOM_MODEL_CONFIG) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: custom_model_config is not supported (tfserve "
                       "serves a model_config_list only)", source);
        goto fail;
    }
    if (cfg->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST ||
        !cfg->model_config_list) {
        list->config_unset =
            cfg->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST;
        *out = list;
        tfs_status_clear(st);
        return TFS_OK;
    }
    const Tensorflow__Serving__ModelConfigList *ml = cfg->model_config_list;
    if (ml->n_config > INT_MAX / 2) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: %zu models is too many", source,
                       ml->n_config);
        goto fail;
    }
    size_t n_labels = 0;
    for (size_t i = 0; i < ml->n_config; i++) {
        if (ml->config[i]->n_version_labels > (size_t)INT_MAX - n_labels) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: too many version labels", source);
            goto fail;
        }
        n_labels += ml->config[i]->n_version_labels;
    }
    if ((ml->n_config && !(list->models = tfs_calloc(ml->n_config, sizeof *list->models))) ||
        (n_labels && !(list->labels = tfs_calloc(n_labels, sizeof *list->labels))))
        goto oom;
    tfs_version_label *lab = list->labels;
    for (size_t i = 0; i < ml->n_config; i++) {
        const Tensorflow__Serving__ModelConfig *m = ml->config[i];
        tfs_model_config                       *mc = &list->models[i];
        mc->name = m->name ? m->name : "";
        mc->base_path = m->base_path ? m->base_path : "";
        if ((code = convert_platform(m, source, mc, st)) != TFS_OK ||
            (code = convert_policy(m, source, &mc->policy, st)) != TFS_OK)
            goto fail;
        mc->labels = m->n_version_labels ? lab : NULL;
        mc->n_labels = (int)m->n_version_labels;
        for (size_t k = 0; k < m->n_version_labels; k++, lab++) {
            lab->label = m->version_labels[k]->key ? m->version_labels[k]->key : "";
            lab->version = m->version_labels[k]->value;
        }
        list->n_models++;
    }
    *out = list;
    tfs_status_clear(st);
    return TFS_OK;
oom:
    code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory converting the model config",
                   source);
fail:
    if (list)
        list->owns_cfg = false;   /* the caller still owns cfg on failure */
    tfs__config_free(list);
    return code;
}

/* Runs the loader's checks on a converted file and, when one fails, points at the model's
 * `config { ... }` block: "<path>:<line>:<col>: <loader's text>". */
static enum tfs_code validate_located(const tfs__model_list *list, const char *path,
                                      const tfs_textformat_locs *locs, tfs_status *st)
{
    int bad, line, col;
    enum tfs_code code = tfs_loader_validate(list->models, list->n_models, &bad, st);
    if (code == TFS_OK)
        return TFS_OK;
    const Tensorflow__Serving__ModelConfigList *ml = list->cfg->model_config_list;
    if (bad >= 0 && ml && (size_t)bad < ml->n_config &&
        tfs_textformat_locate(locs, ml->config[bad], &line, &col))
        tfs_status_prefix(st, "%s:%d:%d", path, line, col);
    else
        tfs_status_prefix(st, "%s", path);
    return code;
}

enum tfs_code tfs__config_read_file(const char *path, tfs__model_list **out, tfs_status *st)
{
    ProtobufCMessage   *msg;
    tfs_textformat_locs locs = {0};
    *out = NULL;
    enum tfs_code code = tfs_textformat_parse_file_located(
        &tensorflow__serving__model_server_config__descriptor, path, &msg, &locs, st);
    if (code != TFS_OK) {
        tfs_textformat_locs_free(&locs);
        return code;
    }
    code = tfs__config_convert((const Tensorflow__Serving__ModelServerConfig *)msg, path, out, st);
    if (code != TFS_OK) {
        tfs_textformat_locs_free(&locs);
        protobuf_c_message_free_unpacked(msg, NULL);
        return code;
    }
    (*out)->owns_cfg = true;
    code = validate_located(*out, path, &locs, st);
    if (code == TFS_OK && (*out)->n_models > 0) {
        const Tensorflow__Serving__ModelConfigList *ml = (*out)->cfg->model_config_list;
        if (!((*out)->where = tfs_calloc((size_t)(*out)->n_models, sizeof *(*out)->where)))
            code = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", path);
        for (int i = 0; code == TFS_OK && i < (*out)->n_models; i++)
            tfs_textformat_locate(&locs, ml->config[i], &(*out)->where[i].line,
                                  &(*out)->where[i].col);
    }
    tfs_textformat_locs_free(&locs);
    if (code != TFS_OK) {
        tfs__config_free(*out);
        *out = NULL;
    }
    return code;
}

int tfs__config_warn_base_paths(const tfs__model_list *list, const char *source)
{
    int warned = 0;
    for (int i = 0; list && i < list->n_models; i++) {
        const tfs_model_config *m = &list->models[i];
        DIR                    *d = opendir(m->base_path);
        if (d) {
            closedir(d);
            continue;
        }
        int  err = errno;
        char where[48] = "";
        if (list->where && list->where[i].line > 0)
            snprintf(where, sizeof where, ":%d:%d", list->where[i].line, list->where[i].col);
        TFS_LOG_WARN(LOG_MODULE, "%s%s: model '%s': base path %s cannot be read: %s; it serves "
                     "nothing until a version folder can be read there (the other models are "
                     "not affected)", source, where, m->name, m->base_path, strerror(err));
        warned++;
    }
    return warned;
}
