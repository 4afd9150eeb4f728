#!/usr/bin/env python3
"""The relay's rooms (relay/src/<room>/) include only the rooms below them.

A room's files may include their own room and the rooms listed before it in ROOMS;
an include of a later room, or a room this list does not know, fails with the file,
the line and the two rooms. Exit 0 when every include is in order."""
import os
import re
import sys

ROOMS = ["config", "policy", "metrics", "pg", "broker", "loop", "ops", "admin"]
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "relay", "src")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main():
    faults, files = [], 0
    rooms_on_disk = sorted(d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d)))
    for room in rooms_on_disk:
        if room not in ROOMS:
            faults.append(f"relay/src/{room}/: a room the order does not name ({', '.join(ROOMS)})")
            continue
        rank = ROOMS.index(room)
        for name in sorted(os.listdir(os.path.join(SRC, room))):
            path = os.path.join(SRC, room, name)
            files += 1
            text = open(path).read()
            for m in INCLUDE.finditer(text):
                target = m.group(1)
                if target == "outbox":  # the shared libraries' public headers
                    continue
                line = text.count("\n", 0, m.start()) + 1
                if target not in ROOMS:
                    faults.append(f"relay/src/{room}/{name}:{line}: includes room '{target}', which is not a room")
                elif ROOMS.index(target) > rank:
                    faults.append(f"relay/src/{room}/{name}:{line}: room '{room}' includes '{target}', a room above it")
    for f in faults:
        print(f)
    print(f"{files} files in {len(rooms_on_disk)} rooms: " + ("in order" if not faults else f"{len(faults)} fault(s)"))
    return 1 if faults or files == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
