# Storage of transactional counters stays bounded under a sustained load.
#
# Every committing transaction adds one row per key it incremented to slotted_counter.deltas;
# the flusher folds them into slotted_counter.key_values every flush_interval and deletes them. So
# during the load the deltas table holds only what committed since the flush before last; after
# a rollup with no load it is empty, key_values holds one row per key, and the values are exact:
# three increments per transaction, so the sum over all keys is three times the number of
# transactions pgbench reports.
#
# The bound is stated in flushes, not in time, so neither a fast machine (a load shorter than a
# few intervals) nor a loaded one (a flusher scheduled late) can fail it: a sample taken after
# two more flushes than an earlier one holds at most the rows committed since that earlier one.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;
use Time::HiRes qw(usleep);

# A load of a fixed size (not of a fixed time, which a loaded machine would shrink).
my $clients = 4;
my $per_client = 4000;
my $load = $clients * $per_client;
my $keys = 100;

my $node = preloaded_node('txn_storage', qq{
slotted_counter.flush_interval = 50
});
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c');
});
my $counter_id =
  $node->safe_psql('postgres', q{SELECT 'c'::slotted_counter::integer});

# Three increments of one random key per transaction: one row in deltas per transaction.
my $script = $node->basedir . '/storage.sql';
append_to_file(
	$script, q{\set k random(1, 100)
BEGIN;
SELECT sc_incr('c', :k, 1);
SELECT sc_incr('c', :k, 1);
SELECT sc_incr('c', :k, 1);
COMMIT;
});

my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', "--client=$clients", '--jobs=2',
		"--transactions=$per_client", "--file=$script", '-h', $node->host, '-p', $node->port,
		'postgres'
	],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

# Sample the deltas table every 20 ms for as long as the load runs. Each sample holds the rows
# of the counter in deltas and the transactions committed by then (the values over all keys,
# three per transaction), between two readings of the flusher's completed flushes: one before,
# one after.
my $sampler = $node->background_psql('postgres');
$sampler->set_query_timer_restart();    # the hang guard is per query, not for the whole load
my $flushes_query = q{SELECT flushes FROM slotted_counter.stats
WHERE datname = current_database()};
my @samples;
while ($pgbench->pumpable)
{
	$pgbench->pump_nb;
	my $before = $sampler->query_safe($flushes_query);
	my $row = $sampler->query_safe(qq{
SELECT (SELECT count(*) FROM slotted_counter.deltas WHERE counter = $counter_id),
       (SELECT sum(sc_sum('c', k)) / 3 FROM generate_series(1, $keys) k)});
	my $after = $sampler->query_safe($flushes_query);
	my ($rows, $committed) = split /\|/, $row;
	push @samples, { committed => $committed, rows => $rows, before => $before, after => $after };
	usleep(20_000);
}
$sampler->quit;
eval { $pgbench->finish; };
is(($pgbench->full_results)[0], 0, 'pgbench ran without error');
note "pgbench stdout:\n$out\npgbench stderr:\n$err";
note 'deltas rows during the load (committed:rows:flushes): '
  . join(', ',
	map { sprintf('%d:%d:%d', @{$_}{qw(committed rows before)}) }
	  @samples[ grep { $_ % 5 == 0 } 0 .. $#samples ]);

my ($transactions) = $out =~ /number of transactions actually processed: (\d+)/;
$transactions //= 0;
my ($failed) = $out =~ /number of failed transactions: (\d+)/;
is($failed // 0, 0, 'no transaction failed');
is($transactions, $load, 'the load committed every transaction');

# A delta row per committing transaction. Sample j was taken after two flushes completed that
# had not when sample i's values were read: the second of them began after sample i, so its fold
# deleted every row committed before then. So sample j holds at most the rows committed since
# sample i (plus a transaction per client that sc_sum counted before its row was visible).
# Without folding, it would hold a row for every transaction committed by then.
my ($pairs, @unbounded) = (0);
for my $j (0 .. $#samples)
{
	my $i;
	for my $k (0 .. $j - 1)
	{
		$i = $k if $samples[$j]{before} >= $samples[$k]{after} + 2;
	}
	next unless defined $i;
	$pairs++;
	push @unbounded, $j
	  if $samples[$j]{rows} >
	  $samples[$j]{committed} - $samples[$i]{committed} + $clients;
}
cmp_ok($pairs, '>=', 3,
	scalar(@samples) . " samples, $pairs of them two flushes or more after an earlier one");
is(scalar(@unbounded), 0,
	'the deltas table held only what committed since the flush before last'
	  . (@unbounded
		? ": $samples[$unbounded[0]]{rows} rows after $samples[$unbounded[0]]{committed} transactions"
		: ''));

my $sum_query = qq{
SELECT sum(sc_sum('c', k)), count(*) FILTER (WHERE sc_sum('c', k) % 3 <> 0)
FROM generate_series(0, $keys + 1) k};
is($node->safe_psql('postgres', $sum_query),
	(3 * $transactions) . '|0',
	'real-time values are exact: three increments per transaction, each a multiple of three');

is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'sc_rollup succeeds');
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM slotted_counter.deltas'),
	'0',
	'after the rollup with no load the deltas table is empty');
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) <= $keys, count(*) = count(DISTINCT key), sum(value), min(key) >= 1,
       max(key) <= $keys
FROM slotted_counter.key_values WHERE counter = $counter_id}),
	't|t|' . (3 * $transactions) . '|t|t',
	'key_values holds one row per key, at most 100, with the exact values');
is($node->safe_psql('postgres', $sum_query),
	(3 * $transactions) . '|0', 'real-time values are unchanged by the rollup');

# A second rollup has nothing left to fold and changes nothing.
my $totals_query = qq{
SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM slotted_counter.key_values
WHERE counter = $counter_id};
my $totals_before = $node->safe_psql('postgres', $totals_query);
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $totals_query),
	$totals_before, 'a second rollup changes no value in the key_values table');
is($node->safe_psql('postgres', $sum_query),
	(3 * $transactions) . '|0', 'values are still exact after a second rollup');

# The folded values survive a clean restart unchanged, with nothing to fold afterwards.
$node->restart;
is($node->safe_psql('postgres', $sum_query),
	(3 * $transactions) . '|0', 'values are exact after a restart');
is( $node->safe_psql(
		'postgres', 'SELECT count(*) FROM slotted_counter.deltas'),
	'0',
	'the deltas table is still empty after the restart');

$node->stop;
done_testing();
