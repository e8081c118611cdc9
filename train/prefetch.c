/* Prefetch: a background thread that runs the dataset's producer up to `depth` batches ahead of
 * the consumer, so that batching (and, for TFRecord sources, reading and parsing) overlaps the
 * training step.
 *
 * DESIGN. One mutex and two condition variables guard a ring of `depth` slots. The thread owns
 * the producer while it runs; it produces a batch without the lock, then waits for a free slot
 * and queues the batch with its code, message and the position after it. It ends after queueing
 * a non-OK result (the end of the data, or an error), which the consumer then meets in order.
 * Stopping sets a flag and broadcasts; the thread checks the flag before and after each batch, so
 * stop waits for at most the batch in progress, then joins and frees whatever is still queued.
 * Nothing here calls user code, and no lock is held while producing.
 */
#include <pthread.h>
#include <string.h>

#include "runtime/alloc.h"
#include "train/dataset-impl.h"

typedef struct slot {
    tfs_tensor    **t;       /* [n] */
    tfs_dataset_pos after;
    enum tfs_code   code;
    tfs_status      st;
} slot;

struct tfs__prefetch {
    tfs__producer  *p;
    int             n;       /* tensors per batch */
    int             depth;
    slot           *ring;
    int             head, count;
    bool            stop;
    pthread_mutex_t mu;
    pthread_cond_t  can_put, can_get;
    pthread_t       thread;
};

static void *run(void *arg)
{
    tfs__prefetch *pf = arg;
    tfs_tensor   **t = tfs_calloc((size_t)(pf->n ? pf->n : 1), sizeof *t);
    for (bool last = false; !last;) {
        tfs_dataset_pos after = {0, 0, 0};
        tfs_status      st;
        enum tfs_code   code;
        pthread_mutex_lock(&pf->mu);
        bool stop = pf->stop;
        pthread_mutex_unlock(&pf->mu);
        if (stop)
            break;
        if (!t) {
            code = TFS_ERR(&st, TFS_RESOURCE_EXHAUSTED, "dataset prefetch: out of memory");
        } else {
            code = tfs__producer_next(pf->p, t, &after, &st);
        }
        last = code != TFS_OK;
        pthread_mutex_lock(&pf->mu);
        while (pf->count == pf->depth && !pf->stop)
            pthread_cond_wait(&pf->can_put, &pf->mu);
        if (pf->stop) {
            pthread_mutex_unlock(&pf->mu);
            for (int k = 0; t && k < pf->n; k++)
                tfs_tensor_unref(t[k]);
            break;
        }
        slot *s = &pf->ring[(pf->head + pf->count) % pf->depth];
        for (int k = 0; t && k < pf->n; k++)
            s->t[k] = t[k];
        s->after = after;
        s->code = code;
        s->st = st;
        pf->count++;
        pthread_cond_signal(&pf->can_get);
        pthread_mutex_unlock(&pf->mu);
    }
    tfs_free(t);
    return NULL;
}

static void free_prefetch(tfs__prefetch *pf)
{
    for (int i = 0; pf->ring && i < pf->depth; i++)
        tfs_free(pf->ring[i].t);
    tfs_free(pf->ring);
    tfs_free(pf);
}

enum tfs_code tfs__prefetch_start(tfs__producer *p, int depth, tfs__prefetch **out,
                                  tfs_status *st)
{
    tfs__prefetch *pf = tfs_calloc(1, sizeof *pf);
    *out = NULL;
    if (!pf || !(pf->ring = tfs_calloc((size_t)depth, sizeof *pf->ring)))
        goto oom;
    pf->p = p;
    pf->n = p->ds->n;
    pf->depth = depth;
    for (int i = 0; i < depth; i++)
        if (!(pf->ring[i].t = tfs_calloc((size_t)(pf->n ? pf->n : 1), sizeof *pf->ring[i].t)))
            goto oom;
    pthread_mutex_init(&pf->mu, NULL);
    pthread_cond_init(&pf->can_put, NULL);
    pthread_cond_init(&pf->can_get, NULL);
    int rc = pthread_create(&pf->thread, NULL, run, pf);
    if (rc != 0) {
        pthread_mutex_destroy(&pf->mu);
        pthread_cond_destroy(&pf->can_put);
        pthread_cond_destroy(&pf->can_get);
        free_prefetch(pf);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset prefetch: cannot start a thread: %s",
                       strerror(rc));
    }
    *out = pf;
    return TFS_OK;
oom:
    if (pf)
        free_prefetch(pf);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "dataset prefetch: out of memory");
}

enum tfs_code tfs__prefetch_next(tfs__prefetch *pf, tfs_tensor **out, tfs_dataset_pos *after,
                                 tfs_status *st)
{
    pthread_mutex_lock(&pf->mu);
    while (pf->count == 0)   /* the thread always queues a last result before it ends */
        pthread_cond_wait(&pf->can_get, &pf->mu);
    slot *s = &pf->ring[pf->head];
    enum tfs_code code = s->code;
    for (int k = 0; k < pf->n; k++) {
        out[k] = s->t[k];
        s->t[k] = NULL;
    }
    *after = s->after;
    if (st)
        *st = s->st;
    pf->head = (pf->head + 1) % pf->depth;
    pf->count--;
    pthread_cond_signal(&pf->can_put);
    pthread_mutex_unlock(&pf->mu);
    return code;
}

void tfs__prefetch_stop(tfs__prefetch *pf)
{
    if (!pf)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = true;
    pthread_cond_broadcast(&pf->can_put);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    for (int i = 0; i < pf->count; i++) {
        slot *s = &pf->ring[(pf->head + i) % pf->depth];
        for (int k = 0; k < pf->n; k++)
            tfs_tensor_unref(s->t[k]);
    }
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->can_put);
    pthread_cond_destroy(&pf->can_get);
    free_prefetch(pf);
}
