// slotted_counter through postgres.js (the npm package "postgres"), called as
// docs/guides/drivers.md shows it: tagged templates, values as they are (numbers, strings,
// arrays). Connected as libpq's PG* environment variables say. Prints "ok postgres.js: ..." or
// "not ok postgres.js: ...", and exits 1 if a check failed.
'use strict';

const assert = require('assert');
const postgres = require('postgres');

const sql = postgres({ max: 20 });
let failures = 0;

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok postgres.js: ${name}`);
  } catch (e) {
    failures++;
    console.log(`not ok postgres.js: ${name}: ${String(e.message).split(/\s+/).join(' ')}`);
  }
}

async function main() {
  await check('int and string keys, arrays, void', async () => {
    const [created] = await sql`SELECT sc_create(${'views'}, ${'buffered'}) AS name`;
    assert.strictEqual(created.name, 'views');
    for (let n = 1; n <= 3; n++) {
      const [row] = await sql`SELECT sc_incr(${'views'}, ${42}) AS n`;
      assert.strictEqual(row.n, String(n), 'bigint comes back as a string');
    }
    const [batch] = await sql`SELECT sc_incr_batch(${'views'}, ${[1, 42]}, ${[5, 1]}) AS v`;
    assert.deepStrictEqual(batch.v, ['5', '4']);
    await sql`SELECT sc_create(${'urls'}, ${'buffered'}, key_type => ${'text'})`;
    const [url] = await sql`SELECT sc_incr(${'urls'}, ${'/pricing'}) AS n`;
    assert.strictEqual(url.n, '1');
    const [dropped] = await sql`SELECT sc_drop(${'urls'}) AS v`;
    assert.strictEqual(dropped.v, '');
  });
  await check('SQLSTATE of an unknown counter', async () => {
    await assert.rejects(sql`SELECT sc_incr(${'no_such_counter'}, ${1})`,
      (e) => e.code === '42704');
  });
  await check('a transactional increment commits and rolls back with sql.begin', async () => {
    await sql`SELECT sc_create(${'sold'})`;
    await sql.begin((tx) => tx`SELECT sc_incr(${'sold'}, ${1})`);
    await assert.rejects(sql.begin(async (tx) => {
      await tx`SELECT sc_incr(${'sold'}, ${1})`;
      throw new Error('rolled back');
    }), /rolled back/);
    const [row] = await sql`SELECT sc_sum(${'sold'}, ${1}) AS n`;
    assert.strictEqual(row.n, '1');
  });
  await check('20 connections count exactly', async () => {
    await sql`SELECT sc_create(${'likes'}, ${'buffered'})`;
    const calls = [];
    for (let i = 0; i < 1000; i++) calls.push(sql`SELECT sc_incr(${'likes'}, ${1}) AS n`);
    const values = (await Promise.all(calls)).map(([row]) => Number(row.n)).sort((a, b) => a - b);
    assert.deepStrictEqual(values, Array.from({ length: 1000 }, (_, i) => i + 1));
  });
  await sql.end();
  process.exit(failures ? 1 : 0);
}

main();
