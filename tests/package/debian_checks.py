"""The Debian side of package_test: what a Debian maintainer checks before adopting a package.

  lintian      lintian --pedantic on both packages: no E: line, and no W: line but those
               of LINTIAN_ALLOWED_WARNINGS for this Debian release (each with its reason);
               no stale override (unused-override, mismatched-override, alien-tag)
  doc files    copyright (DEP-5) and changelog.Debian.gz (gzip -9n, this version) in both
  man pages    outbox-relay.1.gz and outbox-keys.1.gz render with man(1) without warnings
               and carry every command the program's own --help lists
  citations    every document the programs' help, man pages, unit and example configs
               name is installed; no placeholder URL in any file of either package
  hardening    both programs are PIE (ELF type DYN), BIND_NOW, RELRO, call glibc's
               checked functions (__*_chk: _FORTIFY_SOURCE) and the stack protector
  C++20        every installed header, compiled with -std=c++17, stops at the SDK's
               #error, which says what to do; the CMake package asks for cxx_std_20
Each function raises script_steps.Failure naming the file or tag at fault.
"""

import gzip
import os
import re
import shutil
import subprocess

from script_steps import Failure, expect, run, step

# W: tags that may remain, by Debian release (VERSION_ID), each with why it is right.
# None today on Debian 12 (lintian 2.116) or 13 (lintian 2.122): the two tags that hold
# for a package made outside Debian are overridden inside the packages
# (packaging/lintian/PACKAGE), so lintian prints them as O: lines.
LINTIAN_ALLOWED_WARNINGS = {"12": {}, "13": {}}
# The overrides the packages carry (packaging/lintian/): lintian must use each one.
LINTIAN_OVERRIDES = {"outbox-relay": {"initial-upload-closes-no-bugs"},
                     "liboutbox-dev": {"initial-upload-closes-no-bugs"}}
STALE_OVERRIDE_TAGS = {"unused-override", "mismatched-override", "alien-tag", "malformed-override"}
CXX20_ERROR = "outbox-relay's SDK needs C++20: compile with -std=c++20 (or set CMAKE_CXX_STANDARD 20)"
PLACEHOLDER_URL = "example/outbox-relay"


def check_lintian(debs, release):
    step(f"lintian --pedantic on both packages (Debian {release})")
    expect(release in LINTIAN_ALLOWED_WARNINGS,
           f"no lintian allowlist for Debian release {release!r} (known: {sorted(LINTIAN_ALLOWED_WARNINGS)}): "
           "run lintian --pedantic on the packages there and add the release to LINTIAN_ALLOWED_WARNINGS")
    allowed = LINTIAN_ALLOWED_WARNINGS[release]
    # --fail-on none: the lines are judged here; -I --pedantic --show-overrides: all of them printed
    out = run(["lintian", "--pedantic", "--display-info", "--show-overrides", "--fail-on", "none",
               *sorted(debs.values())], timeout=300)
    print("    " + out.strip().replace("\n", "\n    ") if out.strip() else "    (lintian printed no tag)")
    tags = []  # (level, package, tag)
    for line in out.splitlines():
        m = re.match(r"^([EWIPXO]): ([^:\s]+)(?: [a-z]+)?: (\S+)", line)
        if m:
            tags.append(m.groups())
    errors = [t for t in tags if t[0] == "E"]
    warnings = [t for t in tags if t[0] == "W" and t[2] not in allowed]
    stale = [t for t in tags if t[2] in STALE_OVERRIDE_TAGS]
    expect(not errors and not warnings and not stale,
           f"lintian: errors {errors}, warnings not allowed on Debian {release} {warnings}, "
           f"stale overrides {stale}\n{out}")
    for package, overrides in LINTIAN_OVERRIDES.items():
        used = {t[2] for t in tags if t[0] == "O" and t[1] == package}
        expect(used == overrides, f"{package}: lintian used the overrides {sorted(used)}, expected {sorted(overrides)}")


def check_doc_files(root, version):
    step("copyright (DEP-5) and changelog.Debian.gz in both packages")
    for package in ("outbox-relay", "liboutbox-dev"):
        doc = root / "usr/share/doc" / package
        copyright_file = doc / "copyright"
        expect(copyright_file.is_file(), f"{package} lacks /usr/share/doc/{package}/copyright")
        text = copyright_file.read_text()
        expect(text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"),
               f"{copyright_file}: not a DEP-5 copyright file:\n{text[:300]}")
        expect("\nFiles: *\n" in text and "\nLicense: Expat\n Permission is hereby granted" in text,
               f"{copyright_file}: no 'Files: *' paragraph with the Expat (MIT) license text:\n{text}")
        for name in ("changelog.Debian.gz", "changelog.gz"):
            path = doc / name
            expect(path.is_file(), f"{package} lacks /usr/share/doc/{package}/{name}")
            raw = path.read_bytes()
            # gzip -9n: no file name (FLG bit 3) and no time stamp (MTIME 0) in the header
            expect(raw[:2] == b"\x1f\x8b" and not raw[3] & 0x08 and raw[4:8] == b"\0\0\0\0",
                   f"{path}: not compressed with gzip -9n (a name or a time stamp in its header)")
        first = gzip.decompress((doc / "changelog.Debian.gz").read_bytes()).decode().splitlines()[0]
        expect(first.startswith(f"outbox-relay ({version}-1) "),
               f"{package}: changelog.Debian.gz begins {first!r}, expected version {version}-1")


def program_commands(root, program):
    """The commands the installed program's own --help lists."""
    help_text = run([root / "usr/bin" / program, "--help"])
    if program == "outbox-relay":
        return sorted(set(re.findall(r"^  outbox-relay ([a-z][a-z-]+) ", help_text, re.M)))
    block = help_text.split("Subcommands:", 1)
    expect(len(block) == 2, f"{program} --help lists no Subcommands:\n{help_text}")
    return sorted(re.findall(r"^  ([a-z][a-z-]+) ", block[1], re.M))


def check_man_pages(root, tmp):
    step("man pages: rendered by man(1), every command listed")
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MANPAGER="cat", PAGER="cat")
    for program in ("outbox-relay", "outbox-keys"):
        page = root / f"usr/share/man/man1/{program}.1.gz"
        expect(page.is_file(), f"outbox-relay lacks /usr/share/man/man1/{program}.1.gz")
        p = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True, env=env,
                           timeout=60)
        expect(p.returncode == 0 and not p.stderr.strip(), f"man -l {page}: exit {p.returncode}\n{p.stderr}")
        text = p.stdout
        for section in ("NAME", "DESCRIPTION", "COMMANDS", "FILES", "SEE ALSO"):
            expect(re.search(rf"^{section}$", text, re.M), f"{program}.1: no section {section}:\n{text[:2000]}")
        commands_section = text.split("\nCOMMANDS\n", 1)[1]
        commands = program_commands(root, program)
        expect(commands, f"{program} --help lists no commands")
        missing = [c for c in commands if not re.search(rf"^   {re.escape(c)}$", commands_section, re.M)]
        expect(not missing, f"{program}.1: COMMANDS lacks {missing} (cmake/OutboxDebianFiles.cmake names them)")
        for leak in (str(tmp), "/var/tmp", "/build/"):
            expect(leak not in text, f"{program}.1 shows a build path ({leak!r})")
        print(f"    {program}.1: {len(text.splitlines())} lines, commands {', '.join(commands)}")


def check_citations(root):
    step("the documents the programs, unit and examples cite are installed; no placeholder URL")
    doc = root / "usr/share/doc/outbox-relay"
    texts = {"outbox-relay --help": run([root / "usr/bin/outbox-relay", "--help"])}
    for command in program_commands(root, "outbox-relay"):
        texts[f"outbox-relay {command} --help"] = run([root / "usr/bin/outbox-relay", command, "--help"])
    for page in ("outbox-relay", "outbox-keys"):
        texts[f"{page}.1"] = gzip.decompress((root / f"usr/share/man/man1/{page}.1.gz").read_bytes()).decode()
    unit = root / "usr/lib/systemd/system/outbox-relay.service"
    texts[unit.name] = unit.read_text()
    for example in sorted((doc / "examples").glob("*.yaml")):
        texts[f"examples/{example.name}"] = example.read_text()
    for where, text in texts.items():
        for name in sorted(set(re.findall(r"\b([A-Z][A-Z-]+\.md)\b", text.replace("\\-", "-")))):
            expect((doc / f"{name}.gz").is_file(), f"{where} cites {name}, which /usr/share/doc/outbox-relay lacks")
    documentation = re.search(r"^Documentation=(.*)$", texts[unit.name], re.M)
    expect(documentation, f"{unit}: no Documentation= line")
    for uri in documentation.group(1).split():
        if uri.startswith("man:"):
            expect((root / f"usr/share/man/man1/{uri[4:].split('(')[0]}.1.gz").is_file(), f"{unit}: {uri}: no such page")
        else:
            expect(uri.startswith("file:/usr/share/doc/") and (root / uri[len("file:/"):]).is_file(),
                   f"{unit}: Documentation= {uri} is not an installed file")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        expect(PLACEHOLDER_URL.encode() not in data, f"{path.relative_to(root)} holds the placeholder {PLACEHOLDER_URL}")


def check_hardening(root):
    step("hardening: PIE, BIND_NOW, RELRO, fortified glibc calls, stack protector")
    for program in ("outbox-relay", "outbox-keys"):
        binary = root / "usr/bin" / program
        header = run(["readelf", "-h", binary])
        expect(re.search(r"^\s*Type:\s+DYN\b", header, re.M), f"{program}: not PIE (readelf -h):\n{header}")
        dynamic = run(["readelf", "-d", binary])
        expect(re.search(r"\(FLAGS\)\s+.*\bBIND_NOW\b", dynamic), f"{program}: no BIND_NOW (readelf -d):\n{dynamic}")
        expect(re.search(r"\(FLAGS_1\)\s+.*\bPIE\b", dynamic), f"{program}: FLAGS_1 lacks PIE (readelf -d)")
        segments = run(["readelf", "-lW", binary])
        expect("GNU_RELRO" in segments, f"{program}: no GNU_RELRO segment (readelf -l)")
        symbols = run(["readelf", "--dyn-syms", "-W", binary])
        fortified = sorted(set(re.findall(r"\b(__\w+_chk)@", symbols)) - {"__stack_chk_fail"})
        expect(fortified, f"{program}: imports no __*_chk function (built without _FORTIFY_SOURCE)")
        expect("__stack_chk_fail@" in symbols, f"{program}: no __stack_chk_fail (built without a stack protector)")
        print(f"    {program}: PIE, BIND_NOW, RELRO, stack protector, fortified {', '.join(fortified)}")


def check_cxx20_guard(root, tmp):
    step("the SDK's headers in C++17 mode: the #error that says C++20; the CMake package asks for it")
    include = root / "usr/include"
    headers = sorted(include.rglob("*.h"))
    expect(headers, f"no headers under {include}")
    cxx = os.environ.get("CXX", "c++")
    source = tmp / "cxx17.cpp"
    for header in headers:
        source.write_text(f"#include <{header.relative_to(include)}>\nint main() {{ return 0; }}\n")
        # -Wfatal-errors: only the first error, which must be the guard's (it comes first)
        p = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wfatal-errors", f"-I{include}", str(source)],
                           capture_output=True, text=True, timeout=120)
        expect(p.returncode != 0 and CXX20_ERROR in p.stderr,
               f"{header.relative_to(include)} with -std=c++17: exit {p.returncode}, not the C++20 #error first:\n"
               f"{p.stderr[-1500:]}")
    print(f"    {len(headers)} headers: each stops at '#error {CXX20_ERROR}'")
    targets = list(root.rglob("OutboxRelayTargets.cmake"))
    expect(len(targets) == 1, f"expected one OutboxRelayTargets.cmake, found {targets}")
    features = re.findall(r'INTERFACE_COMPILE_FEATURES "([^"]*)"', targets[0].read_text())
    expect(features and all("cxx_std_20" in f for f in features),
           f"{targets[0].name}: INTERFACE_COMPILE_FEATURES {features}, expected cxx_std_20 on every target")


def check_descriptions(debs):
    step("descriptions: a synopsis and lines of at most 80 characters; a C++20 compiler recommended")
    for name, deb in debs.items():
        description = run(["dpkg-deb", "-f", deb, "Description"])
        lines = description.rstrip("\n").split("\n")
        long_lines = [line for line in lines if len(line) > 80]
        expect(not long_lines, f"{name}: description lines over 80 characters: {long_lines}")
        expect(not re.match(r"(?i)(a|an|the) ", lines[0]) and not lines[0].endswith("."),
               f"{name}: synopsis {lines[0]!r} starts with an article or ends with a full stop")
        homepage = run(["dpkg-deb", "-f", deb, "Homepage"]).strip()
        expect(PLACEHOLDER_URL not in homepage, f"{name}: Homepage {homepage!r} is a placeholder")
    recommends = run(["dpkg-deb", "-f", debs["liboutbox-dev"], "Recommends"])
    expect(re.search(r"\bg\+\+ \(>= 4:12\) \| c\+\+-compiler\b", recommends),
           f"liboutbox-dev: Recommends {recommends.strip()!r} does not name a C++20 compiler (g++ >= 12)")


def check_all(debs, root, tmp, version, release):
    missing = [tool for tool in ("lintian", "man", "readelf") if not shutil.which(tool)]
    expect(not missing, f"{', '.join(missing)} not found: apt-get install lintian (it brings man-db and "
                        "binutils; deploy/local/install-deps.sh installs it)")
    check_lintian(debs, release)
    check_descriptions(debs)
    check_doc_files(root, version)
    check_man_pages(root, tmp)
    check_citations(root)
    check_hardening(root)
    check_cxx20_guard(root, tmp)


__all__ = ["check_all", "Failure"]
