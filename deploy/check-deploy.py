#!/usr/bin/env python3
"""Checks the deploy/ files as far as this machine can (Docker and Kubernetes do not run here).

  deploy/check-deploy.py --relay BUILD/relay/outbox-relay [--image-build]

1. Every YAML file under deploy/ parses (PyYAML).
2. Kubernetes manifests: kinds and names; volume mounts name defined volumes; probe
   ports exist and probes go to the pod address, on which the probed relay listens (not
   loopback); ConfigMap and Secret references resolve; the PodDisruptionBudget selects
   the relay Deployment; terminationGracePeriodSeconds covers the SIGTERM drain
   (amqp.confirm_timeout_ms of the relay configuration the pod runs); kustomization lists
   files that exist.
3. docker-compose.yml: secrets, configs, mounted files and depends_on resolve; the relay listens on the
   container address when it publishes a port; stop_grace_period covers the drain.
4. Every relay configuration shipped (ConfigMap, image, compose, systemd) passes
   `outbox-relay check-config` without warnings (secret files and CA files are replaced
   by temporary stand-ins); the compose and image configurations, plaintext on Docker's
   private network, with exactly the "server is not verified" warning.
5. The systemd unit passes `systemd-analyze verify` and scores at most 2.0 in
   `systemd-analyze security --offline`.
6. The Dockerfile's runtime packages exist in apt; with --image-build, the build steps run
   (deploy/docker/build-steps.sh build) into a temporary root and `check-runtime` confirms
   the slim stage provides every shared library.
Prints one line per check; exits 1 if any failed.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

DEPLOY = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def relay_check_config(relay, text, origin, tmp, plaintext=False):
    """Runs check-config on a relay YAML with stand-ins for secret and CA files.

    plaintext: the configuration talks to servers on Docker's private network without
    TLS, so check-config's one "server is not verified" warning is expected (and must be
    there); any other warning still fails."""
    def stand_in(match):
        path = os.path.join(tmp, "secret-" + str(abs(hash(match.group(1)))))
        with open(path, "w") as f:
            f.write("stand-in-secret\n")
        return "${file:" + path + "}"
    text = re.sub(r"\$\{file:([^}]+)\}", stand_in, text)
    ca = os.path.join(tmp, "ca.crt")
    open(ca, "w").write("stand-in")
    text = re.sub(r"(ca_file|cert_file|key_file): \S+", lambda m: m.group(1) + ": " + ca, text)
    path = os.path.join(tmp, "relay-" + str(abs(hash(origin))) + ".yaml")
    with open(path, "w") as f:
        f.write(text)
    env = dict(os.environ, OUTBOX_PG_HOST="db", OUTBOX_PG_DATABASE="shop", OUTBOX_PG_USER="relay",
               OUTBOX_AMQP_HOST="mq", OUTBOX_AMQP_USER="relay",
               OUTBOX_PG_PORT="5432", OUTBOX_AMQP_PORT="5672")
    r = subprocess.run([relay, "check-config", path], capture_output=True, text=True, env=env)
    out = (r.stdout + r.stderr).strip().replace(path, origin)
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    expected = [w for w in warnings if plaintext and "is not verified for" in w]
    check(r.returncode == 0 and warnings == expected and len(expected) == int(plaintext),
          f"check-config {origin}: {out.splitlines()[-1] if out else ''}")
    return yaml.safe_load(text)


def listens_on_pod_address(listen):
    """True when a relay's http.listen is reachable from outside the pod (0.0.0.0, ::);
    a port alone, 127.0.0.1, localhost and [::1] are loopback."""
    host = listen.rpartition(":")[0]
    return host in ("0.0.0.0", "[::]")


def confirm_timeout_s(config):
    return config.get("amqp", {}).get("confirm_timeout_ms", 30000) / 1000


def check_yaml_parses():
    files = sorted(glob.glob(os.path.join(DEPLOY, "**", "*.y*ml"), recursive=True))
    for path in files:
        try:
            load_all(path)
            check(True, f"YAML parses: {os.path.relpath(path, DEPLOY)}")
        except yaml.YAMLError as e:
            check(False, f"YAML parses: {os.path.relpath(path, DEPLOY)}: {e}")


def kubelet_file_access(volume, pod_security):
    """(owner uid, group gid, mode) the kubelet gives the files of a Secret or ConfigMap
    volume: owned by root, mode defaultMode (0644 when unset); with the pod's fsGroup the
    group is fsGroup and group read is added. Without fsGroup a non-root user reads only
    what "other" may read."""
    source = volume.get("secret") or volume.get("configMap") or {}
    mode = source.get("defaultMode", 0o644)
    fs_group = pod_security.get("fsGroup")
    if fs_group is None:
        return 0, 0, mode
    return 0, fs_group, mode | 0o440


def readable_by(access, uid, gids):
    owner, group, mode = access
    return bool(uid == owner and mode & 0o400 or group in gids and mode & 0o040 or mode & 0o004)


def load_kubernetes():
    """All documents of the manifests kustomization.yaml lists."""
    k8s = os.path.join(DEPLOY, "kubernetes")
    kust = load_all(os.path.join(k8s, "kustomization.yaml"))[0]
    return [d for res in kust["resources"] for d in load_all(os.path.join(k8s, res))]


def pod_specs(docs):
    for d in docs:
        if d.get("kind") == "Deployment":
            yield d, d["spec"]["template"]["spec"]


def check_kubernetes(relay, tmp):
    k8s = os.path.join(DEPLOY, "kubernetes")
    docs = []
    for path in sorted(glob.glob(os.path.join(k8s, "*.yaml"))):
        if os.path.basename(path) == "kustomization.yaml":
            kust = load_all(path)[0]
            for res in kust["resources"]:
                check(os.path.exists(os.path.join(k8s, res)), f"kustomization lists existing {res}")
            continue
        docs += load_all(path)
    for d in docs:
        check(bool(d.get("apiVersion")) and bool(d.get("kind")) and bool(d.get("metadata", {}).get("name")),
              f"k8s {d.get('kind')}/{d.get('metadata', {}).get('name')}: apiVersion, kind, name")
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    relay_configs = {}
    for cm_name, cm in configmaps.items():
        for key, text in cm["data"].items():
            relay_configs[key] = relay_check_config(relay, text, f"kubernetes ConfigMap {cm_name}/{key}", tmp)
    for dep, spec in pod_specs(docs):
        name = dep["metadata"]["name"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "configMap" in v:
                check(v["configMap"]["name"] in configmaps, f"{name}: volume {v['name']} names a defined ConfigMap")
            if "secret" in v:
                sname = v["secret"]["secretName"]
                ok = sname in secrets
                for item in v["secret"].get("items", []):
                    ok = ok and item["key"] in secrets[sname].get("stringData", {})
                check(ok, f"{name}: volume {v['name']} names a defined Secret and keys")
        containers = spec.get("containers", []) + spec.get("initContainers", [])
        for c in containers:
            security = spec.get("securityContext", {})
            uid = c.get("securityContext", {}).get("runAsUser", security.get("runAsUser", 0))
            gids = {c.get("securityContext", {}).get("runAsGroup", security.get("runAsGroup", 0)),
                    security.get("fsGroup")} | set(security.get("supplementalGroups", []))
            for m in c.get("volumeMounts", []):
                check(m["name"] in volumes, f"{name}/{c['name']}: mount {m['name']} is a defined volume")
                if m["name"] in volumes and uid != 0:
                    access = kubelet_file_access(volumes[m["name"]], security)
                    check(readable_by(access, uid, gids),
                          f"{name}/{c['name']}: uid {uid} can read the files of {m['name']} "
                          f"(mode {access[2]:04o}, group {access[1]})")
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    check(ref["key"] in secrets.get(ref["name"], {}).get("stringData", {}),
                          f"{name}/{c['name']}: env {e['name']} names a defined Secret and key")
            ports = {p.get("name") for p in c.get("ports", [])} | {p["containerPort"] for p in c.get("ports", [])}
            probes = [probe for probe in ("livenessProbe", "readinessProbe", "startupProbe") if probe in c]
            for probe in probes:
                port = c[probe]["httpGet"]["port"]
                check(port in ports, f"{name}/{c['name']}: {probe} port {port} is exposed")
                # The kubelet probes from the node: a host of 127.0.0.1 is the node's loopback.
                check(not c[probe]["httpGet"].get("host"), f"{name}/{c['name']}: {probe} probes the pod address")
            args = c.get("args", [])
            if "--config" in args:
                key = os.path.basename(args[args.index("--config") + 1])
                check(key in relay_configs, f"{name}/{c['name']}: runs ConfigMap key {key}")
                if probes:
                    listen = str(relay_configs.get(key, {}).get("http", {}).get("listen", ""))
                    check(listens_on_pod_address(listen),
                          f"{name}/{c['name']}: probed, so http.listen '{listen}' is the pod address, not loopback")
                grace = spec.get("terminationGracePeriodSeconds", 30)
                need = confirm_timeout_s(relay_configs.get(key, {})) + 10
                check(grace >= need, f"{name}: terminationGracePeriodSeconds {grace} covers the drain ({need:.0f} s)")
        if name == "outbox-relay":
            labels = dep["spec"]["template"]["metadata"]["labels"]
            pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
            check(any(all(labels.get(k) == v for k, v in p["spec"]["selector"]["matchLabels"].items()) for p in pdbs),
                  "a PodDisruptionBudget selects the relay Deployment")
            check(dep["spec"]["replicas"] > 1, "the relay Deployment is scaled (replicas > 1)")
    sidecars = [c for _, s in pod_specs(docs) for c in s.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    check(len(sidecars) == 1 and "readinessProbe" not in sidecars[0],
          "the order service runs the relay as a native sidecar without a readiness probe")


def check_compose(relay, tmp):
    path = os.path.join(DEPLOY, "docker", "docker-compose.yml")
    c = load_all(path)[0]
    services = c["services"]
    for name, s in services.items():
        for sec in s.get("secrets", []):
            check(sec in c.get("secrets", {}), f"compose {name}: secret {sec} is defined")
        for cfg in s.get("configs", []):
            check(cfg["source"] in c.get("configs", {}), f"compose {name}: config {cfg['source']} is defined")
        deps = s.get("depends_on", {})
        for dep in deps:
            check(dep in services, f"compose {name}: depends on defined service {dep}")
        for vol in s.get("volumes", []):
            source = vol.split(":")[0]
            if source.startswith("."):  # a file of the repository, relative to the compose file
                check(os.path.exists(os.path.join(DEPLOY, "docker", source)), f"compose {name}: mounts existing {source}")
    for name, cfg in c.get("configs", {}).items():
        relay_check_config(relay, cfg["content"].replace("$$", "$"), f"compose config {name}", tmp, plaintext=True)
    relay_check_config(relay, open(os.path.join(DEPLOY, "docker", "admin.yaml")).read(), "docker/admin.yaml", tmp,
                       plaintext=True)
    image_cfg = relay_check_config(relay, open(os.path.join(DEPLOY, "docker", "relay.yaml")).read(),
                                   "docker/relay.yaml", tmp, plaintext=True)
    if services["relay"].get("ports"):
        listen = str(image_cfg.get("http", {}).get("listen", ""))
        check(listens_on_pod_address(listen),
              f"compose relay: publishes a port, so http.listen '{listen}' is the container address, not loopback")
    grace = int(services["relay"]["stop_grace_period"].rstrip("s"))
    check(grace >= confirm_timeout_s(image_cfg) + 10, f"compose relay: stop_grace_period {grace}s covers the drain")


def check_systemd(relay, tmp, man_dir):
    unit = os.path.join(DEPLOY, "systemd", "outbox-relay.service")
    relay_check_config(relay, open(os.path.join(DEPLOY, "systemd", "relay.yaml")).read(), "systemd/relay.yaml", tmp)
    if not shutil.which("systemd-analyze"):
        check(False, "systemd-analyze is installed")
        return
    copy = os.path.join(tmp, "outbox-relay.service")
    open(copy, "w").write(open(unit).read().replace("/usr/local/bin/outbox-relay", os.path.abspath(relay)))
    # verify runs man(1) for each Documentation=man:... page: the build's own pages
    env = dict(os.environ, MANPATH=os.path.abspath(man_dir)) if man_dir else None
    r = subprocess.run(["systemd-analyze", "verify", copy], capture_output=True, text=True, env=env)
    check(r.returncode == 0 and not r.stderr.strip(), f"systemd-analyze verify: {r.stderr.strip() or 'clean'}")
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", copy], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", r.stdout)
    check(m is not None and float(m.group(1)) <= 2.0,
          f"systemd-analyze security: exposure {m.group(1) if m else '?'} (at most 2.0)")
    text = open(unit).read()
    grace = int(re.search(r"TimeoutStopSec=(\d+)", text).group(1))
    check(grace >= 40 and "KillSignal=SIGTERM" in text, f"systemd: SIGTERM with TimeoutStopSec={grace} covers the drain")


def check_docker(image_build):
    steps = os.path.join(DEPLOY, "docker", "build-steps.sh")
    check(subprocess.run(["bash", "-n", steps]).returncode == 0, "build-steps.sh: bash syntax")
    pkgs = subprocess.run([steps, "runtime-packages"], capture_output=True, text=True).stdout.split()
    r = subprocess.run(["apt-cache", "show", "--no-all-versions"] + pkgs, capture_output=True, text=True)
    check(r.returncode == 0, f"runtime packages exist in apt: {' '.join(pkgs)}")
    dockerfile = open(os.path.join(DEPLOY, "docker", "Dockerfile")).read()
    froms = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    check(froms == ["debian:${DEBIAN_RELEASE}", "debian:${DEBIAN_RELEASE}-slim"],
          f"Dockerfile: two stages on one Debian release ({', '.join(froms)})")
    default = re.findall(r"^ARG DEBIAN_RELEASE=(\S+)", dockerfile, re.M)
    check(default == ["13"], f"Dockerfile: Debian 13 (the current stable) by default (DEBIAN_RELEASE={default})")
    # Each release's runtime list names its own versioned library packages.
    lists = {rel: subprocess.run([steps, "runtime-packages", rel], capture_output=True, text=True)
             for rel in ("12", "13")}
    check(all(r.returncode == 0 for r in lists.values()) and lists["12"].stdout != lists["13"].stdout
          and "libpqxx-7.10" in lists["13"].stdout.split(), "build-steps.sh: a runtime package list for 12 and for 13")
    r = subprocess.run([steps, "runtime-packages", "11"], capture_output=True, text=True)
    check(r.returncode != 0 and "'11'" in r.stderr, f"build-steps.sh: an unsupported release is refused ({r.stderr.strip()})")
    check(re.search(r"^USER 10001", dockerfile, re.M) is not None, "Dockerfile: runs as an unprivileged user")
    if not image_build:
        print("skip build steps (pass --image-build to run them)")
        return
    root = tempfile.mkdtemp(prefix="outbox-image-root-")
    src = tempfile.mkdtemp(prefix="outbox-image-src-")
    repo = os.path.dirname(DEPLOY)
    # The committed tree, as a clean clone (the Docker build context) would have it.
    subprocess.run(f"git -C {repo} archive HEAD | tar -x -C {src}", shell=True, check=True)
    r = subprocess.run([steps, "build", src, root, os.path.join(src, "build-image")], capture_output=True, text=True)
    check(r.returncode == 0, "build-steps.sh build (committed tree): " + (r.stdout.strip().splitlines() or ["?"])[-1])
    r = subprocess.run([steps, "check-runtime", root], capture_output=True, text=True)
    check(r.returncode == 0, "build-steps.sh check-runtime: " + (r.stdout + r.stderr).strip())
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--relay", required=True, help="the outbox-relay binary")
    parser.add_argument("--man-dir", help="a man page folder (MANPATH) holding man1/outbox-relay.1.gz: "
                        "systemd-analyze verify looks up the unit's Documentation=man:outbox-relay(1)")
    parser.add_argument("--image-build", action="store_true", help="also run the image's build steps (slow)")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="outbox-check-deploy-")
    try:
        check_yaml_parses()
        check_kubernetes(args.relay, tmp)
        check_compose(args.relay, tmp)
        check_systemd(args.relay, tmp, args.man_dir)
        check_docker(args.image_build)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} check(s) failed" if failures else "all deploy checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
