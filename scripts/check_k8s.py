#!/usr/bin/env python3
"""Checks the Kubernetes manifests of deploy/k8s without a cluster (scripts/test.d/30-deploy.sh).

    python3 scripts/check_k8s.py [--offhost BIN] MANIFEST.yaml...

1. YAML: every document parses (a key given twice in one mapping is an error, not the last one
   winning as in PyYAML); every non-empty document is a mapping with apiVersion, kind and
   metadata.name (a DNS-1123 name).
2. Schema: every document against the Kubernetes OpenAPI schema of its kind, strictly (an
   unknown field is an error), with kubernetes-validate (scripts/requirements.txt), offline.
3. What a schema cannot see, across the documents of all the files given:
   - a StatefulSet's serviceName names a Service given here, and that Service is headless
     (clusterIP: None); the StatefulSet's selector (matchLabels) and the Service's selector
     are non-empty and match the pod template's labels;
   - every port of that Service reaches a container port (targetPort by number or name,
     same protocol);
   - every volumeMount names a volume or a volumeClaimTemplate; names are unique;
   - a Secret volume names its secret; its items name keys the Secret has when the Secret is
     given here; no mode lets others read it; a mode without group or other read bits needs
     the pod's fsGroup when the pod runs as a user other than root (else the files belong to
     root and the user cannot read them);
   - $(VAR) in a container's args or command is one of its env names;
   - an offhost engine container (args starting with `engine`): --tls-certificates is the
     mount path of a Secret volume that provides ca-cert.pem, server-cert.pem and
     server-key.pem; the port of every --listen tls:/tcp: URL is a container port; --files is
     a mount path; with --offhost BIN, every flag is one `BIN engine --help` lists;
   - an `offhost pet replay` container (a Job's, say): with --offhost BIN, every flag is one
     `BIN pet replay --help` lists;
   - every engine named by URL (`--peer NAME=tls:HOST:PORT` of an engine, `--engine
     NAME=tls:HOST:PORT` of a replay) whose HOST is a StatefulSet's pod, POD.SERVICE[...],
     names a pod that the StatefulSet given here has (its ordinal under `replicas`) behind
     that Service, on one of the Service's ports.
   Jobs are checked as the other workloads, less the selector (Kubernetes makes a Job's).

Exits 1 with one line per problem, 0 with a summary.
"""

import argparse
import re
import subprocess
import sys

import yaml

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ENGINE_FILES_SERVER = ("ca-cert.pem", "server-cert.pem", "server-key.pem")
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping."""


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found key {key!r} twice (first at line {seen[key].line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


class Checker:
    def __init__(self):
        self.problems = []

    def error(self, where, message):
        self.problems.append(f"{where}: {message}")


def load(path, c):
    """The non-empty documents of `path`, each as (where, document)."""
    try:
        with open(path, encoding="utf-8") as f:
            docs = list(yaml.load_all(f, Loader=UniqueKeyLoader))
    except (OSError, yaml.YAMLError) as e:
        c.error(path, f"cannot parse: {e}")
        return []
    out = []
    for i, d in enumerate(docs, 1):
        if d is None:
            continue
        where = f"{path}: document {i}"
        if not isinstance(d, dict):
            c.error(where, f"expected a mapping, found {type(d).__name__}")
            continue
        for field in ("apiVersion", "kind"):
            if not isinstance(d.get(field), str) or not d[field]:
                c.error(where, f"no {field}")
        meta = d.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            c.error(where, "no metadata.name")
            continue
        if not DNS1123.match(name) or len(name) > 253:
            c.error(where, f"metadata.name {name!r} is not a DNS-1123 name")
        if isinstance(d.get("kind"), str):
            where = f"{path}: {d['kind']}/{name}"
        out.append((where, d))
    return out


def check_schema(docs, version, c):
    try:
        import kubernetes_validate
        from kubernetes_validate.utils import (
            InvalidSchemaError,
            SchemaNotFoundError,
            ValidationError,
            VersionNotSupportedError,
        )
    except ImportError:
        c.error(
            "schema",
            "kubernetes-validate is not installed "
            "(pip install -r scripts/requirements.txt, or scripts/test sets it up)",
        )
        return None
    version = version or kubernetes_validate.utils.latest_version()
    for where, d in docs:
        if not isinstance(d.get("apiVersion"), str) or not isinstance(d.get("kind"), str):
            continue
        try:
            kubernetes_validate.validate(d, version, strict=True)
        except ValidationError as e:
            path = ".".join(str(p) for p in e.path) or "(top)"
            c.error(where, f"schema (Kubernetes {e.version}): {path}: {e.message}")
        except SchemaNotFoundError as e:
            c.error(where, f"schema: {e.message}")
        except (InvalidSchemaError, VersionNotSupportedError) as e:
            c.error(where, f"schema: {e.message}")
    return version


def labels_match(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def command_flags(binary, words):
    """The long flags `BINARY WORDS... --help` lists."""
    out = subprocess.run(
        [binary, *words, "--help"], capture_output=True, text=True, check=True
    ).stdout
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out))


def engine_flags(binary):
    """The long flags of `BINARY engine` and `BINARY pet replay`, by command."""
    return {
        "engine": command_flags(binary, ["engine"]),
        "pet replay": command_flags(binary, ["pet", "replay"]),
    }


POD_URL = re.compile(r"^[^=]+=tls:([a-z0-9-]+)-(\d+)\.([a-z0-9-]+)(\.[a-z0-9.-]+)?:(\d+)$")


def check_targets(where, values, sets, services, c):
    """Each NAME=tls:STS-N.SERVICE...:PORT of `values` is a pod of StatefulSet STS here."""
    for v in values:
        m = POD_URL.match(v or "")
        if not m:
            continue
        sts, n, svc, port = m.group(1), int(m.group(2)), m.group(3), int(m.group(5))
        if sts not in sets:
            c.error(where, f"{v}: no StatefulSet {sts!r} here")
            continue
        service, replicas = sets[sts]
        if service != svc:
            c.error(where, f"{v}: StatefulSet {sts!r} is behind Service {service!r}, not {svc!r}")
        if n >= replicas:
            c.error(where, f"{v}: StatefulSet {sts!r} has {replicas} replicas, no pod {sts}-{n}")
        ports = [p.get("port") for p in ((services.get(svc) or {}).get("spec") or {}).get("ports") or []]
        if svc in services and port not in ports:
            c.error(where, f"{v}: Service {svc!r} has no port {port}")


def parse_args(args):
    """(flag, value) pairs of a command line: --flag=value, --flag value, --switch."""
    pairs = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("--"):
            if "=" in a:
                flag, value = a.split("=", 1)
            elif i + 1 < len(args) and not str(args[i + 1]).startswith("--"):
                flag, value = a, args[i + 1]
                i += 1
            else:
                flag, value = a, None
            pairs.append((flag, value))
        i += 1
    return pairs


def check_engine(where, container, mounts, secret_files, ports, flags, c):
    args = [str(a) for a in container.get("args") or []]
    pairs = parse_args(args[1:])
    if flags is not None:
        for flag, _ in pairs:
            if flag not in flags["engine"]:
                c.error(where, f"`offhost engine` has no flag {flag}")
    values = {}
    for flag, value in pairs:
        values.setdefault(flag, []).append(value)
    certs = values.get("--tls-certificates", [None])[-1]
    listens = values.get("--listen", [])
    if any(u and u.startswith("tls:") for u in listens):
        if certs is None:
            c.error(where, "a tls: listener needs --tls-certificates")
        elif certs not in mounts:
            c.error(where, f"--tls-certificates {certs} is not a volumeMount's mountPath")
        elif mounts[certs] not in secret_files:
            c.error(where, f"--tls-certificates {certs}: the volume there is not a Secret")
        else:
            files = secret_files[mounts[certs]]
            if files is not None:
                for f in ENGINE_FILES_SERVER:
                    if f not in files:
                        c.error(where, f"--tls-certificates {certs} has no {f}")
    for url in listens:
        m = re.match(r"^(tls|tcp):(.+):(\d+)$", url or "")
        if m and int(m.group(3)) not in ports:
            c.error(where, f"--listen {url}: port {m.group(3)} is not a containerPort")
        if url and url.startswith("tcp:") and "--insecure" not in values:
            c.error(where, f"--listen {url}: plain tcp needs --insecure (use tls:)")
    for d in values.get("--files", []):
        if d not in mounts:
            c.error(where, f"--files {d} is not a volumeMount's mountPath")


def check_workload(where, d, services, secrets, flags, sets, c):
    spec = d.get("spec") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    pod = template.get("spec") or {}
    selector = spec.get("selector") or {}
    if d.get("kind") == "Job":
        selector = {"matchLabels": labels}
    if selector.get("matchExpressions"):
        c.error(where, "selector.matchExpressions: use matchLabels (checked against the labels)")
    match = selector.get("matchLabels") or {}
    if not match:
        c.error(where, "spec.selector.matchLabels is empty")
    elif not labels_match(match, labels):
        c.error(where, f"selector {match} does not match the template's labels {labels}")

    containers = list(pod.get("containers") or []) + list(pod.get("initContainers") or [])
    ports_by_name, ports_by_number = {}, {}
    for k in pod.get("containers") or []:
        for p in k.get("ports") or []:
            proto = p.get("protocol", "TCP")
            ports_by_number[p.get("containerPort")] = proto
            if p.get("name"):
                if p["name"] in ports_by_name:
                    c.error(where, f"container port name {p['name']!r} given twice")
                ports_by_name[p["name"]] = (p.get("containerPort"), proto)

    if d.get("kind") == "StatefulSet":
        name = spec.get("serviceName")
        svc = services.get(name)
        if not name:
            c.error(where, "no spec.serviceName")
        elif svc is None:
            c.error(where, f"serviceName {name!r}: no such Service here")
        else:
            sspec = svc.get("spec") or {}
            if sspec.get("clusterIP") != "None":
                c.error(where, f"Service {name!r} is not headless (clusterIP: None)")
            ssel = sspec.get("selector") or {}
            if not ssel:
                c.error(where, f"Service {name!r} has no selector")
            elif not labels_match(ssel, labels):
                c.error(where, f"Service {name!r}'s selector {ssel} does not match {labels}")
            for p in sspec.get("ports") or []:
                target = p.get("targetPort", p.get("port"))
                proto = p.get("protocol", "TCP")
                pw = f"Service {name!r} port {p.get('name')!r}"
                if isinstance(target, str):
                    got = ports_by_name.get(target)
                    if got is None:
                        c.error(where, f"{pw}: no container port named {target!r}")
                    elif got[1] != proto:
                        c.error(where, f"{pw}: {proto}, the container port {got[1]}")
                elif target not in ports_by_number:
                    c.error(where, f"{pw}: no containerPort {target}")
                elif ports_by_number[target] != proto:
                    c.error(where, f"{pw}: {proto}, the container port {ports_by_number[target]}")

    volumes = {}
    for v in pod.get("volumes") or []:
        if v.get("name") in volumes:
            c.error(where, f"volume {v.get('name')!r} given twice")
        volumes[v.get("name")] = v
    claims = {
        (t.get("metadata") or {}).get("name") for t in spec.get("volumeClaimTemplates") or []
    }
    for n in claims & set(volumes):
        c.error(where, f"{n!r} is both a volume and a volumeClaimTemplate")

    sc = pod.get("securityContext") or {}
    secret_files = {}
    for name, v in volumes.items():
        s = v.get("secret")
        if s is None:
            continue
        vw = f"{where}: volume {name!r}"
        sname = s.get("secretName")
        if not sname:
            c.error(vw, "no secretName")
        items = s.get("items")
        given = secrets.get(sname)
        keys = None
        if given is not None:
            keys = set((given.get("data") or {}) | (given.get("stringData") or {}))
        if items:
            files = set()
            for it in items:
                if keys is not None and it.get("key") not in keys:
                    c.error(vw, f"Secret {sname!r} has no key {it.get('key')!r}")
                files.add(it.get("path"))
                mode = it.get("mode")
                if isinstance(mode, int) and mode & 0o007:
                    c.error(vw, f"item {it.get('path')!r}: mode {mode:#o} lets others read it")
        else:
            files = keys
        secret_files[name] = files
        mode = s.get("defaultMode", 0o644)
        if not isinstance(mode, int):
            continue
        if mode & 0o007:
            c.error(vw, f"defaultMode {mode:#o} lets others read the secret (0400 or 0440)")
        user = sc.get("runAsUser")
        if not mode & 0o040 and user not in (None, 0) and sc.get("fsGroup") is None:
            c.error(
                vw,
                f"defaultMode {mode:#o} with runAsUser {user} and no fsGroup: the files "
                "belong to root and the user cannot read them",
            )

    for k in containers:
        kw = f"{where}: container {k.get('name')!r}"
        mounts = {}
        for m in k.get("volumeMounts") or []:
            if m.get("name") not in volumes and m.get("name") not in claims:
                c.error(kw, f"volumeMount {m.get('name')!r}: no such volume or claim template")
            if m.get("mountPath") in mounts:
                c.error(kw, f"two volumes mounted at {m.get('mountPath')}")
            mounts[m.get("mountPath")] = m.get("name")
        env = {e.get("name") for e in k.get("env") or []}
        for a in list(k.get("command") or []) + list(k.get("args") or []):
            for var in VAR_REF.findall(str(a)):
                if var not in env:
                    c.error(kw, f"$({var}) in its command line is not one of its env names")
        args = [str(a) for a in k.get("args") or []]
        if args and args[0] == "engine":
            ports = {p.get("containerPort") for p in k.get("ports") or []}
            check_engine(kw, k, mounts, secret_files, ports, flags, c)
            peers = [v for f, v in parse_args(args[1:]) if f == "--peer"]
            check_targets(kw, peers, sets, services, c)
        if args[:2] == ["pet", "replay"]:
            pairs = parse_args(args[2:])
            for flag, _ in pairs:
                if flags is not None and flag not in flags["pet replay"]:
                    c.error(kw, f"`offhost pet replay` has no flag {flag}")
            engines = [v for f, v in pairs if f == "--engine"]
            check_targets(kw, engines, sets, services, c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifests", nargs="+")
    ap.add_argument("--offhost", metavar="BIN", help="check engine flags: BIN engine --help")
    ap.add_argument("--kubernetes-version", help="schema version (default: the newest known)")
    a = ap.parse_args()
    c = Checker()
    docs = []
    for path in a.manifests:
        docs += load(path, c)
    version = check_schema(docs, a.kubernetes_version, c)
    flags = engine_flags(a.offhost) if a.offhost else None
    services, secrets, sets = {}, {}, {}
    for _, d in docs:
        name = (d.get("metadata") or {}).get("name")
        if d.get("kind") == "Service":
            services[name] = d
        elif d.get("kind") == "Secret":
            secrets[name] = d
        elif d.get("kind") == "StatefulSet":
            spec = d.get("spec") or {}
            sets[name] = (spec.get("serviceName"), spec.get("replicas", 1))
    workloads = 0
    for where, d in docs:
        if d.get("kind") in ("StatefulSet", "Deployment", "DaemonSet", "Job"):
            workloads += 1
            check_workload(where, d, services, secrets, flags, sets, c)
    for p in c.problems:
        print(p, file=sys.stderr)
    if c.problems:
        print(f"check_k8s: {len(c.problems)} problem(s)", file=sys.stderr)
        return 1
    print(
        f"check_k8s: {len(docs)} documents, {workloads} workload(s): YAML, schema "
        f"(Kubernetes {version}, strict) and references fine"
        + ("" if flags is None else f"; flags in `{a.offhost} engine|pet replay --help`")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
