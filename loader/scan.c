/* Version folders on disk: which integer-named folders a base path holds, whether each holds a
 * SavedModel, and a fingerprint of each folder's file tree (names, sizes, mtimes) so the poller can
 * tell a folder that is still being written (its fingerprint moves between polls) from a complete
 * one. The walk is bounded in depth and entry count, so symlink loops and huge trees cannot hang a
 * poll; unreadable folders change the fingerprint instead of failing the scan. Entries that are not
 * version folders are skipped: at debug level when the name is not a number (TF Serving ignores
 * them silently), with a warning when it is one (a file, a dangling link, a symlink loop).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loader/loader-impl.h"

bool tfs__parse_version(const char *name, int64_t *out)
{
    if (!name[0])
        return false;
    int64_t v = 0;
    for (const char *p = name; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

void tfs__name_set_clear(tfs__name_set *s)
{
    for (int i = 0; i < s->n; i++)
        tfs_free(s->names[i]);
    tfs_free(s->names);
    *s = (tfs__name_set){0};
}

/* True the first time a name is seen. The set is capped: past it, nothing more is logged. */
static bool name_set_add(tfs__name_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name))
            return false;
    if (s->n >= 256)
        return false;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        char **v = tfs_realloc(s->names, (size_t)cap * sizeof *v);
        if (!v)
            return false;
        s->names = v;
        s->cap = cap;
    }
    char *copy = tfs_strdup(name);
    if (!copy)
        return false;
    s->names[s->n++] = copy;
    return true;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t mix(uint64_t x)   /* splitmix64's finalizer */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct walk {
    uint64_t fp;        /* sum of per-entry hashes: independent of readdir order */
    int64_t  bytes;
    int      entries;
} walk;

static void walk_add(walk *w, const char *rel, const struct stat *sb, int tag)
{
    uint64_t h = fnv(1469598103934665603ull, rel, strlen(rel));
    int64_t f[5] = {tag, sb ? (int64_t)sb->st_size : -1, sb ? (int64_t)sb->st_mtim.tv_sec : 0,
                    sb ? (int64_t)sb->st_mtim.tv_nsec : 0, sb ? (int64_t)(sb->st_mode & S_IFMT) : 0};
    h = fnv(h, f, sizeof f);
    w->fp += mix(h);
}

/* Walks dir (path) whose name relative to the version folder is rel. */
static void walk_tree(walk *w, const char *path, const char *rel, int depth)
{
    DIR *d = opendir(path);
    if (!d) {
        walk_add(w, rel, NULL, 1000 + errno);   /* unreadable: part of the fingerprint */
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && w->entries < TFS_SCAN_MAX_ENTRIES) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char child[4096], crel[4096];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child ||
            snprintf(crel, sizeof crel, "%s/%s", rel, e->d_name) >= (int)sizeof crel)
            continue;
        w->entries++;
        struct stat sb;
        if (stat(child, &sb) != 0) {   /* dangling link, or removed meanwhile */
            walk_add(w, crel, NULL, 2);
            continue;
        }
        walk_add(w, crel, &sb, 3);
        if (S_ISREG(sb.st_mode))
            w->bytes += (int64_t)sb.st_size;
        else if (S_ISDIR(sb.st_mode) && depth + 1 < TFS_SCAN_MAX_DEPTH)
            walk_tree(w, child, crel, depth + 1);
    }
    closedir(d);
}

static bool is_file(const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;
    return snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
           stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int cmp_version_desc(const void *a, const void *b)
{
    const tfs__version_dir *x = a, *y = b;
    if (x->version != y->version)
        return x->version < y->version ? 1 : -1;
    return strcmp(x->name, y->name);
}

void tfs__version_dirs_free(tfs__version_dir *d, int n)
{
    if (!d)
        return;
    for (int i = 0; i < n; i++)
        tfs_free(d[i].name);
    tfs_free(d);
}

enum tfs_code tfs__scan_base(const char *base, const char *model, tfs__name_set *logged,
                             tfs__version_dir **out, int *n, tfs_status *st)
{
    *out = NULL;
    *n = 0;
    tfs__version_dir *v = NULL;
    int count = 0, cap = 0;
    DIR *d = opendir(base);
    if (!d) {
        int err = errno;
        return TFS_ERR(st, tfs_code_from_errno(err), "model '%s': cannot read base path %s: %s",
                       model, base, strerror(err));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int64_t version;
        if (!tfs__parse_version(e->d_name, &version)) {
            if (logged && name_set_add(logged, e->d_name))
                TFS_LOG_DEBUG(LOG_MODULE, "model '%s': ignoring '%s' under %s (not a version "
                              "number)", model, e->d_name, base);
            continue;
        }
        char path[4096];
        struct stat sb;
        if (snprintf(path, sizeof path, "%s/%s", base, e->d_name) >= (int)sizeof path)
            continue;
        int err = stat(path, &sb) != 0 ? errno : 0;
        if (err || !S_ISDIR(sb.st_mode)) {
            /* Named like a version, so probably meant as one: say why it is not (a symlink
             * loop or a dangling link fails stat; a file is not a folder), once per name. */
            if (logged && name_set_add(logged, e->d_name))
                TFS_LOG_WARN(LOG_MODULE, "model '%s': ignoring '%s' under %s: %s", model,
                             e->d_name, base, err ? strerror(err) : "not a folder");
            continue;
        }
        if (count == cap) {
            int ncap = cap ? 2 * cap : 8;
            tfs__version_dir *nv = tfs_realloc(v, (size_t)ncap * sizeof *nv);
            if (!nv)
                goto oom;
            v = nv;
            cap = ncap;
        }
        tfs__version_dir *vd = &v[count];
        *vd = (tfs__version_dir){.version = version, .name = tfs_strdup(e->d_name)};
        if (!vd->name)
            goto oom;
        count++;
        vd->has_saved_model = is_file(path, "saved_model.pb") || is_file(path, "saved_model.pbtxt");
        walk w = {0};
        walk_tree(&w, path, ".", 0);
        vd->fingerprint = w.fp ^ (uint64_t)w.entries;
        vd->disk_bytes = w.bytes;
    }
    closedir(d);
    d = NULL;
    if (count > 1)
        qsort(v, (size_t)count, sizeof *v, cmp_version_desc);
    /* "1" and "01" are the same version: keep the first name in sort order. */
    int kept = 0;
    for (int i = 0; i < count; i++) {
        if (kept && v[kept - 1].version == v[i].version) {
            if (logged && name_set_add(logged, v[i].name))
                TFS_LOG_WARN(LOG_MODULE, "model '%s': folders '%s' and '%s' are both version "
                             "%lld; using '%s'", model, v[kept - 1].name, v[i].name,
                             (long long)v[i].version, v[kept - 1].name);
            tfs_free(v[i].name);
            continue;
        }
        v[kept++] = v[i];
    }
    *out = v;
    *n = kept;
    tfs_status_clear(st);
    return TFS_OK;
oom:
    if (d)
        closedir(d);
    tfs__version_dirs_free(v, count);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory scanning %s", base);
}

void tfs__scan_describe_skipped(const char *base, char *out, size_t n)
{
    out[0] = 0;
    DIR *d = opendir(base);
    if (!d)
        return;
    size_t used = 0;
    int shown = 0, more = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        int w = shown < 3 ? snprintf(out + used, n - used, "%s'%s'", shown ? ", " : "", e->d_name)
                          : -1;
        if (w >= 0 && (size_t)w < n - used) {
            used += (size_t)w;
            shown++;
        } else {
            out[used] = 0;
            more++;
        }
    }
    closedir(d);
    if (more)
        snprintf(out + used, n - used, " and %d more", more);
}
