# Buffered counters across restarts.
#
# A clean restart loses nothing: every value read with sc_sum is the same after it, and the
# key_values table holds exactly those values (the worker flushed them at shutdown; flush_interval
# is 0 here, so nothing else could have written them). An immediate stop loses at most what
# came after the last flush and never counts twice: rolled-up value <= value <= truth.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('restart', qq{
slotted_counter.flush_interval = 0
});

# The line an operator looks for after a restart (README, "Connect and check").
my ($control_version) = slurp_file("$FindBin::RealBin/../../slotted_counter.control")
  =~ /^default_version = '([^']+)'/m;
like(
	slurp_file($node->logfile),
	qr/LOG:  slotted_counter \Q$control_version\E loaded: a buffer of 100000 entries, .* 16 /,
	'the server log names the version and the buffer when the library is preloaded');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('a', 'buffered');
SELECT sc_create('b', 'buffered');
SELECT sc_create('n', 'buffered');
});

# a: key k gets k twice, so 2k. n: key k gets +10k then -3k, so 7k; key 0 gets 100 x the
# defaults (key 0, delta 1). b: 2000 increments of 1 on random keys 1..1000, from pgbench.
$node->safe_psql(
	'postgres', q{
SELECT count(sc_incr('a', k, k)) FROM generate_series(1, 3000) k;
SELECT count(sc_incr('a', k, k)) FROM generate_series(1, 3000) k;
SELECT count(sc_incr('n', k, 10 * k)) FROM generate_series(1, 500) k;
SELECT count(sc_incr('n', k, -3 * k)) FROM generate_series(1, 500) k;
SELECT count(sc_incr('n')) FROM generate_series(1, 100);
});
$node->pgbench(
	'--no-vacuum --client=4 --jobs=2 --transactions=500',
	0,
	[qr{actually processed: 2000/2000}],
	[qr{^$}],
	'pgbench increments counter b',
	{ '001_incr_b' => "\\set k random(1, 1000)\nSELECT sc_incr('b', :k, 1);\n" });

# The values a user can compute without the extension.
my $exact_query = q{
SELECT (SELECT count(*) FROM generate_series(1, 3000) k WHERE sc_sum('a', k) <> 2 * k),
       sc_sum('a', 0),
       (SELECT sum(sc_sum('b', k)) FROM generate_series(0, 1000) k),
       (SELECT count(*) FROM generate_series(1, 500) k WHERE sc_sum('n', k) <> 7 * k),
       sc_sum('n', 0)
};
my $exact_expected = '0|0|2000|0|100';

# Every non-zero value of every counter, from the real-time reads and from the table.
my $sums_query = q{
SELECT string_agg(format('%s/%s=%s', c.name, k, sc_sum(c.id::slotted_counter, k)), ','
                  ORDER BY c.name, k)
FROM slotted_counter.counters c CROSS JOIN generate_series(0, 3000) k
WHERE sc_sum(c.id::slotted_counter, k) <> 0
};
my $totals_query = q{
SELECT string_agg(format('%s/%s=%s', c.name, t.key, t.value), ',' ORDER BY c.name, t.key)
FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE t.value <> 0
};

is($node->safe_psql('postgres', $exact_query),
	$exact_expected, 'values are exact before the restart');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM slotted_counter.key_values'),
	'0',
	'flush_interval = 0: nothing flushed before the restart');

my $before = $node->safe_psql('postgres', $sums_query);
ok(length($before) > 0, 'there are values to compare');

$node->restart;

is($node->safe_psql('postgres', $sums_query),
	$before, 'a clean restart keeps every value of every counter');
is($node->safe_psql('postgres', $exact_query),
	$exact_expected, 'values are exact after the restart');
is($node->safe_psql('postgres', $totals_query),
	$before, 'the key_values table holds every value after the restart');

# Immediate stop after a rollup. Make every key of a dirty, roll up (R = 2k + 1 per key), then
# add 2 more per key (truth = 2k + 3) that no flush writes.
$node->safe_psql('postgres',
	q{SELECT count(sc_incr('a', k, 1)) FROM generate_series(1, 3000) k});
is($node->safe_psql('postgres', 'SELECT sc_rollup()'),
	'3000', 'sc_rollup writes one row per dirty key');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE c.name = 'a' AND t.value = 2 * t.key + 1}),
	'3000',
	'the rollup wrote the exact values');
$node->safe_psql(
	'postgres', q{
SELECT count(sc_incr('a', k, 1)) FROM generate_series(1, 3000) k;
SELECT count(sc_incr('a', k, 1)) FROM generate_series(1, 3000) k;
});
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM generate_series(1, 3000) k WHERE sc_sum('a', k) <> 2 * k + 3}),
	'0',
	'the increments after the rollup are counted before the crash');

$node->stop('immediate');
$node->start;

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM generate_series(1, 3000) k
WHERE sc_sum('a', k) NOT BETWEEN 2 * k + 1 AND 2 * k + 3}),
	'0',
	'after an immediate stop: rolled-up value <= value <= truth for every key');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*) FROM generate_series(1, 3000) k WHERE sc_sum('a', k) <> 2 * k + 1}),
	'0',
	'flush_interval = 0: exactly the rolled-up values survive the immediate stop');
is( $node->safe_psql(
		'postgres',
		q{SELECT (SELECT sum(sc_sum('b', k)) FROM generate_series(0, 1000) k), sc_sum('n', 0)}),
	'2000|100',
	'values flushed by the clean shutdown survive the immediate stop');
is( $node->safe_psql('postgres', q{SELECT sc_incr('a', 7, 1), sc_sum('a', 7)}),
	'16|16', 'increments continue from the surviving value');

# An immediate stop while the worker flushes on its own: a rollup in the middle of the load,
# then more load, then the stop. Key 0 of a ends somewhere between the two.
$node->append_conf('postgresql.conf', "slotted_counter.flush_interval = 20\n");
$node->reload;
my $rolled_up;
for my $batch (1 .. 40)
{
	$node->safe_psql('postgres',
		q{SELECT count(sc_incr('a', 0, 1)) FROM generate_series(1, 500)});
	if ($batch == 20)
	{
		$node->safe_psql('postgres', 'SELECT sc_rollup()');
		$rolled_up = $node->safe_psql(
			'postgres', q{
SELECT t.value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE c.name = 'a' AND t.key = 0});
	}
}
is($rolled_up, '10000', 'the mid-load rollup wrote the exact value');
is($node->safe_psql('postgres', q{SELECT sc_sum('a', 0)}),
	'20000', 'the value is exact before the stop');
$node->stop('immediate');
$node->start;
my $survived = $node->safe_psql('postgres', q{SELECT sc_sum('a', 0)});
ok( $survived >= 10000 && $survived <= 20000,
	"after an immediate stop during periodic flushes: 10000 <= $survived <= 20000");

$node->stop;
done_testing();
