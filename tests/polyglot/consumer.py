#!/usr/bin/python3
"""A Python consumer on the SQL inbox (docs/SQL-CONTRACT.md), with pika and psycopg2.
Each delivery: in one transaction, SCHEMA.inbox_sequence('billing', key, seq) for a
keyed event (its x-outbox-key and x-outbox-seq headers: 'apply', 'duplicate' or 'gap',
the last requeued, never applied), SCHEMA.inbox_record(message_id, 'billing') and, for
a first delivery only, the effect (a ledger row and the account's balance); commit,
then ack. Faults forced on purpose, so that redeliveries happen:
  - every 7th first delivery: the effect is rolled back and the message nacked with
    requeue (the redelivery must apply it);
  - every 7th first delivery (another one): committed, then nacked with requeue
    instead of acked, as if the ack was lost (the redelivery must be skipped);
  - once: committed, then the connection is closed without the ack (the message and
    everything prefetched come back, redelivered).

usage: consumer.py DSN SCHEMA AMQP_URI QUEUE EXPECTED LOG_FILE
Stops once EXPECTED effects are applied and the queue stayed empty for a second
(exit 0), or after 40 s (exit 1). LOG_FILE gets one JSON line per delivery.
"""
import json
import sys
import time

import pika
import psycopg2
from psycopg2 import sql

CONSUMER = "billing"


def properties_of(props):
    """The AMQP properties a delivery carried, by name (only those set)."""
    names = ["content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
             "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id"]
    out = {}
    for n in names:
        v = getattr(props, n)
        if v is not None:
            out[n] = {k: (x.decode() if isinstance(x, bytes) else x) for k, x in v.items()} if n == "headers" else v
    return out


class Consumer:
    def __init__(self, dsn, schema, uri, queue, expected, log):
        self.db = psycopg2.connect(dsn)
        self.schema, self.uri, self.queue, self.expected, self.log = schema, uri, queue, expected, log
        self.applied = 0       # first deliveries whose effect committed
        self.firsts = 0        # first deliveries seen (committed or not)
        self.dropped_once = False
        s = sql.Identifier(schema)
        self.record = sql.SQL("SELECT {}.inbox_record(%s, %s, %s)").format(s)
        self.sequence = sql.SQL("SELECT outcome FROM {}.inbox_sequence(%s, %s, %s)").format(s)
        self.ledger = sql.SQL("INSERT INTO {}.ledger (order_id, message_id, amount) VALUES (%s, %s, %s)").format(s)
        self.balance = sql.SQL("UPDATE {}.account SET balance = balance + %s WHERE id = 1").format(s)

    def handle(self, channel, method, props, body):
        """Returns False when the connection was dropped on purpose."""
        first = False
        headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in (props.headers or {}).items()}
        with self.db.cursor() as cur:
            in_turn = "apply"
            if "x-outbox-key" in headers and "x-outbox-seq" in headers:
                cur.execute(self.sequence, (CONSUMER, headers["x-outbox-key"], int(headers["x-outbox-seq"])))
                in_turn = cur.fetchone()[0]
            if in_turn == "gap":  # an earlier event of the key is missing: never apply this one now
                self.db.rollback()
                time.sleep(0.1)
                channel.basic_nack(method.delivery_tag, requeue=True)
                return True
            cur.execute(self.record, (props.message_id, CONSUMER, props.type))
            first = cur.fetchone()[0]
            if first and in_turn != "apply":
                raise RuntimeError(f"{props.message_id}: new to the inbox but sequence says {in_turn}")
            if first:
                event = json.loads(body)
                cur.execute(self.ledger, (event["order_id"], props.message_id, event["amount"]))
                cur.execute(self.balance, (event["amount"],))
        outcome = "skipped"
        if first:
            self.firsts += 1
            if self.firsts % 7 == 1 and not method.redelivered:
                self.db.rollback()
                outcome = "rolled-back"
            else:
                self.db.commit()
                self.applied += 1
                outcome = "applied"
        else:
            self.db.commit()
        if outcome == "rolled-back":
            settled = "nack"
        elif outcome == "applied" and self.firsts % 7 == 4 and not method.redelivered:
            settled = "nack"  # the ack "lost"
        elif outcome == "applied" and self.firsts == 10 and not self.dropped_once:
            self.dropped_once = True
            settled = "dropped"  # committed, never acked: the connection closes now
        else:
            settled = "ack"
        self.log.write(json.dumps({"message_id": props.message_id, "redelivered": method.redelivered,
                                   "outcome": outcome, "settled": settled,
                                   "properties": properties_of(props)}) + "\n")
        self.log.flush()
        if settled == "nack":
            channel.basic_nack(method.delivery_tag, requeue=True)
        elif settled == "ack":
            channel.basic_ack(method.delivery_tag)
        return settled != "dropped"

    def run(self, deadline):
        idle_since = None
        while time.monotonic() < deadline:
            connection = pika.BlockingConnection(pika.URLParameters(self.uri))
            channel = connection.channel()
            channel.basic_qos(prefetch_count=20)
            dropped = False
            for method, props, body in channel.consume(self.queue, inactivity_timeout=0.2):
                if time.monotonic() >= deadline:
                    break
                if method is None:
                    if self.applied >= self.expected:
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since >= 1.0:
                            connection.close()
                            return True
                    continue
                idle_since = None
                if not self.handle(channel, method, props, body):
                    dropped = True
                    break
            if dropped:
                connection.close()  # unacked deliveries go back to the queue
                continue
            connection.close()
        return False


def main():
    dsn, schema, uri, queue, expected, log_path = sys.argv[1:7]
    with open(log_path, "w") as log:
        consumer = Consumer(dsn, schema, uri, queue, int(expected), log)
        ok = consumer.run(time.monotonic() + 40)
    print(json.dumps({"applied": consumer.applied, "dropped_connection": consumer.dropped_once}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
