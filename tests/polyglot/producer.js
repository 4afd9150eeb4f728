// A Node.js order service on the SQL contract (docs/SQL-CONTRACT.md), with the `pg`
// package: each order row and its OrderPlaced event in one transaction, the event by
// SCHEMA.enqueue(); every fifth transaction is rolled back after the enqueue.
//
// usage: node producer.js DSN SCHEMA EXCHANGE ROUTING_KEY COUNT PREFIX
// Prints {"committed": [[order_id, message_id], ...], "rolled_back": [...]} as JSON.
'use strict';
const { Client } = require('pg');

async function main() {
  const [dsn, schema, exchange, routingKey, count, prefix] = process.argv.slice(2);
  // The schema name is an identifier: quoted as one, never interpolated raw.
  const s = '"' + schema.replace(/"/g, '""') + '"';
  const client = new Client({ connectionString: toUri(dsn) });
  await client.connect();
  const committed = [], rolledBack = [];
  for (let i = 0; i < Number(count); i++) {
    const orderId = `${prefix}-${i}`;
    const amount = 100 + i;
    await client.query('BEGIN');
    try {
      await client.query(`INSERT INTO ${s}.orders (id, amount, source) VALUES ($1, $2, 'node')`, [orderId, amount]);
      const payload = Buffer.from(JSON.stringify({ order_id: orderId, amount }));
      const r = await client.query(
        `SELECT ${s}.enqueue(exchange => $1, routing_key => $2, message_type => 'OrderPlaced', payload => $3, ` +
          `headers => $4, ordering_key => $5, correlation_id => $6)::text AS id`,
        [exchange, routingKey, payload, JSON.stringify({ tenant: 'acme' }), orderId, `req-${orderId}`]);
      if (i % 5 === 3) {
        await client.query('ROLLBACK');
        rolledBack.push([orderId, r.rows[0].id]);
        continue;
      }
      await client.query('COMMIT');
      committed.push([orderId, r.rows[0].id]);
    } catch (e) {
      await client.query('ROLLBACK');
      throw e;
    }
  }
  await client.end();
  process.stdout.write(JSON.stringify({ committed, rolled_back: rolledBack }));
}

// libpq keyword DSN ("host=... user=...") to the URI `pg` takes.
function toUri(dsn) {
  if (/^postgres(ql)?:\/\//.test(dsn)) return dsn;
  const kv = {};
  for (const m of dsn.matchAll(/(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/g))
    kv[m[1]] = m[2].startsWith("'") ? m[2].slice(1, -1).replace(/\\(.)/g, '$1') : m[2];
  const auth = kv.user ? encodeURIComponent(kv.user) + (kv.password ? ':' + encodeURIComponent(kv.password) : '') + '@' : '';
  const host = kv.host || 'localhost';
  const hostPart = host.startsWith('/') ? '' : host;
  const params = host.startsWith('/') ? '?host=' + encodeURIComponent(host) : '';
  return `postgresql://${auth}${hostPart}:${kv.port || 5432}/${encodeURIComponent(kv.dbname || kv.user || 'postgres')}${params}`;
}

main().catch((e) => {
  process.stderr.write(`producer.js: ${e.message}\n`);
  process.exit(1);
});
