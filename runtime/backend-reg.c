/* The backends this build has and the process's device settings (device.h, backend-impl.h).
 * Backends are listed statically: CUDA under TFS_USE_CUDA (runtime/cuda/backend.c), nothing
 * else; the CPU is the op table itself. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend-impl.h"
#include "runtime/cuda/gpu-api.h"

static pthread_mutex_t settings_mu = PTHREAD_MUTEX_INITIALIZER;
static tfs_device_opts settings = {
    .device = TFS_DEVICE_CPU,
    .memory_fraction = TFS_DEVICE_MEMORY_FRACTION,
    .executors = TFS_DEVICE_EXECUTORS,
};

tfs_device_opts tfs_device_opts_default(void)
{
    tfs_device_opts o;
    memset(&o, 0, sizeof o);
    o.device = TFS_DEVICE_CPU;
    o.memory_fraction = TFS_DEVICE_MEMORY_FRACTION;
    o.executors = TFS_DEVICE_EXECUTORS;
    return o;
}

enum tfs_code tfs_runtime_set_device(const tfs_device_opts *o, tfs_status *st)
{
    if (o->device != TFS_DEVICE_CPU && o->device != TFS_DEVICE_AUTO &&
        o->device != TFS_DEVICE_GPU)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "device must be cpu, auto or gpu, got %d",
                       (int)o->device);
    if (o->gpu_id < 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "gpu id %d is negative", o->gpu_id);
    if (!(o->memory_fraction >= 0.0 && o->memory_fraction <= 1.0))
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "GPU memory fraction %g is not in [0, 1]",
                       o->memory_fraction);
    tfs_device_opts v = *o;
    if (v.memory_fraction == 0.0)
        v.memory_fraction = TFS_DEVICE_MEMORY_FRACTION;
    if (v.executors <= 0)
        v.executors = TFS_DEVICE_EXECUTORS;
    if (v.executors > 64)
        v.executors = 64;
    pthread_mutex_lock(&settings_mu);
    settings = v;
    pthread_mutex_unlock(&settings_mu);
    tfs_status_clear(st);
    return TFS_OK;
}

void tfs__device_settings(tfs_device_opts *out)
{
    pthread_mutex_lock(&settings_mu);
    *out = settings;
    pthread_mutex_unlock(&settings_mu);
}

enum tfs_code tfs_device_parse(const char *text, enum tfs_device *device, int *gpu_id,
                               tfs_status *st)
{
    *gpu_id = 0;
    if (!text || !strcmp(text, "cpu")) {
        *device = TFS_DEVICE_CPU;
    } else if (!strcmp(text, "auto")) {
        *device = TFS_DEVICE_AUTO;
    } else if (!strcmp(text, "gpu")) {
        *device = TFS_DEVICE_GPU;
    } else if (!strncmp(text, "gpu:", 4) && text[4] >= '0' && text[4] <= '9') {
        char *end;
        errno = 0;
        long id = strtol(text + 4, &end, 10);
        if (*end || errno || id > 1024)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "device '%s': expected gpu:N", text);
        *device = TFS_DEVICE_GPU;
        *gpu_id = (int)id;
    } else {
        return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                       "device '%s': expected auto, cpu, gpu or gpu:N", text);
    }
    tfs_status_clear(st);
    return TFS_OK;
}

/* Tests: a stand-in for GPU 0..N (backend-impl.h). */
static tfs_backend *_Atomic fake_gpu;

void tfs__backend_set_fake(tfs_backend *b)
{
    atomic_store(&fake_gpu, b);
}

static bool use_fake(tfs_backend **out)
{
    *out = atomic_load(&fake_gpu);
    return *out != NULL;
}

#ifdef TFS_USE_CUDA

int tfs_runtime_gpu_count(char *why, size_t n)
{
    return tfs__cuda_gpu_count(why, n);
}

enum tfs_code tfs__backend_gpu(int id, tfs_backend **out, tfs_status *st)
{
    if (use_fake(out))
        return TFS_OK;
    tfs_device_opts o;
    tfs__device_settings(&o);
    return tfs__cuda_backend_open(id, &o, out, st);
}

#else

static const char no_cuda[] = "no GPU: tfserve was built without CUDA";

int tfs_runtime_gpu_count(char *why, size_t n)
{
    if (why && n)
        snprintf(why, n, "%s", no_cuda);
    return 0;
}

enum tfs_code tfs__backend_gpu(int id, tfs_backend **out, tfs_status *st)
{
    (void)id;
    if (use_fake(out))
        return TFS_OK;
    return TFS_ERR(st, TFS_FAILED_PRECONDITION, "%s", no_cuda);
}

#endif

bool tfs_runtime_serving_may_use_gpu(void)
{
    tfs_device_opts o;
    tfs__device_settings(&o);
    tfs_backend *fake;
    return o.device != TFS_DEVICE_CPU && (use_fake(&fake) || tfs_runtime_gpu_count(NULL, 0) > 0);
}
