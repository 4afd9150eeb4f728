#!/usr/bin/python3
"""doc_snippets_test: every fenced block of README.md and docs/*.md says what happens to
it, and the blocks a user is meant to run do run, as written.

Each fence has an HTML comment on the line just before it (tests/docs/snippets.py parses it):

  <!-- snippet: run SCENARIO [with VAR] [in background] -->  run it (sh: bash; sql: psql
        "$DSN", or "$VAR"; python: /usr/bin/python3; js: node) in SCENARIO, in page order
  <!-- snippet: file SCENARIO NAME -->    written as NAME into the scenario's folder
        (a .yaml is a relay configuration: `outbox-relay check-config` must pass)
  <!-- snippet: env SCENARIO -->          `export VAR=...` lines: the test gives VAR the
        value for its own servers (the docs tell the user to set them)
  <!-- snippet: excerpt of PATH -->       verbatim lines of PATH (leading spaces aside)
  <!-- snippet: run by PATH -->           another test runs it (PATH exists)
  <!-- snippet: not run: REASON -->       not a command (output, diagram, fragment) or not
        runnable here; REASON says which

A scenario runs in a database of its own (docs_SCENARIO) on the test's servers, in a
scratch folder, with the variables its env blocks name (and no OUTBOX_* or PG* of the
test's own), the built outbox-relay first on PATH, then /usr/bin, and NODE_PATH at the
npm packages tests/CMakeLists.txt installs. Its sh blocks share one shell's variables,
as in one terminal. Blocks run in background are stopped at the scenario's end. Then
the scenario's check (tests/docs/doc_checks.py) asserts what the page promises and
what its blocks print. Every failure names FILE:LINE.

  doc_snippets_test.py --source DIR [--relay BIN --node-modules DIR] [--check-only]

The runs need OUTBOX_PG_DSN (a superuser) and OUTBOX_AMQP_URI.
"""

import argparse
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import doc_checks  # noqa: E402  (the scenarios' assertions)
import snippets  # noqa: E402

SYSTEMD_TEST = "tests/systemd/systemd_unit_test.py"  # written alongside; may not exist yet
SUPPLIED = ("DSN", "ADMIN_DSN", "AMQP_URI", "ROLES_SQL")  # what an env block may name (Scenario.supplied)


class Failure(Exception):
    pass


def check_markers(source, blocks):
    """The static checks: markers known, excerpts found, `run by` paths real."""
    errors = []
    for b in blocks:
        m = b.marker
        if m is None:
            errors.append(f"{b.where}: a ``` block with no <!-- snippet: ... --> marker on the line before it")
        elif m.kind == "unknown":
            errors.append(f"{b.where}: unknown snippet marker '{m.text}' (docs: tests/docs/doc_snippets_test.py)")
        elif m.kind == "excerpt":
            path = source / m.path
            if not path.is_file():
                errors.append(f"{b.where}: excerpt of '{m.path}': no such file")
            elif not snippets.is_excerpt(b.text, path.read_text(errors="replace")):
                errors.append(f"{b.where}: not a verbatim excerpt of {m.path} (first differing line: "
                              f"{snippets.first_missing_line(b.text, path.read_text(errors='replace'))!r})")
        elif m.kind == "run-by":
            if not (source / m.path).exists() and m.path != SYSTEMD_TEST:
                errors.append(f"{b.where}: run by '{m.path}': no such file")
        elif m.kind == "not-run" and not m.reason:
            errors.append(f"{b.where}: 'not run' needs a reason after the colon")
        elif m.kind in ("run", "file", "env") and m.scenario not in doc_checks.SCENARIOS:
            errors.append(f"{b.where}: scenario '{m.scenario}' has no check in tests/docs/doc_checks.py")
        elif m.kind == "run" and b.lang not in snippets.RUNNERS:
            errors.append(f"{b.where}: 'run' on a ```{b.lang} block: the test runs only "
                          f"{', '.join(sorted(snippets.RUNNERS))}")
        elif m.kind == "env":
            try:
                unknown = [v for v, _ in snippets.exports(b.text, b.where) if v not in SUPPLIED and
                           not v.endswith("_DSN")]
            except ValueError as e:
                unknown = [str(e)]
            if unknown:
                errors.append(f"{b.where}: the test cannot supply {', '.join(unknown)} (it knows {', '.join(SUPPLIED)} "
                              "and *_DSN)")
        elif m.kind == "run" and m.background and b.lang == "sql":
            errors.append(f"{b.where}: sql cannot run in background")
    return errors


class Scenario:
    """One scenario's database, folder, environment and background processes."""

    def __init__(self, name, blocks, args, work):
        self.name, self.blocks, self.args = name, blocks, args
        self.dir = work / name
        self.dir.mkdir()
        self.db = "docs_" + re.sub(r"[^a-z0-9]", "_", name)
        self.spec = doc_checks.SCENARIOS[name]
        self.background = []
        self.outputs = {}  # block -> what it printed (the checks compare it with the page)
        self.state = self.dir / ".shell-state"
        self.state.write_text("")
        self.pg = urllib.parse.urlparse(to_url(os.environ["OUTBOX_PG_DSN"]))

    def url_for(self, user, db=None):
        """A postgresql:// URL of the test's server as `user` (trust auth: no password)."""
        host = self.pg.hostname or "127.0.0.1"
        return f"postgresql://{urllib.parse.quote(user)}@{host}:{self.pg.port or 5432}/{db or self.db}"

    def supplied(self, var, doc_value, where):
        """The value of a variable an env block names, for the test's servers."""
        if var in ("DSN", "ADMIN_DSN") or var.endswith("_DSN"):
            user = urllib.parse.urlparse(doc_value).username if doc_value.startswith("postgres") else None
            if not user:
                raise Failure(f"{where}: {var} must be a postgresql://USER@HOST/DB URL (the test takes its user)")
            # The admin URL is the superuser of the test's server, whatever the docs call theirs.
            return self.url_for(self.pg.username or "postgres" if var == "ADMIN_DSN" else user)
        if var == "AMQP_URI":
            return os.environ["OUTBOX_AMQP_URI"]
        if var == "ROLES_SQL":
            return str(self.args.source / "schema/roles.sql")
        raise Failure(f"{where}: the test cannot supply {var}={doc_value!r} (doc_snippets_test.py knows "
                      "DSN, *_DSN, ADMIN_DSN, AMQP_URI, ROLES_SQL)")

    def environment(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OUTBOX_", "PG"))}
        # Debian's python3 (with psycopg2 and pika) and node, as on the machine the docs describe.
        env["PATH"] = f"{pathlib.Path(self.args.relay).parent}:/usr/bin:/bin"
        if self.args.node_modules:
            env["NODE_PATH"] = str(self.args.node_modules)
        for b in self.blocks:
            if b.marker.kind == "env":
                for var, value in snippets.exports(b.text, b.where):
                    env[var] = self.supplied(var, value, b.where)
        return env

    def run(self):
        admin = doc_checks.Admin(os.environ["OUTBOX_PG_DSN"], os.environ["OUTBOX_AMQP_URI"])
        admin.reset(self.db, self.spec)
        if self.spec.migrate:  # the page assumes a deployment: the test migrates, as an operator did
            config = self.dir / ".migrate.yaml"
            config.write_text(f"postgres:\n  dsn: '{self.url_for(self.pg.username or 'postgres')}'\n"
                              f"  schema: outbox\namqp:\n  uri: '{os.environ['OUTBOX_AMQP_URI']}'\n")
            subprocess.run([self.args.relay, "migrate", "--config", config], check=True, text=True,
                           capture_output=True, timeout=60)
        env = self.environment()
        try:
            for b in self.blocks:
                self.one(b, env)
            started = time.monotonic()
            self.spec.check(doc_checks.Context(self, env, admin))
            print(f"  {self.name}: check passed in {time.monotonic() - started:.1f} s", flush=True)
        finally:
            self.stop_background()
            admin.reset(self.db, self.spec, drop_only=True)

    def one(self, b, env):
        m = b.marker
        if m.kind == "env":
            return
        if m.kind == "file":
            (self.dir / m.name).write_text(b.text)
            if m.name.endswith(".yaml"):
                self.command([self.args.relay, "check-config", m.name], env, b)
            return
        if m.kind != "run":
            return
        print(f"  {b.where}: run ({b.lang}{', background' if m.background else ''})", flush=True)
        script = self.dir / f"{self.stem(b)}{snippets.RUNNERS[b.lang]['suffix']}"
        if b.lang in ("sh", "bash"):
            # One shell session across the page: variables a block sets reach the later ones.
            script.write_text(f'set -eo pipefail\nset -a\n. "{self.state}"\n{b.text}\n'
                              f'export -p > "{self.state}"\n')
        else:
            script.write_text(b.text)
        cmd = {"sh": ["bash", script], "bash": ["bash", script], "python": ["/usr/bin/python3", script],
               "js": ["node", script], "javascript": ["node", script],
               "sql": ["psql", env.get(m.var or "DSN", f"(${m.var or 'DSN'} is not set)"), "-X", "-v",
                       "ON_ERROR_STOP=1", "-f", script]}[b.lang]
        if b.lang == "sql" and (m.var or "DSN") not in env:
            raise Failure(f"{b.where}: the sql block runs with ${m.var or 'DSN'}, which no env block of "
                          f"scenario {self.name} sets")
        if m.background:
            log = open(self.dir / f"{self.stem(b)}.log", "w")
            p = subprocess.Popen([str(c) for c in cmd], cwd=self.dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            self.background.append((b, p, log))
            time.sleep(1.0)
            if p.poll() is not None:
                raise Failure(f"{b.where}: exited with {p.returncode} at once:\n{self.log_of(b)}")
        else:
            self.outputs[b] = self.command(cmd, env, b)

    def output_of(self, text):
        """What the one run block holding `text` printed."""
        hits = [out for b, out in self.outputs.items() if text in b.text]
        if len(hits) != 1:
            raise Failure(f"{len(hits)} run blocks of scenario {self.name} hold {text!r}: expected one")
        return hits[0]

    def command(self, cmd, env, b):
        try:
            p = subprocess.run([str(c) for c in cmd], cwd=self.dir, env=env, capture_output=True, text=True,
                               timeout=90)
        except subprocess.TimeoutExpired:
            raise Failure(f"{b.where}: still running after 90 s") from None
        if p.returncode != 0:
            raise Failure(f"{b.where}: exited with {p.returncode}:\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
                          f"{self.background_logs()}")
        return p.stdout

    @staticmethod
    def stem(b):
        """A block's files in the scenario folder: a scenario may span pages."""
        return f".block-{pathlib.Path(b.page).stem}-{b.line}"

    def log_of(self, b):
        path = self.dir / f"{self.stem(b)}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def background_logs(self):
        return "".join(f"\n--- {b.where} (background) ---\n{self.log_of(b)}" for b, _, _ in self.background)

    def stop_background(self):
        for b, p, log in reversed(self.background):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            log.close()
        self.background = []


def to_url(dsn):
    """libpq keyword DSN -> postgresql:// URL (only to read host, port, user)."""
    if dsn.startswith("postgres"):
        return dsn
    kv = dict(part.split("=", 1) for part in dsn.split())
    return f"postgresql://{kv.get('user', 'postgres')}@{kv.get('host', '127.0.0.1')}:{kv.get('port', '5432')}/" \
           f"{kv.get('dbname', 'postgres')}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=pathlib.Path, required=True)
    ap.add_argument("--relay")
    ap.add_argument("--node-modules", type=pathlib.Path)
    ap.add_argument("--check-only", action="store_true", help="markers and excerpts only, run nothing")
    ap.add_argument("--scenario", action="append", help="run only these scenarios (when debugging)")
    args = ap.parse_args()
    args.source = args.source.resolve()
    if args.relay:
        args.relay = str(pathlib.Path(args.relay).resolve())
    if args.node_modules:
        args.node_modules = args.node_modules.resolve()
    started = time.monotonic()
    pages = [args.source / "README.md"] + sorted((args.source / "docs").glob("*.md"))
    blocks = [b for page in pages for b in snippets.parse(page, args.source)]
    errors = check_markers(args.source, blocks)
    kinds = {}
    for b in blocks:
        if b.marker:
            kinds[b.marker.kind] = kinds.get(b.marker.kind, 0) + 1
    print(f"{len(blocks)} blocks in {len(pages)} pages: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    if errors:
        print("FAIL:\n  " + "\n  ".join(errors))
        return 1
    if args.check_only:
        return 0
    missing = [n for n in ("OUTBOX_PG_DSN", "OUTBOX_AMQP_URI") if not os.environ.get(n)]
    if missing or not args.relay or not os.access(args.relay, os.X_OK):
        print(f"FAIL: the runs need {', '.join(missing) or 'no variable'} set and --relay (the built "
              f"outbox-relay; got {args.relay!r})")
        return 1
    if args.node_modules and not (args.node_modules / "pg").is_dir():
        print(f"FAIL: {args.node_modules}/pg is missing: the npm packages were not installed (ctest fixture "
              "docs_npm_install)")
        return 1
    scenarios = {}
    for b in blocks:
        if b.marker.kind in ("run", "file", "env"):
            scenarios.setdefault(b.marker.scenario, []).append(b)
    # A scenario starts on the page that sets it up (its env block), then follows the
    # page order: another page may use the shop of SQL-CONTRACT.md, set up there.
    for name, its_blocks in scenarios.items():
        home = next((b.page for b in its_blocks if b.marker.kind == "env"), None)
        its_blocks.sort(key=lambda b: b.page != home)  # stable: page and line order kept
    unused = sorted(set(doc_checks.SCENARIOS) - set(scenarios))
    if unused:
        print(f"FAIL: scenario(s) {', '.join(unused)} have a check but no block in the docs")
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="doc-snippets-") as tmp:
        for name, its_blocks in scenarios.items():
            if args.scenario and name not in args.scenario:
                continue
            t0 = time.monotonic()
            print(f"scenario {name}: {len(its_blocks)} blocks", flush=True)
            try:
                Scenario(name, its_blocks, args, pathlib.Path(tmp)).run()
                print(f"scenario {name}: ok in {time.monotonic() - t0:.1f} s", flush=True)
            except (Failure, ValueError, doc_checks.CheckFailed, subprocess.CalledProcessError) as e:
                detail = e.stderr if isinstance(e, subprocess.CalledProcessError) else ""
                failures.append(f"scenario {name}: {e}{detail or ''}")
                print(f"scenario {name}: FAILED", flush=True)
    print(f"done in {time.monotonic() - started:.1f} s")
    if failures:
        print("FAIL:\n" + "\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
