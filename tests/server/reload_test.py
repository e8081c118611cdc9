#!/usr/bin/python3
"""System test of config reloads on the real tfserve: ModelService/HandleReloadConfigRequest from a
real gRPC client (adding a model, removing one, refusing bad configs without touching what is
served, a model that fails to load reported by the reload and by GetModelStatus) and --model_config_file_poll_wait_seconds picking up an edited file (and ignoring a broken
one). Stubs, the Server wrapper and the checks come from grpc_client_test.py. Uses the bundled demo
model only. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 reload_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expects to sit in tests/server/
import grpc_client_test as g  # noqa: E402


def config_text(models):
    """A ModelServerConfig in text format for [(name, base_path), ...]."""
    out = ["model_config_list {"]
    for name, base in models:
        out.append("  config { name: %r base_path: %r model_platform: 'tensorflow' }"
                   % (name, base))
    out.append("}")
    return "\n".join(out) + "\n"


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)   # the poller never sees half a file


def serves(srv, name):
    try:
        r = g.predict(srv, g.predict_req(name, [1.0]))
        return g.close(list(r.outputs["y"].float_val), [2.5])
    except grpc.RpcError:
        return False


def reload_req(models):
    from tensorflow_serving.apis import model_management_pb2 as mm
    req = mm.ReloadConfigRequest()
    for name, base in models:
        c = req.config.model_config_list.config.add()
        c.name = name
        c.base_path = base
        c.model_platform = "tensorflow"
    return req


def check_grpc_reload(build, demo, tmp):
    from tensorflow_serving.apis import model_management_pb2 as mm
    path = os.path.join(tmp, "grpc.config")
    write(path, config_text([("a", demo)]))
    s = g.Server(build, "a", demo, tmp, ["--model_config_file=" + path])
    try:
        reload = lambda req: s.call(g.MS + "HandleReloadConfigRequest", req,  # noqa: E731
                                    mm.ReloadConfigResponse, timeout=60)
        g.check(serves(s, "a") and not serves(s, "b"), "grpc: config file serves a, not b")
        r = reload(reload_req([("a", demo), ("b", demo)]))
        g.check(r.HasField("status") and r.status.error_code == 0 and r.status.error_message == "",
                "grpc: reload adding b answers OK: %s" % r)
        g.check(serves(s, "a") and serves(s, "b"), "grpc: after adding b, a and b serve")
        r = reload(reload_req([("b", demo)]))
        g.check(r.status.error_code == 0, "grpc: reload removing a answers OK: %s" % r)
        g.check(serves(s, "b"), "grpc: b still serves after a is removed")
        g.expect_error(lambda: g.predict(s, g.predict_req("a", [1.0])), grpc.StatusCode.NOT_FOUND,
                       "Servable not found for request: Latest(a)", "grpc: a is gone")
        # Bad configs change nothing.
        bad = mm.ReloadConfigRequest()
        bad.config.custom_model_config.type_url = "x"
        g.expect_error(lambda: reload(bad), grpc.StatusCode.INVALID_ARGUMENT,
                       "Only ModelConfigList is currently supported", "grpc: custom config refused")
        g.expect_error(lambda: reload(reload_req([("c", "relative/path")])),
                       grpc.StatusCode.INVALID_ARGUMENT, "c", "grpc: relative base path refused")
        g.expect_error(lambda: reload(reload_req([("d", demo), ("d", demo)])),
                       grpc.StatusCode.INVALID_ARGUMENT, "d", "grpc: duplicate name refused")
        g.check(serves(s, "b") and not serves(s, "c"), "grpc: b still serves after bad reloads")
        # A model whose only version cannot load: the reload reports the load error, and
        # GetModelStatus over gRPC shows that version END with the error (DATA_LOSS, naming the
        # file), while b keeps serving.
        from tensorflow_serving.apis import get_model_status_pb2 as gms
        corrupt = os.path.join(tmp, "corrupt")
        os.makedirs(os.path.join(corrupt, "3"))
        with open(os.path.join(corrupt, "3", "saved_model.pb"), "wb") as f:
            f.write(b"not a SavedModel")
        g.expect_error(lambda: reload(reload_req([("b", demo), ("corrupt", corrupt)])),
                       grpc.StatusCode.DATA_LOSS, "saved_model.pb",
                       "grpc: reload with a corrupt model fails with its load error")
        req = gms.GetModelStatusRequest()
        req.model_spec.name = "corrupt"
        st = s.call(g.MS + "GetModelStatus", req, gms.GetModelStatusResponse)
        got = [(v.version, v.state, v.status.error_code) for v in st.model_version_status]
        g.check(got == [(3, gms.ModelVersionStatus.END, grpc.StatusCode.DATA_LOSS.value[0])]
                and "saved_model.pb" in st.model_version_status[0].status.error_message,
                "grpc: GetModelStatus shows the failed load (END, DATA_LOSS): %s" % st)
        g.check(serves(s, "b"), "grpc: b still serves next to the corrupt model")
    finally:
        s.stop()


def check_polling(build, demo, tmp):
    path = os.path.join(tmp, "poll.config")
    write(path, config_text([("a", demo)]))
    s = g.Server(build, "a", demo, tmp, ["--model_config_file=" + path,
                                         "--model_config_file_poll_wait_seconds=1"])
    try:
        g.check(serves(s, "a") and not serves(s, "b"), "poll: starts serving a only")
        write(path, "# b added\n" + config_text([("a", demo), ("b", demo)]))
        deadline = time.time() + 15
        while time.time() < deadline and not serves(s, "b"):
            time.sleep(0.2)
        g.check(serves(s, "b") and serves(s, "a"), "poll: the edited file adds b")
        write(path, "model_config_list {\n  config { name: 'a' nmae: 'x' }\n}\n")
        time.sleep(2.5)
        g.check(serves(s, "a") and serves(s, "b"), "poll: a broken file changes nothing")
        logs = s.logs()
        g.check(path + ":2:22: unknown field 'nmae'" in logs,
                "poll: the broken file's error is logged with file:line:col:\n" + logs[-2000:])
        write(path, config_text([("b", demo)]))
        deadline = time.time() + 15
        while time.time() < deadline and serves(s, "a"):
            time.sleep(0.2)
        g.check(serves(s, "b") and not serves(s, "a"), "poll: fixing the file removes a")
    finally:
        s.stop()


def label_version(srv, name, label):
    """The version that answers a Predict naming `label`, or the gRPC status code's name."""
    req = g.predict_req(name, [1.0])
    req.model_spec.version_label = label
    try:
        return g.predict(srv, req).model_spec.version.value
    except grpc.RpcError as e:
        return e.code().name


def check_labels(build, demo, tmp):
    """Labels from the config file at startup (no --allow_version_labels_for_unavailable_models
    needed for versions that load, as in TF Serving) and moved by a gRPC reload."""
    from tensorflow_serving.apis import model_management_pb2 as mm
    base = os.path.join(tmp, "labelled")
    for v in ("1", "2"):
        shutil.copytree(os.path.join(demo, "1"), os.path.join(base, v))
    path = os.path.join(tmp, "labels.config")
    write(path, "model_config_list { config { name: 'm' base_path: %r model_platform: "
                "'tensorflow' model_version_policy { all {} } "
                "version_labels { key: 'stable' value: 1 } "
                "version_labels { key: 'canary' value: 2 } } }\n" % base)
    s = g.Server(build, "m", base, tmp, ["--model_config_file=" + path])
    try:
        g.check(label_version(s, "m", "stable") == 1, "labels: stable -> version 1")
        g.check(label_version(s, "m", "canary") == 2, "labels: canary -> version 2")
        g.check(label_version(s, "m", "nope") == "INVALID_ARGUMENT", "labels: unknown label")
        req = reload_req([("m", base)])
        c = req.config.model_config_list.config[0]
        c.model_version_policy.all.SetInParent()
        c.version_labels["stable"] = 2
        c.version_labels["canary"] = 3          # version 3 does not exist
        reload = lambda: s.call(g.MS + "HandleReloadConfigRequest", req,  # noqa: E731
                                mm.ReloadConfigResponse, timeout=60)
        g.expect_error(reload, grpc.StatusCode.FAILED_PRECONDITION,
                       "Request to assign label to version 3 of model m, which is not currently "
                       "available for inference", "labels: a label on an absent version is refused")
        g.check(label_version(s, "m", "canary") == 2 and label_version(s, "m", "stable") == 1,
                "labels: a refused label change keeps the old labels")
        del c.version_labels["canary"]
        r = reload()
        g.check(r.status.error_code == 0, "labels: moving stable to 2 is OK: %s" % r)
        g.check(label_version(s, "m", "stable") == 2, "labels: stable -> version 2 after reload")
        g.check(label_version(s, "m", "canary") == "INVALID_ARGUMENT",
                "labels: canary dropped by the new config")
    finally:
        s.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="tfs-reload-test-")
    try:
        g.gen_stubs(os.path.abspath(a.source), tmp)
        demo = os.path.join(build, "models", "half_plus_two")
        check_grpc_reload(build, demo, tmp)
        check_polling(build, demo, tmp)
        check_labels(build, demo, tmp)
    except Exception as e:  # a crash of the test itself is a failure
        g.check(False, "reload test raised %r" % e)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (g.PASSED, g.FAILED), flush=True)
    return 1 if g.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
