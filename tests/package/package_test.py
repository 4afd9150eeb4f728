#!/usr/bin/env python3
"""package_test: the Debian packages, installed into a scratch root, used as a team would.

  1. cpack builds outbox-relay_*.deb and liboutbox-dev_*.deb from this build folder;
  2. dpkg-deb -I/-c: package names, Depends, and the files each carries (every public
     header and no private one);
  3. dpkg-deb -x unpacks both into a scratch root (the system is not touched);
     debian_checks.py: lintian --pedantic, copyright and changelogs, man pages, the
     documents cited, hardening of the binaries, the headers' C++20 guard;
  4. examples/embedding (outside the tree's build) is configured with
     find_package(OutboxRelay 0.1) against the scratch root, and built; its producer
     is built again with pkg-config (outbox-producer.pc) and its consumer with
     outbox-consumer.pc;
  5. against the real servers: the installed relay migrates a fresh schema, the
     consumer declares its queue, orders are placed in transactions (one rolled
     back) by both builds of the producer, the installed relay publishes them and
     exits when idle, and the consumer ships exactly the committed orders, once.

Any failure exits 1 with the step and the command's output. Needs OUTBOX_PG_DSN and
OUTBOX_AMQP_URI, dpkg-deb, pkg-config, a C++ compiler, lintian, man (man-db), readelf
(binutils), python3-psycopg2 and python3-pika.
Everything it creates (schemas, exchange, queues, the scratch folder) is removed.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pika
import psycopg2

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
import debian_checks  # noqa: E402
from script_steps import Failure, expect, run, step  # noqa: E402

PUBLIC_HEADER_TREES = ["common/include", "crypto/include", "amqp/include", "producer_sdk/include",
                       "consumer_sdk/include"]
# The runtime packages dpkg-shlibdeps names for the relay, by the Debian release built on.
RELAY_DEPENDS_BY_RELEASE = {
    "12": ["libpqxx-6.4", "librabbitmq4", "libssl3", "libyaml-cpp0.7",
           "libspdlog1.10-fmt9",  # libspdlog1.10 provides it (its shlibs file names it)
           "libfmt9", "libpq5", "libstdc++6", "libc6"],
    "13": ["libpqxx-7.10", "librabbitmq4", "libssl3t64", "libyaml-cpp0.8",
           "libspdlog1.15-fmt10",  # libspdlog1.15 provides it
           "libfmt10", "libpq5", "libstdc++6", "libc6"],
}


def debian_release():
    with open("/etc/os-release") as f:
        fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    return fields.get("VERSION_ID", "").strip('"')


RELAY_DEPENDS = RELAY_DEPENDS_BY_RELEASE.get(debian_release(), RELAY_DEPENDS_BY_RELEASE["12"])
DEV_DEPENDS = ["libpqxx-dev", "librabbitmq-dev", "libssl-dev", "libyaml-cpp-dev", "nlohmann-json3-dev",
               "libfmt-dev", "libspdlog-dev", "libboost-system-dev", "pkgconf"]


def depends_names(field):
    """'a (>= 1), b | c' -> {'a', 'b', 'c'}"""
    names = set()
    for alternative in field.replace("|", ",").split(","):
        if alternative.strip():
            names.add(alternative.split("(")[0].strip())
    return names


def build_packages(args, tmp):
    step("cpack: building the Debian packages")
    out = tmp / "packages"
    run([args.cpack, "--config", args.build / "CPackConfig.cmake", "-B", out], timeout=240)
    debs = {p.name.split("_")[0]: p for p in out.glob("*.deb")}
    expect(set(debs) == {"outbox-relay", "liboutbox-dev"}, f"expected outbox-relay and liboutbox-dev, got {sorted(debs)}")
    return debs


def check_metadata(debs, version):
    step("dpkg-deb -I: names, versions, Depends")
    for name, deb in debs.items():
        fields = {}
        for field in ("Package", "Version", "Architecture", "Depends", "Section"):
            fields[field] = run(["dpkg-deb", "-f", deb, field]).strip()
        print(f"    {name}: {fields}")
        expect(fields["Package"] == name, f"{deb.name}: Package is {fields['Package']!r}")
        expect(fields["Version"] == f"{version}-1", f"{deb.name}: Version {fields['Version']!r}, expected {version}-1")
        wanted = RELAY_DEPENDS if name == "outbox-relay" else DEV_DEPENDS
        missing = set(wanted) - depends_names(fields["Depends"])
        expect(not missing, f"{deb.name}: Depends lacks {sorted(missing)}: {fields['Depends']!r}")


def check_contents(debs, source):
    step("dpkg-deb -c: the files of each package")
    files = {}
    for name, deb in debs.items():
        listing = run(["dpkg-deb", "-c", deb])
        files[name] = {line.split()[-1].lstrip(".") for line in listing.splitlines() if not line.startswith("d")}
    relay, dev = files["outbox-relay"], files["liboutbox-dev"]
    for path in ["/usr/bin/outbox-relay", "/usr/bin/outbox-keys", "/usr/lib/systemd/system/outbox-relay.service",
                 "/usr/share/outbox-relay/migrations/0001_outbox.sql", "/usr/share/outbox-relay/roles.sql",
                 "/usr/share/outbox-relay/events/OrderPlaced.yaml",
                 "/usr/share/doc/outbox-relay/examples/relay.yaml"]:
        expect(path in relay, f"outbox-relay lacks {path}")
    installed = {p.split("/usr/include/", 1)[1] for p in dev if p.startswith("/usr/include/")}
    public = {str(h.relative_to(source / tree)) for tree in PUBLIC_HEADER_TREES for h in (source / tree).rglob("*.h")}
    expect(installed == public, f"liboutbox-dev headers differ from the public include trees: "
                                f"extra {sorted(installed - public)}, missing {sorted(public - installed)}")
    for suffix in ["/OutboxRelayConfig.cmake", "/OutboxRelayConfigVersion.cmake", "/OutboxRelayTargets.cmake",
                   "/pkgconfig/outbox-producer.pc", "/pkgconfig/outbox-consumer.pc", "/liboutbox_producer.a",
                   "/liboutbox_consumer.a", "/liboutbox_common.a", "/liboutbox_schema_sql.a"]:
        expect(any(p.endswith(suffix) for p in dev), f"liboutbox-dev lacks */{suffix.lstrip('/')}")
    expect(not (relay & dev), f"files in both packages: {sorted(relay & dev)}")


def unpack(debs, root):
    step(f"dpkg-deb -x into the scratch root {root}")
    for deb in debs.values():
        run(["dpkg-deb", "-x", deb, root])
    unit = (root / "usr/lib/systemd/system/outbox-relay.service").read_text()
    expect("ExecStart=/usr/bin/outbox-relay run" in unit, "the unit does not run /usr/bin/outbox-relay")
    version = run([root / "usr/bin/outbox-relay", "--version"])
    print(f"    installed relay: {version.strip()}")


def build_with_cmake(args, root, tmp):
    step("examples/embedding with find_package(OutboxRelay 0.1) against the scratch root")
    build = tmp / "app-cmake"
    run([args.cmake, "-S", args.source / "examples/embedding", "-B", build, "-G", args.generator,
         f"-DCMAKE_PREFIX_PATH={root / 'usr'}"], timeout=120)
    cache = (build / "CMakeCache.txt").read_text()
    found = [line for line in cache.splitlines() if line.startswith("OutboxRelay_DIR:")]
    expect(found and str(root) in found[0], f"find_package did not take the scratch root's package: {found}")
    run([args.cmake, "--build", build, "-j2"], timeout=300)
    return build / "place-order", build / "ship-orders"


def build_with_pkg_config(args, root, tmp):
    step("examples/embedding with pkg-config (outbox-producer, outbox-consumer)")
    pc_dirs = sorted({str(p.parent) for p in root.rglob("outbox-producer.pc")})
    expect(len(pc_dirs) == 1, f"expected one folder with outbox-producer.pc, got {pc_dirs}")
    env = dict(os.environ, PKG_CONFIG_PATH=pc_dirs[0])
    out = tmp / "app-pkg-config"
    out.mkdir()
    jobs = []
    for program, module in (("place_order", "outbox-producer"), ("ship_orders", "outbox-consumer")):
        flags = run(["pkg-config", "--cflags", "--libs", module], env=env).split()
        expect(any(str(root) in f for f in flags), f"pkg-config {module} does not point into the scratch root: {flags}")
        cmd = [os.environ.get("CXX", "c++"), "-std=c++20", args.source / f"examples/embedding/{program}.cpp",
               *flags, "-o", out / program]
        jobs.append((cmd, subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True)))
    for cmd, job in jobs:  # compiled side by side: two cores
        output, _ = job.communicate(timeout=300)
        expect(job.returncode == 0, f"exit {job.returncode}: {' '.join(map(str, cmd))}\n{output}")
        print(f"    built {cmd[-1]}")
    return out / "place_order", out / "ship_orders"


class Servers:
    """The unique names of one run on the shared servers, and their removal."""

    def __init__(self):
        tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.schema = f"pkgtest_{tag}"
        self.shop = f"pkgtest_shop_{tag}"
        self.exchange = f"pkgtest.{tag}.orders"
        self.queue = f"pkgtest.{tag}.shipping"
        self.dsn = os.environ["OUTBOX_PG_DSN"]
        self.amqp_uri = os.environ["OUTBOX_AMQP_URI"]

    def env(self):
        return dict(os.environ, OUTBOX_SCHEMA=self.schema, SHOP_SCHEMA=self.shop,
                    SHOP_EXCHANGE=self.exchange, SHOP_QUEUE=self.queue)

    def queue_depth(self):
        conn = pika.BlockingConnection(pika.URLParameters(self.amqp_uri))
        try:
            return conn.channel().queue_declare(self.queue, passive=True).method.message_count
        finally:
            conn.close()

    def pending_rows(self):
        with psycopg2.connect(self.dsn) as conn, conn.cursor() as cur:
            cur.execute(f'SELECT count(*) FROM "{self.schema}".outbox WHERE published_at IS NULL')
            return cur.fetchone()[0]

    def remove(self):
        try:
            conn = psycopg2.connect(self.dsn)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
                cur.execute(f'DROP SCHEMA IF EXISTS "{self.shop}" CASCADE')
            conn.close()
        except Exception as e:  # the result stands; say what was left behind
            print(f"cleanup: PostgreSQL: {e}", file=sys.stderr)
        try:
            conn = pika.BlockingConnection(pika.URLParameters(self.amqp_uri))
            ch = conn.channel()
            for q in (self.queue, self.queue + ".dead-letter"):
                ch.queue_delete(q)
            for x in (self.exchange, self.queue + ".dead-letter"):
                ch.exchange_delete(x)
            conn.close()
        except Exception as e:
            print(f"cleanup: RabbitMQ: {e}", file=sys.stderr)


def run_end_to_end(root, tmp, cmake_apps, pc_apps, servers):
    step("end to end: installed relay, both builds of the application, real servers")
    relay = root / "usr/bin/outbox-relay"
    config = tmp / "relay.yaml"
    config.write_text("postgres:\n  dsn: ${OUTBOX_PG_DSN}\n  schema: " + servers.schema + "\n"
                      "amqp:\n  uri: ${OUTBOX_AMQP_URI}\n"
                      "relay:\n  poll_interval_ms: 50\nlog:\n  level: info\n")
    env = servers.env()
    run([relay, "check-config", config], env=env)
    run([relay, "migrate", "--config", config], env=env, timeout=60)
    place_cmake, ship_cmake = cmake_apps
    place_pc, ship_pc = pc_apps
    run([ship_pc, "--declare"], env=env, timeout=30)
    committed = {
        1001: run([place_cmake, "1001", "2599"], env=env).strip(),
        1003: run([place_pc, "1003", "1250"], env=env).strip(),
    }
    rolled_back = run([place_cmake, "1002", "990", "--rollback"], env=env).strip()
    expect(rolled_back.startswith("rolled back "), f"place-order --rollback printed {rolled_back!r}")
    for order, message_id in committed.items():
        expect(uuid.UUID(message_id).version == 7, f"order {order}: message id {message_id!r} is not a UUIDv7")
    run([relay, "run", "--config", config, "--exit-when-idle"], env=env, timeout=60)
    expect(servers.pending_rows() == 0, "the relay exited with outbox rows still pending")
    depth = servers.queue_depth()
    expect(depth == len(committed), f"the queue holds {depth} messages, expected {len(committed)} (the committed orders)")
    out = run([ship_cmake, "--expect", str(len(committed)), "--timeout-s", "30"], env=env, timeout=60)
    print("    " + out.strip().replace("\n", "\n    "))
    shipped = {int(line.split()[2]): line.split("event ")[1].rstrip(")")
               for line in out.splitlines() if line.startswith("shipped order ")}
    expect(shipped == committed, f"shipped {shipped}, expected exactly the committed orders {committed}")
    expect(servers.queue_depth() == 0, "messages left in the queue after the committed orders were shipped")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=pathlib.Path, required=True)
    ap.add_argument("--build", type=pathlib.Path, required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--cmake", default="cmake")
    ap.add_argument("--cpack", default="cpack")
    ap.add_argument("--generator", default="Ninja")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (its path is printed)")
    args = ap.parse_args()

    t0 = time.monotonic()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="outbox-package-test."))
    servers = Servers()
    try:
        debs = build_packages(args, tmp)
        check_metadata(debs, args.version)
        check_contents(debs, args.source)
        root = tmp / "root"
        unpack(debs, root)
        debian_checks.check_all(debs, root, tmp, args.version, debian_release())
        cmake_apps = build_with_cmake(args, root, tmp)
        pc_apps = build_with_pkg_config(args, root, tmp)
        run_end_to_end(root, tmp, cmake_apps, pc_apps, servers)
    except Failure as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        servers.remove()
        if args.keep:
            print(f"scratch folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"package_test: OK in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
