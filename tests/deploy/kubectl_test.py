#!/usr/bin/python3
"""kubectl's own reading of deploy/'s manifests, offline.

`kubectl apply --dry-run=client --validate=false -f FILE` for every manifest (kustomization.yaml
aside, which is no API object) and `-k deploy`, then `kubectl kustomize deploy`. Even a client
dry run asks the API server which kinds exist (discovery) and whether each object is there, so
the test serves kubectl a stand-in on loopback: the discovery documents of the API groups these
manifests may use (Kubernetes' core, apps, autoscaling/v2, policy/v1, batch; KServe's
serving.kserve.io; Kubeflow's MPIJob) and 404 for every object. So kubectl decodes each
document, maps its apiVersion and kind to a resource (a kind or version the cluster would not
have fails, as it would in a cluster), and reports each object "created (dry run)".

Exit 77 (skipped) when kubectl is not on PATH. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 kubectl_test.py --source SOURCE_DIR
"""
import argparse
import glob
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

PASSED = 0
FAILED = 0

# (group, version): [(resource, kind, namespaced)]
API = {
    ("", "v1"): [("services", "Service", True), ("configmaps", "ConfigMap", True),
                 ("secrets", "Secret", True), ("serviceaccounts", "ServiceAccount", True),
                 ("persistentvolumeclaims", "PersistentVolumeClaim", True),
                 ("namespaces", "Namespace", False)],
    ("apps", "v1"): [("deployments", "Deployment", True), ("statefulsets", "StatefulSet", True)],
    ("autoscaling", "v2"): [("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)],
    ("policy", "v1"): [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    ("batch", "v1"): [("jobs", "Job", True)],
    ("serving.kserve.io", "v1alpha1"): [
        ("clusterservingruntimes", "ClusterServingRuntime", False),
        ("servingruntimes", "ServingRuntime", True)],
    ("serving.kserve.io", "v1beta1"): [("inferenceservices", "InferenceService", True)],
    ("kubeflow.org", "v2beta1"): [("mpijobs", "MPIJob", True)],
}


def check(cond, what):
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print("FAIL: " + what, flush=True)
    return cond


class Discovery(http.server.BaseHTTPRequestHandler):
    """Kubernetes' legacy discovery documents for API, and 404 NotFound for everything else."""

    def log_message(self, *args):
        pass

    def send(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/api":
            return self.send(200, {"kind": "APIVersions", "versions": ["v1"]})
        if path == "/apis":
            groups = {}
            for g, v in API:
                if g:
                    groups.setdefault(g, []).append(v)
            return self.send(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g,
                 "versions": [{"groupVersion": g + "/" + v, "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": g + "/" + vs[-1], "version": vs[-1]}}
                for g, vs in groups.items()]})
        for (g, v), resources in API.items():
            gv = g + "/" + v if g else v
            if path == ("/apis/" + gv if g else "/api/" + v):
                return self.send(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                       "groupVersion": gv, "resources": [
                    {"name": r, "singularName": k.lower(), "namespaced": ns, "kind": k,
                     "verbs": ["create", "delete", "get", "list", "patch", "update"]}
                    for r, k, ns in resources]})
        self.send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "NotFound", "code": 404, "message": "not found"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("SKIP: no kubectl on PATH (scripts/setup.sh installs Debian's kubernetes-client)")
        return 77
    deploy = os.path.join(os.path.abspath(a.source), "deploy")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Discovery)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="tfs-kubectl-")
    # An empty kubeconfig of our own and a private cache: nothing of this machine's cluster
    # settings is read. (A missing kubeconfig file makes Debian 12's kubectl 1.20 warn on stderr.)
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=tmp)
    base = [kubectl, "--server=http://127.0.0.1:%d" % server.server_port,
            "--cache-dir=" + os.path.join(tmp, "cache"), "--request-timeout=20s"]
    try:
        files = [f for f in sorted(glob.glob(os.path.join(deploy, "*.yaml")))
                 if os.path.basename(f) != "kustomization.yaml"]
        check(files, "no manifests in " + deploy)
        for src in [["-f", f] for f in files] + [["-k", deploy]]:
            what = " ".join([src[0], os.path.relpath(src[1], os.path.dirname(deploy))])
            p = subprocess.run(base + ["apply", "--dry-run=client", "--validate=false"] + src,
                               capture_output=True, text=True, env=env, timeout=120)
            created = [l for l in p.stdout.splitlines() if l.endswith(" (dry run)")]
            check(p.returncode == 0 and created and not p.stderr.strip(),
                  "kubectl apply %s: exit %d\n%s%s" % (what, p.returncode, p.stdout, p.stderr))
            print("kubectl apply --dry-run=client %s: %s" % (what, ", ".join(created)),
                  flush=True)
        p = subprocess.run([kubectl, "kustomize", deploy], capture_output=True, text=True,
                           env=env, timeout=120)
        kinds = sorted(l.split(":", 1)[1].strip() for l in p.stdout.splitlines()
                       if l.startswith("kind:"))
        check(p.returncode == 0 and "Deployment" in kinds,
              "kubectl kustomize deploy: exit %d, kinds %s\n%s" % (p.returncode, kinds, p.stderr))
        print("kubectl kustomize deploy: %s" % ", ".join(kinds), flush=True)
    finally:
        server.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (PASSED, FAILED), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
