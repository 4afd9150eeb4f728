#!/usr/bin/env python3
"""Draws docs/images/grafana-dashboard.png: the panels of deploy/grafana/outbox-relay.json,
laid out as in Grafana, with data scraped from a real relay's /metrics. Grafana does not
run here, so this is matplotlib, not a Grafana screenshot; the picture says so.

  record OUT.jsonl   run a relay on the local servers (deploy/local/servers.sh) against a
                     scratch schema, drive a scripted load (steady, burst, unroutable rows
                     that get parked, steady), scrape /metrics every 2 s; needs python3-pika
  render IN.jsonl PNG  evaluate each panel's PromQL on the scrapes and draw the dashboard

The evaluator understands exactly the expression shapes the dashboard uses (one relay, so
sum/max/min over instances are trivial) and fails on anything else, so the picture cannot
silently drift from the JSON.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "outbox-relay.json")

# --------------------------------------------------------------------------- record


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value.replace("+Inf", "inf"))
    return out


def record(out_path):
    import pika  # python3-pika
    import urllib.request

    pg = os.environ["OUTBOX_PG_DSN"]
    amqp = os.environ["OUTBOX_AMQP_URI"]
    relay_bin = os.environ.get("OUTBOX_RELAY_BIN", os.path.join(REPO, "build", "relay", "outbox-relay"))
    schema = f"dashboard_demo_{os.getpid()}"
    exchange, queue = schema + "_x", schema + "_q"
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "relay.yaml")
    with open(cfg, "w") as f:
        f.write(f"""postgres:
  dsn: ${{OUTBOX_PG_DSN}}
  schema: {schema}
amqp:
  uri: ${{OUTBOX_AMQP_URI}}
relay:
  batch_size: 200
  max_attempts: 3
  backoff_initial_ms: 2000
  backoff_max_ms: 4000
http:
  listen: 127.0.0.1:0
  stats_interval_s: 2
retention:
  enabled: true
  keep: 1m
  interval_s: 15
""")
    subprocess.run([relay_bin, "migrate", "--config", cfg], check=True, capture_output=True)
    params = pika.URLParameters(amqp)
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.exchange_declare(exchange, "direct", auto_delete=False)
    ch.queue_declare(queue, durable=True, arguments={"x-max-length": 200000})  # RabbitMQ 4.0 deprecates transient queues
    ch.queue_bind(queue, exchange, "order.placed")
    stop = threading.Event()

    def consume():  # keeps the queue empty, like a real consumer
        c = pika.BlockingConnection(params)
        cc = c.channel()
        while not stop.is_set():
            for method, _, _ in cc.consume(queue, auto_ack=True, inactivity_timeout=0.5):
                if method is None or stop.is_set():
                    break
        c.close()

    consumer = threading.Thread(target=consume)
    consumer.start()
    log = open(os.path.join(tmp, "relay.log"), "w+")
    relay = subprocess.Popen([relay_bin, "run", "--config", cfg], stderr=log)
    address = None
    for _ in range(100):
        log.seek(0)
        m = re.search(r"/readyz on http://(\S+)", log.read())
        if m:
            address = m.group(1)
            break
        time.sleep(0.1)
    if not address:
        raise SystemExit("the relay did not start")

    def insert(n, key="order.placed"):
        sql = (f"INSERT INTO {schema}.outbox (message_id, exchange, routing_key, message_type, payload) "
               f"SELECT gen_random_uuid(), '{exchange}', '{key}', 'OrderPlaced', "
               f"convert_to('{{\"order\":' || g || '}}', 'UTF8') FROM generate_series(1, {n}) g")
        subprocess.run(["psql", pg, "-qc", sql], check=True)

    # (start s, end s, rows per second, routing key)
    phases = [(0, 60, 150, "order.placed"), (60, 61, 20000, "order.placed"), (61, 100, 150, "order.placed"),
              (100, 110, 3, "no.such.route"), (110, 170, 150, "order.placed"), (170, 240, 400, "order.placed")]
    t0 = time.time()
    with open(out_path, "w") as out:
        while (now := time.time() - t0) < 250:
            for start, end, rate, key in phases:
                if start <= now < end:
                    insert(max(1, int(rate * 2)) if rate < 10000 else rate, key)
                    break
            body = urllib.request.urlopen(f"http://{address}/metrics").read().decode()
            out.write(json.dumps({"t": round(now, 2), "m": parse_metrics(body)}) + "\n")
            time.sleep(max(0.0, 2 - (time.time() - t0 - now)))
    relay.terminate()
    relay.wait()
    stop.set()
    consumer.join()
    try:
        conn.close()  # idle for minutes: its heartbeats went unserviced; clean up on a fresh one
    except pika.exceptions.AMQPError:
        pass
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.queue_delete(queue)
    ch.exchange_delete(exchange)
    conn.close()
    subprocess.run(["psql", pg, "-qc", f"DROP SCHEMA {schema} CASCADE"], check=True)


# --------------------------------------------------------------------------- evaluate

SEL = r'\{job=~"\$job", instance=~"\$instance"\}'
RATE = r"\[\$__rate_interval\]"


def series(samples, name):
    """{labels-text: value} of one metric name in one scrape."""
    out = {}
    for key, v in samples.items():
        if key == name or key.startswith(name + "{"):
            out[key[len(name):]] = v
    return out


def label(labels, name):
    m = re.search(name + r'="([^"]*)"', labels)
    return m.group(1) if m else ""


class Evaluator:
    def __init__(self, scrapes, window=30.0):
        self.scrapes = scrapes
        self.window = window

    def rate_at(self, i, name):
        """Per-labels rate over the window ending at scrape i (counter resets ignored)."""
        t, now = self.scrapes[i]["t"], self.scrapes[i]["m"]
        j = i
        while j > 0 and t - self.scrapes[j - 1]["t"] <= self.window:
            j -= 1
        if j == i:
            return {}
        dt = t - self.scrapes[j]["t"]
        before = series(self.scrapes[j]["m"], name)
        return {k: (v - before.get(k, 0)) / dt for k, v in series(now, name).items()}

    def eval(self, expr, i):
        """Returns {legend-label-values: value} for scrape i."""
        e = expr
        m = re.fullmatch(r"(max|sum)\((\w+)" + SEL + r"\)", e)
        if m:
            vals = series(self.scrapes[i]["m"], m.group(2)).values()
            return {"": (max if m.group(1) == "max" else sum)(vals)} if vals else {}
        m = re.fullmatch(r"sum\(min by \(instance\) \((\w+)" + SEL + r"\)\)", e)
        if m:
            vals = series(self.scrapes[i]["m"], m.group(1)).values()
            return {"": min(vals)} if vals else {}
        m = re.fullmatch(r"sum by \((\w+)\) \((\w+)" + SEL + r"\)", e)
        if m:
            return {"local": sum(series(self.scrapes[i]["m"], m.group(2)).values())}
        m = re.fullmatch(r"sum(?: by \((\w+)\) )?\((rate|increase)\((\w+)" + SEL + r"\[(\$__rate_interval|5m)\]\)\)", e)
        if m:
            by, fn, name = m.group(1), m.group(2), m.group(3)
            rates = self.rate_at(i, name)
            scale = 300.0 if fn == "increase" else 1.0
            if by in (None, "instance"):
                return {"local" if by else "": scale * sum(rates.values())} if rates else {}
            out = {}
            for k, v in rates.items():
                out[label(k, by)] = out.get(label(k, by), 0) + scale * v
            return out
        m = re.fullmatch(r"sum\(rate\((\w+)" + SEL + RATE + r"\)\) / sum\(rate\((\w+)" + SEL + RATE + r"\)\)", e)
        if m:
            a, b = sum(self.rate_at(i, m.group(1)).values()), sum(self.rate_at(i, m.group(2)).values())
            return {"": a / b} if b > 0 else {}
        m = re.fullmatch(r"histogram_quantile\(([0-9.]+), sum by \(le\) \(rate\((\w+)" + SEL + RATE + r"\)\)\)", e)
        if m:
            q, rates = float(m.group(1)), self.rate_at(i, m.group(2))
            buckets = sorted((float(label(k, "le").replace("+Inf", "inf")), v) for k, v in rates.items())
            if not buckets or buckets[-1][1] <= 0:
                return {}
            rank, prev_le, prev_c = q * buckets[-1][1], 0.0, 0.0
            for le, c in buckets:  # Prometheus' linear interpolation inside the bucket
                if c >= rank:
                    if math.isinf(le):
                        return {"": prev_le}
                    return {"": prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-12)}
                prev_le, prev_c = le, c
        raise ValueError("the picture's evaluator does not know this expression: " + expr)


# --------------------------------------------------------------------------- render


def render(in_path, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dash = json.load(open(DASHBOARD))
    scrapes = [json.loads(line) for line in open(in_path)]
    ev = Evaluator(scrapes)
    ts = [s["t"] for s in scrapes]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dash["panels"])
    unit_h = 0.42
    fig = plt.figure(figsize=(20, rows * unit_h + 1.3), facecolor="#111217")
    colors = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#b877d9", "#e0e0e0"]
    for p in dash["panels"]:
        g = p["gridPos"]
        total_h = rows * unit_h + 1.3
        x0, w = 0.005 + g["x"] / 24 * 0.99, g["w"] / 24 * 0.99 - 0.006
        y0, h = 1 - (g["y"] + g["h"]) * unit_h / total_h - 0.06, g["h"] * unit_h / total_h - 0.012
        if p["type"] != "stat":  # room for the tick labels inside the panel's cell
            x0, w, y0, h = x0 + 0.03, w - 0.032, y0 + 0.02, h - 0.022
        ax = fig.add_axes([x0, y0, w, h])
        ax.set_facecolor("#181b1f")
        for s in ax.spines.values():
            s.set_color("#2c3235")
        ax.set_title(p["title"], color="#ccccdc", fontsize=10, loc="left")
        unit = p["fieldConfig"]["defaults"].get("unit", "")
        results = [[ev.eval(t["expr"], i) for i in range(len(scrapes))] for t in p["targets"]]
        if p["type"] == "stat":
            last = next((r[""] for r in reversed(results[0]) if "" in r), float("nan"))
            steps = p["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [{"color": "blue", "value": None}])
            color = steps[0]["color"]
            for st in steps:
                if st["value"] is not None and last >= st["value"]:
                    color = st["color"]
            palette = {"green": "#37872d", "orange": "#c4620f", "red": "#c4162a", "blue": "#1f60c4"}
            ax.set_facecolor(palette.get(color, "#1f60c4"))
            text = f"{last:.0f}" if unit in ("short", "") else f"{last:.1f} {'s' if unit == 's' else '/s'}"
            ax.text(0.5, 0.42, text, color="white", fontsize=22, ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        k = 0
        for t, res in zip(p["targets"], results):
            keys = sorted({key for r in res for key in r})
            for key in keys:
                ys = [r.get(key, float("nan")) for r in res]
                name = t["legendFormat"].replace("{{instance}}", "relay").replace("{{reason}}", key).replace("{{peer}}", key)
                ax.plot(ts, ys, color=colors[k % len(colors)], lw=1.6, label=name)
                k += 1
        ax.tick_params(colors="#8e8e8e", labelsize=7)
        ax.grid(color="#2c3235", lw=0.5)
        ax.set_xlim(ts[0], ts[-1])
        if unit:
            ax.set_ylabel({"s": "seconds", "ops": "per second", "short": ""}.get(unit, unit), color="#8e8e8e", fontsize=7)
        if k:
            ax.legend(loc="upper left", fontsize=7, facecolor="#181b1f", edgecolor="#2c3235", labelcolor="#ccccdc")
    fig.text(0.005, 0.995, "outbox-relay — the panels of deploy/grafana/outbox-relay.json", color="#ccccdc",
             fontsize=14, va="top")
    fig.text(0.005, 0.975,
             "Drawn with matplotlib by docs/tools/dashboard_picture.py (not a Grafana screenshot) from /metrics of one "
             "local relay scraped about every 2 s for 4 minutes: steady 150 rows/s, a burst of 20 000 rows at 60 s, "
             "unroutable rows from 100 s (returned, then parked), 400 rows/s from 170 s; retention keeps 1 minute. "
             "x axis: seconds.", color="#8e8e8e", fontsize=8.5, va="top")
    fig.savefig(png_path, dpi=80, facecolor=fig.get_facecolor())


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "render":
        render(sys.argv[2], sys.argv[3])
    else:
        print(__doc__)
        sys.exit(2)
