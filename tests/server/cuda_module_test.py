#!/usr/bin/python3
"""System test of the CUDA module opened at run time (runtime/cuda/module.c), on the real tfserve
serving the bundled half_plus_two over loopback REST (urllib), the answers checked against the
model's definition y = 0.5 x + 2:

  - tfserve links no CUDA library (ldd), while the module built beside it does link cudart;
  - --device=cpu with the module beside tfserve and TFS_CUDA_MODULE naming a bad one: serves,
    and neither is mapped into the process (/proc/PID/maps) nor named in the log;
  - TFS_CUDA_MODULE naming a missing file: --device=auto serves on the CPU and logs one executor
    line naming the file; --device=gpu fails the version's load (END, FAILED_PRECONDITION) with
    that reason in the model's status, and the server keeps answering;
  - a module of another ABI version, and one that needs a library the loader cannot find: the
    load fails with "ABI version 2; this tfserve needs version 1" / the missing library's name;
  - the fake device module (host memory standing in for a GPU): --device=gpu places the graph's
    Mul and Add on "gpu:0" (the executor line says so), the module is mapped, and the answers
    are the same as on the CPU;
  - that GPU gone (cudaGetDeviceCount failing) before version 2 appears: with auto version 2
    loads on the CPU with the reason logged; with gpu its load fails with the reason and
    version 1 keeps serving;
  - the real module (where the build made one) with --device=auto: on this machine's GPU, or on
    the CPU with the reason (no driver, no GPU) in one line.

With --layout SOURCE it checks the GPU image's file tree instead (docker/Dockerfile.gpu), as
docker/collect-rootfs.sh --gpu assembles it from BUILD, with tfserve run from it the way a
container runs it without a GPU: chrooted (in a private mount namespace with /proc, /dev and /sys
bound, as uid 10001), so it loads the layout's libraries and finds no driver whatever the host has:

  - the layout holds the module beside tfserve and every library it loads (the loader inside the
    chroot resolves all of them, with no ld.so.cache), cuDNN's libraries libcudnn.so.9 opens
    itself (the same set as the toolkit's), and no toolkit (nvcc, headers, static libraries), no
    NVRTC and no driver;
  - --device=auto serves half_plus_two on the CPU, logging one executor line that says "no CUDA
    driver", with no CUDA library mapped; --device=gpu fails the load with that reason;
  - libcudnn.so.9 taken out of the layout: the load fails naming it; the ABI stub in the module's
    place: refused with both ABI versions named.

Skipped (77), saying why, where the build made no CUDA module or chroot is not allowed.

Prints "N passed, M failed"; exit 1 on a failure.
Run: /usr/bin/python3 cuda_module_test.py --build BUILD --fake FAKE.so --abi ABI.so --needs NEEDS.so
     /usr/bin/python3 cuda_module_test.py --build BUILD --layout SOURCE [--abi ABI.so]
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

MODEL = "half_plus_two"
CUDA_LIBS = re.compile(r"lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nvrtc)\.so")
# Runs "$@" chrooted into $0 as a container would: its own mounts (gone with the process), the
# kernel's file systems tfserve reads (/proc/self/exe finds the module), the image's user.
CHROOT = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
          'for d in proc dev sys; do mount --rbind "/$d" "$0/$d" || exit 1; done; '
          'exec chroot --userspec=10001:10001 "$0" "$@"']
failures = []
passes = 0


def check(cond, what):
    global passes
    if cond:
        passes += 1
    else:
        failures.append(what)
        print("FAIL: " + what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """tfserve serving half_plus_two on free ports, with the environment given; always stopped."""

    def __init__(self, build, tmp, device, module=None, base=None, env_extra=None, root=None):
        """root: run /usr/bin/tfserve of that image layout, chrooted (CHROOT)."""
        self.rest = free_port()
        env = dict(os.environ)
        for k in ("TFS_CUDA_MODULE", "LD_LIBRARY_PATH"):
            env.pop(k, None)
        if module is not None:
            env["TFS_CUDA_MODULE"] = module
        env.update(env_extra or {})
        self.logpath = os.path.join(tmp, "tfserve-%d.log" % self.rest)
        self.log = open(self.logpath, "w+")
        if root:
            argv = CHROOT + [root, "/usr/bin/tfserve"]
            base = base or "/models/" + MODEL
        else:
            argv = [os.path.join(build, "server", "tfserve")]
        self.proc = subprocess.Popen(
            argv + ["--port=%d" % free_port(),
                    "--rest_api_port=%d" % self.rest, "--model_name=" + MODEL,
                    "--model_base_path=" + (base or os.path.join(build, "models", MODEL)),
                    "--device=" + device], stdout=self.log, stderr=subprocess.STDOUT, env=env)

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.rest, path),
                                        timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def version_status(self, version=None):
        """The status of `version` (default: the first listed) once its load has ended
        (AVAILABLE or END), or None."""
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return None
            try:
                code, doc = self.get("/v1/models/" + MODEL)
                vs = [v for v in doc.get("model_version_status", [])
                      if version is None or v["version"] == str(version)]
                if code == 200 and vs and vs[0]["state"] in ("AVAILABLE", "END"):
                    return vs[0]
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        return None

    def predict(self, xs):
        req = urllib.request.Request(
            "http://127.0.0.1:%d/v1/models/%s:predict" % (self.rest, MODEL),
            data=json.dumps({"instances": xs}).encode())
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())["predictions"]

    def maps(self):
        try:
            with open("/proc/%d/maps" % self.proc.pid) as f:
                return f.read()
        except OSError:   # exited: a check before this one says so
            return ""

    def logs(self):
        self.log.flush()
        with open(self.logpath) as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


XS = [1.0, 2.0, 5.0]
WANT = [0.5 * x + 2.0 for x in XS]


def executor_lines(log):
    return [ln for ln in log.splitlines() if "executor: " in ln]


def serves(srv, what, version=None):
    vs = srv.version_status(version)
    check(vs is not None and vs["state"] == "AVAILABLE", "%s: version AVAILABLE (%s)\n%s"
          % (what, vs, srv.logs()[-2000:]))
    if vs and vs["state"] == "AVAILABLE":
        check(srv.predict(XS) == WANT, "%s: predictions %s" % (what, WANT))


def load_fails(srv, needles, what, version=None):
    vs = srv.version_status(version)
    check(vs is not None and vs["state"] == "END", "%s: version END (%s)" % (what, vs))
    if not vs or vs["state"] != "END":
        return
    st = vs.get("status", {})
    msg = st.get("error_message", "")
    check(st.get("error_code") == "FAILED_PRECONDITION", "%s: FAILED_PRECONDITION (%s)"
          % (what, st))
    for n in needles:
        check(n in msg, "%s: status names %r: %s" % (what, n, msg))
    code, _ = srv.get("/v1/models/" + MODEL)
    check(code == 200, "%s: the server still answers" % what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--fake")
    ap.add_argument("--abi")
    ap.add_argument("--needs")
    ap.add_argument("--layout", metavar="SOURCE", help="check the GPU image's layout instead")
    a = ap.parse_args()
    want = ["build"] + (["abi"] if a.abi else []) if a.layout else ["build", "fake", "abi", "needs"]
    for k in want:
        if getattr(a, k) is None:
            ap.error("--%s is required" % k)
        setattr(a, k, os.path.abspath(getattr(a, k)))   # tfserve wants an absolute base path
    tfserve = os.path.join(a.build, "server", "tfserve")
    real = os.path.join(a.build, "server", "libtfserve-cuda.so")
    if a.layout and not os.path.exists(real):
        print("SKIP cuda-image-layout: %s is absent: the CUDA build is off (nvcc or cuDNN not "
              "found at configure time, or -DTFS_CUDA=OFF)" % real)
        return 77
    if a.layout and os.geteuid() != 0:
        print("SKIP cuda-image-layout: chroot and bind mounts need root")
        return 77
    for path in [tfserve, os.path.join(a.build, "models", MODEL)] + [getattr(a, k) for k in want]:
        if not os.path.exists(path):
            print("cuda_module_test: %s is missing (build first)" % path)
            return 1
    tmp = tempfile.mkdtemp(prefix="tfs-cuda-module-")
    try:
        if a.layout:
            rc = layout_checks(a, real, tmp)
            if rc:
                return rc
        else:
            checks(a, tfserve, real, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passes, len(failures)))
    return 1 if failures else 0


def checks(a, tfserve, real, tmp):
    ldd = subprocess.run(["ldd", tfserve], capture_output=True, text=True).stdout
    check(ldd and not CUDA_LIBS.search(ldd), "ldd tfserve shows no CUDA library:\n" + ldd)
    if os.path.exists(real):
        ldd = subprocess.run(["ldd", real], capture_output=True, text=True).stdout
        check("libcudart" in ldd, "the module links cudart itself:\n" + ldd)

    # --device=cpu: nothing opened, even with a bad module named and the real one beside tfserve.
    srv = Server(a.build, tmp, "cpu", module=a.abi)
    try:
        serves(srv, "cpu")
        maps = srv.maps()
        check("libtfserve-cuda" not in maps and "tfs-test-cuda" not in maps
              and not CUDA_LIBS.search(maps), "cpu: no module or CUDA library mapped")
        check("CUDA module" not in srv.logs() and not executor_lines(srv.logs()),
              "cpu: the log says nothing of CUDA")
    finally:
        srv.stop()

    missing = os.path.join(tmp, "none", "libtfserve-cuda.so")
    reason = "no CUDA module: TFS_CUDA_MODULE=%s: No such file or directory" % missing
    srv = Server(a.build, tmp, "auto", module=missing)
    try:
        serves(srv, "auto, module absent")
        lines = executor_lines(srv.logs())
        check(len(lines) == 1 and "executor: cpu (device auto): no GPU: " + reason in lines[0],
              "auto, module absent: one executor line with the reason: %s" % lines)
    finally:
        srv.stop()

    srv = Server(a.build, tmp, "gpu", module=missing)
    try:
        load_fails(srv, ["device gpu:0: no GPU: " + reason], "gpu, module absent")
    finally:
        srv.stop()

    srv = Server(a.build, tmp, "gpu", module=a.abi)
    try:
        load_fails(srv, ["CUDA module %s has ABI version 2; this tfserve needs version 1" % a.abi],
                   "gpu, other ABI")
        check("tfs-test-cuda-abi" not in srv.maps(), "gpu, other ABI: the module was closed")
    finally:
        srv.stop()

    srv = Server(a.build, tmp, "gpu", module=a.needs)
    try:
        load_fails(srv, ["CUDA module %s: " % a.needs,
                         "libtfs-test-absent.so: cannot open shared object file"],
                   "gpu, dependency missing")
    finally:
        srv.stop()

    srv = Server(a.build, tmp, "gpu", module=a.fake)
    try:
        serves(srv, "gpu, fake device")
        lines = executor_lines(srv.logs())
        # One line per session the load makes (the graph, then its serving rewrite).
        check(lines and all(re.search(r"executor: gpu:0 \(device requested\): 2 of the "
                                      r"graph's \d+ ops run there", ln) for ln in lines),
              "gpu, fake device: Mul and Add placed on gpu:0: %s" % lines)
        check(os.path.basename(a.fake) in srv.maps(), "gpu, fake device: the module is mapped")
    finally:
        srv.stop()

    # The GPU falls off the bus after version 1 loaded on it: version 2's load finds no device.
    # auto loads it on the CPU, saying why; gpu fails it and version 1 keeps serving.
    for device in ("auto", "gpu"):
        base = os.path.join(tmp, "base-" + device)
        gone = os.path.join(tmp, "gone-" + device)
        shutil.copytree(os.path.join(a.build, "models", MODEL, "1"), os.path.join(base, "1"))
        srv = Server(a.build, tmp, device, module=a.fake, base=base,
                     env_extra={"TFS_FAKE_GPU_GONE": gone})
        what = "%s, the GPU gone before version 2" % device
        try:
            serves(srv, what + ": version 1", version=1)
            open(gone, "w").close()
            shutil.copytree(os.path.join(base, "1"), os.path.join(tmp, "v2-" + device))
            os.rename(os.path.join(tmp, "v2-" + device), os.path.join(base, "2"))
            reason = "no GPU: cudaGetDeviceCount: the fake device is gone"
            if device == "auto":
                serves(srv, what + ": version 2", version=2)
                lines = executor_lines(srv.logs())
                check(lines and re.search(r"executor: gpu:0 ", lines[0])
                      and "executor: cpu (device auto): " + reason in lines[-1],
                      what + ": version 1 on gpu:0, version 2 on the CPU: %s" % lines)
            else:
                load_fails(srv, ["device gpu:0: " + reason], what + ": version 2", version=2)
                serves(srv, what + ": version 1 still", version=1)
        finally:
            srv.stop()

    if os.path.exists(real):
        srv = Server(a.build, tmp, "auto")
        try:
            serves(srv, "auto, the real module")
            lines = executor_lines(srv.logs())
            check(len(lines) == 1 and re.search(r"executor: (gpu:0|cpu \(device auto\): no GPU: "
                                                r"(no CUDA driver|cudaGetDeviceCount))",
                                                lines[0]),
                  "auto, the real module: one executor line: %s" % lines)
        finally:
            srv.stop()


def collect(a, root, *opts):
    """docker/collect-rootfs.sh [opts] BUILD ROOT; its size in bytes, or None on failure."""
    r = subprocess.run(["sh", os.path.join(a.layout, "docker", "collect-rootfs.sh")] + list(opts)
                       + [a.build, root], capture_output=True, text=True)
    check(r.returncode == 0, "collect-rootfs.sh %s: %s" % (" ".join(opts), r.stderr))
    if r.returncode != 0:
        return None
    return sum(os.lstat(os.path.join(d, f)).st_size
               for d, _, fs in os.walk(root) for f in fs)


def layout_checks(a, real, tmp):
    root = os.path.join(tmp, "rootfs")
    cpu_size = collect(a, os.path.join(tmp, "cpu-rootfs"))
    size = collect(a, root, "--gpu")
    if size is None or cpu_size is None:
        return None
    print("layout sizes: CPU %d bytes, GPU %d bytes (+%d)" % (cpu_size, size, size - cpu_size))
    for d in ("proc", "dev", "sys"):   # what a container runtime mounts
        os.makedirs(os.path.join(root, d), exist_ok=True)
    probe = subprocess.run(CHROOT + [root, "/usr/bin/tfserve", "--help"],
                           capture_output=True, text=True)
    if probe.returncode != 0 and re.search(r"^(unshare|mount|chroot): ", probe.stderr, re.M):
        print("SKIP cuda-image-layout: cannot chroot here: " + probe.stderr.strip())
        return 77
    check(probe.returncode == 0, "tfserve --help in the layout: %s" % probe.stderr[-2000:])

    # What the module needs, as the layout's own loader resolves it (no ld.so.cache there).
    libdir = "/usr/lib/x86_64-linux-gnu"
    module = "/usr/bin/libtfserve-cuda.so"
    ls = subprocess.run(CHROOT + [root, "/lib64/ld-linux-x86-64.so.2", "--list", module],
                        capture_output=True, text=True).stdout
    check("not found" not in ls and all(
        re.search(r"\t%s\.\d+ => %s/%s\.\d+ " % (n, libdir, n), ls)
        for n in ("libcudart.so", "libcublas.so", "libcublasLt.so", "libcudnn.so")),
        "the layout's loader resolves the module's CUDA libraries in %s:\n%s" % (libdir, ls))
    host = subprocess.run(["ldd", real], capture_output=True, text=True).stdout
    m = re.search(r"libcudnn\.so\.\d+ => (\S+)", host)
    want = sorted(f for f in os.listdir(os.path.dirname(m.group(1)))
                  if re.fullmatch(r"libcudnn\w*\.so\.\d+", f)) if m else None
    got = sorted(f for f in os.listdir(root + libdir) if f.startswith("libcudnn"))
    check(want and got == want, "cuDNN's libraries in the layout: %s, want %s" % (got, want))
    for sub in got:
        ls = subprocess.run(CHROOT + [root, "/lib64/ld-linux-x86-64.so.2", "--list",
                                      libdir + "/" + sub], capture_output=True, text=True)
        check(ls.returncode == 0 and "not found" not in ls.stdout,
              "%s resolves in the layout:\n%s%s" % (sub, ls.stdout, ls.stderr))
    extra = [os.path.join(d, f)[len(root):] for d, _, fs in os.walk(root) for f in fs
             if f in ("nvcc", "ptxas") or f.endswith((".h", ".a"))
             or re.match(r"lib(cuda|nvrtc|nvidia-)", f) and not f.startswith("libcudart")]
    check(not extra, "no toolkit, NVRTC or driver in the layout: %s" % extra)

    driver = "no GPU: no CUDA driver: libcuda.so.1: cannot open shared object file"
    srv = Server(a.build, tmp, "auto", root=root)
    try:
        serves(srv, "layout, auto")
        lines = executor_lines(srv.logs())
        check(len(lines) == 1 and "executor: cpu (device auto): " + driver in lines[0],
              "layout, auto: one executor line saying there is no driver: %s" % lines)
        check(not CUDA_LIBS.search(srv.maps()), "layout, auto: no CUDA library mapped")
    finally:
        srv.stop()
    srv = Server(a.build, tmp, "gpu", root=root)
    try:
        load_fails(srv, ["device gpu:0: " + driver], "layout, gpu")
    finally:
        srv.stop()

    # A library missing from the image, as if the collect step had left libcudnn out.
    name = os.path.basename(m.group(1)) if m else "libcudnn.so.9"
    cudnn = root + libdir + "/" + name
    os.rename(cudnn, cudnn + ".away")
    srv = Server(a.build, tmp, "gpu", root=root)
    try:
        load_fails(srv, ["CUDA module %s: %s: cannot open shared object file" % (module, name)],
                   "layout without libcudnn, gpu")
    finally:
        srv.stop()
        os.rename(cudnn + ".away", cudnn)

    # A module from another build than its tfserve.
    if a.abi:
        shutil.copyfile(a.abi, root + module)
        srv = Server(a.build, tmp, "gpu", root=root)
        try:
            load_fails(srv, ["CUDA module %s has ABI version 2; this tfserve needs version 1"
                             % module], "layout with another ABI's module, gpu")
        finally:
            srv.stop()
    return None


if __name__ == "__main__":
    sys.exit(main())
