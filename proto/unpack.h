/* Bounded unpacking of protobuf wire data from peers and files. protobuf-c's unpack recurses once
 * per nested message with no limit, so a few kilobytes of `0x0a 0x..` nesting through a recursive
 * type (TensorProto -> variant_val -> tensors -> ..., AttrValue lists, StructuredValue) overflow
 * the stack. tfs_proto_unpack_bounded walks the wire data first, without recursion, and refuses
 * nesting deeper than protobuf's own default limit before protobuf-c sees it.
 *
 *     ProtobufCMessage *m;
 *     if (tfs_proto_unpack_bounded(&tensorflow__serving__predict_request__descriptor, NULL,
 *                                  data, len, &m, &st) != TFS_OK)
 *         ... st.msg is "message nests deeper than 100 levels" or "malformed ..."
 *     ...
 *     protobuf_c_message_free_unpacked(m, NULL);
 *
 * Only fields the descriptor declares as messages are descended; unknown fields and other
 * length-delimited fields (bytes, strings, packed numbers, google.protobuf.Any's value) are
 * skipped, as protobuf-c does. The walk accepts exactly the framing protobuf-c's own scan accepts
 * (tags of at most 5 bytes whose first byte has field-number bits, varints of at most 10 bytes,
 * lengths of at most 5 bytes and INT_MAX, wire types 0, 1, 2 and 5) and never reads outside
 * data[0..len).
 * Thread-safety: reentrant; no allocation besides protobuf-c's own.
 */
#ifndef TFS_PROTO_UNPACK_H
#define TFS_PROTO_UNPACK_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/status.h"

/* Sub-messages nested inside the top-level message that are accepted (protobuf's default
 * recursion limit): 100 levels pass, 101 are refused. */
#define TFS_PROTO_MAX_DEPTH 100

/* Checks that data[0..len), read as a desc, nests at most TFS_PROTO_MAX_DEPTH levels.
 * INVALID_ARGUMENT "message nests deeper than 100 levels (at byte N)" when deeper; DATA_LOSS
 * "malformed <type> (...)" when the framing is broken before that. */
enum tfs_code tfs_proto_check_depth(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                    size_t len, tfs_status *st);

/* tfs_proto_check_depth, then protobuf_c_message_unpack with alloc (NULL: malloc). On success *out
 * is the message, freed with protobuf_c_message_free_unpacked(*out, alloc); on failure *out is
 * NULL and the code is tfs_proto_check_depth's, or DATA_LOSS "malformed <type> (N bytes)" when
 * protobuf-c refuses the data (or its allocator failed: callers that care track that in alloc). */
enum tfs_code tfs_proto_unpack_bounded(const ProtobufCMessageDescriptor *desc,
                                       ProtobufCAllocator *alloc, const uint8_t *data, size_t len,
                                       ProtobufCMessage **out, tfs_status *st);

#endif
