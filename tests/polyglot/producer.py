#!/usr/bin/python3
"""A Python order service on the SQL contract (docs/SQL-CONTRACT.md): each order row
and its OrderPlaced event are written in one transaction with psycopg2, the event by
SCHEMA.enqueue(); every fifth transaction is rolled back after the enqueue, and every
seventh event is scheduled 1.5 s ahead (deliver_at, migration 0018).

usage: producer.py DSN SCHEMA EXCHANGE ROUTING_KEY COUNT PREFIX
Prints {"committed": [[order_id, message_id], ...], "rolled_back": [...],
"scheduled": [committed message ids scheduled ahead]} as JSON.
"""
import json
import sys

import psycopg2
from psycopg2 import sql


def main():
    dsn, schema, exchange, routing_key, count, prefix = sys.argv[1:7]
    committed, rolled_back, scheduled = [], [], []
    conn = psycopg2.connect(dsn)
    enqueue = sql.SQL(
        "SELECT {}.enqueue(exchange => %s, routing_key => %s, message_type => 'OrderPlaced', "
        "payload => %s, headers => %s, ordering_key => %s, correlation_id => %s, "
        "deliver_at => CASE WHEN %s THEN now() + interval '1500 milliseconds' END)::text"
    ).format(sql.Identifier(schema))
    insert_order = sql.SQL("INSERT INTO {}.orders (id, amount, source) VALUES (%s, %s, 'python')").format(
        sql.Identifier(schema))
    for i in range(int(count)):
        order_id = f"{prefix}-{i}"
        amount = 100 + i
        with conn:  # one transaction: commits on leaving the block, rolls back on an exception
            with conn.cursor() as cur:
                cur.execute(insert_order, (order_id, amount))
                payload = json.dumps({"order_id": order_id, "amount": amount}).encode()
                later = i % 7 == 2
                cur.execute(enqueue, (exchange, routing_key, payload, json.dumps({"tenant": "acme"}), order_id,
                                      f"req-{order_id}", later))
                message_id = cur.fetchone()[0]
                if i % 5 == 3:
                    conn.rollback()  # the order failed after its event was enqueued
                    rolled_back.append([order_id, message_id])
                    continue
        committed.append([order_id, message_id])
        if later:
            scheduled.append(message_id)
    conn.close()
    json.dump({"committed": committed, "rolled_back": rolled_back, "scheduled": scheduled}, sys.stdout)


if __name__ == "__main__":
    main()
