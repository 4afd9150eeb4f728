"""What each scenario of the docs promises, asserted after its blocks ran.

A scenario is the run/file/env blocks that carry its name, in page order
(doc_snippets_test.py). Each entry of SCENARIOS says which broker objects the test
removes before and after (the docs declare them; they are not the test's to make) and
which function asserts the outcome.
"""

import subprocess
import time
from dataclasses import dataclass, field

import pika
import psycopg2


class CheckFailed(Exception):
    pass


class Admin:
    """The test's superuser session and broker connection: reset and inspect only."""

    def __init__(self, pg_dsn, amqp_uri):
        self.pg_dsn, self.amqp_uri = pg_dsn, amqp_uri

    def reset(self, db, spec, drop_only=False):
        conn = psycopg2.connect(self.pg_dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            # The page's logins are the cluster's, not the database's: with it gone they hold
            # nothing, and go too (before, so that a page's CREATE ROLE runs as on a new server).
            for login in spec.logins:
                cur.execute(f'DROP ROLE IF EXISTS "{login}"')
            if not drop_only:
                cur.execute(f'CREATE DATABASE "{db}"')
        conn.close()
        with pika.BlockingConnection(pika.URLParameters(self.amqp_uri)) as amqp:
            for q in spec.queues:
                amqp.channel().queue_delete(q)
            for x in spec.exchanges:
                amqp.channel().exchange_delete(x)


class Context:
    def __init__(self, scenario, env, admin):
        self.scenario, self.env, self.admin = scenario, env, admin
        self.db_url = scenario.url_for("postgres")

    def query(self, sql, args=()):
        conn = psycopg2.connect(self.db_url)
        try:
            with conn, conn.cursor() as cur:
                cur.execute(sql, args)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()

    def wait_for(self, what, predicate, timeout=30.0):
        deadline = time.monotonic() + timeout
        while True:
            got = predicate()
            if got:
                return got
            if time.monotonic() > deadline:
                raise CheckFailed(f"after {timeout:.0f} s: {what}{self.scenario.background_logs()}")
            time.sleep(0.2)

    def command(self, args):
        p = subprocess.run(args, cwd=self.scenario.dir, env=self.env, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise CheckFailed(f"{' '.join(args)} exited with {p.returncode}: {p.stdout}{p.stderr}")
        return p.stdout

    def background_alive(self):
        dead = [f"{b.where} exited with {p.returncode}" for b, p, _ in self.scenario.background
                if p.poll() is not None]
        if dead:
            raise CheckFailed("; ".join(dead) + self.scenario.background_logs())


def effects(ctx):
    """order id -> (invoices, shipments) for every order of the shop's tables."""
    rows = ctx.query("SELECT o.id, (SELECT count(*) FROM invoices i WHERE i.order_id = o.id), "
                     "(SELECT count(*) FROM shipments s WHERE s.order_id = o.id) FROM orders o")
    return {r[0]: (r[1], r[2]) for r in rows}


def expect_output(ctx, text, lines):
    got = [ln.strip() for ln in ctx.scenario.output_of(text).splitlines() if ln.strip()]
    if got != lines:
        raise CheckFailed(f"the block holding {text!r} printed {got}, the page says {lines}")


def check_shop(ctx):
    """SQL-CONTRACT.md's shop: every order placed (psql, Python, Node) is published by the
    relay and billed once (Python consumer) and shipped once (Node consumer); the same
    messages delivered again change nothing; an event to a missing exchange stays
    pending with the broker's 404 as its last error, as the page says."""
    # What the page says its statements print.
    expect_output(ctx, "ON CONFLICT (order_id) DO NOTHING", ["INSERT 0 1", "INSERT 0 0"])
    expect_output(ctx, "UPDATE orders SET status = 'paid'", ["UPDATE 1", "UPDATE 0"])
    printed = {ctx.scenario.output_of("python3 place_order.py").strip(),
               ctx.scenario.output_of("node producer.js").strip()}
    orders = ctx.wait_for("every order has an invoice and a shipment",
                          lambda: (e := effects(ctx)) and all(v == (1, 1) for v in e.values()) and e)
    if len(orders) < 3:
        raise CheckFailed(f"the page places orders with psql, Python and Node; the tables hold {sorted(orders)}")
    rows = ctx.query("SELECT message_id::text, message_type, payload, routing_key, published_at IS NOT NULL "
                     "FROM outbox.outbox WHERE exchange = 'orders'")
    if len(rows) != len(orders) or not all(r[4] for r in rows):
        raise CheckFailed(f"{len(orders)} orders but outbox rows (message id, published): "
                          f"{[(r[0], r[4]) for r in rows]}")
    if not printed <= {r[0] for r in rows}:
        raise CheckFailed(f"the producers printed {sorted(printed)}, not message ids of outbox rows")
    # Every message again, with its own id: a redelivery, as the broker makes after a lost ack.
    with pika.BlockingConnection(pika.URLParameters(ctx.env["AMQP_URI"])) as amqp:
        ch = amqp.channel()
        ch.confirm_delivery()
        for message_id, message_type, payload, routing_key, _ in rows:
            ch.basic_publish("orders", routing_key, bytes(payload), pika.BasicProperties(
                message_id=message_id, type=message_type, content_type="application/json", delivery_mode=2),
                mandatory=True)
    # An order placed after them (the page's Node producer) is consumed after them: once it
    # has its effects, the redeliveries were processed.
    ctx.command(["node", "producer.js", "o-after-redelivery", "100"])
    ctx.wait_for("the order placed after the redeliveries has an invoice and a shipment",
                 lambda: effects(ctx).get("o-after-redelivery") == (1, 1))
    again = effects(ctx)
    twice = {k: v for k, v in again.items() if v != (1, 1)}
    if twice:
        raise CheckFailed(f"a redelivery had a second effect (order: (invoices, shipments)): {twice}")
    inbox = ctx.query("SELECT consumer, count(*) FROM outbox.inbox GROUP BY consumer ORDER BY consumer")
    if inbox != [("billing", len(again)), ("shipping", len(again))]:
        raise CheckFailed(f"inbox rows by consumer {inbox}, expected one per order each for {len(again)} orders")
    ctx.background_alive()
    # What the page says of a missing exchange: refused by the broker (404), counted as an
    # attempt, retried, never marked published, the other rows unaffected.
    ctx.query("SELECT outbox.enqueue(exchange => 'no-such-exchange', routing_key => 'x', message_type => 'Probe', "
              "payload => '\\x7b7d'::bytea)")
    row = ctx.wait_for("the row to a missing exchange has an attempt and the broker's 404 as last_error", lambda: [
        r for r in ctx.query("SELECT attempts, last_error, published_at FROM outbox.outbox "
                             "WHERE exchange = 'no-such-exchange'") if r[0] >= 1 and "404" in (r[1] or "")])
    if row[0][2] is not None:
        raise CheckFailed(f"a row to a missing exchange was marked published: {row}")


def check_operations(ctx):
    """OPERATIONS.md's roles: the logins it creates hold what its table says (the relay
    UPDATE of its state columns only, DELETE with retention=true, no INSERT; the consumer
    login its role), and the consumer names are mapped. The runbook's queries (OPERATIONS.md,
    UPGRADING.md) ran against the migrated schema: they name real columns and catalogs."""
    may = {}
    for column in ("published_at", "parked_at", "attempts", "payload", "exchange", "message_id"):
        may[column] = ctx.query("SELECT has_column_privilege('relay', 'outbox.outbox', %s, 'UPDATE')",
                                (column,))[0][0]
    want = {"published_at": True, "parked_at": True, "attempts": True, "payload": False, "exchange": False,
            "message_id": False}
    if may != want:
        raise CheckFailed(f"login relay may UPDATE (column: may) {may}; OPERATIONS.md says {want}")
    table = ctx.query("SELECT has_table_privilege('relay', 'outbox.outbox', 'DELETE'), "
                      "has_table_privilege('relay', 'outbox.outbox', 'INSERT'), "
                      "pg_has_role('billing_svc', 'outbox_consumer', 'MEMBER'), "
                      "pg_has_role('relay', 'outbox_relay', 'MEMBER')")[0]
    if table != (True, False, True, True):
        raise CheckFailed(f"(relay DELETE, relay INSERT, billing_svc in outbox_consumer, relay in outbox_relay) = "
                          f"{table}; the page's roles.sql runs (retention=true) and logins give (True, False, "
                          "True, True)")
    mapped = ctx.query("SELECT consumer, member_of::text FROM outbox.inbox_consumers ORDER BY consumer")
    if mapped != [("billing", "billing_svc"), ("shipping", "shipping_svc")]:
        raise CheckFailed(f"outbox.inbox_consumers holds {mapped}")


@dataclass
class Spec:
    check: object
    migrate: bool = False  # migrated by the test (the page assumes a running deployment)
    exchanges: list = field(default_factory=list)
    queues: list = field(default_factory=list)
    logins: list = field(default_factory=list)  # login roles the page creates, dropped after it


SCENARIOS = {
    "shop": Spec(check_shop, exchanges=["orders", "no-such-exchange"], queues=["billing", "shipping"],
                 logins=["shop"]),
    "operations": Spec(check_operations, migrate=True, logins=["relay", "billing_svc"]),
}
