# A buffer far smaller than the keys in use (256 entries, 5000 + 5000 keys).
#
# When the buffer is full, increments never fail and are never lost: clean entries are evicted
# or the increment is written through. Every value stays exact, in real time and in the key_values
# table after a rollup, and stats shows that evictions or write-throughs happened.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('small_buffer', qq{
slotted_counter.max_entries = 256
slotted_counter.flush_interval = 100
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
SELECT sc_create('d', 'buffered');
});

is( $node->safe_psql(
		'postgres',
		q{SELECT capacity FROM slotted_counter.stats WHERE datname = current_database()}),
	'256',
	'stats shows the configured capacity');

# c: 8000 increments of 1 on random keys out of 5000.
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=1000',
	0,
	[qr{actually processed: 8000/8000}],
	[qr{^$}],
	'pgbench: 8000 increments on random keys, no error',
	{ '003_random_keys' => "\\set k random(1, 5000)\nSELECT sc_incr('c', :k, 1);\n" });

# d: every client adds 1 to each of 5000 keys, 3 times over; each key ends at 8 * 3 = 24.
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=3',
	0,
	[qr{actually processed: 24/24}],
	[qr{^$}],
	'pgbench: 120000 increments sweeping 5000 keys, no error',
	{
		'003_all_keys' =>
		  "SELECT count(sc_incr('d', k, 1)) FROM generate_series(1, 5000) k;\n"
	});

my $check = q{
SELECT (SELECT sum(sc_sum('c', k)) FROM generate_series(1, 5000) k),
       (SELECT count(*) FROM generate_series(1, 5000) k WHERE sc_sum('d', k) <> 24)
};
is($node->safe_psql('postgres', $check),
	'8000|0', 'real-time values are exact: c sums to 8000, every key of d is 24');

is( $node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't',
	'sc_rollup succeeds with a full buffer');
my $table_check = q{
SELECT (SELECT coalesce(sum(t.value), 0) FROM slotted_counter.key_values t
        JOIN slotted_counter.counters n ON n.id = t.counter WHERE n.name = 'c'),
       (SELECT count(*) FROM slotted_counter.key_values t
        JOIN slotted_counter.counters n ON n.id = t.counter WHERE n.name = 'd' AND t.value = 24),
       (SELECT count(*) FROM slotted_counter.key_values t
        JOIN slotted_counter.counters n ON n.id = t.counter WHERE n.name = 'd')
};
is($node->safe_psql('postgres', $table_check),
	'8000|5000|5000', 'after a rollup the key_values table holds the exact values');

my $stats = $node->safe_psql(
	'postgres', q{
SELECT write_throughs + evictions > 0, entries_used <= capacity, dirty_entries
FROM slotted_counter.stats WHERE datname = current_database()});
is($stats, 't|t|0',
	'stats: evictions or write-throughs happened, the buffer stayed within capacity, '
	  . 'nothing dirty after the rollup');

# A single hot key keeps exact values while the cold keys churn through the buffer.
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=500',
	0,
	[qr{actually processed: 4000/4000}],
	[qr{^$}],
	'pgbench: a hot key mixed with churning cold keys, no error',
	{
		'003_hot_and_cold' =>
		  "\\set k random(1, 5000)\nSELECT sc_incr('c', 0, 1);\nSELECT sc_incr('d', :k, 1);\n"
	});
is( $node->safe_psql(
		'postgres', q{
SELECT sc_sum('c', 0), (SELECT sum(sc_sum('d', k)) FROM generate_series(1, 5000) k)}),
	'4000|124000',
	'the hot key and the churning keys are exact');

my $all_query = q{
SELECT (SELECT sum(sc_sum('c', k)) FROM generate_series(1, 5000) k), sc_sum('c', 0),
       (SELECT sum(sc_sum('d', k)) FROM generate_series(1, 5000) k)
};
$node->restart;
is($node->safe_psql('postgres', $all_query),
	'8000|4000|124000', 'values are exact after a restart with a full buffer');

# A transaction that changes more keys of a transactional counter than the buffer holds commits
# (a large commit writes the rows of the keys out of the buffer itself: large_commit.hpp), and so
# does a small one; every key is exact.
$node->safe_psql('postgres', q{SELECT sc_create('t')});
is($node->safe_psql('postgres', q{
BEGIN;
SELECT count(sc_incr('t', k, k)) FROM generate_series(1, 2000) k;
COMMIT;
SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(1, 2000)::bigint))}),
	"2000\n2001000", 'a commit of 2000 keys into a buffer of 256 counts them all');
is($node->safe_psql('postgres',
		q{BEGIN; SELECT count(sc_incr('t', k)) FROM generate_series(1, 50) k; COMMIT; SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(1, 50)::bigint))}),
	"50\n1325", 'a commit of 50 keys pins them in the buffer, and counts them');

$node->stop;
done_testing();
