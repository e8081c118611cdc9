#!/usr/bin/python3
"""Offline check of deploy/'s manifests against what tfserve really does.

Reads every deploy/*.yaml (Debian's python3-yaml) and, for each pod template or serving runtime
that runs tfserve (image tfserve:..., the image's entrypoint or tfserve itself as the command):

- every flag in the container's args is one `tfserve --help` lists (docs/flags.md's tables when
  the build has no tfserve);
- the ports tfserve will listen on (the entrypoint's --port=8500 --rest_api_port=8501, or
  tfserve's defaults, then the args) are the declared containerPorts, and every probe resolves to
  them: HTTP probes on the REST port at /healthz or /readyz (liveness /healthz, readiness
  /readyz), gRPC probes on the gRPC port; a Deployment has all three probes;
- the Prometheus annotations name the REST port and the metrics path the args set;
- terminationGracePeriodSeconds (Kubernetes' 30 when unset) is more than the preStop sleep plus
  --drain_delay_seconds plus --drain_timeout_seconds, so the kubelet never kills a drain.

And across files: the Service's targetPorts are the Deployment's ports, with an appProtocol; the
HPA scales that Deployment on Pods metrics that are gauges in docs/metrics.md and that the
Prometheus adapter rule serves under that name, from that series; the PodDisruptionBudget selects
the Deployment's pods; the kustomization lists files that exist. Then, with the build's tfserve,
the Deployment's own command line (its ports and model path swapped for free loopback ports and
the bundled half_plus_two) starts a server whose /readyz answers 200, whose metrics path exports
every HPA metric, and which exits 0 within the grace period after SIGTERM.

Exit 77 (skipped) without python3-yaml. Prints "N passed, M failed"; exit 1 on a failure.

Run: /usr/bin/python3 manifests_test.py --build BUILD_DIR --source SOURCE_DIR
"""
import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
import docs_flags_test as dft  # noqa: E402  (help_flags, doc_flags)
import grpc_client_test as gct  # noqa: E402  (check, free_port)

check = gct.check
DEFAULT_GRACE = 30  # Kubernetes' terminationGracePeriodSeconds when a pod spec sets none
ENTRYPOINT_PORTS = {"port": 8500, "rest_api_port": 8501}  # docker/entrypoint.c


def load_docs(deploy):
    """[(file name, document)] of every YAML document in deploy/*.yaml."""
    docs = []
    for path in sorted(glob.glob(os.path.join(deploy, "*.yaml"))):
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d is not None:
                    docs.append((os.path.basename(path), d))
    return docs


def pod_specs(node, path=""):
    """Every mapping with a `containers` list under node (pod specs, serving runtime specs, the
    replica specs of other workloads), as (path, spec)."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield path, node
        for k, v in node.items():
            yield from pod_specs(v, path + "." + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from pod_specs(v, "%s[%d]" % (path, i))


def runs_tfserve(c):
    """Whether container c runs tfserve: the image's entrypoint (no command) or tfserve itself.
    Other commands in the image (tfserve-train, a launcher) take other flags."""
    image = str(c.get("image", ""))
    if not re.match(r"^(.*/)?tfserve(:|@|$)", image):
        return None
    cmd = c.get("command") or []
    if not cmd or os.path.basename(cmd[0]) == "tfserve-entrypoint":
        return "entrypoint"
    if os.path.basename(cmd[0]) == "tfserve":
        return "tfserve"
    return None


def parse_args(args):
    """{flag name: value} of --name=value / --name arguments, and the arguments that are not
    flags."""
    flags, bad = {}, []
    for a in args:
        m = re.match(r"^--([A-Za-z0-9_]+)(?:=(.*))?$", str(a))
        if m:
            flags[m.group(1)] = m.group(2) if m.group(2) is not None else "true"
        else:
            bad.append(a)
    return flags, bad


def prestop_seconds(c):
    pre = (c.get("lifecycle") or {}).get("preStop") or {}
    if "sleep" in pre:
        return int(pre["sleep"]["seconds"])
    cmd = (pre.get("exec") or {}).get("command") or []
    if cmd and os.path.basename(cmd[0]) == "sleep":
        return int(float(cmd[1]))
    return 0


def check_container(where, kind, spec, c, how, known, defaults, annotations, metric_paths):
    """The per-container checks; returns (ports, flags) for the cross-file checks."""
    name = "%s %s" % (where, c.get("name"))
    flags, bad = parse_args(c.get("args") or [])
    check(not bad, "%s: args that are not --flag=value: %s" % (name, bad))
    unknown = sorted(f for f in flags if f not in known)
    check(not unknown, "%s: flags tfserve does not have: %s" % (name, unknown))

    def flag_int(f):
        v = flags.get(f, defaults.get(f))
        try:
            return int(v)
        except (TypeError, ValueError):
            return None

    ports = {}
    for f in ("port", "rest_api_port"):
        v = flags.get(f, ENTRYPOINT_PORTS[f] if how == "entrypoint" else defaults.get(f))
        ports[f] = int(v)
    grpc_port, rest_port = ports["port"], ports["rest_api_port"]
    check(rest_port > 0, "%s: REST is off (--rest_api_port=0): no probes, no metrics" % name)
    check(grpc_port != rest_port, "%s: --port equals --rest_api_port" % name)

    declared = {}
    for p in c.get("ports") or []:
        declared[p.get("name") or str(p["containerPort"])] = int(p["containerPort"])
        check(int(p["containerPort"]) in (grpc_port, rest_port),
              "%s: containerPort %s is neither --port=%d nor --rest_api_port=%d"
              % (name, p["containerPort"], grpc_port, rest_port))
    check(rest_port in declared.values(),
          "%s: the REST port %d is not declared" % (name, rest_port))
    if kind == "Deployment":
        check(grpc_port in declared.values(), "%s: the gRPC port %d is not declared"
              % (name, grpc_port))

    def resolve(port):
        if isinstance(port, int):
            return port
        return declared.get(port)

    want_path = {"livenessProbe": "/healthz", "readinessProbe": "/readyz",
                 "startupProbe": ("/healthz", "/readyz")}
    for probe, paths in want_path.items():
        pr = c.get(probe)
        if pr is None:
            check(kind != "Deployment", "%s: no %s" % (name, probe))
            continue
        if "httpGet" in pr:
            hg = pr["httpGet"]
            check(resolve(hg.get("port")) == rest_port, "%s: %s on port %r, not the REST port %d"
                  % (name, probe, hg.get("port"), rest_port))
            check(hg.get("path") in ((paths,) if isinstance(paths, str) else paths),
                  "%s: %s path %r (want %s)" % (name, probe, hg.get("path"), paths))
        elif "grpc" in pr:
            check(resolve(pr["grpc"].get("port")) == grpc_port, "%s: %s on port %r, not the "
                  "gRPC port %d" % (name, probe, pr["grpc"].get("port"), grpc_port))
        else:
            check(False, "%s: %s is neither httpGet nor grpc: %s" % (name, probe, pr))

    # Metrics: the path the args set, on the REST port, as the scrape annotations say.
    mpath = flags.get("metrics_path")
    for prefix in ("prometheus.io/", "prometheus.kserve.io/"):
        if prefix + "port" in annotations or prefix + "path" in annotations:
            check(str(annotations.get(prefix + "port")) == str(rest_port),
                  "%s: %sport %r is not the REST port %d"
                  % (name, prefix, annotations.get(prefix + "port"), rest_port))
            check(mpath is not None and annotations.get(prefix + "path") == mpath,
                  "%s: %spath %r but --metrics_path=%r"
                  % (name, prefix, annotations.get(prefix + "path"), mpath))
    if mpath:
        metric_paths.append(mpath)

    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE)
    pre, delay, timeout = prestop_seconds(c), flag_int("drain_delay_seconds"), \
        flag_int("drain_timeout_seconds")
    check(delay is not None and timeout is not None and grace > pre + delay + timeout,
          "%s: terminationGracePeriodSeconds %s is not above preStop %s + --drain_delay_seconds "
          "%s + --drain_timeout_seconds %s" % (name, grace, pre, delay, timeout))
    print("%s: ports gRPC %d REST %d; grace %ss, preStop %ds + delay %ss + timeout %ss"
          % (name, grpc_port, rest_port, grace, pre, delay, timeout), flush=True)
    return ports, flags


def metrics_gauges(path):
    """Names of the gauges docs/metrics.md's tables list."""
    names = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\|\s*`([A-Za-z_:][A-Za-z0-9_:]*)`\s*\|\s*gauge\s*\|", line)
            if m:
                names.add(m.group(1))
    return names


def adapter_rules(docs):
    """{metric name the adapter serves: series its rule queries} from every ConfigMap holding a
    Prometheus adapter config (a `rules` list)."""
    served = {}
    for _, d in docs:
        if d.get("kind") != "ConfigMap":
            continue
        for text in (d.get("data") or {}).values():
            conf = yaml.safe_load(text)
            if not isinstance(conf, dict):
                continue
            for r in conf.get("rules") or []:
                m = re.match(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)", r.get("seriesQuery", ""))
                series = m.group(1) if m else None
                as_ = (r.get("name") or {}).get("as") or series
                check("<<.LabelMatchers>>" in r.get("metricsQuery", "") and
                      "<<.GroupBy>>" in r.get("metricsQuery", ""),
                      "adapter rule for %s: metricsQuery does not select by the HPA's labels "
                      "and group by them: %r" % (series, r.get("metricsQuery")))
                ov = (r.get("resources") or {}).get("overrides") or {}
                check(any(v.get("resource") == "pod" for v in ov.values()),
                      "adapter rule for %s maps no label to the pod resource" % series)
                served[as_] = series
    return served


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def check_live(build, name, container, hpa_metrics, grace, tmp):
    """Deployment name's command line, served by the build's tfserve on loopback."""
    tfserve = os.path.join(build, "server", "tfserve")
    flags, _ = parse_args(container.get("args") or [])
    env = {e["name"]: e.get("value", "") for e in container.get("env") or []}
    model = env.get("MODEL_NAME", "half_plus_two")
    grpc_port, rest_port = gct.free_port(), gct.free_port()
    # The entrypoint's command line, then the args; only what names this machine is replaced.
    argv = [tfserve, "--port=%d" % grpc_port, "--rest_api_port=%d" % rest_port,
            "--model_name=" + model,
            "--model_base_path=" + os.path.join(build, "models", "half_plus_two")]
    for a in container.get("args") or []:
        if not re.match(r"^--(port|rest_api_port|model_name|model_base_path)=", a):
            argv.append(a)
    log = open(os.path.join(tmp, "tfserve.log"), "w+")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    base = "http://127.0.0.1:%d" % rest_port
    try:
        ready, deadline = False, time.time() + 60
        while time.time() < deadline and p.poll() is None and not ready:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
                    ready = r.status == 200
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        check(ready, "Deployment %s's args: /readyz never answered 200 (exit %s)"
              % (name, p.poll()))
        if ready:
            with urllib.request.urlopen(base + flags["metrics_path"], timeout=10) as r:
                page = r.read().decode()
            exported = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) gauge$", page, re.M)}
            for m in hpa_metrics:
                check(m in exported, "the running server exports no gauge %s at %s"
                      % (m, flags["metrics_path"]))
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=grace + 10)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.time() - t0
        check(rc == 0 and dt < grace, "SIGTERM: exit %s after %.1fs (grace %ds)" % (rc, dt, grace))
        # tfserve warns about an unknown flag and goes on, so a misspelt one would serve silently.
        log.seek(0)
        unknown = [l for l in log.read().splitlines() if "unknown argument" in l]
        check(not unknown, "Deployment %s's args: %s" % (name, unknown))
        print("Deployment %s's command line: ready, metrics %s, exit %s %.1fs after SIGTERM"
              % (name, sorted(hpa_metrics), rc, dt), flush=True)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if gct.FAILED:
            log.seek(0)
            print("---- tfserve log ----\n" + log.read()[-3000:], flush=True)
        log.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    a.build, a.source = os.path.abspath(a.build), os.path.abspath(a.source)
    deploy = os.path.join(a.source, "deploy")
    docs = load_docs(deploy)
    check(docs, "no manifests in %s" % deploy)

    tfserve = os.path.join(a.build, "server", "tfserve")
    if os.access(tfserve, os.X_OK):
        helped = dft.help_flags(tfserve)
        known = set(helped)
        defaults = {k: v[1] for k, v in helped.items()}
    else:
        print("note: no %s; flags checked against docs/flags.md, no live check" % tfserve)
        documented = dft.doc_flags(os.path.join(a.source, "docs", "flags.md"))
        known = set(documented)
        defaults = {k: v[1] for k, v in documented.items()}

    deployments = {}  # name -> (labels, container, ports, grace)
    metric_paths = []
    n_containers = 0
    for fname, d in docs:
        kind = d.get("kind")
        annotations = dict((d.get("metadata") or {}).get("annotations") or {})
        for path, spec in pod_specs(d.get("spec") or {}, "spec"):
            # A pod template's annotations are beside its spec.
            if path.endswith(".template.spec") and "[" not in path:
                tmpl = d
                for k in path.split(".")[:-1]:
                    tmpl = tmpl[k]
                annotations.update((tmpl.get("metadata") or {}).get("annotations") or {})
            for c in spec["containers"]:
                how = runs_tfserve(c)
                if not how:
                    continue
                n_containers += 1
                where = "%s %s/%s" % (fname, kind, (d.get("metadata") or {}).get("name"))
                ports, _ = check_container(where, kind, spec, c, how, known, defaults,
                                           annotations, metric_paths)
                if kind == "Deployment":
                    labels = d["spec"]["template"]["metadata"].get("labels") or {}
                    deployments[d["metadata"]["name"]] = (
                        labels, c, ports, spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
    check(n_containers >= 2, "found %d tfserve containers (want the Deployment's and the "
          "serving runtime's)" % n_containers)
    check(deployments, "no Deployment runs tfserve")

    gauges = metrics_gauges(os.path.join(a.source, "docs", "metrics.md"))
    check("tfserve_requests_in_flight" in gauges, "docs/metrics.md lists no gauges (%s)" % gauges)
    served = adapter_rules(docs)
    hpa_metrics = set()
    for fname, d in docs:
        kind, spec = d.get("kind"), d.get("spec") or {}
        if kind == "Service":
            for name, (labels, c, ports, _) in deployments.items():
                if not selects({"matchLabels": spec.get("selector") or {}}, labels):
                    continue
                names = {p.get("name"): int(p["containerPort"]) for p in c.get("ports") or []}
                for sp in spec.get("ports") or []:
                    tp = sp.get("targetPort", sp.get("port"))
                    tp = names.get(tp, tp)
                    check(tp in ports.values(), "%s: Service port %s targets %r, not a tfserve "
                          "port %s" % (fname, sp.get("name"), sp.get("targetPort"), ports))
                    check(sp.get("appProtocol"), "%s: Service port %s has no appProtocol"
                          % (fname, sp.get("name")))
        elif kind == "HorizontalPodAutoscaler":
            check(d["apiVersion"] == "autoscaling/v2", "%s: %s" % (fname, d["apiVersion"]))
            ref = spec.get("scaleTargetRef") or {}
            check(ref.get("kind") == "Deployment" and ref.get("name") in deployments,
                  "%s: scales %s/%s, not a tfserve Deployment" % (fname, ref.get("kind"),
                                                                 ref.get("name")))
            pods = [m["pods"] for m in spec.get("metrics") or [] if m.get("type") == "Pods"]
            check(pods, "%s: no Pods metric" % fname)
            for m in pods:
                name = m["metric"]["name"]
                hpa_metrics.add(name)
                check(name in served, "%s: metric %s is served by no adapter rule (rules serve %s)"
                      % (fname, name, sorted(served)))
                check(served.get(name) in gauges, "%s: metric %s comes from series %s, which is "
                      "not a gauge in docs/metrics.md" % (fname, name, served.get(name)))
                print("%s: Pods metric %s <- adapter rule <- gauge %s"
                      % (fname, name, served.get(name)), flush=True)
        elif kind == "PodDisruptionBudget":
            check(any(selects(spec.get("selector") or {}, lab)
                      for lab, _, _, _ in deployments.values()),
                  "%s: selects no tfserve Deployment's pods" % fname)
        elif kind == "Kustomization":
            for r in d.get("resources") or []:
                check(os.path.exists(os.path.join(deploy, r)), "%s lists %s, which is absent"
                      % (fname, r))
    check(hpa_metrics, "no HorizontalPodAutoscaler with a Pods metric")

    if os.access(tfserve, os.X_OK):
        with tempfile.TemporaryDirectory(prefix="tfs-manifests-") as tmp:
            for name, (_, c, _, grace) in deployments.items():
                check_live(a.build, name, c, hpa_metrics, grace, tmp)
    print("%d passed, %d failed" % (gct.PASSED, gct.FAILED), flush=True)
    return 1 if gct.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
