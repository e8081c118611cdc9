/* Bounded unpacking: an iterative walk over the wire data, with an explicit stack of the messages
 * entered, before protobuf-c's recursive unpack (unpack.h). */
#include "proto/unpack.h"

#include <limits.h>
#include <stdbool.h>

#include "runtime/buf.h"

/* One message being walked: its type and where its bytes end. */
typedef struct frame {
    const ProtobufCMessageDescriptor *desc;
    size_t                            end;
} frame;

/* tfs_varint_get over data[*pos..end), advancing the index; *pos untouched on failure. */
static bool read_varint(const uint8_t *data, size_t end, size_t *pos, int max, uint64_t *v)
{
    const uint8_t *p = data + *pos;
    if (!tfs_varint_get(&p, data + end, max, v))
        return false;
    *pos = (size_t)(p - data);
    return true;
}

static enum tfs_code malformed(const ProtobufCMessageDescriptor *desc, const char *what,
                               size_t at, tfs_status *st)
{
    return TFS_ERR(st, TFS_DATA_LOSS, "malformed %s (%s at byte %zu)", desc->name, what, at);
}

enum tfs_code tfs_proto_check_depth(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                                    size_t len, tfs_status *st)
{
    /* stack[0] is the top-level message, stack[d] the one nested d levels inside it. */
    frame  stack[TFS_PROTO_MAX_DEPTH + 1];
    int    sp = 0;
    size_t pos = 0;
    stack[0] = (frame){desc, len};
    for (;;) {
        while (pos == stack[sp].end) {
            if (sp == 0) {
                tfs_status_clear(st);
                return TFS_OK;
            }
            sp--;
        }
        const frame *fr = &stack[sp];
        size_t       at = pos;
        uint64_t     key;
        /* As protobuf-c: a tag of at most 5 bytes whose first byte has field-number bits. */
        if ((data[pos] & 0xf8) == 0 ||
            !read_varint(data, fr->end, &pos, TFS_VARINT32_MAX_BYTES, &key))
            return malformed(desc, "bad tag", at, st);
        uint32_t field_no = (uint32_t)(key >> 3);
        unsigned wire     = (unsigned)(key & 7);
        uint64_t v;
        switch (wire) {
        case PROTOBUF_C_WIRE_TYPE_VARINT:
            if (!read_varint(data, fr->end, &pos, TFS_VARINT_MAX_BYTES, &v))
                return malformed(desc, "unterminated varint", at, st);
            break;
        case PROTOBUF_C_WIRE_TYPE_64BIT:
        case PROTOBUF_C_WIRE_TYPE_32BIT: {
            size_t n = wire == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
            if (fr->end - pos < n)
                return malformed(desc, "truncated fixed-size field", at, st);
            pos += n;
            break;
        }
        case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED: {
            if (!read_varint(data, fr->end, &pos, TFS_VARINT32_MAX_BYTES, &v) || v > INT_MAX ||
                v > fr->end - pos)
                return malformed(desc, "bad length", at, st);
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(fr->desc, field_no);
            if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE) {
                pos += (size_t)v;   /* unknown, bytes, string or packed: never descended */
                break;
            }
            if (sp == TFS_PROTO_MAX_DEPTH)
                return TFS_ERR(st, TFS_INVALID_ARGUMENT,
                               "message nests deeper than %d levels (at byte %zu)",
                               TFS_PROTO_MAX_DEPTH, at);
            stack[++sp] = (frame){f->descriptor, pos + (size_t)v};
            break;
        }
        default:   /* groups (3, 4) and 6, 7: protobuf-c refuses them too */
            return malformed(desc, "unsupported wire type", at, st);
        }
    }
}

enum tfs_code tfs_proto_unpack_bounded(const ProtobufCMessageDescriptor *desc,
                                       ProtobufCAllocator *alloc, const uint8_t *data, size_t len,
                                       ProtobufCMessage **out, tfs_status *st)
{
    *out = NULL;
    enum tfs_code code = tfs_proto_check_depth(desc, data, len, st);
    if (code != TFS_OK)
        return code;
    if (!(*out = protobuf_c_message_unpack(desc, alloc, len, data)))
        return TFS_ERR(st, TFS_DATA_LOSS, "malformed %s (%zu bytes)", desc->name, len);
    return TFS_OK;
}
