/* grpc.health.v1.Health/Check, gRPC's standard health protocol, as grpc's own health service
 * answers it: the empty service name is the server as a whole; the services tfserve implements
 * (tensorflow.serving.PredictionService and ModelService, KServe's
 * inference.GRPCInferenceService) report the same status, because their methods need the models; any other name is NOT_FOUND "service name unknown".
 * SERVING when tfs_health_ready (every model has an AVAILABLE version, no drain started),
 * NOT_SERVING otherwise, the same rule as REST's /readyz. Watch is not registered, so it is
 * answered UNIMPLEMENTED by the generic handler of grpc.c.
 */
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "server/grpc-impl.h"

#define SERVING     GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
#define NOT_SERVING GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING

static const char *const services[] = {
    "",
    "tensorflow.serving.PredictionService",
    "tensorflow.serving.ModelService",
    "inference.GRPCInferenceService",
};

enum tfs_code tfs__grpc_health_check(const tfs_health *h, const uint8_t *in, size_t n,
                                     uint8_t **out, size_t *out_len, tfs_status *st)
{
    Grpc__Health__V1__HealthCheckRequest *req;
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    enum tfs_code                         code;
    bool                                  known = false;

    req = (Grpc__Health__V1__HealthCheckRequest *)tfs__grpc_unpack(
        &grpc__health__v1__health_check_request__descriptor, in, n, st);
    if (!req)
        return st ? st->code : TFS_INVALID_ARGUMENT;
    const char *service = req->service ? req->service : "";
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++)
        known = known || strcmp(service, services[i]) == 0;
    if (!known) {
        code = TFS_ERR(st, TFS_NOT_FOUND, "service name unknown");
        goto done;
    }
    resp.status = tfs_health_ready(h) ? SERVING : NOT_SERVING;
    code = tfs__grpc_pack(&resp.base, out, out_len, st);
done:
    tfs__grpc_free_unpacked(req);
    return code;
}
