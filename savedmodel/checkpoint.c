/* Checkpoints in TensorFlow's format: saving named tensors as a TensorBundle and recording it in
 * the directory's `checkpoint` state file (keeping the newest keep_checkpoint_max), and reading
 * them back (the latest prefix, names, dtypes, shapes, values).
 *
 * DESIGN. The bookkeeping follows tf.train.CheckpointManager, which is what TF2 users and
 * `tensorboard` expect to find: the state file is continued from what is on disk (so a resumed
 * run keeps deleting the checkpoints of the run before it); entries recorded at or before
 * last_preserved_timestamp are no longer managed (never deleted), as when CheckpointManager
 * recovers a state; a new state starts with last_preserved_timestamp = now - 1, as it does; paths
 * are written relative to the directory.
 * Crash safety comes from ordering. Everything that can run out of memory (the old state, the new
 * state texts, the victims' paths) is prepared before the first byte is written. Then: the bundle
 * (temporary files, fsync, renamed into place by the bundle writer), an fsync of the directory,
 * the state file replaced atomically with the new checkpoint listed last and the old ones still
 * listed (the commit point), the old files deleted, and the state replaced again without them
 * (CheckpointManager's order, so a crash while deleting leaves a state that lists every file still
 * present). A failure before the commit point removes the new bundle again, so the directory
 * holds exactly what it held before.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "runtime/log.h"
#include "savedmodel/bundle-impl.h"
#include "savedmodel/checkpoint-impl.h"

struct tfs_checkpoint {
    tfs_bundle *bundle;
};

tfs_checkpoint_opts tfs_checkpoint_opts_default(void)
{
    return (tfs_checkpoint_opts){.keep_checkpoint_max = 5};
}

static double now_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* A checkpoint the state file lists: its path as written there, and when it was saved. */
typedef struct managed {
    char  *path;
    double ts;
} managed;

/* path as the state file should hold it: relative to dir when it lies directly in dir (TF's
 * relpath for that case), unchanged otherwise. Caller frees. */
static char *relative_to(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (path[0] == '/' && strncmp(path, dir, n) == 0 && path[n] == '/' &&
        !strchr(path + n + 1, '/') && path[n + 1])
        return tfs_strdup(path + n + 1);
    return tfs_strdup(path);
}

/* dir/path, or path when it is absolute. Caller frees. */
static char *join(const char *dir, const char *path)
{
    if (path[0] == '/')
        return tfs_strdup(path);
    size_t n = strlen(dir) + strlen(path) + 2;
    char  *p = tfs_malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, path);
    return p;
}

/* Deletes <prefix>.index and <prefix>.data-?????-of-????? (TF's remove_checkpoint for V2); a file
 * that cannot be removed is logged and left. */
static void remove_checkpoint_files(const char *prefix)
{
    char           path[PATH_MAX], dir[PATH_MAX];
    const char    *slash = strrchr(prefix, '/');
    const char    *base  = slash ? slash + 1 : prefix;
    size_t         nb    = strlen(base);
    DIR           *d;
    struct dirent *e;

    if ((size_t)snprintf(path, sizeof path, "%s.index", prefix) < sizeof path &&
        unlink(path) != 0 && errno != ENOENT)
        TFS_LOG_WARN("savedmodel", "cannot delete old checkpoint file %s: %s", path,
                     strerror(errno));
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == prefix)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - prefix), prefix);
    if (!(d = opendir(dir)))
        return;
    while ((e = readdir(d))) {
        /* "<base>.data-" then 5 characters, "-of-", 5 characters, as the glob "?????" matches. */
        const char *n = e->d_name;
        if (strncmp(n, base, nb) != 0 || strncmp(n + nb, ".data-", 6) != 0)
            continue;
        const char *t = n + nb + 6;
        if (strlen(t) != 14 || strncmp(t + 5, "-of-", 4) != 0)
            continue;
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, n) < sizeof path &&
            unlink(path) != 0 && errno != ENOENT)
            TFS_LOG_WARN("savedmodel", "cannot delete old checkpoint file %s: %s", path,
                         strerror(errno));
    }
    closedir(d);
}

static enum tfs_code check_name(const char *name, int64_t step, tfs_status *st)
{
    if (!name || !name[0] || strchr(name, '/'))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "checkpoint name '%s' must be a non-empty file "
                       "name without '/'", name ? name : "(null)");
    if (step < 0 && (!strcmp(name, "checkpoint") || !strcmp(name, ".") || !strcmp(name, "..")))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "checkpoint name '%s' conflicts with %s", name,
                       name[0] == '.' ? "the directory" : "the checkpoint state file");
    return TFS_OK;
}

enum tfs_code tfs_checkpoint_save(const char *dir_in, const char *name, int64_t step,
                                  const tfs_named_tensor *tensors, int n,
                                  const tfs_checkpoint_opts *opts, char **prefix_out,
                                  tfs_status *st)
{
    tfs_checkpoint_opts   o      = opts ? *opts : tfs_checkpoint_opts_default();
    tfs_checkpoint_state *old    = NULL;
    tfs_bundle_writer    *bw     = NULL;
    managed              *list   = NULL;
    char                **victim = NULL;   /* full prefixes of the checkpoints to delete */
    char                 *dir = NULL, *rel = NULL, *prefix = NULL, *text1 = NULL, *text2 = NULL;
    char                **paths  = NULL;
    double               *stamps = NULL;
    int                   count = 0, n_victims = 0;
    bool                  was_listed = false, bundle_written = false;
    char                  state_file[PATH_MAX];
    enum tfs_code         rc;

    if (prefix_out)
        *prefix_out = NULL;
    if ((rc = check_name(name, step, st)) != TFS_OK)
        return rc;
    if (o.keep_checkpoint_max < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "keep_checkpoint_max must be >= 0, got %d",
                       o.keep_checkpoint_max);
    if (n < 0 || (n > 0 && !tensors))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "checkpoint '%s': bad tensor list", name);
    if (!dir_in || !dir_in[0])
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "checkpoint '%s': empty directory name", name);

    /* dir without trailing slashes ("/" stays). */
    size_t dl = strlen(dir_in);
    while (dl > 1 && dir_in[dl - 1] == '/')
        dl--;
    char num[32] = "";
    if (step >= 0)
        snprintf(num, sizeof num, "-%lld", (long long)step);
    if (!(dir = tfs_strndup(dir_in, dl)))
        goto oom;
    if (!(rel = tfs_malloc(strlen(name) + strlen(num) + 1)))
        goto oom;
    strcpy(rel, name);
    strcat(rel, num);
    if (!(prefix = join(dir, rel)))
        goto oom;
    int sl = snprintf(state_file, sizeof state_file, "%s/checkpoint", dir);
    if (strlen(prefix) + 64 >= PATH_MAX || sl < 0 || (size_t)sl >= sizeof state_file) {
        rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s: path too long", prefix);
        goto fail;
    }
    if ((rc = tfs__mkdirs(dir, st)) != TFS_OK)
        goto fail;

    /* The state on disk, continued as CheckpointManager recovers it. */
    rc = tfs_checkpoint_state_read(dir, &old, st);
    if (rc == TFS_DATA_LOSS) {
        TFS_LOG_WARN("savedmodel", "%s; starting a new checkpoint state", st ? st->msg : dir);
    } else if (rc != TFS_OK && rc != TFS_NOT_FOUND) {
        goto fail;
    }
    double now = now_seconds();
    double last_preserved = old ? old->last_preserved_timestamp : now - 1.0;
    if (now < last_preserved)
        last_preserved = now;   /* the clock went back: protect what exists, as TF does */
    int cap = (old ? old->n_paths : 0) + 1;
    if (!(list = tfs_calloc((size_t)cap, sizeof *list)))
        goto oom;
    for (int i = 0; old && i < old->n_paths; i++) {
        double ts = old->n_timestamps ? fmin(old->all_model_checkpoint_timestamps[i], now)
                                      : last_preserved;
        if (!(ts > last_preserved))
            continue;
        char *p = relative_to(dir, old->all_model_checkpoint_paths[i]);
        if (!p)
            goto oom;
        if (!strcmp(p, rel)) {   /* saved again: it moves to the end */
            was_listed = true;
            tfs_free(p);
            continue;
        }
        list[count++] = (managed){p, ts};
    }
    if (!(list[count].path = tfs_strdup(rel)))
        goto oom;
    list[count++].ts = now;
    if (o.keep_checkpoint_max > 0 && count > o.keep_checkpoint_max)
        n_victims = count - o.keep_checkpoint_max;
    if (!(paths = tfs_calloc((size_t)count, sizeof *paths)) ||
        !(stamps = tfs_calloc((size_t)count, sizeof *stamps)) ||
        !(victim = tfs_calloc((size_t)(n_victims ? n_victims : 1), sizeof *victim)))
        goto oom;
    for (int i = 0; i < count; i++) {
        paths[i]  = list[i].path;
        stamps[i] = list[i].ts;
    }
    for (int i = 0; i < n_victims; i++)
        if (!(victim[i] = join(dir, list[i].path)))
            goto oom;
    tfs_checkpoint_state s1 = {rel, count, paths, count, stamps, last_preserved};
    tfs_checkpoint_state s2 = {rel, count - n_victims, paths + n_victims, count - n_victims,
                               stamps + n_victims, last_preserved};
    if ((rc = tfs__checkpoint_state_render(&s1, &text1, st)) != TFS_OK ||
        (n_victims && (rc = tfs__checkpoint_state_render(&s2, &text2, st)) != TFS_OK))
        goto fail;

    /* The tensors. */
    if ((rc = tfs_bundle_writer_new(prefix, &bw, st)) != TFS_OK)
        goto fail;
    for (int i = 0; i < n; i++) {
        if (!tensors[i].tensor) {
            rc = TFS_ERR(st, TFS_INVALID_ARGUMENT, "checkpoint %s: tensor '%s' is NULL", prefix,
                         tensors[i].name ? tensors[i].name : "");
            goto fail;
        }
        if ((rc = tfs_bundle_writer_add(bw, tensors[i].name, tensors[i].tensor, st)) != TFS_OK)
            goto fail;
    }
    if ((rc = tfs_bundle_writer_finish(bw, st)) != TFS_OK)
        goto fail;
    bundle_written = true;
    if ((rc = tfs_dir_fsync(dir, st)) != TFS_OK)
        goto fail;

    /* Commit. */
    if ((rc = tfs_atomic_file_write(state_file, text1, strlen(text1), st)) != TFS_OK)
        goto fail;
    bundle_written = false;
    for (int i = 0; i < n_victims; i++)
        remove_checkpoint_files(victim[i]);
    if (n_victims) {
        tfs_status st2;
        if (tfs_atomic_file_write(state_file, text2, strlen(text2), &st2) != TFS_OK)
            TFS_LOG_WARN("savedmodel", "checkpoint %s saved, but the state file still lists "
                         "deleted checkpoints: %s", prefix, st2.msg);
    }
    if (prefix_out) {
        *prefix_out = prefix;
        prefix = NULL;
    }
    tfs_status_clear(st);
    rc = TFS_OK;
    goto done;
oom:
    rc = TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory saving checkpoint '%s' in %s", name,
                 dir_in);
fail:
    /* A complete bundle the state file does not name must not stay behind, unless it replaced a
     * checkpoint that the old state names (then it is the only copy there is). */
    if (bundle_written && !was_listed)
        remove_checkpoint_files(prefix);
done:
    tfs_bundle_writer_free(bw);
    for (int i = 0; list && i < count; i++)
        tfs_free(list[i].path);
    tfs_free(list);
    for (int i = 0; victim && i < n_victims; i++)
        tfs_free(victim[i]);
    tfs_free(victim);
    tfs_free(paths);
    tfs_free(stamps);
    tfs_free(text1);
    tfs_free(text2);
    tfs_checkpoint_state_free(old);
    tfs_free(prefix);
    tfs_free(rel);
    tfs_free(dir);
    return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

enum tfs_code tfs_checkpoint_open(const char *prefix, tfs_checkpoint **out, tfs_status *st)
{
    tfs_checkpoint *c = NULL;
    enum tfs_code   rc;

    *out = NULL;
    if (!(c = tfs_calloc(1, sizeof *c)))
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "%s: out of memory", prefix);
    if ((rc = tfs_bundle_open(prefix, &c->bundle, st)) != TFS_OK) {
        tfs_free(c);
        return rc;
    }
    *out = c;
    return TFS_OK;
}

void tfs_checkpoint_close(tfs_checkpoint *c)
{
    if (!c)
        return;
    tfs_bundle_free(c->bundle);
    tfs_free(c);
}

int tfs_checkpoint_count(const tfs_checkpoint *c)
{
    return tfs_bundle_count(c->bundle);
}

tfs_checkpoint_var tfs_checkpoint_var_at(const tfs_checkpoint *c, int i)
{
    const tfs_bundle_entry *e = tfs_bundle_entry_at(c->bundle, i);
    tfs_checkpoint_var      v = {.name = e->key, .dtype = e->dtype};
    v.shape.rank = e->rank;
    for (int d = 0; d < e->rank; d++)
        v.shape.dims[d] = e->dims[d];
    return v;
}

int tfs_checkpoint_find(const tfs_checkpoint *c, const char *name)
{
    const tfs_bundle_entry *e = tfs_bundle_find(c->bundle, name);
    return e ? (int)(e - tfs_bundle_entry_at(c->bundle, 0)) : -1;
}

enum tfs_code tfs_checkpoint_read(tfs_checkpoint *c, const char *name, enum tfs_dtype want,
                                  tfs_tensor **out, tfs_status *st)
{
    return tfs_bundle_read(c->bundle, name, want, out, st);
}
