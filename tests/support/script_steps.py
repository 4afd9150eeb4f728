"""What the scripted tests (package, systemd) share: a failure with the step's output, and commands run
with their time."""

import subprocess
import time


class Failure(Exception):
    pass


def step(text):
    print(f"==> {text}", flush=True)


def run_process(cmd, timeout=120, check=True, input=None, env=None, cwd=None):
    """Runs cmd; returns the CompletedProcess. Raises Failure with the output when it fails (check) or
    times out."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                           input=input, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise Failure(f"timed out after {timeout} s: {' '.join(map(str, cmd))}\n{e.stdout or ''}{e.stderr or ''}")
    print(f"    {' '.join(map(str, cmd)).replace(chr(10), '; ')[:160]}  [{time.monotonic() - t0:.1f} s]", flush=True)
    if check and p.returncode != 0:
        raise Failure(f"exit {p.returncode}: {' '.join(map(str, cmd))}\n{p.stdout}{p.stderr}")
    return p


def run(cmd, timeout=120, env=None, cwd=None):
    """Runs cmd; returns its stdout. Raises Failure with the output when it fails."""
    return run_process(cmd, timeout=timeout, env=env, cwd=cwd).stdout


def expect(condition, text):
    if not condition:
        raise Failure(text)
