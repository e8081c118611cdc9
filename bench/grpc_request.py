"""Writes the gRPC-framed request bodies that bench/grpc_predict.sh and bench/v2_grpc.sh send
with h2load, and checks framed responses. Run with /usr/bin/python3 and PYTHONPATH at protoc
--python_out stubs generated from the project's proto/ (the scripts do that in a temp dir).

  grpc_request.py write FILE            PredictRequest: model half_plus_two, x = float [3] {1, 2, 5}
  grpc_request.py check FILE            PredictResponse: output y = [2.5, 3.0, 4.5], else exit 1
  grpc_request.py write-v2 FILE KIND    KServe v2 ModelInferRequest with the same x, KIND "typed"
                                        (fp32_contents) or "raw" (raw_input_contents)
  grpc_request.py check-v2 FILE         ModelInferResponse: y = [2.5, 3.0, 4.5], typed or raw
A gRPC message on the wire is 1 flag byte (0: not compressed), a 4-byte big-endian length, then
the serialized protobuf."""
import struct
import sys

from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2


def frame(body):
    return struct.pack(">BI", 0, len(body)) + body


def unframe(path):
    data = open(path, "rb").read()
    if len(data) < 5:
        sys.exit("grpc_request: response of %d bytes has no gRPC frame" % len(data))
    flag, n = struct.unpack(">BI", data[:5])
    if flag != 0 or len(data) != 5 + n:
        sys.exit("grpc_request: bad gRPC frame (flag %d, length %d, %d bytes)" % (flag, n, len(data)))
    return data[5:]


def write(path):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    x = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0, 2.0, 5.0])
    x.tensor_shape.dim.add(size=3)
    req.inputs["x"].CopyFrom(x)
    with open(path, "wb") as f:
        f.write(frame(req.SerializeToString()))


def check(path):
    resp = predict_pb2.PredictResponse.FromString(unframe(path))
    y = resp.outputs["y"]
    vals = list(y.float_val)
    if not vals and y.tensor_content:
        vals = list(struct.unpack("<%df" % (len(y.tensor_content) // 4), y.tensor_content))
    if vals != [2.5, 3.0, 4.5]:
        sys.exit("grpc_request: output y = %r, expected [2.5, 3.0, 4.5]" % vals)


def write_v2(path, kind):
    from kserve import grpc_predict_v2_pb2 as v2
    x = [1.0, 2.0, 5.0]
    req = v2.ModelInferRequest(model_name="half_plus_two")
    t = req.inputs.add(name="x", datatype="FP32", shape=[3])
    if kind == "raw":
        req.raw_input_contents.append(struct.pack("<3f", *x))
    else:
        t.contents.fp32_contents.extend(x)
    with open(path, "wb") as f:
        f.write(frame(req.SerializeToString()))


def check_v2(path):
    from kserve import grpc_predict_v2_pb2 as v2
    resp = v2.ModelInferResponse.FromString(unframe(path))
    if resp.raw_output_contents:
        data = resp.raw_output_contents[0]
        vals = list(struct.unpack("<%df" % (len(data) // 4), data))
    else:
        vals = list(resp.outputs[0].contents.fp32_contents) if resp.outputs else []
    if [o.name for o in resp.outputs] != ["y"] or vals != [2.5, 3.0, 4.5]:
        sys.exit("grpc_request: v2 outputs %r = %r, expected y = [2.5, 3.0, 4.5]"
                 % ([o.name for o in resp.outputs], vals))


if __name__ == "__main__":
    cmds = {"write": (write, 3), "check": (check, 3), "write-v2": (write_v2, 4),
            "check-v2": (check_v2, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) != cmds[sys.argv[1]][1]:
        sys.exit(__doc__)
    cmds[sys.argv[1]][0](*sys.argv[2:])
