#!/usr/bin/env python3
"""systemd_unit_test: the systemd unit, installed as docs/OPERATIONS.md says, under a real systemd.

  1. cpack builds outbox-relay_*.deb from this build folder;
  2. a Debian image with systemd as PID 1 (localhost/outbox-systemd:CODENAME, the host's
     release) is made with mmdebstrap when missing or when its recipe changed (its
     packages: systemd and the .deb's Depends, so the package installs with no download);
  3. a podman container boots it (--network=host: the test's PostgreSQL and RabbitMQ on
     the host's loopback), and every ```sh block of docs/OPERATIONS.md marked with
     SNIPPET_MARK runs in it as written, as root, in a folder holding the .deb and the
     two secret files; between the blocks the test does what the docs ask the reader to
     do by hand: edits /etc/outbox-relay/relay.yaml (its own schema, the servers'
     addresses; the example's ${file:...} secrets kept);
  4. the unit is active, a row enqueued in the test's schema reaches the test's queue
     and is marked published, no secret is in the journal, and `systemctl stop` ends it
     cleanly (SIGTERM, exit 0);
  5. a misspelled key, then a missing configuration file: each time the unit ends in
     `failed` and stays there (NRestarts=0 a few seconds later, longer than RestartSec),
     and the journal says why (the relay's message naming the key; systemd's
     243/CREDENTIALS and "Failed to set up credentials"); the key fixed, `systemctl
     restart` brings the unit back;
  6. the package removed, the hand install block (the repository's unit, the built
     relay in /usr/local/bin), the edit and the secrets block again: it publishes.

Any failure exits 1 with the step and what was seen. Needs root, podman (runc) and
mmdebstrap (deploy/local/install-deps.sh installs them), OUTBOX_PG_DSN and
OUTBOX_AMQP_URI (deploy/local/servers.sh env). Everything it creates (container,
schema, exchange, queue, scratch folder) is removed; the image is kept.
"""

import argparse
import fcntl
import hashlib
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

import pika
import psycopg2
import psycopg2.extensions
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
from script_steps import Failure, expect, step  # noqa: E402
from script_steps import run_process as run  # noqa: E402

SNIPPET_MARK = "<!-- snippet: run by tests/systemd/systemd_unit_test.py -->"
SNIPPETS = 3  # package + folders; secrets + enable; the hand install (docs/OPERATIONS.md, "systemd")
UNIT = "outbox-relay"
CREDENTIALS = f"/run/credentials/{UNIT}.service"
# The image: systemd as init; ca-certificates as on any server (the example's sslrootcert).
# The .deb's Depends are added, so the recipe (and the image) follows the package.
# Bump RECIPE_VERSION when the way the image is made changes.
BASE_PACKAGES = ["systemd", "systemd-sysv", "ca-certificates"]
RECIPE_VERSION = "1"
IMAGE_REPO = "localhost/outbox-systemd"
RECIPE_LABEL = "outbox.recipe"
# Longer than the unit's RestartSec=2s (and one more start): a restart would show by then.
SETTLE_S = 6


def os_release():
    with open("/etc/os-release") as f:
        return {k: v.strip('"') for k, v in (line.rstrip("\n").split("=", 1) for line in f if "=" in line)}


def prerequisites():
    missing = [c for c in ("podman", "runc", "mmdebstrap", "dpkg-deb") if not shutil.which(c)]
    expect(not missing, f"missing {', '.join(missing)}: run deploy/local/install-deps.sh (it installs them)")
    expect(os.geteuid() == 0, "run as root (podman with runc and systemd in the container, mmdebstrap)")
    for var in ("OUTBOX_PG_DSN", "OUTBOX_AMQP_URI"):
        expect(os.environ.get(var), f"{var} is not set: eval \"$(deploy/local/servers.sh env)\"")


# ------------------------------------------------------------------ the package ----

def build_deb(args, tmp):
    step("cpack: the outbox-relay package")
    out = tmp / "packages"
    # Only the relay's component: the test installs nothing else.
    run([args.cpack, "--config", args.build / "CPackConfig.cmake", "-B", out, "-D", "CPACK_COMPONENTS_ALL=relay"],
        timeout=300)
    debs = sorted(out.glob("outbox-relay_*.deb"))
    expect(len(debs) == 1, f"expected one outbox-relay_*.deb in {out}, found {[d.name for d in debs]}")
    return debs[0]


def deb_depends(deb):
    """The first alternative of each Depends entry: what the image must hold."""
    field = run(["dpkg-deb", "-f", deb, "Depends"]).stdout
    return sorted({entry.split("|")[0].split("(")[0].strip() for entry in field.split(",") if entry.strip()})


# -------------------------------------------------------------------- the image ----

def default_mirror():
    """The host's own Debian mirror (deploy/local/trixie-leg.sh reads it the same way)."""
    for path in sorted(pathlib.Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    try:
        for line in pathlib.Path("/etc/apt/sources.list").read_text().splitlines():
            words = line.split()
            if words and words[0] == "deb":
                uri = next((w for w in words[1:] if re.match(r"[a-z]+://", w)), None)
                if uri:
                    return uri
    except FileNotFoundError:
        pass
    return "http://deb.debian.org/debian"


def ensure_image(codename, depends):
    packages = sorted(set(BASE_PACKAGES) | set(depends))
    recipe = hashlib.sha256(f"{RECIPE_VERSION}\n{codename}\n{' '.join(packages)}".encode()).hexdigest()[:16]
    image = f"{IMAGE_REPO}:{codename}"
    step(f"the image {image} (recipe {recipe}: {' '.join(packages)})")
    cache = pathlib.Path(os.environ.get("OUTBOX_SYSTEMD_CACHE", "/var/tmp/outbox-systemd"))
    cache.mkdir(parents=True, exist_ok=True)
    # One builder at a time: two test runs on one machine share the image.
    with open(cache / "image.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = run(["podman", "image", "inspect", "-f", "{{index .Labels \"" + RECIPE_LABEL + "\"}}", image],
                   check=False)
        if have.returncode == 0 and have.stdout.strip() == recipe:
            print("    present, reused")
            return image
        print(f"    {'recipe changed' if have.returncode == 0 else 'missing'}: made again with mmdebstrap")
        tar = cache / f"{codename}.tar"
        partial = tar.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        mirror = os.environ.get("OUTBOX_SYSTEMD_MIRROR") or default_mirror()
        # --variant=apt with only these packages: no apt run inside the container later.
        run(["mmdebstrap", "--quiet", "--variant=apt", "--format=tar", "--include=" + ",".join(packages),
             codename, partial, mirror], timeout=900)
        run(["podman", "import", "--quiet", "--change", f"LABEL {RECIPE_LABEL}={recipe}",
             "--change", "CMD [\"/sbin/init\"]", partial, image], timeout=300)
        partial.unlink()
    return image


# ------------------------------------------------------------------ the servers ----

class Servers:
    """The test's own schema, exchange and queue on the shared servers, and their removal."""

    def __init__(self):
        tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.schema = f"systemdtest_{tag}"
        self.exchange = f"systemdtest.{tag}.orders"
        self.queue = f"systemdtest.{tag}.shipping"
        self.dsn = os.environ["OUTBOX_PG_DSN"]
        self.amqp_uri = os.environ["OUTBOX_AMQP_URI"]

    def declare(self):
        conn = pika.BlockingConnection(pika.URLParameters(self.amqp_uri))
        ch = conn.channel()
        ch.exchange_declare(self.exchange, exchange_type="direct", durable=True)
        ch.queue_declare(self.queue, durable=True)
        ch.queue_bind(self.queue, self.exchange, routing_key="order")
        conn.close()

    def enqueue(self, message_id, payload):
        with psycopg2.connect(self.dsn) as conn, conn.cursor() as cur:
            cur.execute(f'SELECT "{self.schema}".enqueue(exchange => %s, routing_key => %s, '
                        f"message_type => 'OrderPlaced', payload => %s, message_id => %s)",
                        (self.exchange, "order", payload, message_id))
            return str(cur.fetchone()[0])

    def published(self, message_id):
        with psycopg2.connect(self.dsn) as conn, conn.cursor() as cur:
            cur.execute(f'SELECT published_at IS NOT NULL FROM "{self.schema}".outbox WHERE message_id = %s',
                        (message_id,))
            return cur.fetchone()[0]

    def take(self):
        """The queue's messages, consumed: [(message_id, body)]."""
        conn = pika.BlockingConnection(pika.URLParameters(self.amqp_uri))
        ch, got = conn.channel(), []
        while True:
            method, props, body = ch.basic_get(self.queue, auto_ack=True)
            if method is None:
                break
            got.append((props.message_id, body))
        conn.close()
        return got

    def remove(self):
        try:
            conn = psycopg2.connect(self.dsn)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            conn.close()
        except Exception as e:  # the result stands; say what was left behind
            print(f"cleanup: PostgreSQL: {e}", file=sys.stderr)
        try:
            conn = pika.BlockingConnection(pika.URLParameters(self.amqp_uri))
            ch = conn.channel()
            ch.queue_delete(self.queue)
            ch.exchange_delete(self.exchange)
            conn.close()
        except Exception as e:
            print(f"cleanup: RabbitMQ: {e}", file=sys.stderr)


def migrate(relay, servers, tmp):
    """The schema, made from the host with the build's relay (docs: `migrate` comes first)."""
    config = tmp / "migrate.yaml"
    config.write_text(yaml.safe_dump({"postgres": {"dsn": servers.dsn, "schema": servers.schema},
                                      "amqp": {"uri": servers.amqp_uri}}))
    run([relay, "migrate", "--config", config])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def edited_config(example_text, servers, pg_secret_ref, amqp_secret_ref):
    """The reader's edit of the example: these servers, this schema; the secrets stay credentials."""
    config = yaml.safe_load(example_text)
    pg = psycopg2.extensions.parse_dsn(servers.dsn)
    dsn = " ".join(f"{k}={pg[k]}" for k in ("host", "port", "dbname", "user") if k in pg)
    config["postgres"].update(dsn=f"{dsn} sslmode=disable password={pg_secret_ref}", schema=servers.schema,
                              require_tls=False)
    amqp = urllib.parse.urlsplit(servers.amqp_uri)
    config["amqp"].update(uri=f"amqp://{amqp.username}:{amqp_secret_ref}@{amqp.hostname}:{amqp.port}{amqp.path}",
                          require_tls=False)
    config["http"]["listen"] = f"127.0.0.1:{free_port()}"  # the host's network: not a fixed port
    return yaml.safe_dump(config, sort_keys=False)


# -------------------------------------------------------------- the container ----

class Container:
    def __init__(self, image, workdir):
        self.name = f"outbox-systemd-test-{os.getpid()}"
        self.image, self.workdir = image, workdir

    @staticmethod
    def remove_stale():
        """Containers of earlier runs that were killed (a ctest timeout) before removing theirs."""
        names = run(["podman", "ps", "-a", "--filter", "name=^outbox-systemd-test-", "--format", "{{.Names}}"],
                    check=False).stdout.split()
        for name in names:
            pid = name.rsplit("-", 1)[-1]
            if pid.isdigit() and not pathlib.Path(f"/proc/{pid}").exists():
                print(f"    removing {name}, left by a run that is gone")
                subprocess.run(["podman", "rm", "-f", "--time", "2", name], capture_output=True)

    def start(self):
        self.remove_stale()
        step(f"booting systemd in container {self.name}")
        # runc as the other podman scripts here; explicit limits (runc refuses the host's
        # nproc here); the host's network so the servers on its loopback are reachable.
        run(["podman", "--runtime", "runc", "run", "-d", "--name", self.name, "--systemd=always",
             "--network=host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
             "-v", f"{self.workdir}:/root/outbox", "-w", "/root/outbox", self.image, "/sbin/init"])
        # Right after `podman run -d` systemd may not answer yet (no bus: nothing printed).
        deadline, state = time.monotonic() + 60, ""
        while time.monotonic() < deadline and state not in ("running", "degraded"):
            state = self.sh("systemctl is-system-running --wait", check=False, timeout=90).stdout.strip()
            if state not in ("running", "degraded"):
                time.sleep(0.5)
        if state not in ("running", "degraded"):
            raise Failure(f"systemd did not come up: {state!r}\n" + self.sh(
                "systemctl --failed --no-pager; journalctl -b --no-pager | tail -40", check=False).stdout)
        print(f"    systemd {self.sh('systemctl --version').stdout.split()[1]} is PID 1: {state}")

    def sh(self, script, check=True, timeout=120):
        return run(["podman", "exec", "-w", "/root/outbox", self.name, "bash", "-euo", "pipefail", "-c", script],
                   timeout=timeout, check=check)

    def show(self):
        props = "ActiveState,SubState,Result,NRestarts,ExecMainStatus,ExecMainCode,InvocationID"
        out = self.sh(f"systemctl show {UNIT} -p {props}").stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def cursor(self):
        out = self.sh("journalctl --show-cursor -n 0 --no-pager", check=False).stdout
        m = re.search(r"-- cursor: (\S+)", out)
        return m.group(1) if m else None

    def journal(self, cursor, match=f"-u {UNIT}"):
        after = f"--after-cursor='{cursor}'" if cursor else ""
        return self.sh(f"journalctl {match} --no-pager -o cat {after}").stdout

    def remove(self):
        subprocess.run(["podman", "rm", "-f", "--time", "5", self.name], capture_output=True)


def wait_for(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise Failure(f"timed out after {timeout} s waiting for {what}")


def doc_snippets(source):
    """The ```sh blocks of docs/OPERATIONS.md right after SNIPPET_MARK, in order."""
    lines = (source / "docs/OPERATIONS.md").read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != SNIPPET_MARK:
            continue
        expect(i + 1 < len(lines) and lines[i + 1].strip() == "```sh",
               f"docs/OPERATIONS.md:{i + 2}: the snippet mark must be followed by a ```sh block")
        end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        blocks.append("\n".join(lines[i + 2:end]))
    expect(len(blocks) == SNIPPETS, f"docs/OPERATIONS.md has {len(blocks)} blocks marked {SNIPPET_MARK!r}, "
                                    f"the test runs {SNIPPETS}")
    return blocks


def write_secrets(work, pg_secret):
    """The reader's secret files, each the password alone (the second block removes them)."""
    (work / "pg-password").write_text(pg_secret)
    amqp = urllib.parse.urlsplit(os.environ["OUTBOX_AMQP_URI"])
    (work / "amqp-password").write_text(urllib.parse.unquote(amqp.password or ""))


def edit_config(c, servers):
    """The reader's edit of /etc/outbox-relay/relay.yaml, as the docs ask between the blocks."""
    example = c.sh("cat /etc/outbox-relay/relay.yaml").stdout
    refs = re.findall(r"\$\{file:" + re.escape(CREDENTIALS) + r"/([a-z-]+)\}", example)
    expect(sorted(refs) == ["amqp-password", "pg-password"],
           f"the example configuration's secrets are not the unit's credentials: {refs}")
    edited = edited_config(example, servers, f"${{file:{CREDENTIALS}/pg-password}}",
                           f"${{file:{CREDENTIALS}/amqp-password}}")
    c.sh(f"cat > /etc/outbox-relay/relay.yaml <<'EOF'\n{edited}EOF")


def run_block(c, name, block):
    step(f"docs/OPERATIONS.md, systemd: {name}, as written")
    print("    " + block.replace("\n", "\n    "))
    c.sh(block)


def check_root_only(c):
    modes = c.sh("stat -c '%a %U %n' /etc/outbox-relay /etc/outbox-relay/relay.yaml "
                 "/etc/outbox-relay/credentials/pg-password").stdout.strip().splitlines()
    expect(len(modes) == 3 and all(m.split()[0] in ("700", "600") and m.split()[1] == "root" for m in modes),
           f"the documented steps do not leave root-only files: {modes}")


def install_from_package(c, blocks, servers, work, pg_secret):
    run_block(c, "the package, the folders, the example", blocks[0])
    installed = c.sh(f"cat /usr/lib/systemd/system/{UNIT}.service").stdout
    repo_unit = (work / f"deploy/systemd/{UNIT}.service").read_text()
    expect(installed == repo_unit.replace("/usr/local/bin/outbox-relay", "/usr/bin/outbox-relay"),
           "the packaged unit is not deploy/systemd/outbox-relay.service with /usr/bin/outbox-relay")
    edit_config(c, servers)
    write_secrets(work, pg_secret)
    run_block(c, "the secrets, enable --now", blocks[1])
    check_root_only(c)


def install_by_hand(c, blocks, servers, work, pg_secret):
    step("apt remove outbox-relay: the hand install next")
    c.sh("apt-get remove -y -q outbox-relay && systemctl daemon-reload")
    run_block(c, "the hand install from the repository", blocks[2])
    expect(c.sh(f"systemctl show {UNIT} -p FragmentPath").stdout.strip()
           == f"FragmentPath=/etc/systemd/system/{UNIT}.service", "the hand-installed unit is not the one loaded")
    edit_config(c, servers)
    write_secrets(work, pg_secret)
    run_block(c, "the secrets, enable --now", blocks[1])
    check_root_only(c)


def check_publishes(c, servers, pg_secret):
    step("the unit runs and publishes")
    wait_for("the unit active", lambda: c.show()["ActiveState"] == "active", 30)
    message_id = str(uuid.uuid4())
    enqueued = servers.enqueue(message_id, b'{"order": 1}')
    expect(enqueued == message_id, f"enqueue() returned {enqueued}, not the message id given ({message_id})")
    wait_for(f"the row of message {message_id} marked published", lambda: servers.published(message_id), 30)
    got = servers.take()
    expect(got == [(message_id, b'{"order": 1}')], f"the queue held {got}, expected the one row's message")
    s = c.show()
    expect(s["ActiveState"] == "active" and s["NRestarts"] == "0", f"the unit after publishing: {s}")
    journal = c.journal(None)
    expect(pg_secret not in journal, "the PostgreSQL secret is in the journal")
    print(f"    message {message_id} published and in the queue; unit {s['ActiveState']}, NRestarts {s['NRestarts']}")
    step("systemctl stop: SIGTERM, a clean exit")
    c.sh(f"systemctl stop {UNIT}", timeout=60)
    s = c.show()
    expect(s["ActiveState"] == "inactive" and s["Result"] == "success", f"after systemctl stop: {s}")


def check_fails_for_good(c, what, break_it, reason, systemd_reason=None, fix_it=None):
    step(f"a broken configuration ({what}): failed for good, the reason in the journal")
    cursor = c.cursor()
    c.sh(break_it)
    c.sh(f"systemctl start {UNIT}", check=False)  # Type=exec: returns once the relay is started
    wait_for("the unit failed", lambda: c.show()["ActiveState"] == "failed", 20)
    time.sleep(SETTLE_S)
    s = c.show()
    expect(s["ActiveState"] == "failed" and s["SubState"] == "failed" and s["NRestarts"] == "0",
           f"{what}: the unit is not failed for good {SETTLE_S} s later: {s}")
    journal = c.journal(cursor)
    print("    journalctl -u outbox-relay:\n      " + journal.strip().replace("\n", "\n      "))
    expect(re.search(reason, journal), f"{what}: the journal does not say why (no match for {reason!r})")
    if systemd_reason:
        # Logged by the process that was to become the relay, before it could: with the
        # unit's name in UNIT=, which `journalctl -u` matches only when journald saw the
        # process's cgroup before it ended (a race; systemd 252).
        logged = c.journal(cursor, f"UNIT={UNIT}.service")
        print("    journalctl UNIT=outbox-relay.service:\n      " + logged.strip().replace("\n", "\n      "))
        expect(re.search(systemd_reason, logged), f"{what}: systemd's reason is not in the journal "
                                                  f"(no match for {systemd_reason!r})")
    print(f"    {s}")
    if fix_it:
        step(f"{what} fixed, then `systemctl restart outbox-relay` (as the docs say)")
        c.sh(fix_it)
        c.sh(f"systemctl restart {UNIT}")
        wait_for("the unit active again", lambda: c.show()["ActiveState"] == "active", 20)
        c.sh(f"systemctl stop {UNIT}", timeout=60)
    c.sh(f"systemctl reset-failed {UNIT}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=pathlib.Path, required=True)
    ap.add_argument("--build", type=pathlib.Path, required=True)
    ap.add_argument("--relay", type=pathlib.Path, required=True, help="the build's relay (migrates the schema)")
    ap.add_argument("--cpack", default="cpack")
    ap.add_argument("--keep", action="store_true", help="keep the container and the scratch folder")
    args = ap.parse_args()
    t0 = time.monotonic()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="outbox-systemd-test-"))
    servers, container = None, None
    try:
        prerequisites()
        deb = build_deb(args, tmp)
        image = ensure_image(os_release().get("VERSION_CODENAME", "bookworm"), deb_depends(deb))
        # The folder the blocks run in (/root/outbox in the container): the .deb, and the
        # repository's layout for the hand install (its built relay, deploy/systemd).
        work = tmp / "work"
        (work / "build/relay").mkdir(parents=True)
        shutil.copy(deb, work)
        shutil.copy(args.relay, work / "build/relay/outbox-relay")
        shutil.copytree(args.source / "deploy/systemd", work / "deploy/systemd")
        blocks = doc_snippets(args.source)
        # Unique, so the journal can be searched for it (PostgreSQL here may not ask for it;
        # the relay reads it all the same).
        pg_secret = f"pg-{uuid.uuid4().hex}"
        servers = Servers()
        migrate(args.relay, servers, tmp)
        servers.declare()
        container = Container(image, work)
        container.start()
        install_from_package(container, blocks, servers, work, pg_secret)
        check_publishes(container, servers, pg_secret)
        check_fails_for_good(container, "a misspelled key",
                             "sed -i 's/^  schema:/  shema:/' /etc/outbox-relay/relay.yaml",
                             r"invalid configuration: \S+/relay\.yaml:\d+: postgres\.shema: unknown key",
                             fix_it="sed -i 's/^  shema:/  schema:/' /etc/outbox-relay/relay.yaml")
        check_fails_for_good(container, "no relay.yaml", "rm /etc/outbox-relay/relay.yaml",
                             r"status=243/CREDENTIALS",
                             r"Failed to set up credentials: No such file or directory")
        install_by_hand(container, blocks, servers, work, pg_secret)
        check_publishes(container, servers, pg_secret)
    except (Failure, psycopg2.Error, pika.exceptions.AMQPError) as e:
        print(f"FAIL: {'' if isinstance(e, Failure) else type(e).__name__ + ': '}{e}", file=sys.stderr)
        if container:
            print(container.sh(f"systemctl status {UNIT} --no-pager; journalctl -u {UNIT} --no-pager | tail -30",
                               check=False).stdout, file=sys.stderr)
        return 1
    finally:
        if container and not args.keep:
            container.remove()
        if servers:
            servers.remove()
        if args.keep:
            print(f"kept: container {container.name if container else '-'}, folder {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: systemd_unit_test in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
