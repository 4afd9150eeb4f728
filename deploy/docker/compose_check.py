"""The compose part of deploy/docker/check-image.py: docker-compose.yml brought up with
podman-compose, PostgreSQL and RabbitMQ from compose.standins.yml (Debian packages; no
registry is reachable here), the relay and the order service from the image.

podman-compose 1.0 (Debian 12) ignores depends_on conditions, so the services come up in
the order the conditions give: postgres and rabbitmq until healthy, migrate and grants to
completion, then the relay and the order service."""
import os
import re
import time

import image_check_lib as lib
from image_check_lib import DOCKER, check, podman

PROJECT = "outbox-relay-check"


def compose(*args, timeout=600):
    cmd = ["podman-compose", "--podman-build-args", "--network host --pull=never", "-p", PROJECT,
           "-f", os.path.join(DOCKER, "docker-compose.yml"), "-f", os.path.join(DOCKER, "compose.standins.yml"), *args]
    return lib.run(["nice", "-n", "10", *cmd] if args[0] == "build" else cmd, check_rc=False, timeout=timeout)


def container(service):
    return f"{PROJECT}_{service}_1"


def wait_healthy(service, timeout_s):
    """Runs the service's healthcheck (podman has no timer for it here) until it passes."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if podman("healthcheck", "run", container(service), check_rc=False).returncode == 0:
            return time.monotonic() - started
        time.sleep(1)
    return None


def run_to_completion(service):
    compose("up", "-d", "--no-deps", service)
    code = podman("wait", container(service), check_rc=False, timeout=300).stdout.strip()
    logs = podman("logs", container(service), check_rc=False)
    check(code == "0", f"compose: {service} exits {code}"
          + ("" if code == "0" else f": {(logs.stdout + logs.stderr).strip()[-300:]}"))


def outbox_counts():
    """(rows, published) in the compose file's database, through its own psql."""
    r = podman("exec", container("postgres"), "psql", "-U", "shop_admin", "-d", "shop", "-Atc",
               "SELECT count(*), count(published_at) FROM outbox.outbox", check_rc=False)
    m = re.match(r"(\d+)\|(\d+)", r.stdout.strip())
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def event_printer(image, amqp_password, *args):
    """The image's event-printer on the compose network (exchange orders -> queue order-events)."""
    uri = f"amqp://relay:{amqp_password}@rabbitmq:5672/%2f"
    return podman("run", "--rm", "--network", f"{PROJECT}_default", "-e", f"OUTBOX_AMQP_URI={uri}",
                  "--entrypoint", "event-printer", image, *args, check_rc=False, timeout=300)


def bring_up(image, secret_values, build_relay):
    # The relay's services build the image just built (its layers are cached): the same
    # Dockerfile and context. With --no-build, only the stand-ins are built.
    services = [] if build_relay else ["postgres", "rabbitmq"]
    checked = lib.image_config(image)["Id"]
    r = compose("build", *services, timeout=3600)
    check(r.returncode == 0, f"compose: podman-compose build {' '.join(services) or '(relay image, PostgreSQL and RabbitMQ stand-ins)'}"
          + ("" if r.returncode == 0 else f": {(r.stdout + r.stderr).strip()[-600:]}"))
    if build_relay:  # podman-compose builds with -f ../../deploy/docker/Dockerfile: .containerignore filters it
        built = lib.image_config(image)["Id"]
        check(built == checked, f"compose: podman-compose built the image checked above ({built[:12]}, from the "
              "same filtered context)")
    compose("up", "-d", "--no-deps", "postgres", "rabbitmq")
    for service in ("postgres", "rabbitmq"):
        took = wait_healthy(service, 180)
        check(took is not None, f"compose: {service} healthy" + (f" after {took:.0f} s" if took is not None else ""))
    r = event_printer(image, secret_values["amqp_password"], "--declare")
    check(r.returncode == 0, f"compose: {r.stdout.strip() or r.stderr.strip()}")
    run_to_completion("migrate")
    run_to_completion("grants")


def run(image, secret_values, metrics_port, ui_port, build_relay=True):
    os.environ["OUTBOX_METRICS_PORT"] = str(metrics_port)
    os.environ["OUTBOX_RABBITMQ_UI_PORT"] = str(ui_port)
    spec = lib.check_deploy.load_all(os.path.join(DOCKER, "docker-compose.yml"))[0]["services"]
    grace = int(spec["relay"]["stop_grace_period"].rstrip("s"))
    compose("down", "-v")
    try:
        bring_up(image, secret_values, build_relay)
        relay = container("relay")
        started = time.monotonic()
        compose("up", "-d", "--no-deps", "relay", "order-service")
        ready = lib.wait_ready(f"http://127.0.0.1:{metrics_port}/readyz", 120)
        ready_at = time.time()
        startup = time.monotonic() - started if ready is not None else None
        began = int(podman("inspect", "--format", "{{.State.StartedAt.UnixNano}}", relay).stdout.strip()) / 1e9
        check(ready is not None, f"compose: relay ready on the published port {metrics_port} "
              + (f"{startup:.2f} s after `podman-compose up` ({ready_at - began:.2f} s after its container started)"
                 if startup is not None else "(not within 120 s)"))
        uid, gid = lib.image_config(image)["Config"]["User"].split(":")
        lib.check_process(relay, "compose", uid, gid, no_new_privs=True, caps_dropped=True)
        deadline = time.monotonic() + 60
        while outbox_counts()[0] < 100 and time.monotonic() < deadline:
            time.sleep(1)
        lib.stop_timed(container("order-service"), 2)
        deadline = time.monotonic() + 90
        while (counts := outbox_counts())[1] < counts[0] and time.monotonic() < deadline:
            time.sleep(0.5)
        rows, published = outbox_counts()
        r = event_printer(image, secret_values["amqp_password"], "--expect", str(rows), "--idle-ms", "5000")
        m = re.search(r"(\d+) distinct message ids", r.stdout)
        distinct = int(m.group(1)) if m else -1
        check(rows >= 100 and published == rows and distinct == rows,
              f"compose: the order service wrote {rows} events, {published} marked published, "
              f"{distinct} distinct arrived in queue order-events")
        lib.check_http_inside(relay, "compose", 9187, published)
        podman("start", container("order-service"))
        time.sleep(2)
        lib.check_stop(relay, "compose", grace, "stop_grace_period")
        lib.stop_timed(container("order-service"), 2)
        for service in ("relay", "migrate", "order-service"):
            lib.check_logs_clean(container(service), f"compose {service}", secret_values)
        if startup is not None:
            print(f"compose start-up: {startup:.2f} s from `podman-compose up -d relay order-service` to /readyz 200, "
                  f"{ready_at - began:.2f} s from the relay container's start")
    finally:
        compose("down", "-v")
        podman("network", "rm", f"{PROJECT}_default", check_rc=False)  # podman-compose 1.0 leaves it
