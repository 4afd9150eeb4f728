"""Helpers of deploy/docker/check-image.py: podman, base images, the image build, the
image's file system, HTTP and process state seen from inside a container, the timed stop.

Everything here drives podman as root (the containers run with uid 10001 and read
bind-mounted files with the ownership the test gives them)."""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

DOCKER = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(DOCKER)
REPO = os.path.dirname(DEPLOY)

_spec = importlib.util.spec_from_file_location("check_deploy", os.path.join(DEPLOY, "check-deploy.py"))
check_deploy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_deploy)
check = check_deploy.check

# The Debian releases the image builds on (Dockerfile ARG DEBIAN_RELEASE) and what the
# official debian:N images carry in their sources (-updates and -security too).
CODENAMES = {"12": "bookworm", "13": "trixie"}


def debian_sources(release):
    c = CODENAMES[release]
    return (f"deb http://deb.debian.org/debian {c} main\n"
            f"deb http://deb.debian.org/debian {c}-updates main\n"
            f"deb http://deb.debian.org/debian-security {c}-security main\n")


# debian:N-slim is minbase without documentation, manual pages and translations.
SLIM_DPKG_OPTIONS = ["path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
                     "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/info/*",
                     "path-exclude=/usr/share/locale/*", "path-exclude=/usr/share/lintian/*"]
# The apt settings of the official images (debuerreotype): no package caches or .deb files
# left behind by apt-get, no translations, compressed indexes.
APT_CLEAN = ('DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
             '/var/cache/apt/*.bin || true"; };\n'
             'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb '
             '/var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
             'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n')
APT_HOOKS = [f"printf '%s' '{APT_CLEAN}' > \"$1/etc/apt/apt.conf.d/docker-clean\"",
             "echo 'Acquire::Languages \"none\";' > \"$1/etc/apt/apt.conf.d/docker-no-languages\"",
             "echo 'Acquire::GzipIndexes \"true\";' > \"$1/etc/apt/apt.conf.d/docker-gzip-indexes\"",
             "rm -f \"$1\"/var/cache/apt/*.bin"]
COMPILERS = re.compile(r"^((x86_64-linux-gnu-)?(gcc|g\+\+|cpp|c\+\+|cc|ld|as|ld\.bfd|ld\.gold)(-\d+)?"
                       r"|cc1|cc1plus|cmake|ninja|make|clang(\+\+)?(-\d+)?)$")


def run(cmd, check_rc=True, timeout=600, **kw):
    """Runs a command, output captured as text; raises with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {r.returncode}: {(r.stdout + r.stderr).strip()[-2000:]}")
    return r


def podman(*args, check_rc=True, timeout=600):
    return run(["podman", *args], check_rc=check_rc, timeout=timeout)


def use_own_containers_conf(work):
    """runc (crun refuses this kernel's hybrid cgroups) and explicit limits, for every
    podman this process starts, podman-compose's included."""
    path = os.path.join(work, "containers.conf")
    with open(path, "w") as f:
        f.write('[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]\n'
                '[engine]\nruntime = "runc"\n')
    os.environ["CONTAINERS_CONF"] = path


def ensure_base_images(work, release):
    """docker.io/library/debian:N and :N-slim for the image's release, and debian:12-slim
    for the compose stand-ins, made from Debian packages (mmdebstrap) when missing: no
    image registry is reachable here."""
    wanted = [(release, "", []), (release, "-slim", SLIM_DPKG_OPTIONS), ("12", "-slim", SLIM_DPKG_OPTIONS)]
    for rel, suffix, options in dict.fromkeys((r, s, tuple(o)) for r, s, o in wanted):
        tag = f"docker.io/library/debian:{rel}{suffix}"
        if podman("image", "exists", tag, check_rc=False).returncode == 0:
            print(f"base image {tag}: present")
            continue
        tar = os.path.join(work, "base.tar")
        started = time.monotonic()
        # merged /usr by the hook, as the official images: the usrmerge package pulls in perl.
        run(["nice", "-n", "10", "mmdebstrap", "--quiet", "--variant=minbase",
             "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
             *[f"--dpkgopt={o}" for o in options], *[f"--customize-hook={h}" for h in APT_HOOKS],
             CODENAMES[rel], tar, "-"], input=debian_sources(rel), timeout=1800)
        podman("import", "--change", 'CMD ["bash"]', tar, tag)
        os.unlink(tar)
        print(f"base image {tag}: made with mmdebstrap in {time.monotonic() - started:.0f} s")


def build_image(image, log_path, release):
    """The image from deploy/docker/Dockerfile as it is on Debian `release` (its
    DEBIAN_RELEASE argument), the repository as the context (Dockerfile.dockerignore
    filters it, as for Docker). Returns seconds taken."""
    started = time.monotonic()
    with open(log_path, "w") as log:
        r = subprocess.run(["nice", "-n", "10", "podman", "build", "--pull=never", "--network", "host",
                            "--build-arg", f"DEBIAN_RELEASE={release}",
                            "-f", os.path.join(DOCKER, "Dockerfile"), "-t", image, REPO],
                           stdout=log, stderr=subprocess.STDOUT, timeout=3600)
    took = time.monotonic() - started
    tail = open(log_path).read().strip().splitlines()[-15:]
    if not check(r.returncode == 0, f"podman build --build-arg DEBIAN_RELEASE={release} -t {image} ({took:.0f} s)"):
        print("\n".join("    " + line for line in tail))
    return took if r.returncode == 0 else None


def image_config(image):
    return json.loads(podman("image", "inspect", image).stdout)[0]


def mounted_image(image):
    """The image's root file system, mounted read-only at a path of the host (rootful)."""
    return podman("image", "mount", image).stdout.strip()


def files_under(root):
    for base, dirs, files in os.walk(root):
        for name in files:
            yield os.path.join(base, name)


def compilers_in(root):
    return sorted(os.path.relpath(p, root) for p in files_under(root) if COMPILERS.match(os.path.basename(p)))


PEM_PRIVATE_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=\r\n]{64}")


def packaged_files(root):
    """The files Debian packages installed in the tree (dpkg's lists)."""
    owned = set()
    for lst in glob.glob(os.path.join(root, "var/lib/dpkg/info/*.list")):
        owned.update(line.rstrip("\n") for line in open(lst, errors="replace"))
    return owned


def secrets_in(root, secrets):
    """(file, which secret) for every regular file of the tree holding one of the secrets,
    and for every file no Debian package installed that holds a PEM private key (some
    libraries carry self-test keys)."""
    needles = [(name, value.encode()) for name, value in secrets.items() if value]
    packaged = packaged_files(root)
    found = []
    for path in files_under(root):
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        found += [(os.path.relpath(path, root), name) for name, value in needles if value in data]
        if "/" + os.path.relpath(path, root) not in packaged and PEM_PRIVATE_KEY.search(data):
            found.append((os.path.relpath(path, root), "a PEM private key"))
    return found


def http_inside(container, path, port):
    """GET http://127.0.0.1:PORT/PATH from inside the container (bash's /dev/tcp: the
    image has no HTTP client); (status, body)."""
    script = (f'exec 3<>/dev/tcp/127.0.0.1/{port} && printf "GET {path} HTTP/1.0\\r\\nHost: relay\\r\\n\\r\\n" >&3'
              ' && cat <&3')
    r = podman("exec", container, "bash", "-c", script, check_rc=False, timeout=30)
    head, _, body = r.stdout.replace("\r\n", "\n").partition("\n\n")
    m = re.match(r"HTTP/1\.\d (\d+)", head)
    return (int(m.group(1)) if m else None), body


def http_outside(url, timeout=2):
    """GET from the host, through the published port (as the kubelet or Prometheus do,
    from outside the container's network namespace); (status, body) or (None, error)."""
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (OSError, urllib.error.URLError) as e:
        return None, str(e)


def wait_ready(url, deadline_s):
    """Seconds until URL answers 200, or None."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        status, _ = http_outside(url, timeout=1)
        if status == 200:
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def process_status(container):
    """/proc/1/status of the container's main process as a dict, read from inside."""
    r = podman("exec", container, "cat", "/proc/1/status", check_rc=False)
    return dict(line.split(":\t", 1) for line in r.stdout.splitlines() if ":\t" in line)


def metric(text, name):
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None


def check_process(container, what, uid, gid, no_new_privs, caps_dropped):
    """The relay is PID 1, runs as uid:gid (not root), and has what the hardening asks for."""
    st = process_status(container)
    check(st.get("Name", "").strip() == "outbox-relay", f"{what}: PID 1 is outbox-relay ({st.get('Name', '?').strip()})")
    uids, gids = st.get("Uid", "").split(), st.get("Gid", "").split()
    check(uids and all(u == str(uid) for u in uids) and gids and all(g == str(gid) for g in gids),
          f"{what}: runs as uid {uid} gid {gid} (Uid {' '.join(uids)}, Gid {' '.join(gids)})")
    if no_new_privs:
        check(st.get("NoNewPrivs", "").strip() == "1", f"{what}: no_new_privs set")
    if caps_dropped:
        check(int(st.get("CapEff", "1"), 16) == 0 and int(st.get("CapBnd", "1"), 16) == 0,
              f"{what}: no capabilities (CapEff {st.get('CapEff', '?').strip()})")


def check_http_inside(container, what, port, published_at_least):
    status, body = http_inside(container, "/healthz", port)
    check(status == 200, f"{what}: /healthz from inside the container: {status} {body.strip()[:40]}")
    status, body = http_inside(container, "/metrics", port)
    published = metric(body, "outbox_relay_published_total")
    check(status == 200 and published is not None and published >= published_at_least,
          f"{what}: /metrics from inside the container: {status}, outbox_relay_published_total {published}"
          f" (>= {published_at_least})")


def stop_timed(container, grace_s):
    """`podman stop -t GRACE`: the image's STOPSIGNAL, SIGKILL after GRACE seconds.
    Returns (seconds taken, exit code)."""
    started = time.monotonic()
    podman("stop", "-t", str(grace_s), container, timeout=grace_s + 60)
    took = time.monotonic() - started
    code = int(podman("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip())
    return took, code


def check_stop(container, what, grace_s, grace_from):
    took, code = stop_timed(container, grace_s)
    check(code == 0 and took < grace_s,
          f"{what}: SIGTERM drains and exits {code} in {took:.1f} s (grace {grace_s} s, {grace_from})")
    return took


def check_logs_clean(container, what, secrets):
    r = podman("logs", container, check_rc=False)
    text = r.stdout + r.stderr
    leaked = [name for name, value in secrets.items() if value and value in text]
    check(not leaked, f"{what}: no secret in the logs ({len(text.splitlines())} lines)"
          + (f"; leaked: {', '.join(leaked)}" if leaked else ""))


def remove_containers(*names):
    for name in names:
        podman("rm", "-f", "-t", "0", name, check_rc=False)


def private_dir(work, name, files, uid=0, gid=0, mode=0o644):
    """A directory of files for a bind mount, owned uid:gid with MODE (the kubelet's or
    Docker's view of a Secret or ConfigMap)."""
    path = os.path.join(work, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    os.chmod(path, 0o755)
    for fname, text in files.items():
        p = os.path.join(path, fname)
        with open(p, "w") as f:
            f.write(text)
        os.chown(p, uid, gid)
        os.chmod(p, mode)
    return path


def new_work_dir():
    return tempfile.mkdtemp(prefix="outbox-image-check-", dir="/var/tmp")
