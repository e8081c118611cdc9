/* The one place a canonical code becomes an HTTP status (TF Serving's ToHTTPStatusCode in
 * model_servers/http_server.cc). FAILED_PRECONDITION is 400, not 412, because that is what TF
 * Serving clients see.
 */
#include "server/server-impl.h"

int tfs__http_status(enum tfs_code code)
{
    switch (code) {
    case TFS_OK:                  return 200;
    case TFS_CANCELLED:           return 499;
    case TFS_INVALID_ARGUMENT:
    case TFS_FAILED_PRECONDITION:
    case TFS_OUT_OF_RANGE:        return 400;
    case TFS_DEADLINE_EXCEEDED:   return 504;
    case TFS_NOT_FOUND:           return 404;
    case TFS_ALREADY_EXISTS:
    case TFS_ABORTED:             return 409;
    case TFS_PERMISSION_DENIED:   return 403;
    case TFS_RESOURCE_EXHAUSTED:  return 429;
    case TFS_UNIMPLEMENTED:       return 501;
    case TFS_UNAVAILABLE:         return 503;
    case TFS_UNAUTHENTICATED:     return 401;
    case TFS_UNKNOWN:
    case TFS_INTERNAL:
    case TFS_DATA_LOSS:
    default:                      return 500;
    }
}
