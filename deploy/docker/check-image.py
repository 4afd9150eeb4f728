#!/usr/bin/python3
"""Builds the image from deploy/docker/Dockerfile with podman and runs it for real.

  deploy/docker/check-image.py [image|compose|all]      (as root; default: all)

image    makes the base images (mmdebstrap) when missing, builds the image, checks its file
         system (no compiler, no secret, the paths the manifests use) and configuration
         (user, port, stop signal), then runs it against the local PostgreSQL and RabbitMQ
         (deploy/local/servers.sh): `migrate`, then `run` twice while the example order
         service from the image writes orders:
           docker:     as `docker run` does: the shipped configuration, Docker secrets, the
                       compose file's hardening;
           kubernetes: as the relay Deployment's pod does: its arguments, the ConfigMap and
                       Secret mounted where it mounts them with the kubelet's file modes,
                       its user, group and fsGroup, a read-only root, no capabilities, its
                       probes from outside the container; the order service's container of
                       order-service.yaml writes the orders.
         Each run checks that every committed order's event arrives in a queue, /healthz and
         /metrics answer from inside the container, the relay runs as uid 10001, SIGTERM
         drains and exits 0 within the grace period, and no secret reaches the logs.
compose  docker-compose.yml with podman-compose (and compose.standins.yml: PostgreSQL and
         RabbitMQ images built from Debian packages), brought up service by service in the
         order of its depends_on conditions (podman-compose 1.0 ignores them), same checks.
Prints one line per check, the image size and the start-up time; exits 1 if any failed.
"""
import argparse
import os
import re
import secrets
import shutil
import sys
import time
import urllib.parse

import yaml

sys.dont_write_bytecode = True  # no __pycache__ in the repository (the image's build context)
try:
    import pika
except ImportError:
    sys.exit("check-image.py: python3-pika is missing: deploy/local/install-deps.sh --image")

import image_check_lib as lib
from image_check_lib import DEPLOY, DOCKER, REPO, check, podman

HOST_FROM_CONTAINER = "10.0.2.2"  # slirp4netns with allow_host_loopback: the host's 127.0.0.1
NETWORK = "slirp4netns:allow_host_loopback=true"
METRICS_PORT = 38917               # host ports of this check (38000-38999)
K8S_METRICS_PORT = 38918          # and 38919: one per relay container of the manifests
COMPOSE_METRICS_PORT = 38921
COMPOSE_UI_PORT = 38922
RELAY_ROLE, PRODUCER_ROLE, RELAY_LOGIN = "image_check_relay", "image_check_producer", "image_check_relay_login"
SECRET_NAMES = ("pg_admin_password", "pg_password", "amqp_password")


def compose_file():
    return lib.check_deploy.load_all(os.path.join(DOCKER, "docker-compose.yml"))[0]


class LocalServers:
    """The local PostgreSQL (a database per run, the least-privilege roles of roles.sql;
    through psql) and RabbitMQ (see EventQueue)."""

    def __init__(self):
        if "OUTBOX_PG_DSN" not in os.environ:
            out = lib.run(["bash", os.path.join(DEPLOY, "local", "servers.sh"), "env"]).stdout
            for name, value in re.findall(r"^export (\w+)='([^']*)'$", out, re.M):
                os.environ[name] = value
        self.dsn = dict(kv.split("=", 1) for kv in os.environ["OUTBOX_PG_DSN"].split())
        self.amqp = urllib.parse.urlparse(os.environ["OUTBOX_AMQP_URI"])
        self.relay_password = secrets.token_hex(16)

    def psql(self, sql, dbname=None, variables=()):
        """SQL (psql input, so :'variables' work) as the servers' admin; the rows, '|'-separated."""
        dsn = " ".join(f"{k}={v}" for k, v in dict(self.dsn, dbname=dbname or self.dsn.get("dbname", "postgres")).items())
        cmd = ["psql", dsn, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"]
        for k, v in variables:
            cmd += ["-v", f"{k}={v}"]
        return lib.run(cmd, input=sql).stdout.split()

    def dsn_for(self, dbname, user, host=HOST_FROM_CONTAINER):
        return f"host={host} port={self.dsn.get('port', 5432)} dbname={dbname} user={user}"

    def fresh_database(self, name):
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);\nCREATE DATABASE "{name}";')

    def grant_roles(self, dbname):
        """schema/roles.sql as the compose file's grants service runs it, and a login role."""
        roles = open(os.path.join(REPO, "schema", "roles.sql")).read()
        self.psql(roles + "\nSELECT format('CREATE ROLE %I LOGIN IN ROLE %I PASSWORD %L', :'login', :'relay_role', :'pw')"
                  " WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'login') \\gexec\n", dbname,
                  [("schema", "outbox"), ("relay_role", RELAY_ROLE), ("producer_role", PRODUCER_ROLE),
                   ("retention", "true"), ("login", RELAY_LOGIN), ("pw", self.relay_password)])

    def rows(self, dbname):
        """{message_id: published?} of the outbox."""
        out = self.psql("SELECT message_id, published_at IS NOT NULL FROM outbox.outbox", dbname)
        return {mid: done == "t" for mid, done in (line.split("|") for line in out)}

    def cleanup(self, *databases):
        self.psql("".join(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);\n' for name in databases)
                  + "".join(f"DROP ROLE IF EXISTS {role};\n" for role in (RELAY_LOGIN, RELAY_ROLE, PRODUCER_ROLE)))

    def container_env(self, dbname, user):
        """The variables the shipped relay.yaml reads, for the local servers."""
        return {"OUTBOX_PG_HOST": HOST_FROM_CONTAINER, "OUTBOX_PG_PORT": str(self.dsn.get("port", 5432)),
                "OUTBOX_PG_DATABASE": dbname, "OUTBOX_PG_USER": user,
                "OUTBOX_AMQP_HOST": HOST_FROM_CONTAINER, "OUTBOX_AMQP_PORT": str(self.amqp.port or 5672),
                "OUTBOX_AMQP_USER": urllib.parse.unquote(self.amqp.username)}


class EventQueue:
    """An exclusive queue bound to the example's exchange "orders" (order.#), declared
    before the relay publishes; collects the message ids that arrive."""

    def __init__(self, uri):
        params = pika.URLParameters(uri)
        params.heartbeat = 0
        self.conn = pika.BlockingConnection(params)
        self.ch = self.conn.channel()
        self.ch.exchange_declare("orders", "topic", durable=True)  # as event-printer --declare
        self.queue = self.ch.queue_declare("", exclusive=True).method.queue
        self.ch.queue_bind(self.queue, "orders", "order.#")
        self.ids = set()

    def collect(self, wanted, timeout_s):
        """Takes messages until WANTED ids have all arrived, or TIMEOUT_S; True when all did."""
        started = time.monotonic()
        while not wanted <= self.ids and time.monotonic() - started < timeout_s:
            method, props, _ = self.ch.basic_get(self.queue, auto_ack=True)
            if method is None:
                time.sleep(0.1)
            else:
                self.ids.add(props.message_id)
        return wanted <= self.ids

    def close(self):
        self.conn.close()


def run_args(env=None, mounts=(), extra=()):
    args = ["--network", NETWORK]
    for k, v in (env or {}).items():
        args += ["-e", f"{k}={v}"]
    for host, target in mounts:
        args += ["-v", f"{host}:{target}:ro"]
    return args + list(extra)


def compose_hardening(service):
    """podman flags for a compose service's read_only, cap_drop and security_opt."""
    flags = ["--read-only"] if service.get("read_only") else []
    flags += [a for cap in service.get("cap_drop", []) for a in ("--cap-drop", cap)]
    flags += [a for opt in service.get("security_opt", []) for a in ("--security-opt", opt.replace(":true", ""))]
    return flags


def wait_all_published(servers, dbname, timeout_s):
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        rows = servers.rows(dbname)
        if rows and all(rows.values()):
            return rows
        time.sleep(0.2)
    return servers.rows(dbname)


def check_events(what, servers, dbname, queue, committed, exact=True):
    """Every outbox row published and arrived; as many rows as orders committed (or at
    least as many, when the writer was stopped between a commit and its report)."""
    rows = wait_all_published(servers, dbname, 90)
    arrived = queue.collect(set(rows), 30)
    check((len(rows) == committed if exact else len(rows) >= committed) and all(rows.values()) and arrived,
          f"{what}: {committed} orders committed, {len(rows)} outbox rows, {sum(rows.values())} marked published, "
          f"{len(set(rows) & queue.ids)} of them arrived in the queue")
    return len(rows)


def check_drain_kept_promises(what, servers, dbname, queue):
    """After a SIGTERM under load: every row marked published arrived (it had its
    broker ack); the others stay pending for the next relay."""
    rows = servers.rows(dbname)
    published = {mid for mid, done in rows.items() if done}
    queue.collect(published, 30)
    check(published <= queue.ids, f"{what}: after SIGTERM under load, all {len(published)} rows marked published "
          f"arrived; {len(rows) - len(published)} left pending for the next relay")


def committed_orders(output):
    m = re.search(r"order-service: (\d+) orders written", output)
    return int(m.group(1)) if m else -1


def kubernetes_pods():
    """{deployment name: (deployment, pod spec)} of the manifests."""
    docs = lib.check_deploy.load_kubernetes()
    return {d["metadata"]["name"]: (d, spec) for d, spec in lib.check_deploy.pod_specs(docs)}, docs


def check_image_contents(image, secret_values, kube):
    """Configuration and file system: what the Dockerfile promises and the manifests use."""
    cfg = lib.image_config(image)["Config"]
    pods, _ = kube
    users = {f"{s['securityContext']['runAsUser']}:{s['securityContext']['runAsGroup']}" for _, s in pods.values()}
    check(users == {cfg.get("User")}, f"image user {cfg.get('User')} is the manifests' runAsUser:runAsGroup {users}")
    ports = {f"{p['containerPort']}/tcp" for _, s in pods.values()
             for c in s.get("containers", []) + s.get("initContainers", []) for p in c.get("ports", [])}
    check(ports and ports <= set(cfg.get("ExposedPorts", {})),
          f"image exposes the manifests' container ports {sorted(ports)}")
    check(cfg.get("StopSignal") == "SIGTERM", f"image stop signal {cfg.get('StopSignal')}")
    cmd_config = cfg["Cmd"][cfg["Cmd"].index("--config") + 1]
    root = lib.mounted_image(image)
    try:
        found = lib.compilers_in(root)
        check(not found, "image holds no compiler or build tool" + (f": {', '.join(found[:8])}" if found else ""))
        leaks = lib.secrets_in(root, secret_values)
        check(not leaks, f"image holds none of {len(secret_values)} secrets (compose secret files, test passwords, "
              "keyring keys) and no private key" + (f": {leaks[:5]}" if leaks else ""))
        need = ["/usr/local/bin/outbox-relay", "/usr/local/bin/order-service", "/usr/local/bin/event-printer",
                "/usr/share/outbox-relay/roles.sql", cmd_config, "/bin/sh", "/bin/bash"]
        scripts = "\n".join(a for _, s in pods.values() for c in s.get("containers", []) for a in c.get("args", []))
        need += re.findall(r"--schemas (\S+)", scripts)
        missing = [p for p in need if not os.path.exists(root + p)]
        check(not missing, f"image has {', '.join(need)}" + (f"; missing {missing}" if missing else ""))
        passwd = open(root + "/etc/passwd").read()
        uid = cfg["User"].split(":")[0]
        check(re.search(rf"^[^:]+:[^:]*:{uid}:", passwd, re.M) is not None, f"image /etc/passwd names uid {uid}")
    finally:
        podman("image", "unmount", image, check_rc=False)
    size = int(lib.image_config(image)["Size"])
    print(f"image {image}: {size / 1e6:.1f} MB")
    return cmd_config


def docker_secrets(work, servers):
    """The Docker secrets the shipped relay.yaml reads: [(host file, /run/secrets/NAME)]."""
    sdir = lib.private_dir(work, "docker-secrets", {"pg_password": servers.relay_password,
                                                    "amqp_password": urllib.parse.unquote(servers.amqp.password)})
    return [(os.path.join(sdir, f), f"/run/secrets/{f}") for f in ("pg_password", "amqp_password")]


def migrate(what, image, servers, db, mounts):
    """`outbox-relay migrate` from the image with the shipped configuration, as the
    database owner; then roles.sql and the relay's login role."""
    admin = servers.dsn.get("user", "postgres")
    servers.fresh_database(db)
    r = podman("run", "--rm", *run_args(servers.container_env(db, admin), mounts), image,
               "migrate", "--config", "/etc/outbox-relay/relay.yaml", check_rc=False)
    check(r.returncode == 0, f"{what}: migrate as {admin}: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    servers.grant_roles(db)
    return admin


def docker_run(image, servers, work, grace_s, secret_values):
    """`docker run` with the shipped configuration and Docker secrets."""
    db, name, writer = "outbox_image_check_docker", "outbox-check-docker", "outbox-check-docker-orders"
    lib.remove_containers(name, writer)
    mounts = docker_secrets(work, servers)
    admin = migrate("docker", image, servers, db, mounts)
    queue = EventQueue(os.environ["OUTBOX_AMQP_URI"])
    relay = compose_file()["services"]["relay"]
    started = time.monotonic()
    podman("run", "-d", "--name", name, "-p", f"127.0.0.1:{METRICS_PORT}:9187",
           *run_args(servers.container_env(db, RELAY_LOGIN), mounts, compose_hardening(relay)), image)
    ready = lib.wait_ready(f"http://127.0.0.1:{METRICS_PORT}/readyz", 60)
    startup = time.monotonic() - started if ready is not None else None
    check(ready is not None, f"docker: ready (/readyz 200) {startup:.2f} s after `podman run`" if ready is not None
          else "docker: ready within 60 s")
    # One keyring for every order-service container: the subject keys they wrap in the
    # database must be readable by the next one.
    keyring = make_keyring(image, work, servers, db)
    secret_values.update(keyring_keys(keyring, "docker"))
    writer_env = {"OUTBOX_PG_DSN": servers.dsn_for(db, admin), "OUTBOX_KEYRING": keyring}
    r = podman("run", "--rm", "--entrypoint", "order-service", *run_args(writer_env), image,
               "--orders", "300", "--rollback-every", "10", "--schemas", "/usr/share/outbox-relay/events",
               check_rc=False)
    committed = committed_orders(r.stdout)
    check(r.returncode == 0 and committed == 270, f"docker: order-service from the image: {r.stdout.strip()[:90]}")
    total = check_events("docker", servers, db, queue, committed)
    lib.check_http_inside(name, "docker", 9187, total)
    uid, gid = lib.image_config(image)["Config"]["User"].split(":")
    lib.check_process(name, "docker", uid, gid, no_new_privs=True, caps_dropped=True)
    podman("run", "-d", "--name", writer, "--entrypoint", "order-service", *run_args(writer_env), image,
           "--orders", "1000", "--schemas", "/usr/share/outbox-relay/events")
    time.sleep(2)
    lib.check_stop(name, "docker", grace_s, "terminationGracePeriodSeconds")
    code = podman("wait", writer, timeout=600).stdout.strip()
    r = podman("logs", writer, check_rc=False)
    out = r.stdout + r.stderr
    check(code == "0" and committed_orders(out) == 1000, f"docker: order-service wrote 1000 more orders meanwhile "
          f"(exit {code}): {out.strip()[:60]}")
    check_drain_kept_promises("docker", servers, db, queue)
    lib.check_logs_clean(name, "docker", {"pg_password": servers.relay_password})
    queue.close()
    lib.remove_containers(name, writer)
    return startup, db


def local_relay_config(key, text, servers, dbname, secrets_path):
    """The ConfigMap's relay.yaml for the local servers: their addresses, the login role
    and no TLS (they have none); every other setting as shipped. Passwords stay
    ${file:...} references into the Secret mount."""
    cfg = yaml.safe_load(text)
    pg_password = re.search(r"password=(\$\{file:[^}]+\})", cfg["postgres"]["dsn"]).group(1)
    # amqp.uris (every cluster node) since the manifests list the broker's nodes; the
    # local broker is one node, so the check runs on one uri.
    shipped_uris = cfg["amqp"].get("uris") or [cfg["amqp"]["uri"]]
    amqp_password = re.search(r"amqps?://[^:]+:(\$\{file:[^}]+\})@", shipped_uris[0]).group(1)
    check(pg_password.startswith("${file:" + secrets_path) and amqp_password.startswith("${file:" + secrets_path),
          f"kubernetes: ConfigMap {key} reads its passwords from the Secret mount {secrets_path}")
    cfg["postgres"]["dsn"] = servers.dsn_for(dbname, RELAY_LOGIN) + f" password={pg_password}"
    user = urllib.parse.unquote(servers.amqp.username)
    local_uri = f"amqp://{user}:{amqp_password}@{HOST_FROM_CONTAINER}:{servers.amqp.port or 5672}/%2f"
    cfg["amqp"]["uris" if "uris" in cfg["amqp"] else "uri"] = [local_uri] if "uris" in cfg["amqp"] else local_uri
    for section, keys in (("postgres", ("require_tls",)), ("amqp", ("require_tls", "ca_file"))):
        for key in keys:
            cfg[section].pop(key, None)
    return yaml.safe_dump(cfg, sort_keys=False)


def kubelet_volume_dir(work, pod_spec, volume, files):
    """The volume's files as the kubelet lays them out; made once per volume name (two
    containers of a pod share it)."""
    path = os.path.join(work, "k8s-" + volume["name"])
    if os.path.isdir(path):
        return path
    uid, gid, mode = lib.check_deploy.kubelet_file_access(volume, pod_spec.get("securityContext", {}))
    items = (volume.get("secret") or {}).get("items")
    chosen = {i["path"]: files[i["key"]] for i in items} if items else files
    return lib.private_dir(work, "k8s-" + volume["name"], chosen, uid, gid, mode)


def pod_run_args(work, pod_spec, container, files_by_volume, env):
    """podman flags for a container as its pod spec runs it."""
    sec = pod_spec.get("securityContext", {})
    csec = container.get("securityContext", {})
    args = ["--user", f"{sec['runAsUser']}:{sec['runAsGroup']}"]
    if "fsGroup" in sec:
        args += ["--group-add", str(sec["fsGroup"])]
    if csec.get("readOnlyRootFilesystem"):
        args += ["--read-only", "--read-only-tmpfs=false"]  # no tmpfs on /tmp: Kubernetes gives none
    if csec.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    args += [a for cap in csec.get("capabilities", {}).get("drop", []) for a in ("--cap-drop", cap)]
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = [(kubelet_volume_dir(work, pod_spec, volumes[m["name"]], files_by_volume[m["name"]]), m["mountPath"])
              for m in container.get("volumeMounts", [])]
    return run_args(env, mounts, args)


def keyring_keys(keyring, label):
    ring = yaml.safe_load(keyring)
    return dict({f"{label} keyring key {k}": v for k, v in ring["keys"].items()},
                **{f"{label} keyring blind index key {k}": v for k, v in ring["blind_index"]["keys"].items()})


def make_keyring(image, work, servers, db):
    """A keyring made by the example itself (it creates a missing one), for the Secret."""
    kdir = lib.private_dir(work, "keyring", {})
    os.chown(kdir, 10001, 10001)
    podman("run", "--rm", "--entrypoint", "order-service", "-v", f"{kdir}:/keyring",
           *run_args({"OUTBOX_PG_DSN": servers.dsn_for(db, servers.dsn.get("user", "postgres")),
                      "OUTBOX_KEYRING_FILE": "/keyring/keyring.yaml"}), image, "--orders", "0",
           "--schemas", "/usr/share/outbox-relay/events")
    return open(os.path.join(kdir, "keyring.yaml")).read()


def kubernetes_relays(pods):
    """[(label, pod spec, relay container)]: the relay Deployment's container and the
    order service pod's sidecar, each with its own host port for its probes."""
    found = []
    for pod_name, (_, spec) in pods.items():
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            if "--config" in c.get("args", []):
                found.append((f"kubernetes {pod_name}/{c['name']}", spec, c))
    return found


def start_pod_relay(image, work, label, spec, relay, files, host_port, name):
    """Starts a relay container as its pod spec does; checks its probes from outside."""
    check(relay["image"].rsplit("/", 1)[-1] == image.rsplit("/", 1)[-1], f"{label}: runs {relay['image']}, "
          "the image built here")
    config_path = relay["args"][relay["args"].index("--config") + 1]
    mounts = {m["mountPath"]: m["name"] for m in relay["volumeMounts"]}
    check(os.path.dirname(config_path) in mounts and os.path.dirname(config_path) != "/etc/outbox-relay",
          f"{label}: --config {config_path} is in a ConfigMap mount, beside the image's own relay.yaml")
    container_port = relay["ports"][0]["containerPort"]
    port_name = {p.get("name"): p["containerPort"] for p in relay["ports"]}
    started = time.monotonic()
    podman("run", "-d", "--name", name, "-p", f"127.0.0.1:{host_port}:{container_port}",
           *pod_run_args(work, spec, relay, files, {}), image, *relay["args"])
    alive = lib.wait_ready(f"http://127.0.0.1:{host_port}/healthz", 60)
    check(alive is not None, f"{label}: alive {time.monotonic() - started:.2f} s after `podman run`")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if probe not in relay:
            continue
        get = relay[probe]["httpGet"]
        port = port_name.get(get["port"], get["port"])
        budget = relay[probe].get("periodSeconds", 10) * relay[probe].get("failureThreshold", 3)
        took = lib.wait_ready(f"http://127.0.0.1:{host_port}{get['path']}", budget)
        check(port == container_port and took is not None, f"{label}: {probe} GET {get['path']} on port "
              f"{get['port']} ({port}) answers 200 from outside the container (within {budget} s)")
    return container_port


def kubernetes_run(image, servers, work, kube, secret_values):
    """The relay Deployment's pod and the order service pod's sidecar, as their specs run
    them, while order-service.yaml's order service writes orders."""
    pods, docs = kube
    db, writer = "outbox_image_check_k8s", "outbox-check-k8s-orders"
    relays = kubernetes_relays(pods)
    names = [f"outbox-check-k8s-{i}" for i in range(len(relays))]
    lib.remove_containers(writer, *names)
    admin = migrate("kubernetes", image, servers, db, docker_secrets(work, servers))
    amqp_password = urllib.parse.unquote(servers.amqp.password)
    keyring = make_keyring(image, work, servers, db)
    secret_values.update(keyring_keys(keyring, "kubernetes"))
    # Each Secret's and ConfigMap's data, for the local servers.
    label, spec, relay = relays[0]
    volumes = {v["name"]: v for v in spec["volumes"]}
    secrets_path = next(m["mountPath"] for m in relay["volumeMounts"]
                        if any(i["key"] == "pg-password" for i in volumes[m["name"]].get("secret", {}).get("items", [])))
    configmap = next(d for d in docs if d["kind"] == "ConfigMap")
    data = {configmap["metadata"]["name"]: {k: local_relay_config(k, v, servers, db, secrets_path)
                                            for k, v in configmap["data"].items()}}
    data["outbox-relay-secrets"] = {"pg-password": servers.relay_password, "amqp-password": amqp_password,
                                    "ca.crt": "unused\n"}
    data["order-service-secrets"] = {"pg-password": "unused-by-trust-auth"}
    data["order-service-keyring"] = {"keyring.yaml": keyring}

    def files_of(pod_spec):
        return {v["name"]: data[(v.get("secret") or {}).get("secretName") or v["configMap"]["name"]]
                for v in pod_spec.get("volumes", [])}

    queue = EventQueue(os.environ["OUTBOX_AMQP_URI"])
    ports = [start_pod_relay(image, work, label, spec, relay, files_of(spec), K8S_METRICS_PORT + i, names[i])
             for i, (label, spec, relay) in enumerate(relays)]
    # The order service container of order-service.yaml, its own command, writing orders.
    _, ospec = pods["order-service"]
    osvc = next(c for c in ospec["containers"] if c["name"] == "order-service")
    env = {e["name"]: e["value"] if "value" in e else
           data[e["valueFrom"]["secretKeyRef"]["name"]][e["valueFrom"]["secretKeyRef"]["key"]]
           for e in osvc.get("env", [])}
    env["OUTBOX_PG_DSN"] = servers.dsn_for(db, admin)  # the local server, as its superuser: no TLS, no password
    podman("run", "-d", "--name", writer, "--entrypoint", osvc["command"][0],
           *pod_run_args(work, ospec, osvc, files_of(ospec), env), image, *osvc["command"][1:], *osvc["args"])
    time.sleep(12)  # two or three rounds of its loop (50 orders, 5 s)
    lib.stop_timed(writer, 2)
    logs = podman("logs", writer, check_rc=False).stdout
    committed = sum(committed_orders(line) for line in logs.splitlines() if "orders written" in line)
    check(committed >= 100 and "denied" not in logs,
          f"kubernetes order-service/order-service: its command, variables and Secrets: wrote {committed} orders "
          f"({logs.strip().splitlines()[-1:] or logs})")
    total = check_events("kubernetes", servers, db, queue, committed, exact=False)
    podman("start", writer)
    time.sleep(2)
    for (label, spec, _), name, port in zip(relays, names, ports):
        lib.check_http_inside(name, label, port, 0)
        sec = spec["securityContext"]
        lib.check_process(name, label, sec["runAsUser"], sec["runAsGroup"], no_new_privs=True, caps_dropped=True)
        lib.check_stop(name, label, spec["terminationGracePeriodSeconds"], "terminationGracePeriodSeconds")
        lib.check_logs_clean(name, label, {"pg_password": servers.relay_password})
    lib.stop_timed(writer, 2)
    check_drain_kept_promises("kubernetes", servers, db, queue)
    print(f"kubernetes: {total} events published by {len(relays)} relays")
    queue.close()
    lib.remove_containers(writer, *names)


def image_check(image, work, secret_values):
    kube = kubernetes_pods()
    grace = kube[0]["outbox-relay"][1]["terminationGracePeriodSeconds"]
    servers = LocalServers()
    secret_values["relay test password"] = servers.relay_password
    startup = None
    try:
        startup, _ = docker_run(image, servers, work, grace, secret_values)
        kubernetes_run(image, servers, work, kube, secret_values)
    finally:
        lib.remove_containers("outbox-check-docker", "outbox-check-docker-orders", "outbox-check-k8s-0",
                              "outbox-check-k8s-1", "outbox-check-k8s-orders")
        servers.cleanup("outbox_image_check_docker", "outbox_image_check_k8s")
        check_image_contents(image, secret_values, kube)  # after the runs: their passwords and keys too
    if startup is not None:
        print(f"start-up: {startup:.2f} s from `podman run -d` to /readyz 200")


def ensure_compose_secrets():
    """deploy/docker/secrets/* as the compose file's header makes them; returns
    ({name: value}, names created here)."""
    sdir = os.path.join(DOCKER, "secrets")
    os.makedirs(sdir, exist_ok=True)
    values, created = {}, []
    for name in SECRET_NAMES:
        path = os.path.join(sdir, name)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(secrets.token_hex(16) + "\n")
            os.chmod(path, 0o644)  # `openssl rand -hex 16 > file` with umask 022, as the header says
            created.append(path)
        values[name] = open(path).read().strip()
    return values, created


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="all", choices=["image", "compose", "all"])
    parser.add_argument("--no-build", action="store_true",
                        help="check the image this script built before instead of building it again")
    parser.add_argument("--debian-release", choices=sorted(lib.CODENAMES), default="13",
                        help="the Dockerfile's DEBIAN_RELEASE (default 13, as the Dockerfile's)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("check-image.py: run as root (podman and bind mounts with the kubelet's file owners)", file=sys.stderr)
        return 2
    missing = [t for t in ("podman", "runc", "mmdebstrap", "podman-compose", "psql") if not shutil.which(t)]
    if missing:
        print(f"check-image.py: missing {', '.join(missing)}: deploy/local/install-deps.sh --image", file=sys.stderr)
        return 2
    work = lib.new_work_dir()
    lib.use_own_containers_conf(work)
    image = "localhost/" + compose_file()["x-relay-image"]["image"]
    secret_values, created = ensure_compose_secrets()
    try:
        lib.ensure_base_images(work, args.debian_release)
        if args.no_build:
            print(f"not built (--no-build): {image} of {lib.image_config(image)['Created']}")
        elif lib.build_image(image, os.path.join(work, "build.log"), args.debian_release) is None:
            return 1
        if args.what in ("image", "all"):
            image_check(image, work, secret_values)
        if args.what in ("compose", "all"):
            import compose_check
            compose_check.run(image, secret_values, COMPOSE_METRICS_PORT, COMPOSE_UI_PORT, build_relay=not args.no_build)
    except Exception as e:  # a step that could not run is a failed check, with its reason
        check(False, f"{type(e).__name__}: {e}")
    finally:
        for path in created:
            os.unlink(path)
        shutil.rmtree(work, ignore_errors=True)
    failures = lib.check_deploy.failures
    print(f"{len(failures)} check(s) failed" if failures else "all image checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
