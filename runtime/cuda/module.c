/* Opening the CUDA module (gpu-impl.h): libtfserve-cuda.so holds the executor's device layer and
 * links cudart, cuBLAS and cuDNN, so that tfserve links none of them, starts where they are
 * absent, and a process that never asks for a GPU (--device=cpu) never maps them.
 *
 * DESIGN. The module is opened on the first call that may use a GPU (a model load with device
 * auto or gpu; tfs_runtime_gpu_count) and kept open for the life of the process: the devices
 * opened through it keep their memory and handles that long. Where it is looked for: the file
 * TFS_CUDA_MODULE names, if set (tests; a deployment that keeps it elsewhere), and only there;
 * otherwise the running executable's directory (build/server/ in the build tree, or wherever a
 * container or tarball put both), then the install tree's library directory relative to it, then
 * the configured install prefix's. The runtime reaches the module only through the one table it
 * exports (tfs_cuda_api), whose ABI version must equal the runtime's: a module from another
 * build is refused, never called. With device auto and the module found where it is installed,
 * the CUDA driver (libcuda.so.1) is looked for first, so a CPU-only machine with the module
 * installed still maps no CUDA library; with gpu, or a module TFS_CUDA_MODULE names, the module
 * is opened regardless, so the failure names the most specific cause (the module's own loader
 * error, its ABI, then cudaGetDeviceCount's error). With gpu and the installed module the
 * driver is looked for after the ABI check: without it cudart reports only "CUDA driver version
 * is insufficient", which reads as an old driver where a container was started without one. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cuda/gpu-impl.h"

#define DRIVER_FILE "libcuda.so.1"

const tfs_cuda_api *tfs__cuda;

static pthread_mutex_t module_mu = PTHREAD_MUTEX_INITIALIZER;

/* paths[*n] = "<dir>/<rel>/<file>" (rel may be ""), unless it would not fit. */
static void add_path(char paths[][PATH_MAX], int *n, const char *dir, const char *rel)
{
    int r = snprintf(paths[*n], PATH_MAX, "%s/%s%s%s", dir, rel, *rel ? "/" : "",
                     TFS_CUDA_MODULE_FILE);
    if (r > 0 && r < PATH_MAX)
        (*n)++;
}

/* The candidate paths, in order, into paths[3]; returns how many. */
static int candidates(char paths[][PATH_MAX])
{
    int n = 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = NULL;
    if (len > 0) {
        exe[len] = 0;
        slash = strrchr(exe, '/');
    }
    if (slash) {
        *slash = 0;
        add_path(paths, &n, exe, "");
        add_path(paths, &n, exe, "../" TFS_CUDA_MODULE_RELDIR);
    }
    add_path(paths, &n, TFS_CUDA_MODULE_DIR, "");
    return n;
}

/* dlopen + the ABI check of one module file; *handle is the caller's to dlclose. */
static enum tfs_code open_file(const char *path, void **handle, const tfs_cuda_api **out,
                               tfs_status *st)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the library that could not be found ("libcudnn.so.9: cannot open shared
         * object file: ..."), which may be the module itself or one it needs. */
        const char *e = dlerror();
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "CUDA module %s: %s", path,
                       e ? e : "dlopen failed");
    }
    const tfs_cuda_api *api = dlsym(h, TFS_CUDA_MODULE_SYMBOL);
    if (!api) {
        dlclose(h);
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "CUDA module %s: exports no %s (not a tfserve CUDA module)", path,
                       TFS_CUDA_MODULE_SYMBOL);
    }
    if (api->abi_version != TFS_CUDA_ABI_VERSION || api->size != sizeof *api) {
        int v = api->abi_version;
        dlclose(h);
        return TFS_ERR(st, TFS_FAILED_PRECONDITION,
                       "CUDA module %s has ABI version %d; this tfserve needs version %d "
                       "(install the module built with it)", path, v, TFS_CUDA_ABI_VERSION);
    }
    *handle = h;
    *out = api;
    return TFS_OK;
}

/* The installed module only (auto: before opening it; gpu: after): whether the CUDA driver can
 * be loaded at all. Kept open when it can (the module's cudart opens it again). */
static enum tfs_code probe_driver(tfs_status *st)
{
    void *h = dlopen(DRIVER_FILE, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return TFS_OK;
    const char *e = dlerror();
    return TFS_ERR(st, TFS_FAILED_PRECONDITION, "no CUDA driver: %s",
                   e ? e : DRIVER_FILE ": dlopen failed");
}

static enum tfs_code module_open_locked(tfs_status *st)
{
    const char *env = getenv("TFS_CUDA_MODULE");
    char paths[3][PATH_MAX];
    int n = 0;
    if (env && *env) {
        snprintf(paths[n++], PATH_MAX, "%s", env);
    } else {
        n = candidates(paths);
    }
    int found = -1;
    for (int i = 0; i < n && found < 0; i++)
        if (access(paths[i], F_OK) == 0)
            found = i;
    if (found < 0) {
        if (env && *env)
            return TFS_ERR(st, TFS_FAILED_PRECONDITION, "no CUDA module: TFS_CUDA_MODULE=%s: %s",
                           env, strerror(ENOENT));
        if (n < 3)   /* /proc/self/exe unreadable */
            return TFS_ERR(st, TFS_FAILED_PRECONDITION, "no CUDA module: %s is not in %s",
                           TFS_CUDA_MODULE_FILE, TFS_CUDA_MODULE_DIR);
        return TFS_ERR(st, TFS_FAILED_PRECONDITION, "no CUDA module: %s is not beside the "
                       "executable, in ../%s from it, nor in %s", TFS_CUDA_MODULE_FILE,
                       TFS_CUDA_MODULE_RELDIR, TFS_CUDA_MODULE_DIR);
    }
    tfs_device_opts o;
    tfs__device_settings(&o);
    bool installed = !(env && *env), device_auto = o.device == TFS_DEVICE_AUTO;
    enum tfs_code rc;
    if (installed && device_auto && (rc = probe_driver(st)) != TFS_OK)
        return rc;
    const tfs_cuda_api *api = NULL;
    void *h = NULL;
    if ((rc = open_file(paths[found], &h, &api, st)) != TFS_OK)
        return rc;
    if (installed && !device_auto && (rc = probe_driver(st)) != TFS_OK) {
        dlclose(h);
        return rc;
    }
    tfs__cuda = api;
    return TFS_OK;
}

enum tfs_code tfs__cuda_module_open(tfs_status *st)
{
    pthread_mutex_lock(&module_mu);
    enum tfs_code rc = tfs__cuda ? TFS_OK : module_open_locked(st);
    pthread_mutex_unlock(&module_mu);
    if (rc == TFS_OK)
        tfs_status_clear(st);
    return rc;
}
