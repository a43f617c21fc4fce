#!/usr/bin/env python3
"""corral's Kubernetes manifests (containers/kubernetes/) as the tests read
them: the values each promises, checked against each other, and the copy
podman kube play is given. Shared by tests/containers/test_kube.py (the
host) and tests/vm/guest/kube.sh (the cgroup-v2 guest, which runs it as a
command). Python 3 standard library only: there is no YAML parser in it,
so the manifests are read as text, and keep each value read here on one
line of its own (asserted: one match each).

  kube_manifest.py values FILE
      prints the values as JSON (bytes, seconds, ports, names, the death
      category a leaking worker must end in), after checking them;
  kube_manifest.py for-podman FILE NAME TERMLOG [PROBE_TIMEOUT]
      prints the copy podman kube play is given (Manifest.for_podman)."""
import json
import os
import re
import sys
import textwrap

MIB = 1 << 20


def indent(line):
    return len(line) - len(line.lstrip())


def k8s_bytes(q):
    """A Kubernetes memory quantity: 384Mi, 1Gi, 500M (decimal), plain bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", q)
    assert m, f"memory quantity {q!r}"
    unit = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, None: 1}[m.group(2)]
    return int(m.group(1)) * unit


def corral_bytes(s):
    """A corrald size: K, M, G, T are 1024-based (corrald --help)."""
    m = re.fullmatch(r"(\d+)([KMGT])?", str(s))
    assert m, f"corrald size {s!r}"
    return int(m.group(1)) << {None: 0, "K": 10, "M": 20, "G": 30, "T": 40}[m.group(2)]


def corral_seconds(s):
    """A corrald duration: a number of seconds, or with ms or s."""
    m = re.fullmatch(r"(\d+)(ms|s)?", str(s))
    assert m, f"corrald duration {s!r}"
    return int(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


class Manifest:
    """One manifest file: a ConfigMap with corrald's config, a Deployment,
    a Service, separated by ---."""

    def __init__(self, path):
        self.path = path
        with open(path) as f:
            self.text = f.read()
        self.docs = self.text.split("\n---\n")

    def doc(self, kind):
        hits = [i for i, d in enumerate(self.docs) if re.search(rf"^kind: {kind}$", d, re.M)]
        assert len(hits) == 1, f"{self.path}: {len(hits)} documents of kind {kind}"
        return hits[0]

    def one(self, pattern, kind="Deployment"):
        hits = re.findall(pattern, self.docs[self.doc(kind)], re.M)
        assert len(hits) == 1, f"{self.path}: {pattern!r} matches {len(hits)} times"
        return hits[0]

    def config(self):
        """corrald's JSON config, from the ConfigMap's corral.json block."""
        lines = self.docs[self.doc("ConfigMap")].split("\n")
        i = next(i for i, line in enumerate(lines) if line.strip() == "corral.json: |")
        block = []
        for line in lines[i + 1:]:
            if line.strip() and indent(line) <= indent(lines[i]):
                break
            block.append(line)
        return json.loads(textwrap.dedent("\n".join(block)))

    def block(self, key, kind="Deployment"):
        """The lines of `key:` and everything indented below it, as text."""
        lines = self.docs[self.doc(kind)].split("\n")
        hits = [i for i, line in enumerate(lines) if line.strip() == f"{key}:"]
        assert len(hits) == 1, f"{self.path}: {len(hits)} lines '{key}:'"
        out = [lines[hits[0]]]
        for line in lines[hits[0] + 1:]:
            if line.strip() and indent(line) <= indent(out[0]):
                break
            out.append(line)
        return "\n".join(out).rstrip("\n") + "\n"

    def probe(self, kind):
        path, port = self.one(rf"^\s*{kind}:\n\s*httpGet: \{{path: (\S+), port: (\d+)\}}$")
        return path, int(port)

    def probe_timing(self, kind):
        """periodSeconds, timeoutSeconds, failureThreshold of a probe (the
        Kubernetes defaults where absent: 10, 1, 3)."""
        b = self.block(kind)
        got = [re.findall(rf"^\s*{k}: (\d+)$", b, re.M) for k in
               ("periodSeconds", "timeoutSeconds", "failureThreshold")]
        return [int(g[0]) if g else d for g, d in zip(got, (10, 1, 3))]

    def values(self):
        """What the manifest promises, checked: the probes on the metrics
        port, 0.0.0.0 inside the pod, the grace period above stop-delay +
        stop-timeout, the config file mounted where args name it, and the
        memory budget corrald checks at start-up (the workers and a
        reload's replacement at memory-max, corrald, the margin) under the
        container's limit."""
        cfg = self.config()
        v = {"limit": k8s_bytes(self.one(r"^\s*limits: \{memory: (\w+)\}$")),
             "grace": int(self.one(r"^\s*terminationGracePeriodSeconds: (\d+)$")),
             "image": self.one(r"^\s*image: (\S+)$"),
             "container": self.one(r"^\s*containers:\n\s*- name: (\S+)$"),
             "pull": self.one(r"^\s*imagePullPolicy: (\w+)$"),
             "workers": cfg["workers"],
             "per_worker": corral_bytes(cfg["memory-max"]),
             "writable": not cfg.get("no-cgroups", False),
             "stop_delay": corral_seconds(cfg["stop-delay"]),
             "stop_timeout": corral_seconds(cfg["stop-timeout"]),
             "liveness": self.probe("livenessProbe"),
             "liveness_timing": self.probe_timing("livenessProbe"),
             "readiness": self.probe("readinessProbe")}
        v["category"] = "oom-own-limit" if v["writable"] else "memory-kill"
        host, port = cfg["listen"].rsplit(":", 1)
        mhost, mport = cfg["metrics-listen"].rsplit(":", 1)
        v["http_port"], v["metrics_port"] = int(port), int(mport)
        assert host == mhost == "0.0.0.0", (cfg["listen"], cfg["metrics-listen"])
        assert v["liveness"] == ("/livez", v["metrics_port"]), v["liveness"]
        assert v["readiness"] == ("/readyz", v["metrics_port"]), v["readiness"]
        assert v["grace"] > v["stop_delay"] + v["stop_timeout"], v
        assert v["pull"] in ("IfNotPresent", "Never"), v["pull"]
        assert self.one(r"^\s*args: (\[.*\])$") == '["--config", "/etc/corral/corral.json"]'
        assert self.one(r"^\s*- \{name: config, mountPath: (/etc/corral), readOnly: true\}$")
        need = ((v["workers"] + 1) * v["per_worker"] + 16 * MIB +
                max(v["limit"] // 20, 16 * MIB))
        assert need <= v["limit"], \
            f"{need / MIB:.0f} MiB needed, the limit is {v['limit'] / MIB:.0f} MiB"
        return v

    def for_podman(self, name, termlog, probe_timeout=None):
        """The text podman kube play is given: this manifest with
        - the Deployment named `name` and one replica (the test's own);
        - with probe_timeout, that timeoutSeconds for the liveness probe
          (the emulated guest: podman times the probe's whole exec there,
          several seconds under TCG, not the HTTP request);
        - no containerPorts: podman publishes each on the host as a
          hostPort, and refuses that with --network none (Kubernetes reads
          them as information, and for the Service's named targetPort);
        - the termination-message file bind-mounted at /dev/termination-log,
          as the kubelet does for terminationMessagePath (podman 4.3 does
          not implement it)."""
        docs = list(self.docs)
        i = self.doc("Deployment")
        d, n = re.subn(r"^(metadata:\n  name: )\S+$", rf"\g<1>{name}", docs[i], count=1,
                       flags=re.M)
        assert n == 1, "the Deployment's metadata.name"
        d, n = re.subn(r"^(\s*replicas: )\d+$", r"\g<1>1", d, flags=re.M)
        assert n == 1, "replicas"
        if probe_timeout is not None:
            d, n = re.subn(r"^(\s*livenessProbe:\n(?:\s+\S.*\n)*?\s*timeoutSeconds: )\d+$",
                           rf"\g<1>{int(probe_timeout)}", d, count=1, flags=re.M)
            assert n == 1, "the liveness probe's timeoutSeconds"
        out, skip, edits = [], None, set()
        for line in d.split("\n"):
            if skip is not None:
                if line.strip() and indent(line) > skip:
                    continue
                skip = None
            if line.strip() == "ports:":
                skip = indent(line)
                edits.add("ports")
                continue
            out.append(line)
            if line.strip() == "volumeMounts:":
                out.append(" " * (indent(line) + 2) +
                           "- {name: termination-log, mountPath: /dev/termination-log}")
                edits.add("volumeMounts")
            elif line.strip() == "volumes:":
                item = " " * (indent(line) + 2)
                out += [item + "- name: termination-log",
                        item + f"  hostPath: {{path: {termlog}, type: File}}"]
                edits.add("volumes")
        assert edits == {"ports", "volumeMounts", "volumes"}, edits
        docs[i] = "\n".join(out)
        return "\n---\n".join(docs)


def main(argv):
    if len(argv) == 3 and argv[1] == "values":
        print(json.dumps(Manifest(argv[2]).values()))
        return 0
    if len(argv) in (5, 6) and argv[1] == "for-podman":
        m = Manifest(argv[2])
        m.values()
        sys.stdout.write(m.for_podman(argv[3], argv[4], *argv[5:]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
