#!/usr/bin/env python3
"""Checks deploy/k8s/*.yaml: every document loads as YAML, has a kind this
directory uses, and holds the fields kennel relies on, consistent with each
other and with the kennel.toml in the ConfigMap:

- the Deployment probes /livez and /readyz on the container's port, has a
  preStop, and a terminationGracePeriodSeconds that covers the preStop, the
  server's shutdown_grace and every pool's job_grace;
- the Service selects the Deployment's pods and targets its port;
- the KEDA ScaledObject scales the Deployment on the nats-jetstream trigger
  of the queued pool's stream and durable consumer, with a lagThreshold;
- the HPA scales the Deployment on kennel_jetstream_projected_wait_seconds of
  that pool, with an AverageValue target;
- the kustomization names files that exist, and not both autoscalers;
- with a bearer token, the config lets the metrics be read without it
  (`metrics_public`), as the scrape annotations and the HPA's adapter need;
- with the shipped image (`kennel:…`, the binary alone), every pool runs a
  worker built into kennel (`@kennel …`), so the example runs as shipped.

With a kennel binary given (`--kennel PATH`), the ConfigMap's kennel.toml is
also checked by `kennel check` itself.

Usage: python3 deploy/k8s/check.py [--kennel target/debug/kennel]
Needs PyYAML (.ci/run installs it in target/yaml-venv).
"""

import pathlib
import subprocess
import sys
import tempfile
import tomllib

import yaml

HERE = pathlib.Path(__file__).resolve().parent
KINDS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "ScaledObject": "keda.sh/v1alpha1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
    return condition


def duration_seconds(text):
    """Seconds of a kennel duration such as "60s", "5m", "1h 30m", "500ms"."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    total = 0.0
    for part in text.split():
        number = part.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = part[len(number):]
        if not check(unit in units, f"duration {text!r}: unit {unit!r} not understood"):
            return 0.0
        total += float(number) * units[unit]
    return total


def dig(doc, *path):
    for key in path:
        if isinstance(key, int):
            if not isinstance(doc, list) or len(doc) <= key:
                return None
        elif not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def load():
    docs = {}
    for path in sorted(HERE.glob("*.yaml")):
        with path.open() as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                kind = doc.get("kind")
                where = f"{path.name}: {kind}"
                if not check(kind in KINDS, f"{path.name}: unknown kind {kind!r}"):
                    continue
                check(doc.get("apiVersion") == KINDS[kind],
                      f"{where}: apiVersion {doc.get('apiVersion')!r}, expected {KINDS[kind]!r}")
                docs.setdefault(kind, []).append((path.name, doc))
    return docs


def main():
    kennel = None
    if len(sys.argv) == 3 and sys.argv[1] == "--kennel":
        kennel = sys.argv[2]
    docs = load()
    for kind in KINDS:
        check(len(docs.get(kind, [])) == 1, f"expected one {kind}, found {len(docs.get(kind, []))}")
    if failures:
        return report()
    one = {kind: docs[kind][0][1] for kind in KINDS}

    # The config in the ConfigMap.
    text = dig(one["ConfigMap"], "data", "kennel.toml")
    check(isinstance(text, str), "ConfigMap: data.kennel.toml missing")
    config = tomllib.loads(text)
    queued = [p for p in config.get("pool", []) if "queue" in p]
    check(len(queued) >= 1, "kennel.toml: no pool has a [pool.queue]")
    pool = queued[0]
    queue = pool["queue"]
    durable = queue.get("durable", pool["name"])
    port = int(config.get("server", {}).get("listen", "127.0.0.1:7878").rsplit(":", 1)[1])
    check(config.get("server", {}).get("listen", "").startswith("0.0.0.0:"),
          "kennel.toml: server.listen must take connections from the pod network (0.0.0.0:PORT)")
    server = config.get("server", {})
    check("token_env" not in server or server.get("metrics_public") is True,
          "kennel.toml: with a token, metrics_public = true, or the scrape and the HPA's adapter get 401")

    # The Deployment.
    dep = one["Deployment"]
    name = dig(dep, "metadata", "name")
    labels = dig(dep, "spec", "template", "metadata", "labels") or {}
    check(dig(dep, "spec", "selector", "matchLabels") == labels or
          all(labels.get(k) == v for k, v in (dig(dep, "spec", "selector", "matchLabels") or {}).items()),
          "Deployment: the selector does not match the pod template's labels")
    container = dig(dep, "spec", "template", "spec", "containers", 0) or {}
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports", [])}
    check(port in ports.values(), f"Deployment: no containerPort {port} (server.listen)")
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        got = dig(container, probe, "httpGet", "path")
        check(got == path, f"Deployment: {probe} path {got!r}, expected {path!r}")
        probe_port = dig(container, probe, "httpGet", "port")
        check(probe_port == port or ports.get(probe_port) == port,
              f"Deployment: {probe} port {probe_port!r} is not {port}")
    # The shipped image holds the kennel binary alone: with it, every pool
    # runs a worker built into kennel.
    image = container.get("image", "")
    if image.split(":")[0] == "kennel":
        for p in config.get("pool", []):
            argv = p.get("argv", [])
            check(argv[:1] == ["@kennel"],
                  f"kennel.toml: pool {p.get('name')!r} runs {argv[:1]}, which the image {image!r} "
                  "(the kennel binary alone) does not hold; run a built-in worker (@kennel worker demo) "
                  "or name your own image")
    pre_stop = dig(container, "lifecycle", "preStop")
    check(pre_stop is not None, "Deployment: no lifecycle.preStop")
    pre_stop_secs = dig(pre_stop, "sleep", "seconds") or 0
    grace = dig(dep, "spec", "template", "spec", "terminationGracePeriodSeconds")
    shutdown = duration_seconds(config.get("server", {}).get("shutdown_grace", "10s"))
    close = max(duration_seconds(p.get("job_grace", "30s")) for p in config.get("pool", []))
    need = pre_stop_secs + shutdown + close
    check(isinstance(grace, int) and grace >= need,
          f"Deployment: terminationGracePeriodSeconds {grace!r} is below preStop {pre_stop_secs} s "
          f"+ shutdown_grace {shutdown:g} s + job_grace {close:g} s = {need:g} s")
    args = container.get("args", [])
    mount = dig(container, "volumeMounts", 0, "mountPath")
    check("--config" in args and any(str(a).startswith(str(mount)) for a in args),
          f"Deployment: args {args!r} do not read the config from the mounted {mount!r}")
    volume = dig(dep, "spec", "template", "spec", "volumes", 0, "configMap", "name")
    check(volume == dig(one["ConfigMap"], "metadata", "name"), "Deployment: the volume is not the ConfigMap")

    # The Service.
    svc = one["Service"]
    selector = dig(svc, "spec", "selector") or {}
    check(selector and all(labels.get(k) == v for k, v in selector.items()),
          "Service: the selector does not select the Deployment's pods")
    target = dig(svc, "spec", "ports", 0, "targetPort")
    check(target == port or ports.get(target) == port, f"Service: targetPort {target!r} is not {port}")

    # KEDA.
    so = one["ScaledObject"]
    check(dig(so, "spec", "scaleTargetRef", "name") == name, "ScaledObject: scaleTargetRef is not the Deployment")
    trigger = dig(so, "spec", "triggers", 0) or {}
    meta = trigger.get("metadata", {})
    check(trigger.get("type") == "nats-jetstream", "ScaledObject: the trigger is not nats-jetstream")
    check(meta.get("stream") == queue["stream"], f"ScaledObject: stream {meta.get('stream')!r} is not {queue['stream']!r}")
    check(meta.get("consumer") == durable, f"ScaledObject: consumer {meta.get('consumer')!r} is not {durable!r}")
    for key in ("natsServerMonitoringEndpoint", "account", "lagThreshold"):
        check(key in meta, f"ScaledObject: metadata.{key} missing")
    check(str(meta.get("lagThreshold", "")).isdigit(), "ScaledObject: lagThreshold is not a whole number")

    # The HPA alternative.
    hpa = one["HorizontalPodAutoscaler"]
    check(dig(hpa, "spec", "scaleTargetRef", "name") == name and
          dig(hpa, "spec", "scaleTargetRef", "kind") == "Deployment",
          "HPA: scaleTargetRef is not the Deployment")
    metric = dig(hpa, "spec", "metrics", 0) or {}
    check(dig(metric, "external", "metric", "name") == "kennel_jetstream_projected_wait_seconds",
          "HPA: the metric is not kennel_jetstream_projected_wait_seconds")
    check(dig(metric, "external", "metric", "selector", "matchLabels", "pool") == pool["name"],
          f"HPA: the metric's pool label is not {pool['name']!r}")
    check(dig(metric, "external", "target", "type") == "AverageValue", "HPA: the target is not AverageValue")

    # The kustomization.
    resources = dig(one["Kustomization"], "resources") or []
    for r in resources:
        check((HERE / r).is_file(), f"kustomization: {r} does not exist")
    check(not ("hpa.yaml" in resources and "keda-scaledobject.yaml" in resources),
          "kustomization: both autoscalers would drive the Deployment")

    if kennel and not failures:
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "kennel.toml"
            path.write_text(text.replace('cwd = "/app"', f'cwd = "{tmp}"'))
            run = subprocess.run([kennel, "check", "--config", str(path)], capture_output=True, text=True,
                                 env={"KENNEL_TOKEN": "x", "PATH": "/usr/bin:/bin"})
            check(run.returncode == 0, f"kennel check refused the ConfigMap's kennel.toml:\n{run.stderr}")
    return report()


def report():
    for f in failures:
        print(f"deploy/k8s: {f}", file=sys.stderr)
    count = len(list(HERE.glob("*.yaml")))
    if failures:
        print(f"deploy/k8s: {len(failures)} problem(s) in {count} files", file=sys.stderr)
        return 1
    print(f"deploy/k8s: {count} files, every document loads and holds the fields kennel relies on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
