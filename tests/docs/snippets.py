"""The fenced blocks of a Markdown page and the snippet marker before each.

A marker is an HTML comment alone on the line just before the opening fence (Markdown
shows neither), e.g. `<!-- snippet: run shop -->`; doc_snippets_test.py says what each
kind means.
"""

import re
import shlex
from dataclasses import dataclass

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<lang>[^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<text>.*?)\s*-->\s*$")
NAME = r"[a-z0-9][a-z0-9-]*"

# What a `run` block of each language is written to (then run; doc_snippets_test.py).
RUNNERS = {"sh": {"suffix": ".sh"}, "bash": {"suffix": ".sh"}, "sql": {"suffix": ".sql"},
           "python": {"suffix": ".py"}, "js": {"suffix": ".js"}, "javascript": {"suffix": ".js"}}


@dataclass
class Marker:
    kind: str  # run, file, env, excerpt, run-by, not-run, unknown
    text: str
    scenario: str = ""
    name: str = ""  # file: the file name
    var: str = ""  # run (sql): the variable holding the DSN psql connects with
    background: bool = False
    path: str = ""  # excerpt, run-by
    reason: str = ""  # not-run


@dataclass(eq=False)  # compared and hashed by identity: a key of Scenario.outputs
class Block:
    page: str
    line: int  # the opening fence's line, 1-based
    lang: str
    text: str  # the body, its common indentation removed
    marker: Marker | None

    @property
    def where(self):
        return f"{self.page}:{self.line}"


def parse_marker(text):
    m = re.fullmatch(rf"run (?P<s>{NAME})(?: with (?P<var>[A-Z_][A-Z0-9_]*))?(?P<bg> in background)?", text)
    if m:
        return Marker("run", text, scenario=m["s"], var=m["var"] or "", background=bool(m["bg"]))
    m = re.fullmatch(rf"file (?P<s>{NAME}) (?P<name>[A-Za-z0-9_.-]+)", text)
    if m:
        return Marker("file", text, scenario=m["s"], name=m["name"])
    m = re.fullmatch(rf"env (?P<s>{NAME})", text)
    if m:
        return Marker("env", text, scenario=m["s"])
    m = re.fullmatch(r"excerpt of (?P<path>[\w./-]+)", text)
    if m:
        return Marker("excerpt", text, path=m["path"])
    m = re.fullmatch(r"run by (?P<path>[\w./-]+)", text)
    if m:
        return Marker("run-by", text, path=m["path"])
    m = re.fullmatch(r"not run:\s*(?P<reason>.*)", text)
    if m:
        return Marker("not-run", text, reason=m["reason"].strip())
    return Marker("unknown", text)


def dedent(lines):
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(indents, default=0)
    return "\n".join(ln[cut:] for ln in lines) + "\n"


def parse(path, root):
    page = str(path.relative_to(root))
    lines = path.read_text().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        close = re.compile(r"^\s*" + re.escape(m["fence"][0]) + "{" + str(len(m["fence"])) + r",}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        before = MARKER.match(lines[i - 1]) if i > 0 else None
        marker = parse_marker(before["text"]) if before else None
        blocks.append(Block(page, i + 1, m["lang"].lower(), dedent(lines[i + 1:j]), marker))
        i = j + 1
    return blocks


def _stripped(text):
    return [ln.strip() for ln in text.split("\n") if ln.strip()]


def is_excerpt(block, file_text):
    """The block's non-empty lines appear in order, one after the other, among the
    file's non-empty lines (each compared without its indentation)."""
    want, have = _stripped(block), _stripped(file_text)
    return any(have[k:k + len(want)] == want for k in range(len(have) - len(want) + 1))


def first_missing_line(block, file_text):
    have = set(_stripped(file_text))
    return next((ln for ln in _stripped(block) if ln not in have), "(every line exists, not in this order)")


def exports(text, where):
    """The (VAR, value) pairs of an env block: `export VAR=value` lines and comments only."""
    pairs = []
    for ln in text.split("\n"):
        s = ln.strip()
        if not s or s.startswith("#"):
            continue
        m = re.fullmatch(r"export ([A-Z_][A-Z0-9_]*)=(.*?)(\s+#.*)?", s)
        if not m:
            raise ValueError(f"{where}: an env block holds only `export VAR=value` lines, not {s!r}")
        pairs.append((m[1], shlex.split(m[2])[0] if m[2] else ""))
    return pairs
