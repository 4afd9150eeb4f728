#!/usr/bin/python3
"""Plots a soak's figures over time from the CSV of `outbox-bench --phases soak`.

usage: bench/plot_soak.py OUT.png SOAK.csv

One column of panels per mode (mark, delete, ordered), one row per figure: the
commit -> confirm and commit -> receipt p99, the CPU per message (relay, its
PostgreSQL sessions, the whole PostgreSQL server, the broker), the heap and index
sizes, the dead tuples with the autovacuum runs, and the disk: the bench's 4 KiB
flushes (p50, p99) and the WAL's mean flush time (CSVs from before these columns leave
that panel empty). The CSV is written row by row
during the run, so a run still going (or one that failed) can be plotted too.
Needs Debian's python3-matplotlib (deploy/local/install-deps.sh).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def number(text):
    return float(text) if text not in ("", None) else None


def load(path):
    modes = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            modes.setdefault(row["mode"], []).append(row)
    if not modes:
        raise SystemExit(f"{path}: no rows (is it the CSV of outbox-bench --phases soak?)")
    return modes


def series(rows, column):
    xs, ys = [], []
    for r in rows:
        v = number(r.get(column))
        if v is not None:
            xs.append(number(r["end_s"]) / 60)
            ys.append(v)
    return xs, ys


def main(argv):
    if len(argv) != 3:
        raise SystemExit(__doc__.strip())
    out, path = argv[1], argv[2]
    modes = load(path)
    fig, axes = plt.subplots(5, len(modes), figsize=(5 * len(modes), 15), dpi=110, squeeze=False, sharex="col")
    for col, (mode, rows) in enumerate(modes.items()):
        ax = axes[0][col]
        for column, label in (("confirm_p99_ms", "commit -> confirm p99"), ("receipt_p99_ms", "commit -> receipt p99")):
            xs, ys = series(rows, column)
            if ys:  # delete mode has no confirm times
                ax.plot(xs, ys, marker=".", label=label)
        ax.set_title(f"{mode}", fontsize=10)
        ax.set_ylabel("ms")
        ax = axes[1][col]
        for column, label in (("relay_cpu_us_per_msg", "relay"), ("relay_pg_cpu_us_per_msg", "relay's PG sessions"),
                              ("pg_server_cpu_us_per_msg", "PG server (all)"), ("broker_cpu_us_per_msg", "broker")):
            ax.plot(*series(rows, column), marker=".", label=label)
        ax.set_ylabel("CPU us / message")
        ax = axes[2][col]
        xs, heap = series(rows, "heap_bytes")
        ax.plot(xs, [b / 1048576 for b in heap], marker=".", label="heap")
        for column in [c for c in rows[0] if c.startswith("index_bytes:")]:
            xs, ys = series(rows, column)
            ax.plot(xs, [b / 1048576 for b in ys], marker=".", label=column.split(":", 1)[1])
        ax.set_ylabel("MiB")
        ax = axes[3][col]
        ax.plot(*series(rows, "dead_tuples"), marker=".", label="dead tuples")
        ax.set_ylabel("dead tuples")
        twin = ax.twinx()
        twin.bar(*series(rows, "autovacuums"), width=0.05, alpha=0.4, color="tab:red", label="autovacuums")
        twin.set_ylabel("autovacuums per sample")
        twin.set_ylim(bottom=0)
        ax = axes[4][col]
        for column, label in (("disk_flush_p50_us", "disk flush p50 (bench probe)"),
                              ("disk_flush_p99_us", "disk flush p99 (bench probe)"),
                              ("wal_sync_us", "WAL flush, mean (track_wal_io_timing)")):
            xs, ys = series(rows, column)
            if ys:
                ax.plot(xs, ys, marker=".", label=label)
        ax.set_ylabel("us (log)")
        if ax.lines:
            ax.set_yscale("log")  # a flush's p99 is 5-50 times its p50
        ax.set_xlabel("minutes")
        for row in axes:
            row[col].grid(True, alpha=0.3)
            if row[col].get_legend_handles_labels()[0]:
                row[col].legend(fontsize=7)
    fig.suptitle(f"outbox-relay soak: {path}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} ({', '.join(f'{m}: {len(r)} samples' for m, r in modes.items())})")


if __name__ == "__main__":
    main(sys.argv)
