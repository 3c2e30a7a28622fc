// slotted_counter through node-postgres with its default settings: $1, $2 placeholders, whose
// values it sends untyped, and a pg.Pool of 20 connections, connected as the PG* environment
// variables say. Prints "ok node-postgres: ..." or "not ok node-postgres: ...: why" per check.
'use strict';

const assert = require('node:assert/strict');
const pg = require('pg');

const STACK = 'node-postgres';
const WORKERS = 20;
// More than 5 rounds, as for the drivers that prepare after 5 executions; named statements
// (prepared at their first use) take the same path here.
const ROUNDS = 12;

const pool = new pg.Pool({ max: WORKERS });

async function one(q, text, values) {
  const res = await q.query(text, values);
  return res.rows[0][res.fields[0].name];
}

async function rows(q, text, values) {
  return (await q.query(text, values)).rows;
}

async function expectSqlstate(sqlstate, text, values) {
  let err = null;
  try {
    await pool.query(text, values);
  } catch (e) {
    err = e;
  }
  assert.ok(err, `${text} ${JSON.stringify(values)} succeeded, expected SQLSTATE ${sqlstate}`);
  assert.equal(err.code, sqlstate, `SQLSTATE of ${text} ${JSON.stringify(values)}: ${err.message}`);
}

// Asserts that values are 1..total, each once, as a buffered counter hands them out. node-postgres
// hands bigint results over as strings, so that no value loses precision.
function eachOnce(values, total, what) {
  const numbers = values.map(Number).sort((a, b) => a - b);
  if (numbers.length === total && numbers.every((v, i) => v === i + 1)) return;
  const seen = new Set(numbers);
  const missing = [];
  for (let v = 1; v <= total && missing.length < 10; v++) if (!seen.has(v)) missing.push(v);
  const repeated = [...new Set(numbers.filter((v, i) => i > 0 && numbers[i - 1] === v))].slice(0, 10);
  assert.fail(`${what}: ${values.length} values, expected 1..${total} each once; missing [${missing}], repeated [${repeated}]`);
}

async function pageViews() {
  assert.equal(await one(pool, 'SELECT sc_create($1, $2)', ['page_views', 'buffered']), 'page_views');
  for (let n = 1; n <= 7; n++) {
    assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['page_views', 42]), String(n), `view ${n}`);
  }
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['page_views', 42, 10]), '17', 'adding 10');
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['page_views', 42, -2]), '15', 'adding -2');
  for (let i = 0; i < 7; i++) {
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['page_views', 42]), '15', 'sc_sum of post 42');
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['page_views', 43]), '0', 'an unseen post');
}

async function copiesSold() {
  await pool.query('CREATE TABLE sales (book bigint NOT NULL)');
  assert.equal(await one(pool, 'SELECT sc_create($1)', ['copies_sold']), 'copies_sold');
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('INSERT INTO sales VALUES ($1)', [7]);
    assert.equal(await one(client, 'SELECT sc_incr($1, $2)', ['copies_sold', 7]), '1', 'incr in the open sale');
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['copies_sold', 7]), '0',
      "another session's sum before the sale commits");
    await client.query('COMMIT');
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['copies_sold', 7]), '1', 'sum after the commit');

    await client.query('BEGIN');
    await client.query('INSERT INTO sales VALUES ($1)', [7]);
    assert.equal(await one(client, 'SELECT sc_incr($1, $2)', ['copies_sold', 7]), '2',
      'incr in a sale that will roll back');
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['copies_sold', 7]), '1', 'sum after the rollback');
  assert.equal(await one(pool, 'SELECT count(*) FROM sales WHERE book = $1', [7]), '1', 'sales rows');
}

async function teamPoints() {
  await pool.query('SELECT sc_create($1, $2)', ['points', 'buffered']);
  await pool.query('CREATE TABLE friends (user_id bigint, friend_id bigint)');
  for (const [u, f] of [[1, 2], [1, 3], [4, 1]]) {
    await pool.query('INSERT INTO friends VALUES ($1, $2)', [u, f]);
  }
  const answers = { 1: 3, 2: 5, 3: 1, 4: 2, 5: 4 };
  for (const [user, count] of Object.entries(answers)) {
    for (let n = 1; n <= count; n++) {
      assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['points', user, 10]), String(10 * n),
        `points of user ${user}`);
    }
  }
  assert.equal(await one(pool, 'SELECT sc_sum_keys($1, $2)', ['points', [2, 3, 1]]), '90', 'team of user 1');
  assert.equal(await one(pool, 'SELECT sc_sum_keys($1, $2)', ['points', [1, 1, 2]]), '80',
    'a key listed twice counts once');
  // The README's own query, the group read from a table.
  const team = 'SELECT sc_sum_keys($1, ARRAY(SELECT friend_id FROM friends WHERE user_id = $2) || $3::bigint)';
  assert.equal(await one(pool, team, ['points', 1, 1]), '90', 'team of user 1 from friends');
  assert.equal(await one(pool, team, ['points', 4, 4]), '50', 'team of user 4 from friends');
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top($1, $2)', ['points', 3]),
    [{ key: '2', value: '50' }, { key: '5', value: '40' }, { key: '1', value: '30' }], 'top 3');
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top($1, $2)', ['points', 10]),
    [{ key: '2', value: '50' }, { key: '5', value: '40' }, { key: '1', value: '30' },
      { key: '4', value: '20' }, { key: '3', value: '10' }], 'top 10 of 5 users');
  // sc_rank: the others as of the last flush
  await one(pool, 'SELECT sc_rollup()', []);
  assert.equal(await one(pool, 'SELECT sc_rank($1, $2)', ['points', 5]), '2', 'rank of user 5');
  assert.equal(await one(pool, 'SELECT sc_rank($1, $2)', ['points', 99]), '6', 'rank of a user without points');
  assert.equal(await one(pool, 'SELECT sc_total($1)', ['points']), '150', 'points of every user');
}

async function hitsPerHour() {
  const at = (hour, minute) => new Date(Date.UTC(2021, 10, 21, hour, minute));
  assert.equal(await one(pool, 'SELECT sc_create($1, $2, $3)', ['hits', 'buffered', '1 hour']), 'hits');
  const incr = 'SELECT sc_incr($1, $2, $3, $4)';
  for (let n = 1; n <= 3; n++) assert.equal(await one(pool, incr, ['hits', 42, 1, at(10, 15)]), String(n), 'hit at 10:15');
  for (let n = 4; n <= 5; n++) assert.equal(await one(pool, incr, ['hits', 42, 1, at(10, 45)]), String(n), 'hit at 10:45');
  for (let n = 1; n <= 4; n++) assert.equal(await one(pool, incr, ['hits', 42, 1, at(11, 5)]), String(n), 'hit at 11:05');
  assert.equal(await one(pool, incr, ['hits', 42, 1, at(9, 59)]), '1', 'hit at 9:59');
  assert.equal(await one(pool, incr, ['hits', 7, 2, at(10, 20)]), '2', '2 hits of page 7 at 10:20');
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['hits', 42]), '1', 'a hit in the current hour');

  const ranged = 'SELECT sc_sum($1, $2, $3, $4)';
  assert.equal(await one(pool, ranged, ['hits', 42, at(10, 0), at(11, 0)]), '5', 'hits from 10:00 to 11:00');
  assert.equal(await one(pool, ranged, ['hits', 42, at(10, 0), null]), '10', 'hits since 10:00');
  assert.equal(await one(pool, ranged, ['hits', 42, at(10, 30), at(11, 30)]), '4',
    'hits in the buckets that start from 10:30 to 11:30');
  assert.equal(await one(pool, ranged, ['hits', 42, at(23, 0), null]), '1', 'hits since the day after');
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['hits', 42]), '11', 'hits over all hours');

  const series = await rows(pool, 'SELECT * FROM sc_series($1, $2, $3, $4)', ['hits', 42, at(9, 0), at(12, 0)]);
  assert.deepEqual(series.map((r) => [r.bucket.getTime(), r.value]),
    [[at(9, 0).getTime(), '1'], [at(10, 0).getTime(), '5'], [at(11, 0).getTime(), '4']], 'sc_series');
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top($1, $2, $3, $4)', ['hits', 10, at(10, 0), at(11, 0)]),
    [{ key: '42', value: '5' }, { key: '7', value: '2' }], 'top pages from 10:00 to 11:00');
  const totals = await rows(pool, 'SELECT * FROM sc_total_series($1, $2, $3)', ['hits', at(9, 0), at(12, 0)]);
  assert.deepEqual(totals.map((r) => [r.bucket.getTime(), r.value]),
    [[at(9, 0).getTime(), '1'], [at(10, 0).getTime(), '7'], [at(11, 0).getTime(), '4']], 'sc_total_series');
  assert.equal(await one(pool, 'SELECT sc_total($1, $2, $3)', ['hits', at(10, 0), at(11, 0)]), '7',
    'hits of every page from 10:00 to 11:00');

  assert.equal(await one(pool, 'SELECT sc_set($1, $2, $3, $4)', ['hits', 42, 100, at(10, 30)]), '5',
    'sc_set of the 10:00 bucket returns its old value');
  assert.equal(await one(pool, ranged, ['hits', 42, at(10, 0), at(11, 0)]), '100', 'the 10:00 bucket after sc_set');
  assert.equal(await one(pool, ranged, ['hits', 42, at(11, 0), at(12, 0)]), '4', 'the 11:00 bucket after sc_set');
}

// Retention set with placeholders, and a payment webhook delivered three times.
async function retentionAndOnce() {
  await pool.query('SELECT sc_create($1, $2, $3, $4)', ['hits_kept', 'buffered', '1 hour', '90 days']);
  await pool.query('SELECT sc_create(name => $1, durability => $2, retain => $3)', ['sessions_kept', 'buffered', '30 minutes']);
  await pool.query('SELECT sc_alter_retention($1, $2)', ['hits_kept', '7 days']);
  await pool.query('SELECT sc_alter_retention($1, $2)', ['sessions_kept', null]);
  assert.equal(await one(pool, "SELECT retain::text FROM slotted_counter.counters WHERE name = $1", ['hits_kept']),
    '7 days', 'retain changed through a placeholder');
  assert.equal(await one(pool, 'SELECT retain FROM slotted_counter.counters WHERE name = $1', ['sessions_kept']),
    null, 'retain removed with a NULL placeholder');
  await assert.rejects(pool.query('SELECT sc_alter_retention($1, $2)', ['hits_kept', '-1 second']),
    (e) => e.code === '22023', 'a negative retention is 22023');
  for (const durability of ['buffered', 'transactional']) {
    const name = `revenue_${durability}`;
    await pool.query('SELECT sc_create($1, $2)', [name, durability]);
    const once = 'SELECT sc_incr_once($1, $2, $3, $4)';
    for (let delivery = 1; delivery <= 3; delivery++) {
      assert.equal(await one(pool, once, [name, 42, 1999, 'evt_3Nq']), '1999', `${durability}: delivery ${delivery}`);
    }
    assert.equal(await one(pool, once, [name, 42, 500, 'evt_4Xz']), '2499', `${durability}: another event counts`);
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', [name, 42]), '2499', `${durability}: counted once each`);
    await assert.rejects(pool.query(once, [name, 42, 1, null]), (e) => e.code === '22004', 'a NULL request id is 22004');
  }
}

// A rate limit on a per-minute counter and a stock that never goes below zero.
async function boundedIncrements() {
  const at = (hour, minute) => new Date(Date.UTC(2021, 10, 21, hour, minute));
  await pool.query('SELECT sc_create($1, $2, $3)', ['api_limit', 'buffered', '1 minute']);
  const bounded = 'SELECT sc_incr_bounded($1, $2, $3, $4, $5, $6)';
  for (let n = 1; n <= 3; n++) {
    assert.equal(await one(pool, bounded, ['api_limit', 7, 1, null, 3, at(10, 15)]), String(n), `call ${n} admitted`);
  }
  assert.equal(await one(pool, bounded, ['api_limit', 7, 1, null, 3, at(10, 15)]), null,
    'the fourth call in the minute is refused');
  assert.equal(await one(pool, bounded, ['api_limit', 7, 1, null, 3, at(10, 16)]), '1', 'the next minute admits again');

  await pool.query('SELECT sc_create($1)', ['stock_left']);
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['stock_left', 1, 2]), '2', '2 in stock');
  const sell = 'SELECT sc_incr_bounded($1, $2, $3, $4, $5)';
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    assert.equal(await one(client, sell, ['stock_left', 1, -3, 0, null]), null, 'selling 3 of 2 is refused');
    assert.equal(await one(client, sell, ['stock_left', 1, -2, 0, null]), '0', 'selling 2 of 2');
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['stock_left', 1]), '0', 'sold out, never below zero');
  await assert.rejects(pool.query(sell, ['stock_left', 1, 1, 5, 4]), (e) => e.code === '22023', 'lower above upper is 22023');
}

async function buyersReset() {
  await pool.query('SELECT sc_create($1, $2)', ['buyers_total', 'buffered']);
  for (let n = 1; n <= 7; n++) {
    assert.equal(await one(pool, 'SELECT sc_incr($1)', ['buyers_total']), String(n), `buyer ${n}`);
  }
  assert.equal(await one(pool, 'SELECT sc_set($1, $2, $3)', ['buyers_total', 0, 0]), '7', 'sc_set returns the old value');
  assert.equal(await one(pool, 'SELECT sc_sum($1)', ['buyers_total']), '0', 'sum after the reset');
  assert.equal(await one(pool, 'SELECT sc_incr($1)', ['buyers_total']), '1', 'first buyer after the reset');

  // On a transactional counter the reset belongs to its transaction.
  await pool.query('SELECT sc_create($1)', ['orders_total']);
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['orders_total', 3, 5]), '5', '5 orders');
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    assert.equal(await one(client, 'SELECT sc_set($1, $2, $3)', ['orders_total', 3, 0]), '5',
      'transactional sc_set returns the old value');
    await client.query('ROLLBACK');
    assert.equal(await one(client, 'SELECT sc_sum($1, $2)', ['orders_total', 3]), '5', 'a rolled back reset');
    await client.query('BEGIN');
    assert.equal(await one(client, 'SELECT sc_set($1, $2, $3)', ['orders_total', 3, 1]), '5', 'reset to 1');
    await client.query('COMMIT');
  } finally {
    client.release();
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['orders_total', 3]), '1', 'a committed reset');
}

async function nullsAndArrays() {
  await pool.query('SELECT sc_create($1, $2)', ['batch', 'buffered']);
  for (let i = 0; i < 7; i++) {
    await expectSqlstate('22004', 'SELECT sc_incr($1, $2)', ['batch', null]);
    await expectSqlstate('22004', 'SELECT sc_sum($1, $2)', ['batch', null]);
    await expectSqlstate('22004', 'SELECT sc_incr($1, $2, $3)', ['batch', null, 1]);
    await expectSqlstate('42704', 'SELECT sc_sum($1, $2)', ['no_such_counter', 1]);
    assert.equal(await one(pool, 'SELECT sc_sum_keys($1, $2)', ['batch', []]), '0', 'an empty group');
    assert.deepEqual(await one(pool, 'SELECT sc_incr_batch($1, $2, $3)', ['batch', [], []]), [], 'an empty batch');
  }
  assert.deepEqual(await one(pool, 'SELECT sc_incr_batch($1, $2, $3)', ['batch', [1, 2, 1], [5, 1, 2]]),
    ['5', '1', '7'], 'a batch with a key twice');
  assert.equal(await one(pool, 'SELECT sc_sum_keys($1, $2)', ['batch', [1, 2]]), '8', 'sum of the batch');
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['batch', 1]), '7', 'key 1 after the batch');
}

// ---- counters keyed by text (README "Keys as text"). node-postgres sends every parameter untyped,
// a JS number too, so every key takes the text form of a function; a JS array goes as an array
// literal, which the _text array forms read as text[].

const URL = '/blog/hot-counters?utm_source=news&page=2';

// Seed 002: page views by URL on a buffered counter keyed by text.
async function viewsByUrl() {
  assert.equal(await one(pool, 'SELECT sc_create($1, $2, key_type => $3)', ['views_by_url', 'buffered', 'text']),
    'views_by_url', "sc_create with key_type => 'text'");
  assert.equal(await one(pool, 'SELECT key_type FROM slotted_counter.counters WHERE name = $1', ['views_by_url']),
    'text', 'counters.key_type');
  // One connection, so that its named statement runs prepared from the second call on.
  const client = await pool.connect();
  try {
    for (let n = 1; n <= 7; n++) {
      assert.equal(await one(client, { name: 'incr-url', text: 'SELECT sc_incr($1, $2)', values: ['views_by_url', URL] }),
        String(n), `view ${n} of the URL`);
    }
  } finally {
    client.release();
  }
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2, $3)', ['views_by_url', URL, 10]), '17', 'adding 10');
  for (let n = 1; n <= 3; n++) {
    assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['views_by_url', '/about']), String(n), `view ${n} of /about`);
  }
  for (let i = 0; i < 7; i++) {
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['views_by_url', URL]), '17', 'sc_sum of the URL');
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['views_by_url', '/never-seen']), '0', 'a URL never counted');
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top_text($1, $2)', ['views_by_url', 10]),
    [{ key: URL, value: '17' }, { key: '/about', value: '3' }], 'sc_top_text: key and value, largest first');
  // sc_rank: the others as of the last flush
  await one(pool, 'SELECT sc_rollup()', []);
  assert.equal(await one(pool, 'SELECT sc_rank($1, $2)', ['views_by_url', URL]), '1', 'rank of the URL');
  assert.equal(await one(pool, 'SELECT sc_rank($1, $2)', ['views_by_url', '/about']), '2', 'rank of /about');
  assert.equal(await one(pool, 'SELECT sc_rank($1, $2)', ['views_by_url', '/never-seen']), '3',
    'rank of a URL never counted');
}

// Seed 004: copies sold by title on a transactional counter keyed by text.
async function salesByTitle() {
  assert.equal(await one(pool, 'SELECT sc_create($1, key_type => $2)', ['sales_by_title', 'text']), 'sales_by_title',
    'sc_create, transactional by default');
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    assert.equal(await one(client, 'SELECT sc_incr($1, $2, $3)', ['sales_by_title', 'Moby Dick', 2]), '2',
      'two copies in the open sale');
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['sales_by_title', 'Moby Dick']), '0',
      "another session's sum before the sale commits");
    await client.query('COMMIT');
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['sales_by_title', 'Moby Dick']), '2', 'sum after the commit');
    for (let n = 3; n <= 9; n++) {
      assert.equal(await one(client, 'SELECT sc_incr($1, $2)', ['sales_by_title', 'Moby Dick']), String(n), `sale ${n}`);
    }
    await client.query('BEGIN');
    assert.equal(await one(client, 'SELECT sc_incr($1, $2)', ['sales_by_title', 'Moby Dick']), '10',
      'a sale that will roll back');
    assert.equal(await one(client, 'SELECT sc_incr($1, $2, $3)', ['sales_by_title', 'Ulysses', 5]), '5',
      'the first sale of a new title, rolled back');
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['sales_by_title', 'Moby Dick']), '9', 'sum after the rollback');
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['sales_by_title', 'Ulysses']), '0', 'the rolled back title');
  assert.deepEqual(await rows(pool, 'SELECT key AS title, value AS copies FROM sc_top_text($1, $2)', ['sales_by_title', 5]),
    [{ title: 'Moby Dick', copies: '9' }], 'sc_top_text: the rolled back title is not ranked');
}

// Keys compare by their bytes; the array forms take JS arrays; a key has at most 2048 bytes.
async function textKeysExact() {
  const keys = ['/search?q=naïve ☕', '/search?q=naive', '/home', '/home '];
  await pool.query('SELECT sc_create($1, $2, key_type => $3)', ['url_hits', 'buffered', 'text']);
  assert.deepEqual(await one(pool, 'SELECT sc_incr_batch_text($1, $2, $3)', ['url_hits', keys, [1, 2, 3, 4]]),
    ['1', '2', '3', '4'], 'sc_incr_batch_text: four keys, each its own value');
  assert.deepEqual(await one(pool, 'SELECT sc_incr_batch_text($1, $2, $3)', ['url_hits', [keys[0], keys[1], keys[0]], [10, 10, 10]]),
    ['11', '12', '21'], 'a batch with a key twice');
  const expected = ['21', '12', '3', '4'];
  for (let i = 0; i < keys.length; i++) {
    assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['url_hits', keys[i]]), expected[i], `sc_sum of ${JSON.stringify(keys[i])}`);
  }
  assert.equal(await one(pool, 'SELECT sc_sum_keys_text($1, $2)', ['url_hits', keys]), '40', 'sc_sum_keys_text');
  assert.equal(await one(pool, 'SELECT sc_sum_keys_text($1, $2)', ['url_hits', ['/home', '/home', '/home ']]), '7',
    'a key listed twice counts once');
  assert.equal(await one(pool, 'SELECT sc_sum_keys_text($1, $2)', ['url_hits', []]), '0', 'an empty group');
  assert.deepEqual(await one(pool, 'SELECT sc_incr_batch_text($1, $2, $3)', ['url_hits', [], []]), [], 'an empty batch');
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top_text($1, $2)', ['url_hits', 10]),
    [{ key: keys[0], value: '21' }, { key: keys[1], value: '12' }, { key: keys[3], value: '4' }, { key: keys[2], value: '3' }],
    'sc_top_text returns the keys as they were given');

  assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['url_hits', 'é'.repeat(1024)]), '1', 'a key of 2048 bytes');
  for (const tooLong of ['x'.repeat(2049), 'é'.repeat(1024) + 'x']) {
    await expectSqlstate('22001', 'SELECT sc_incr($1, $2)', ['url_hits', tooLong]);
    await expectSqlstate('22001', 'SELECT sc_incr_batch_text($1, $2, $3)', ['url_hits', ['/home', tooLong], [1, 1]]);
  }
  assert.equal(await one(pool, 'SELECT sc_total($1)', ['url_hits']), '41', 'the keys too long counted nothing');
  for (let i = 0; i < 7; i++) await expectSqlstate('22004', 'SELECT sc_incr($1, $2)', ['url_hits', null]);
}

// Untyped keys on both kinds of counter: a string on a counter keyed by bigint is read as a number,
// and a JS number on a counter keyed by text is a text key. The bigint forms refuse a text counter.
async function keyKinds() {
  await pool.query('SELECT sc_create($1, $2)', ['views_by_id', 'buffered']);
  await pool.query('SELECT sc_create($1, $2, key_type => $3)', ['views_by_path', 'buffered', 'text']);
  for (let n = 1; n <= 3; n++) {
    assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['views_by_id', '42']), String(n), `'42', view ${n}`);
  }
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['views_by_id', 42]), '4', "42 is the same key as '42'");
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['views_by_id', '42']), '4', "sc_sum with '42'");
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top($1, $2)', ['views_by_id', 10]), [{ key: '42', value: '4' }],
    'sc_top of the counter keyed by bigint');
  await expectSqlstate('22P02', 'SELECT sc_incr($1, $2)', ['views_by_id', '/home']);

  assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['views_by_path', 42]), '1', 'a JS number on a text counter');
  assert.equal(await one(pool, 'SELECT sc_incr($1, $2)', ['views_by_path', '42']), '2', "is the text key '42'");
  assert.deepEqual(await rows(pool, 'SELECT * FROM sc_top_text($1, $2)', ['views_by_path', 10]), [{ key: '42', value: '2' }],
    'sc_top_text of the counter keyed by text');
  for (let i = 0; i < 7; i++) {
    await expectSqlstate('42804', 'SELECT sc_incr($1, $2::bigint)', ['views_by_path', 42]);
    await expectSqlstate('42804', 'SELECT * FROM sc_top($1, $2)', ['views_by_path', 10]);
    await expectSqlstate('42804', 'SELECT sc_sum_keys($1, $2)', ['views_by_path', [42]]);
    await expectSqlstate('42804', 'SELECT sc_incr_batch($1, $2, $3)', ['views_by_path', [42], [1]]);
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', ['views_by_path', 42]), '2', 'the refused calls counted nothing');
}

// Runs fn(i) for i in 0..n-1 at once and returns their results in order.
function inParallel(n, fn) {
  return Promise.all(Array.from({ length: n }, (_, i) => fn(i)));
}

async function concurrentExact(durability) {
  const counter = `hot_${durability}`;
  const total = WORKERS * ROUNDS;
  await pool.query('SELECT sc_create($1, $2)', [counter, durability]);
  const results = await inParallel(WORKERS, async () => {
    const values = [];
    for (let r = 0; r < ROUNDS; r++) values.push(await one(pool, 'SELECT sc_incr($1, $2)', [counter, 1]));
    return values;
  });
  assert.equal(pool.totalCount, WORKERS, 'connections the pool opened');
  const values = results.flat();
  if (durability === 'buffered') {
    eachOnce(values, total, 'values returned to concurrent callers');
  } else {
    assert.deepEqual(values.filter((v) => !(Number(v) >= 1 && Number(v) <= total)), [], 'values outside 1..total');
  }
  assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', [counter, 1]), String(total), 'the total');
}

async function recreateUnderPrepared() {
  const names = { buffered: 'recreated_buffered', transactional: 'recreated_transactional' };
  const total = WORKERS * ROUNDS;
  for (const [d, name] of Object.entries(names)) await pool.query('SELECT sc_create($1, $2)', [name, d]);

  // Each worker holds one of the pool's connections for the whole phase, so that all 20 prepare
  // the named statements, and finds them prepared already in the second phase.
  const phase = () => inParallel(WORKERS, async () => {
    const client = await pool.connect();
    try {
      const out = {};
      for (const [d, name] of Object.entries(names)) {
        out[d] = [];
        for (let r = 0; r < ROUNDS; r++) {
          out[d].push(await one(client, { name: 'count-hot-key', text: 'SELECT sc_incr($1, $2)', values: [name, 1] }));
        }
      }
      out.prepared = await one(client, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%sc_incr%'");
      out.pid = client.processID;
      return out;
    } finally {
      client.release();
    }
  });
  let sessions = null;
  const check = async (results, when) => {
    const pids = results.map((r) => r.pid).sort();
    assert.equal(new Set(pids).size, WORKERS, `server sessions ${when}`);
    if (sessions) assert.deepEqual(pids, sessions, `server sessions ${when}, against those before`);
    sessions = pids;
    assert.deepEqual(results.filter((r) => r.prepared !== '1').length, 0, `connections without the prepared sc_incr ${when}`);
    eachOnce(results.flatMap((r) => r.buffered), total, `buffered values returned ${when}`);
    assert.deepEqual(results.flatMap((r) => r.transactional).filter((v) => !(Number(v) >= 1 && Number(v) <= total)), [],
      `transactional values outside 1..total ${when}`);
    for (const [d, name] of Object.entries(names)) {
      assert.equal(await one(pool, 'SELECT sc_sum($1, $2)', [name, 1]), String(total), `${d} total ${when}`);
    }
  };
  await check(await phase(), 'before the re-create');
  const admin = await pool.connect();
  try {
    await admin.query('BEGIN');
    for (const [d, name] of Object.entries(names)) {
      await admin.query('SELECT sc_drop($1)', [name]);
      await admin.query('SELECT sc_create($1, $2)', [name, d]);
    }
    await admin.query('COMMIT');
  } finally {
    admin.release();
  }
  await check(await phase(), 'after the re-create');
}

// A counter's name written into a named (prepared) statement and into a view reaches the
// counter created again under that name after a drop.
async function literalNames() {
  const client = await pool.connect();
  try {
    await client.query('SELECT sc_create($1, $2)', ['literal_views', 'buffered']);
    await client.query("CREATE VIEW literal_view AS SELECT sc_sum('literal_views', 1) AS v");
    const count = () => one(client, { name: 'literal-incr', text: "SELECT sc_incr('literal_views', 1)" });
    const before = [];
    for (let i = 0; i < 10; i++) before.push(await count());
    assert.deepEqual(before, ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10'], 'values before the re-create');
    assert.equal(await one(client, 'SELECT v FROM literal_view'), '10', 'the view before the re-create');
    await client.query('SELECT sc_drop($1)', ['literal_views']);
    await client.query('SELECT sc_create($1, $2)', ['literal_views', 'buffered']);
    const after = [];
    for (let i = 0; i < 3; i++) after.push(await count());
    assert.deepEqual(after, ['1', '2', '3'], 'values after the re-create');
    assert.equal(await one(client, 'SELECT v FROM literal_view'), '3', 'the view after the re-create');
    await client.query('DROP VIEW literal_view');
    await client.query('SELECT sc_drop($1, if_exists => $2)', ['literal_views', true]);
    await client.query('SELECT sc_drop($1, if_exists => $2)', ['literal_views', true]);
  } finally {
    client.release();
  }
}

async function main() {
  const checks = [
    ['page views: sc_incr, sc_incr with a delta, sc_sum', pageViews],
    ['copies sold: a committed sc_incr counts, a rolled back one does not', copiesSold],
    ['team points: sc_sum_keys of a team, sc_top leaderboard, sc_rank, sc_total', teamPoints],
    ['hits per hour: sc_incr at a time, sc_sum over a range, sc_series, sc_top, sc_total_series, sc_set', hitsPerHour],
    ['sc_set returns the old value, buffered and transactional', buyersReset],
    ['sc_incr_bounded: a rate limit per minute, a stock never below zero', boundedIncrements],
    ['retention through placeholders; sc_incr_once: a webhook delivered three times', retentionAndOnce],
    ['NULL key is 22004, unknown counter 42704, empty arrays, sc_incr_batch', nullsAndArrays],
    ['keys as text: page views by URL, sc_incr, sc_sum, sc_top_text, sc_rank', viewsByUrl],
    ['keys as text: copies sold by title, a committed sc_incr counts, a rolled back one does not', salesByTitle],
    ['keys as text: multibyte and trailing space are keys of their own, JS arrays, 22001 past 2048 bytes', textKeysExact],
    ["keys as text: a string key on a bigint counter is its number, a JS number on a text counter a text key", keyKinds],
    [`${WORKERS} pooled connections count one key of a buffered counter exactly`, () => concurrentExact('buffered')],
    [`${WORKERS} pooled connections count one key of a transactional counter exactly`, () => concurrentExact('transactional')],
    [`drop and re-create under ${WORKERS} pooled connections with prepared statements`, recreateUnderPrepared],
    ['a name written in a prepared statement and a view outlives a drop and re-create', literalNames],
  ];
  let failures = 0;
  for (const [name, fn] of checks) {
    try {
      await fn();
      console.log(`ok ${STACK}: ${name}`);
    } catch (e) {
      failures++;
      console.log(`not ok ${STACK}: ${name}: ${String(e.message).replace(/\s+/g, ' ')}`);
      console.log(e.stack);
    }
  }
  await pool.end();
  process.exitCode = failures ? 1 : 0;
}

main().catch((e) => {
  console.log(e.stack);
  process.exitCode = 1;
});
