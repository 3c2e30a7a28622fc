# Storage of transactional counters stays bounded under a sustained load.
#
# Every committing transaction adds one row per key it incremented to slotted_counter.deltas;
# the flusher folds them into slotted_counter.totals every flush_interval and deletes them. So
# during the load the deltas table holds only what the last few intervals committed, far fewer
# rows than the load committed; after a rollup with no load it is empty, totals holds one row
# per key, and the values are exact: three increments per transaction, so the sum over all keys
# is three times the number of transactions pgbench reports.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;
use Time::HiRes qw(time usleep);

my $clients = 4;
my $seconds = 8;
my $keys = 100;

my $node = preloaded_node('txn_storage', qq{
slotted_counter.flush_interval = 200
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
		'pgbench', '--no-vacuum', "--client=$clients", '--jobs=2', "--time=$seconds",
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout(60));

# Sample the deltas table every 250 ms while the load runs, with the time of each sample.
my $sampler = $node->background_psql('postgres');
my @samples;
my $start = time;
while (time - $start < $seconds - 0.5 && @samples < 100)
{
	my $rows = $sampler->query_safe(
		"SELECT count(*) FROM slotted_counter.deltas WHERE counter = $counter_id");
	push @samples, [ time - $start, $rows ];
	usleep(250_000);
}
$sampler->quit;
eval { $pgbench->finish; };
is(($pgbench->full_results)[0], 0, 'pgbench ran without error');
note "pgbench stdout:\n$out\npgbench stderr:\n$err";
note 'deltas rows during the load: '
  . join(', ', map { sprintf('%.1fs:%d', @$_) } @samples);

my ($transactions) = $out =~ /number of transactions actually processed: (\d+)/;
$transactions //= 0;
my ($failed) = $out =~ /number of failed transactions: (\d+)/;
is($failed // 0, 0, 'no transaction failed');
ok($transactions >= 1000, "the load committed $transactions transactions");

# A delta row per committing transaction: without folding, the last samples would hold most of
# the transactions. The bound is 20% of the transactions (60 increments in 300).
my $max_rows = 0;
$max_rows = $_->[1] > $max_rows ? $_->[1] : $max_rows for @samples;
my @late = grep { $_->[0] >= $seconds / 2 } @samples;
ok(@samples >= 10 && @late >= 5, scalar(@samples) . ' samples, ' . scalar(@late) . ' in the second half');
ok($max_rows < 0.2 * $transactions,
	"the deltas table stayed small during the load: at most $max_rows rows for "
	  . ($transactions * 3) . " increments in $transactions transactions");

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
FROM slotted_counter.totals WHERE counter = $counter_id}),
	't|t|' . (3 * $transactions) . '|t|t',
	'totals holds one row per key, at most 100, with the exact values');
is($node->safe_psql('postgres', $sum_query),
	(3 * $transactions) . '|0', 'real-time values are unchanged by the rollup');

# A second rollup has nothing left to fold and changes nothing.
my $totals_query = qq{
SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM slotted_counter.totals
WHERE counter = $counter_id};
my $totals_before = $node->safe_psql('postgres', $totals_query);
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $totals_query),
	$totals_before, 'a second rollup changes no value in the totals table');
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
