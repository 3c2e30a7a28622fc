# Distinct counters (sc_add, sc_count, sc_count_keys, sc_count_total, sc_sketch): HyperLogLog
# sketches at scale, exact small sets, postgresql-hll's format, crashes, and eviction.
#   a. 1,000,000 distinct bigint elements added to one key of a buffered counter read within 2%
#      of 1,000,000; adding them all again changes nothing: every sc_add returns false and the
#      count is the same. After a flush, the key's row holds the same estimate.
#   b. A second key with half its elements in common: sc_count_keys of both is within 2% of
#      1,500,000 (their union, not the 2,000,000 sum), and sc_count_total equals it.
#   c. Small sets are exact (the explicit form holds up to 1,280 hashes at log2m 14): text keys
#      with 1, 10, 100 and 1,000 distinct text elements, each added twice, count exactly that,
#      live and after a flush, and each element changes the sketch once. A bucketed counter
#      counts each bucket and their union exactly.
#   d. sc_sketch of a small, a middle and a large key is in the explicit, sparse and full form
#      of postgresql-hll's storage format. With the hll extension (skipped if it is not
#      available): hll_cardinality of sc_sketch(...)::hll rounds to sc_count for each, and the
#      sketch is byte for byte hll_add_agg(hll_hash_...(), 14, 5) of the same elements; the
#      union of two keys' sketches in hll rounds to sc_count_keys.
#   e. Transactional: a transaction sees its own adds, another session does not before the
#      commit; ROLLBACK (and ROLLBACK TO SAVEPOINT) leaves no trace, in the count or in the
#      tables; a commit writes its row itself (slotted_counter.sketch_deltas, until a flush folds
#      it into key_sketches), and a committed add survives a crash and a clean restart.
#      Buffered: what sc_rollup() flushed survives a crash exactly (adding it again changes
#      nothing), the count after the crash is never more than before
#      (and if less, the log says adds were lost), and a clean restart keeps every add.
#   f. Eviction, on a node with slotted_counter.max_sketches = 8: 50 keys of a buffered counter
#      with key*10 distinct elements each read exactly key*10 after a flush; the keys were
#      evicted (slotted_counter.stats), and loaded again from the table by later adds (adding
#      the same elements again changes nothing; new ones count); one transaction of a
#      transactional counter adds to 50 keys and commits. Then 8 pgbench clients × 200
#      transactions add random elements of 300 to 40 keys of a buffered and a transactional
#      counter, recording each in a table: each key counts exactly the distinct elements the
#      table has for it, live, after a flush and after a restart.
#   g. After pg_dump and pg_restore (also --no-owner) into another database, the counters are
#      distinct counters of their precision, every key counts what it did (unfolded commits
#      included), and adding the same elements again changes nothing.
#   h. A streaming standby counts what its primary does (unfolded commits included) and refuses
#      sc_add with 25006.
#   i. (before h) Keys of an unbucketed counter with a retention expire, buffered and
#      transactional: idle past it they count nothing at once, an add counts from an empty set,
#      the stored sketches are replaced (not unioned) by the flush and the fold, and the
#      retention pass deletes the idle keys' rows and sketches.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('distinct', qq{
slotted_counter.flush_interval = 100
restart_after_crash = on
synchronous_commit = on
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('v', 'buffered', kind => 'distinct'),
       sc_create('s', 'buffered', key_type => 'text', kind => 'distinct'),
       sc_create('h', 'buffered', bucket => interval '1 hour', kind => 'distinct'),
       sc_create('t', 'transactional', kind => 'distinct'),
       sc_create('bc', 'buffered', kind => 'distinct');
});
is( $node->safe_psql('postgres', q{
SELECT string_agg(name || ':' || durability || ':' || kind || ':' || log2m, ',' ORDER BY name)
  FROM slotted_counter.counters}),
	'bc:buffered:distinct:14,h:buffered:distinct:14,s:buffered:distinct:14,'
	  . 't:transactional:distinct:14,v:buffered:distinct:14',
	'distinct counters are created with log2m 14 by default');

# The number of sc_add calls that returned true (changed the sketch) over elements lo..hi.
sub adds_true
{
	my ($counter, $key, $lo, $hi) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE sc_add('$counter', $key, g)) FROM generate_series($lo, $hi) g});
}

# Adds lo..hi in statements of 250,000 elements; returns the number of trues.
sub add_range
{
	my ($counter, $key, $lo, $hi) = @_;
	my $trues = 0;
	for (my $s = $lo; $s <= $hi; $s += 250_000)
	{
		my $e = $s + 249_999 > $hi ? $hi : $s + 249_999;
		$trues += adds_true($counter, $key, $s, $e);
	}
	return $trues;
}

# Is $got within 2% of $want?
sub within_2pct
{
	my ($got, $want, $what) = @_;
	cmp_ok(abs($got - $want), '<=', $want * 0.02, "$what: $got is within 2% of $want");
}

# a. 1,000,000 distinct elements on one key.
my $first_trues = add_range('v', 1, 1, 1_000_000);
note("the first 1,000,000 adds changed the sketch $first_trues times");
cmp_ok($first_trues, '>', 0, 'adding 1,000,000 new elements changes the sketch');
my $count1 = $node->safe_psql('postgres', q{SELECT sc_count('v', 1)});
within_2pct($count1, 1_000_000, 'sc_count of 1,000,000 distinct elements');
is(add_range('v', 1, 1, 1_000_000), 0, 'adding the same 1,000,000 again: every sc_add is false');
is($node->safe_psql('postgres', q{SELECT sc_count('v', 1)}), $count1,
	'and sc_count is the same as before');
is( $node->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT kv.value = sc_count('v', 1) AND slotted_counter.sketch_count(ks.sketch) = kv.value
  FROM slotted_counter.key_values kv
  JOIN slotted_counter.key_sketches ks USING (counter, key, bucket)
 WHERE kv.counter = 'v'::slotted_counter::integer AND kv.key = 1}),
	"t\nt", 'after a flush, the row holds the sketch and its estimate, sc_count');

# b. A second key overlapping the first by 500,000: the union, not the sum.
add_range('v', 2, 500_001, 1_500_000);
my $count2 = $node->safe_psql('postgres', q{SELECT sc_count('v', 2)});
within_2pct($count2, 1_000_000, 'sc_count of key 2 (500,001..1,500,000)');
my $union = $node->safe_psql('postgres', q{SELECT sc_count_keys('v', ARRAY[1, 2]::bigint[])});
within_2pct($union, 1_500_000, 'sc_count_keys of keys 1 and 2 is their union');
is($node->safe_psql('postgres', q{SELECT sc_count_total('v')}), $union,
	'sc_count_total (the union of all keys) equals sc_count_keys of both');
is( $node->safe_psql('postgres', q{SELECT sc_count_keys('v', ARRAY[2, 1, 2, 1]::bigint[])}),
	$union, 'a key given twice in sc_count_keys counts once');

# c. Small sets are exact: each element added twice, in one statement.
is( $node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('s', 'n' || n, 'e' || g))
  FROM unnest(ARRAY[1, 10, 100, 1000]) n, generate_series(1, n) g, generate_series(1, 2) r}),
	'1111', 'each of 1,111 distinct elements changes its sketch once, added twice');
my $small = q{SELECT string_agg(n || ':' || sc_count('s', 'n' || n), ',' ORDER BY n)
  FROM unnest(ARRAY[1, 10, 100, 1000]) n};
is($node->safe_psql('postgres', $small), '1:1,10:10,100:100,1000:1000',
	'1, 10, 100 and 1,000 distinct text elements count exactly');
is( $node->safe_psql('postgres', q{SELECT sc_count_keys_text('s', ARRAY['n1000', 'n10', 'n1'])}),
	'1000', 'sc_count_keys_text of text keys: the union of sets within the largest, exactly');
is($node->safe_psql('postgres', q{SELECT sc_count('s', 'none')}), '0', 'a key never added: 0');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $small), '1:1,10:10,100:100,1000:1000',
	'after a flush, the same exact counts');
is( $node->safe_psql('postgres', q{
SELECT string_agg(k.key || ':' || kv.value, ',' ORDER BY kv.value)
  FROM slotted_counter.key_values kv
  JOIN slotted_counter.keys k ON k.counter = kv.counter AND k.id = kv.key
 WHERE kv.counter = 's'::slotted_counter::integer}),
	'n1:1,n10:10,n100:100,n1000:1000', 'and the rows of key_values hold the exact values');
is( $node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('h', 1, 'e' || g, '2024-01-01 00:10+00'))
     + count(*) FILTER (WHERE sc_add('h', 1, 'e' || (g + 5), '2024-01-01 01:10+00'))
  FROM generate_series(1, 10) g;
SELECT sc_count('h', 1), sc_count('h', 1, '2024-01-01 00:00+00', '2024-01-01 01:00+00'),
       sc_count('h', 1, '2024-01-01 01:00+00', '2024-01-01 02:00+00'),
       sc_count_total('h', '2024-01-01 01:00+00', '2024-01-01 02:00+00')}),
	"20\n15|10|10|10",
	'bucketed: 10 elements in each of two buckets, 5 in common: 10 in each, 15 in all');

# d. postgresql-hll: the same estimate, the same bytes. The test command installs it beside every
# packaged server; only the assert-enabled build of the memory checks has none (SC_NO_HLL).
my $have_hll = $node->safe_psql('postgres',
	q{SELECT count(*) FROM pg_available_extensions WHERE name = 'hll'});
is($have_hll, '1', 'the hll extension is installed') unless $ENV{SC_NO_HLL};
# A middle key, 3,000 elements: past the explicit form, below the full one. The storage format's
# first byte holds the version (1) and the form: 2 explicit, 3 sparse, 4 full.
adds_true('v', 3, 1, 3000);
is( $node->safe_psql('postgres', q{
SELECT string_agg(to_hex(get_byte(sc_sketch(c, k), 0)), '|' ORDER BY n)
  FROM (VALUES (1, 's'::slotted_counter, 'n1000'), (2, 'v', '3'), (3, 'v', '1')) s(n, c, k)}),
	'12|13|14', 'the small, middle and large keys\' sketches are explicit, sparse and full');
SKIP:
{
	skip 'the hll extension is not available', 7 unless $have_hll;
	$node->safe_psql('postgres', 'CREATE EXTENSION hll');
	for my $k ([ 's', q{'n1000'}, 'small' ], [ 'v', 3, 'middle' ], [ 'v', 1, 'large' ])
	{
		my ($c, $key, $what) = @$k;
		is( $node->safe_psql('postgres', qq{
SELECT round(hll_cardinality(sc_sketch('$c', $key)::hll))::bigint = sc_count('$c', $key)}),
			't', "$what key: hll_cardinality of sc_sketch()::hll rounds to sc_count");
	}
	is( $node->safe_psql('postgres', q{
SELECT sc_sketch('s', 'n1000')::hll = h, sc_sketch('s', 'n1000')::text = h::text
  FROM (SELECT hll_add_agg(hll_hash_text('e' || g), 14, 5) AS h
          FROM generate_series(1, 1000) g) a}),
		't|t', 'small key: sc_sketch is hll_add_agg of the same text elements, byte for byte');
	is( $node->safe_psql('postgres', q{
SELECT sc_sketch('v', 3)::hll = h, sc_sketch('v', 3)::text = h::text
  FROM (SELECT hll_add_agg(hll_hash_bigint(g), 14, 5) AS h FROM generate_series(1, 3000) g) a}),
		't|t', 'middle key: sc_sketch is hll_add_agg of the same elements, byte for byte');
	is( $node->safe_psql('postgres', q{
SELECT sc_sketch('v', 1)::hll = h, sc_sketch('v', 1)::text = h::text
  FROM (SELECT hll_add_agg(hll_hash_bigint(g), 14, 5) AS h FROM generate_series(1, 1000000) g) a}),
		't|t', 'large key: sc_sketch is hll_add_agg of the same elements, byte for byte');
	is( $node->safe_psql('postgres', q{
SELECT round(hll_cardinality(sc_sketch('v', 1)::hll || sc_sketch('v', 2)::hll))::bigint}),
		$union, 'the union of two keys\' sketches in hll rounds to sc_count_keys');
}

# e. Transactional: the transaction's own, gone on rollback, kept by a commit through a crash.
# A transactional key's stored rows: its key_sketches row and its commits not yet folded (the
# flusher moves a commit's sketch_deltas row into key_sketches in one transaction).
my $t_stored = q{(SELECT sketch FROM slotted_counter.key_sketches
 WHERE counter = 't'::slotted_counter::integer AND key = %1$d
 UNION ALL SELECT sketch FROM slotted_counter.sketch_deltas
 WHERE counter = 't'::slotted_counter::integer AND key = %1$d)};
my $t_rows = q{SELECT count(*) FROM } . $t_stored . q{ r};
is( $node->safe_psql('postgres', sprintf(q{
BEGIN;
SELECT count(*) FILTER (WHERE sc_add('t', 1, g)) FROM generate_series(1, 100) g;
SELECT sc_count('t', 1);
ROLLBACK;
SELECT sc_count('t', 1);
SELECT (%s);}, sprintf($t_rows, 1))),
	"100\n100\n0\n0",
	'a transaction sees its own 100 adds; after ROLLBACK the key counts 0 and has no row');
is( $node->safe_psql('postgres', sprintf(q{
BEGIN;
SELECT count(*) FILTER (WHERE sc_add('t', 3, g)) FROM generate_series(1, 10) g;
SAVEPOINT s;
SELECT count(*) FILTER (WHERE sc_add('t', 3, g)) FROM generate_series(5, 20) g;
SELECT sc_count('t', 3);
ROLLBACK TO SAVEPOINT s;
SELECT sc_count('t', 3);
COMMIT;
SELECT sc_count('t', 3), (%s);}, sprintf($t_rows, 3))),
	"10\n10\n20\n10\n10|1",
	'ROLLBACK TO SAVEPOINT drops the adds after the savepoint; COMMIT keeps the rest');

my $session = $node->background_psql('postgres');
$session->query_safe('BEGIN');
is( $session->query_safe(q{
SELECT count(*) FILTER (WHERE sc_add('t', 2, g)) FROM generate_series(1, 500) g}),
	'500', 'a transaction adds 500 elements');
is($node->safe_psql('postgres', q{SELECT sc_count('t', 2)}), '0',
	'another session does not see them before the commit');
$session->query_safe('COMMIT');
$session->quit;
is( $node->safe_psql('postgres', sprintf(q{
SELECT sc_count('t', 2);
SELECT (%s);
SELECT slotted_counter.sketch_count(slotted_counter.sketch_union_agg(sketch)) FROM %s r;},
		sprintf($t_rows, 2), sprintf($t_stored, 2))),
	"500\n1\n500", 'after the commit: 500, and the commit wrote its one row itself');
$node->stop('immediate');
$node->start;
is( $node->safe_psql('postgres', q{
SELECT sc_count('t', 2), sc_count('t', 3), sc_count('t', 1);
SELECT count(*) FILTER (WHERE sc_add('t', 2, g)) FROM generate_series(1, 500) g;}),
	"500|10|0\n0", 'after a crash the committed adds are all there, nothing of the rolled back');
$node->restart;
is($node->safe_psql('postgres', q{SELECT sc_count('t', 2), sc_count('t', 3), sc_count('t', 1)}),
	'500|10|0', 'and after a clean restart');

# Buffered: flushed, then unflushed, then a crash.
is(adds_true('bc', 1, 1, 300), 300, 'a buffered key takes 300 elements');
is( $node->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT slotted_counter.sketch_count(sketch) FROM slotted_counter.key_sketches
 WHERE counter = 'bc'::slotted_counter::integer AND key = 1;}),
	"t\n300", 'sc_rollup() writes its sketch to the table');
is(adds_true('bc', 1, 301, 600), 300, '300 more, not flushed by the test');
my $before_crash = $node->safe_psql('postgres', q{SELECT sc_count('bc', 1)});
is($before_crash, 600, 'the key counts 600 before the crash');
my $log_offset = -s $node->logfile;
$node->stop('immediate');
$node->start;
my $after_crash = $node->safe_psql('postgres', q{SELECT sc_count('bc', 1)});
note("after the crash the buffered key counts $after_crash (the flusher may have run)");
cmp_ok($after_crash, '<=', $before_crash, 'after a crash the count is never more than before');
cmp_ok($after_crash, '>=', 300, 'and at least what sc_rollup() flushed');
like(slurp_file($node->logfile, $log_offset),
	qr/the unflushed adds to 1 keys of distinct counters are lost/,
	'the crash lost unflushed adds, and the log says so')
  if $after_crash < $before_crash;
is(adds_true('bc', 1, 1, 300), 0,
	'the flushed part survives exactly: adding its 300 elements again changes nothing');
is($node->safe_psql('postgres', q{SELECT sc_count('bc', 1)}), $after_crash,
	'and the count stays');
# A clean stop flushes what the buffer holds.
is(adds_true('bc', 1, 1001, 1100), 100, '100 new elements, not flushed by the test');
$node->restart;
is($node->safe_psql('postgres', q{SELECT sc_count('bc', 1)}), $after_crash + 100,
	'a clean restart keeps every buffered add');
$node->stop;

# f. Eviction: 8 resident sketches for 50, then 40, keys.
my $small_node = preloaded_node('distinct_evict', qq{
wal_level = replica
max_wal_senders = 4
slotted_counter.max_sketches = 8
slotted_counter.flush_interval = 100
});
$small_node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('ev', 'buffered', kind => 'distinct'),
       sc_create('pb', 'buffered', kind => 'distinct'),
       sc_create('pt', 'transactional', kind => 'distinct');
CREATE UNLOGGED TABLE got (k integer NOT NULL, e integer NOT NULL);
});
my $evictions = q{SELECT max(evictions) FROM slotted_counter.stats};
is( $small_node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('ev', k, g))
  FROM generate_series(1, 50) k, generate_series(1, k * 10) g}),
	'12750', '50 keys take key*10 distinct elements each, 12,750 in all');
my $ev_loaded = $small_node->safe_psql('postgres', $evictions);
cmp_ok($ev_loaded, '>', 0, "keys were evicted for room ($ev_loaded evictions)");
my $ev_counts = q{SELECT string_agg(sc_count('ev', k)::text, ',' ORDER BY k)
  FROM generate_series(1, 50) k};
my $want = join(',', map { $_ * 10 } 1 .. 50);
is($small_node->safe_psql('postgres', $ev_counts), $want,
	'read live, before sc_rollup(), each key counts key*10 exactly');
$small_node->safe_psql('postgres', 'SELECT sc_rollup()');
is($small_node->safe_psql('postgres', $ev_counts), $want,
	'after sc_rollup(), each key counts key*10 exactly');
is( $small_node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.key_sketches WHERE counter = 'ev'::slotted_counter::integer;
SELECT sc_count_keys('ev', array(SELECT generate_series(1, 50)::bigint)), sc_count_total('ev');}),
	"50\n500|500", 'every key has its row; the union of all keys is the 500 elements');
is( $small_node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('ev', k, g))
  FROM generate_series(1, 50) k, generate_series(1, k * 10) g}),
	'0', 'adding every key\'s elements again changes nothing: evicted keys load their sketch');
is( $small_node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('ev', k, g))
  FROM generate_series(1, 50) k, generate_series(k * 10 + 1, k * 10 + 5) g}),
	'250', 'and 5 new elements on each key all count');
my $ev_again = $small_node->safe_psql('postgres', $evictions);
cmp_ok($ev_again, '>', $ev_loaded, 'keys were evicted again to load the others');
$small_node->safe_psql('postgres', 'SELECT sc_rollup()');
is($small_node->safe_psql('postgres', $ev_counts), join(',', map { $_ * 10 + 5 } 1 .. 50),
	'each key counts key*10 + 5 exactly');
# One transaction of a transactional counter adds to 50 keys, more than the buffer's sketches:
# its commit holds none of them, and each key counts its elements.
$small_node->safe_psql('postgres', q{SELECT sc_create('tt', 'transactional', kind => 'distinct')});
is( $small_node->safe_psql('postgres', q{
BEGIN;
SELECT count(*) FILTER (WHERE sc_add('tt', k, g))
  FROM generate_series(1, 50) k, generate_series(1, k) g;
COMMIT;
SELECT string_agg(sc_count('tt', k)::text, ',' ORDER BY k) FROM generate_series(1, 50) k;
SELECT sc_count_total('tt');}),
	"1275\n" . join(',', 1 .. 50) . "\n50",
	'a transaction adds to 50 keys of a transactional counter with 8 resident sketches: each '
	  . 'counts its elements');

# Concurrent writers: 40 keys, 8 resident sketches, both durabilities.
$small_node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=200',
	0,
	[qr{actually processed: 1600/1600}],
	[qr{^$}],
	'8 clients × 200 transactions add random elements to 40 keys, without an error',
	{
		'074_adds' => q{\set k random(1, 40)
\set e random(1, 300)
BEGIN;
SELECT sc_add('pb', :k, :e);
SELECT sc_add('pt', :k, :e);
INSERT INTO got VALUES (:k, :e);
COMMIT;
}
	});
my $expected = $small_node->safe_psql('postgres', q{
SELECT string_agg(k || ':' || coalesce(n, 0), ',' ORDER BY k)
  FROM generate_series(1, 40) k
  LEFT JOIN (SELECT k, count(DISTINCT e) AS n FROM got GROUP BY k) d USING (k);
SELECT count(*), count(DISTINCT e) FROM got;});
my ($expected_keys, $expected_total) = split /\n/, $expected;
is((split /\|/, $expected_total)[0], 1600, 'the table has the 1,600 adds');
$expected_total = (split /\|/, $expected_total)[1];
my $per_key = q{SELECT string_agg(k || ':' || sc_count('%s', k), ',' ORDER BY k)
  FROM generate_series(1, 40) k;
SELECT sc_count_total('%s');};
for my $when ('live', 'after sc_rollup()', 'after a restart')
{
	$small_node->safe_psql('postgres', 'SELECT sc_rollup()') if $when eq 'after sc_rollup()';
	$small_node->restart if $when eq 'after a restart';
	for my $c (qw(pb pt))
	{
		is($small_node->safe_psql('postgres', sprintf($per_key, $c, $c)),
			"$expected_keys\n$expected_total",
			"$c, $when: each key counts exactly the distinct elements it got, and the total "
			  . 'all of them');
	}
}

# g. pg_dump and pg_restore (also --no-owner) into another database: the counters keep their kind
# and precision, every key its sketch (a transactional counter's commits not yet folded too), and
# adding what was added before changes nothing there.
$small_node->safe_psql('postgres', q{SELECT sc_add('pt', 1, 'after the flush')});
my $dump = $small_node->basedir . '/distinct.dump';
$small_node->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dump, '-d', $small_node->connstr('postgres') ], 'pg_dump');
my $before_dump = $small_node->safe_psql('postgres', sprintf($per_key, 'pt', 'pt'));
for my $restore ([ 'restored', [] ], [ 'restored_no_owner', ['--no-owner'] ])
{
	my ($db, $options) = @$restore;
	$small_node->safe_psql('postgres', "CREATE DATABASE $db");
	$small_node->command_ok(
		[ 'pg_restore', '--exit-on-error', @$options, '-d', $small_node->connstr($db), $dump ],
		"pg_restore @$options into $db");
	is( $small_node->safe_psql($db, q{
SELECT string_agg(name || ' ' || kind || ' ' || log2m, ', ' ORDER BY name)
  FROM slotted_counter.counters WHERE name IN ('pb', 'pt');
} . sprintf($per_key, 'pb', 'pb') . sprintf($per_key, 'pt', 'pt') . q{
SELECT count(*) FILTER (WHERE sc_add('pb', k, e)), count(*) FILTER (WHERE sc_add('pt', k, e))
  FROM got;
SELECT sc_add('pt', 1, 'after the flush');}),
		"pb distinct 14, pt distinct 14\n$expected_keys\n$expected_total\n$before_dump\n0|0\nf",
		"$db: the counters, every key's count, and nothing new in what was added before");
}

# i. The expiry of an unbucketed counter's keys (retain without bucket), buffered and
# transactional: a key idle for its retention counts nothing at once, flushed or not; an add
# counts it from an empty set, whose flush and fold replace the stored sketch rather than union
# with it; the retention pass deletes the idle keys' rows and sketches.
$small_node->safe_psql('postgres', q{
SELECT sc_create('xb', 'buffered', kind => 'distinct', retain => '3 seconds'),
       sc_create('xt', 'transactional', kind => 'distinct', retain => '3 seconds');
SELECT count(*) FILTER (WHERE sc_add('xb', k, g)) FROM generate_series(1, 3) k,
       generate_series(1, 10) g;
SELECT count(*) FILTER (WHERE sc_add('xt', k, g)) FROM generate_series(1, 3) k,
       generate_series(1, 10) g;
SELECT sc_rollup();
SELECT sc_add('xb', 3, 11), sc_add('xt', 3, 11);});
my $x_counts = q{SELECT sc_count('%1$s', 1), sc_count('%1$s', 3), sc_count_total('%1$s'),
       sc_count_keys('%1$s', '{1,2,3}')};
is(join("\n", map { $small_node->safe_psql('postgres', sprintf($x_counts, $_)) } qw(xb xt)),
	"10|11|11|11\n10|11|11|11", 'xb, xt: 3 keys of 10 elements (key 3: 11, not flushed)');
$small_node->safe_psql('postgres', 'SELECT pg_sleep(3.1)');
is(join("\n", map { $small_node->safe_psql('postgres', sprintf($x_counts, $_)) } qw(xb xt)),
	"0|0|0|0\n0|0|0|0", 'idle past the retention: every key counts nothing at once');
is( $small_node->safe_psql('postgres', q{
SELECT sc_add('xb', 1, 100), sc_add('xb', 1, 1), sc_add('xb', 1, 1);
SELECT sc_add('xt', 1, 100), sc_add('xt', 1, 1), sc_add('xt', 1, 1);
SELECT sc_count('xb', 1), sc_count('xt', 1);}),
	"t|t|f\nt|t|f\n2|2", 'an add to an expired key counts from an empty set');
is( $small_node->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT sc_count('xb', 1), sc_count('xt', 1);
SELECT string_agg(c.name || ' ' || slotted_counter.sketch_count(s.sketch), ', ' ORDER BY c.name)
  FROM slotted_counter.key_sketches s JOIN slotted_counter.counters c ON c.id = s.counter
 WHERE c.name IN ('xb', 'xt') AND s.key = 1;}),
	"t\n2|2\nxb 2, xt 2",
	'after a flush the stored sketches hold the 2 new elements: the expired ones did not come back');
ok( $small_node->poll_query_until('postgres', q{
SELECT sc_rollup() >= 0 AND NOT EXISTS (SELECT FROM slotted_counter.key_values
 WHERE counter IN ('xb'::slotted_counter::integer, 'xt'::slotted_counter::integer)
   AND key IN (2, 3))}),
	'the retention pass deletes the idle keys\' rows');
is( $small_node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.key_sketches
 WHERE counter IN ('xb'::slotted_counter::integer, 'xt'::slotted_counter::integer);}),
	'2', '... and their sketches: only key 1\'s of each counter are left');

# h. A streaming standby reads the sketches its primary's flushes and commits wrote (a
# transactional counter's commits before their fold too), and refuses an add.
$small_node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('distinct_standby');
$standby->init_from_backup($small_node, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "shared_preload_libraries = 'slotted_counter'\n");
$standby->start;
$small_node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_add('tt', k, 'after the backup')) FROM generate_series(1, 50) k;
SELECT sc_add('pb', 1, 'after the backup');
SELECT sc_rollup();});
$small_node->safe_psql('postgres', q{SELECT sc_add('tt', 1, 'not folded yet')});
$small_node->wait_for_catchup($standby);
my $on_both = q{SELECT sc_count_total('tt'), sc_count('tt', 1), sc_count('pb', 1),
       sc_count_keys('pb', array(SELECT generate_series(1, 40)::bigint))};
is($standby->safe_psql('postgres', $on_both), $small_node->safe_psql('postgres', $on_both),
	'the standby counts what the primary does, its unfolded commits included');
my ($ret, $out, $err) = $standby->psql('postgres', q{SELECT sc_add('pb', 1, 'on the standby')});
like($err, qr/cannot execute sc_add\(\) during recovery/, 'an add on the standby: 25006');
$standby->stop;
$small_node->stop;
done_testing();
