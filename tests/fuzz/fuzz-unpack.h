/* The checked bounded unpack the gRPC request drivers share (fuzz_predict_request,
 * fuzz_infer_request): tfs__grpc_unpack must agree with proto/unpack.h's depth check, and every
 * refusal is INVALID_ARGUMENT with a message. Aborts (a libFuzzer finding) otherwise.
 */
#ifndef TFS_TESTS_FUZZ_FUZZ_UNPACK_H
#define TFS_TESTS_FUZZ_FUZZ_UNPACK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/unpack.h"
#include "server/grpc-impl.h"

/* Prints "DRIVER: WHAT: DETAIL" and aborts. */
static void fuzz_fail(const char *driver, const char *what, const char *detail)
{
    fprintf(stderr, "%s: %s%s%s\n", driver, what, detail ? ": " : "", detail ? detail : "");
    abort();
}

/* The unpacked message (free with tfs__grpc_free_unpacked), or NULL when it was rightly refused. */
static ProtobufCMessage *fuzz_unpack_checked(const char *driver,
                                            const ProtobufCMessageDescriptor *d,
                                            const uint8_t *data, size_t size)
{
    tfs_status        depth_st, st;
    enum tfs_code     depth = tfs_proto_check_depth(d, data, size, &depth_st);
    ProtobufCMessage *msg = tfs__grpc_unpack(d, data, size, &st);
    if (!msg) {
        if (st.code != TFS_INVALID_ARGUMENT || !st.msg[0])
            fuzz_fail(driver, "a refused request without INVALID_ARGUMENT and a message", st.msg);
        if ((depth == TFS_INVALID_ARGUMENT) != (strstr(st.msg, "nests deeper") != NULL))
            fuzz_fail(driver, "the refusal does not match the depth check", st.msg);
        return NULL;
    }
    if (depth != TFS_OK)
        fuzz_fail(driver, "unpacked although the depth check refuses it", depth_st.msg);
    return msg;
}

#endif
