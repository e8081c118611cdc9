/* loader internals shared by loader.c (API, lookups, handles), config.c (validation, copies,
 * reload), scan.c (version folders on disk), policy.c (aspired versions) and lifecycle.c (load
 * threads, poll thread, the state machine). Include only from loader/ and its tests.
 *
 * Locking. l->mu guards the registry: every model_entry field, every version_entry, the task queue,
 * the release list and the counters. It is never held while a model loads, a folder is scanned, or
 * a servable is freed. l->scan_mu serializes whole scan passes (poll thread, tfs_loader_poll_now,
 * reload) so that two passes never interleave their listings; it is taken before l->mu, never
 * after. Entries (models and versions) are allocated one by one and live until tfs_loader_free, so
 * pointers to them stay valid after l->mu is released.
 */
#ifndef TFS_LOADER_LOADER_IMPL_H
#define TFS_LOADER_LOADER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "loader/loader.h"

#define LOG_MODULE "loader"

/* ---- scan.c: version folders of a base path ------------------------------------------------- */

/* Bounds of the walk that fingerprints a version folder: deeper folders and entries past the count
 * are not looked at (symlink loops end at the depth bound). */
#define TFS_SCAN_MAX_DEPTH   8
#define TFS_SCAN_MAX_ENTRIES 10000

typedef struct tfs__version_dir {
    int64_t  version;
    char    *name;             /* folder name as on disk ("00000123") */
    bool     has_saved_model;  /* saved_model.pb or saved_model.pbtxt is a regular file */
    uint64_t fingerprint;      /* names, sizes, mtimes of the tree; changes when a file does */
    int64_t  disk_bytes;       /* sum of the regular files' sizes */
    bool     stable;           /* set by the caller: loadable (complete and unchanged) */
} tfs__version_dir;

/* Names already logged as "not a version" for one model, so each is logged once. */
typedef struct tfs__name_set {
    int    n, cap;
    char **names;
} tfs__name_set;
void tfs__name_set_clear(tfs__name_set *s);

/* Lists the integer-named folders of base, sorted by version, highest first. Entries whose names
 * are not versions are skipped (logged at debug level once per name through `logged`). NOT_FOUND
 * or PERMISSION_DENIED when base cannot be read. *out is freed with tfs__version_dirs_free. */
enum tfs_code tfs__scan_base(const char *base, const char *model, tfs__name_set *logged,
                             tfs__version_dir **out, int *n, tfs_status *st);
void tfs__version_dirs_free(tfs__version_dir *d, int n);
/* For the "no versions found" warning: up to three entry names of base, quoted ("'v1', 'x.pb'
 * and 2 more"), or "" when it cannot be read or is empty. */
void tfs__scan_describe_skipped(const char *base, char *out, size_t n);
/* "123" / "00000123" -> 123; false for anything else (signs, spaces, past INT64_MAX). */
bool tfs__parse_version(const char *name, int64_t *out);

/* ---- policy.c ------------------------------------------------------------------------------- */

/* The versions the policy serves out of `present` (sorted highest first): into out (room for
 * n_present), highest first. */
int tfs__policy_aspired(const tfs_version_policy *p, const int64_t *present, int n_present,
                        int64_t *out);
const char *tfs__policy_name(enum tfs_policy_kind k);

/* ---- registry (loader.c, lifecycle.c) ------------------------------------------------------- */

typedef struct model_entry model_entry;

typedef struct version_entry {
    int64_t                version;
    enum tfs_version_state state;
    tfs_status             status;       /* last load error when END after a failure */
    double                 load_seconds;
    int64_t                memory_bytes; /* while AVAILABLE */
    uint64_t               gen;          /* bumped at each START; tasks and handles carry it */
    bool                   aspired;      /* as of the last reconcile */
    bool                   failed;       /* END after a failed load attempt */
    uint64_t               tried_fp;     /* fingerprint of the folder the last attempt loaded */
    int64_t                disk_bytes;   /* of that folder: the pre-load memory estimate */
    char                  *dir;          /* version folder of the last attempt */
    tfs_servable          *servable;     /* the registry's reference while AVAILABLE */
    tfs_servable          *leaving;      /* while UNLOADING: the handle requests still hold (no
                                          * reference; cleared under mu before it is freed) */
    model_entry           *model;
} version_entry;

typedef struct label_entry {
    char   *label;
    int64_t version;
} label_entry;

struct model_entry {
    char              *name;
    char              *base_path;
    bool               configured;   /* in the current config (else only kept for its status) */
    tfs_version_policy policy;       /* versions owned */
    int                n_labels;
    label_entry       *labels;
    tfs__version_dir  *listing;      /* last successful scan, `stable` set */
    int                n_listing;
    bool               scanned;      /* a scan succeeded since the model was (re)configured */
    version_entry    **versions;     /* every version ever aspired, highest first */
    int                n_versions, cap_versions;
    /* log-once state (scan passes only, under scan_mu) */
    tfs__name_set      ignored;
    tfs_status         scan_error;   /* the last scan failure, logged once */
    uint64_t           missing_sig;
    bool               warned_empty;
};

typedef struct load_task {
    version_entry *v;
    uint64_t       gen;
} load_task;

/* batch.c: the batch queues of one version, one per signature (index of
 * tfs_savedmodel_signature_at), created on first use. */
typedef struct tfs__sig_queue {
    tfs_batch_queue      *q;           /* NULL until first use */
    const tfs_savedmodel *model;       /* what the queue's run callback runs */
    const tfs_loader     *loader;      /* its options */
    const tfs_signature  *sig;
    signed char           batchable;   /* -1 not yet known, 0 no, 1 yes */
} tfs__sig_queue;

typedef struct tfs__servable_batch {
    pthread_mutex_t      mu;          /* guards queue creation */
    tfs_batching_params  params;      /* global, or the version's batching_params.pbtxt */
    int                  n;
    tfs__sig_queue      *sq;          /* [n] */
} tfs__servable_batch;

struct tfs_servable {
    atomic_int      refs;        /* the registry holds one while AVAILABLE */
    tfs_loader     *loader;
    version_entry  *entry;
    uint64_t        gen;
    char           *name;
    int64_t         version;
    int64_t         memory_bytes;
    tfs_savedmodel *model;
    tfs__servable_batch *batch;  /* NULL when batching is off */
    tfs_servable   *bnext;       /* l->batched list (under l->mu) */
    tfs_servable   *rnext;       /* l->reap list (under l->mu) */
};

/* TensorFlow's SavedModel load counters for one version folder (tfs_loader_load_records). */
typedef struct tfs__load_record {
    char   *path;
    int64_t ok, failed, ok_us;
} tfs__load_record;
#define TFS_LOADER_MAX_LOAD_RECORDS 1024   /* folders past it are not counted */

struct tfs_loader {
    pthread_mutex_t mu;
    pthread_mutex_t scan_mu;
    pthread_cond_t  work_cv;     /* tasks queued, or stopping */
    pthread_cond_t  done_cv;     /* a version changed state */
    pthread_cond_t  poll_cv;     /* stopping (wakes the poll thread at once) */
    tfs_loader_opts opts;        /* tags points at `tags`; warmup kept */
    char           *tags;
    bool            stopping;

    model_entry   **models;      /* every model ever configured, never freed before the loader */
    int             n_models, cap_models;
    model_entry   **config;      /* the configured ones, in config order */
    int             n_config;

    load_task      *tasks;       /* FIFO ring */
    int             task_head, n_tasks, cap_tasks;
    tfs_servable  **releases;    /* registry references to drop once mu is released */
    int             n_releases, cap_releases;
    int             n_flushing;  /* threads dropping such references now */
    int             n_loading;   /* workers inside a load, cleanup included */

    int64_t         mem_in_use;    /* bytes of loaded models not yet freed */
    int64_t         mem_reserved;  /* estimates of loads in progress */
    int64_t         loads_ok, loads_failed, unloads;
    double          load_seconds_total;
    tfs__load_record *load_records;   /* one per version folder a SavedModel load ran on */
    int             n_load_records, cap_load_records;

    /* batching (batch.c): NULL batcher when off */
    tfs_batcher    *batcher;
    tfs_servable   *batched;     /* servables with batch state, not yet freed */
    tfs_servable   *reap;        /* refs hit 0 while they had queues: freed by a load thread */

    pthread_t      *workers;
    int             n_workers;
    pthread_t       poll_thread;
    bool            poll_started;
};

/* Finds a model by name among all entries (configured or not). Under mu. */
model_entry   *tfs__model_find(tfs_loader *l, const char *name);
/* A new, empty entry added to l->models. Under mu. NULL when out of memory. */
model_entry   *tfs__model_add(tfs_loader *l, const char *name);
version_entry *tfs__version_find(model_entry *m, int64_t version);
void           tfs__model_free(model_entry *m);

/* lifecycle.c */
/* Recomputes the aspired versions of m from its listing and policy; queues loads, cancels queued
 * loads no longer aspired, unloads per the availability-preserving rule. Under mu. Registry
 * references to drop are queued on l->releases: call tfs__flush_releases after unlocking. */
void tfs__model_reconcile(tfs_loader *l, model_entry *m);
void tfs__flush_releases(tfs_loader *l);
/* Replaces m's listing with a fresh scan, marking which folders are loadable. Under mu. */
void tfs__model_apply_listing(model_entry *m, tfs__version_dir *d, int n);
/* Scans the given models (all configured ones when models is NULL) and reconciles them. The
 * _locked form is called with scan_mu held; both take mu themselves. */
void tfs__scan_pass(tfs_loader *l, model_entry **models, int n);
void tfs__scan_pass_locked(tfs_loader *l, model_entry **models, int n);
/* Waits until no version is START or LOADING and the registry references of unloaded versions
 * have been dropped and their frees finished (a version a handle still holds stays UNLOADING).
 * Takes mu. */
void tfs__wait_idle(tfs_loader *l);
enum tfs_code tfs__threads_start(tfs_loader *l, tfs_status *st);   /* the load threads */
enum tfs_code tfs__poll_start(tfs_loader *l, tfs_status *st);      /* the poll thread, if any */
void tfs__threads_stop(tfs_loader *l);
void tfs__servable_unref(tfs_servable *s);
/* Frees a servable whose refs reached 0 (its queues first). Not under mu. */
void tfs__servable_destroy(tfs_servable *s);

/* batch.c */
/* Starts the batcher when opts ask for batching (validating the global queue options). */
enum tfs_code tfs__batching_start(tfs_loader *l, tfs_status *st);
void          tfs__batching_stop(tfs_loader *l);   /* after every servable is freed */
/* Batch state for a new servable of `model` (per-model params read from dir when configured).
 * Not under mu. NULL *out when batching is off. */
enum tfs_code tfs__servable_batch_new(tfs_loader *l, const char *dir, const tfs_savedmodel *model,
                                      tfs__servable_batch **out, tfs_status *st);
/* Frees every queue (waiting for their tasks), then the state. Never on a batch thread. */
void          tfs__servable_batch_free(tfs__servable_batch *b);
bool          tfs__servable_batch_busy(const tfs__servable_batch *b);   /* has queues */

/* config.c */
/* INVALID_ARGUMENT naming the model for a config tfs_loader_new/reload would refuse. */
enum tfs_code tfs__config_validate(const tfs_model_config *models, int n, tfs_status *st);
/* Checks the configs' labels against what is loaded now (tfs__labels_check) and, when they pass,
 * installs them. Under mu. */
enum tfs_code tfs__labels_apply(tfs_loader *l, const tfs_model_config *models, int n,
                                tfs_status *st);
/* FAILED_PRECONDITION when a label points at a version that may not take it now. Under mu. */
enum tfs_code tfs__labels_check(tfs_loader *l, const tfs_model_config *models, int n,
                                tfs_status *st);
/* Makes the loader's configured list equal `models` (copies; entries reused by name). Models
 * dropped are marked unconfigured and their listings cleared. Under mu. Returns the entries of
 * `models` in order through *entries (n of them, caller frees the array). */
enum tfs_code tfs__config_apply(tfs_loader *l, const tfs_model_config *models, int n,
                                model_entry ***entries, tfs_status *st);

#endif
