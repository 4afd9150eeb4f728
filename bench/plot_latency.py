#!/usr/bin/python3
"""Plots latency against producer rate from outbox-bench JSON summaries.

usage: bench/plot_latency.py OUT.png RESULT.json [RESULT.json ...]

Each JSON file is one `outbox-bench --json` run; its "latency" list holds, per steady
producer rate, the percentiles of enqueue commit -> broker confirm and -> consumer
receipt. Every file adds its points, so several runs at different --rates make one
curve. Needs Debian's python3-matplotlib (deploy/local/install-deps.sh).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402


def load_points(paths):
    points = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
        if "latency" not in report:
            raise SystemExit(f"{path}: no 'latency' list (run outbox-bench with the latency phase)")
        for entry in report["latency"]:
            points.append(entry)
    points.sort(key=lambda e: e["achieved_rate"])
    return points, report


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__.strip())
    out, paths = argv[1], argv[2:]
    points, last = load_points(paths)
    rates = [p["achieved_rate"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    styles = {"p50": "o", "p99": "s", "p999": "^"}
    for pct, marker in styles.items():
        ax.plot(rates, [p["to_confirm_ms"][pct] for p in points], marker=marker, linestyle="-",
                label=f"commit -> confirm {pct}")
        ax.plot(rates, [p["to_receipt_ms"][pct] for p in points], marker=marker, linestyle="--",
                alpha=0.6, label=f"commit -> receipt {pct}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("steady producer rate (messages/s, one message per transaction)")
    ax.set_ylabel("latency (ms)")
    machine = last.get("machine", {})
    ax.set_title(f"outbox-relay latency, {last.get('message_bytes', '?')} B messages\n"
                 f"{machine.get('cpus', '?')} CPUs, {last.get('date', '')}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out)
    print(f"wrote {out} ({len(points)} rates)")


if __name__ == "__main__":
    main(sys.argv)
