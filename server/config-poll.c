/* --model_config_file_poll_wait_seconds: a thread that re-reads the model config file every
 * period and hands a changed config to tfs_loader_reload, as TensorFlow Serving's
 * Server::PollFilesystemAndReloadConfig does. "Changed" compares the serialized message, so
 * editing comments or spacing reloads nothing. A bad file or a failed reload is logged (once per
 * distinct error) and the serving models stay as they are.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "runtime/log.h"
#include "server/config-impl.h"

#define LOG_MODULE "config"

struct tfs__config_poll {
    tfs_loader     *loader;
    char           *path;
    double          period_s;
    uint8_t        *last;       /* serialized form of the last config seen */
    size_t          last_len;
    char            last_error[TFS_STATUS_MSG_MAX];
    int64_t         reloads;    /* guarded by mu */
    bool            stop;       /* guarded by mu */
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    pthread_t       thread;
};

/* Serializes cfg into a tfs_malloc'ed buffer; NULL when out of memory. */
static uint8_t *serialize(const Tensorflow__Serving__ModelServerConfig *cfg, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(&cfg->base);
    uint8_t *b = tfs_malloc(*len ? *len : 1);
    if (b)
        protobuf_c_message_pack(&cfg->base, b);
    return b;
}

static void log_error_once(tfs__config_poll *p, const char *what, const tfs_status *st)
{
    if (strcmp(p->last_error, st->msg) == 0)
        return;
    snprintf(p->last_error, sizeof p->last_error, "%s", st->msg);
    TFS_LOG_ERROR(LOG_MODULE, "%s: %s: %s (the models served stay as they are)", what,
                  tfs_code_name(st->code), st->msg);
}

static void poll_once(tfs__config_poll *p)
{
    tfs_status       st;
    tfs__model_list *list = NULL;
    uint8_t         *bytes = NULL;
    size_t           len = 0;
    if (tfs__config_read_file(p->path, &list, &st) != TFS_OK) {
        log_error_once(p, "Failed to read ModelServerConfig file", &st);
        return;
    }
    if (list->config_unset)
        goto done;   /* TF Serving: "Taking no action for empty config." */
    if (!(bytes = serialize(list->cfg, &len)))
        goto done;   /* try again next period */
    if (p->last && len == p->last_len && memcmp(bytes, p->last, len) == 0)
        goto done;
    tfs_free(p->last);
    p->last = bytes;
    p->last_len = len;
    bytes = NULL;
    TFS_LOG_INFO(LOG_MODULE, "%s changed: applying %d model(s)", p->path, list->n_models);
    tfs__config_warn_base_paths(list, p->path);
    if (tfs_loader_reload(p->loader, list->models, list->n_models, &st) != TFS_OK) {
        tfs_status_prefix(&st, "%s", p->path);
        log_error_once(p, "Reloading the model config failed", &st);
        goto done;
    }
    p->last_error[0] = 0;
    pthread_mutex_lock(&p->mu);
    p->reloads++;
    pthread_mutex_unlock(&p->mu);
done:
    tfs_free(bytes);
    tfs__config_free(list);
}

static void *poll_main(void *arg)
{
    tfs__config_poll *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        double whole = (double)(time_t)p->period_s;
        until.tv_sec += (time_t)p->period_s;
        until.tv_nsec += (long)((p->period_s - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &until) == 0)
            ;
        if (p->stop)
            break;
        pthread_mutex_unlock(&p->mu);
        poll_once(p);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

enum tfs_code tfs__config_poll_start(tfs_loader *l, const char *path, double period_s,
                                     const tfs__model_list *current, tfs__config_poll **out,
                                     tfs_status *st)
{
    *out = NULL;
    if (!(period_s > 0) || period_s > 1e9)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "config poll period %g s is not in (0, 1e9]",
                       period_s);
    tfs__config_poll *p = tfs_calloc(1, sizeof *p);
    if (!p || !(p->path = tfs_strdup(path)))
        goto oom;
    p->loader = l;
    p->period_s = period_s;
    if (current && current->cfg && !(p->last = serialize(current->cfg, &p->last_len)))
        goto oom;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, poll_main, p) != 0) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
        tfs_free(p->last);
        tfs_free(p->path);
        tfs_free(p);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "could not start the config poll thread");
    }
    *out = p;
    tfs_status_clear(st);
    return TFS_OK;
oom:
    if (p) {
        tfs_free(p->path);
        tfs_free(p);
    }
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory starting the config poll thread");
}

void tfs__config_poll_stop(tfs__config_poll *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    tfs_free(p->last);
    tfs_free(p->path);
    tfs_free(p);
}

int64_t tfs__config_poll_reloads(const tfs__config_poll *p)
{
    tfs__config_poll *q = (tfs__config_poll *)p;
    pthread_mutex_lock(&q->mu);
    int64_t n = q->reloads;
    pthread_mutex_unlock(&q->mu);
    return n;
}
