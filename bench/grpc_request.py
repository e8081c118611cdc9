"""Writes the gRPC-framed PredictRequest body that bench/grpc_predict.sh sends with h2load, and
checks a framed PredictResponse. Run with /usr/bin/python3 and PYTHONPATH at protoc --python_out
stubs generated from the project's proto/ (the script does that in a temp dir).

  grpc_request.py write FILE      request: model half_plus_two, input x = float [3] {1, 2, 5}
  grpc_request.py check FILE      response: output y = [2.5, 3.0, 4.5], else exit 1
A gRPC message on the wire is 1 flag byte (0: not compressed), a 4-byte big-endian length, then
the serialized protobuf."""
import struct
import sys

from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2


def write(path):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    x = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0, 2.0, 5.0])
    x.tensor_shape.dim.add(size=3)
    req.inputs["x"].CopyFrom(x)
    body = req.SerializeToString()
    with open(path, "wb") as f:
        f.write(struct.pack(">BI", 0, len(body)) + body)


def check(path):
    data = open(path, "rb").read()
    if len(data) < 5:
        sys.exit("grpc_request: response of %d bytes has no gRPC frame" % len(data))
    flag, n = struct.unpack(">BI", data[:5])
    if flag != 0 or len(data) != 5 + n:
        sys.exit("grpc_request: bad gRPC frame (flag %d, length %d, %d bytes)" % (flag, n, len(data)))
    resp = predict_pb2.PredictResponse.FromString(data[5:])
    y = resp.outputs["y"]
    vals = list(y.float_val)
    if not vals and y.tensor_content:
        vals = list(struct.unpack("<%df" % (len(y.tensor_content) // 4), y.tensor_content))
    if vals != [2.5, 3.0, 4.5]:
        sys.exit("grpc_request: output y = %r, expected [2.5, 3.0, 4.5]" % vals)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "write" else check)(sys.argv[2])
