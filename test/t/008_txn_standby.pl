# Counters on a streaming hot standby.
#
# The standby reads what the primary committed: once replay has caught up, sc_sum on the standby
# equals the primary's committed value of every transactional key, whether the primary's
# flusher has folded the deltas yet or not, and never shows a pending or rolled back increment.
# A buffered counter replicates with its flushed table: the standby shows the values of the last
# rollup. A key read once on the standby shows the new value after the next replay (no stale
# copy). Writes on the standby fail with 25006; after promotion the standby counts on from the
# committed values.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# flush_interval = 0 on the primary: deltas stay unfolded and buffered values stay in the buffer
# until a rollup, so the test decides what the table holds. idle_timeout = 0: the flusher stays
# (one that leaves flushes and folds first; it counts as idle any moment between this test's
# connections, so on a slow run it left between two of them).
# preloaded_node inits without streaming (wal_level = minimal, no WAL senders): turn it on.
my $primary = preloaded_node('primary', qq{
slotted_counter.flush_interval = 0
slotted_counter.idle_timeout = 0
wal_level = replica
max_wal_senders = 4
});
$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('t');
SELECT sc_create('b', 'buffered');
});

$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"shared_preload_libraries = 'slotted_counter'\nlog_statement = none\n");
$standby->start;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');

# b: key k gets 5k, then a rollup (which would fold t's deltas too,
# so it comes first).
$primary->safe_psql('postgres',
	q{SELECT count(sc_incr('b', k, 5 * k)) FROM generate_series(1, 100) k});
$primary->safe_psql('postgres', 'SELECT sc_rollup()');

# t: key k gets k in one transaction and 2k in another (3k); key 0 gets 10 single increments.
$primary->safe_psql(
	'postgres', q{
BEGIN; SELECT count(sc_incr('t', k, k)) FROM generate_series(1, 200) k; COMMIT;
BEGIN; SELECT count(sc_incr('t', k, 2 * k)) FROM generate_series(1, 200) k; COMMIT;
SELECT count(sc_incr('t', 0, 1)) FROM generate_series(1, 10);
});
# Rolled back: must show nowhere.
$primary->safe_psql(
	'postgres', q{
BEGIN; SELECT count(sc_incr('t', k, 1000)) FROM generate_series(0, 300) k; ROLLBACK;
});

my $t_check = q{
SELECT sc_sum('t', 0),
       (SELECT count(*) FROM generate_series(1, 200) k WHERE sc_sum('t', k) <> 3 * k),
       (SELECT count(*) FROM generate_series(201, 300) k WHERE sc_sum('t', k) <> 0)};
my $b_check = q{
SELECT (SELECT count(*) FROM generate_series(1, 100) k WHERE sc_sum('b', k) <> 5 * k),
       sc_sum('b', 0)};

is($primary->safe_psql('postgres', $t_check),
	'10|0|0', 'primary: transactional values are the committed ones');
is( $primary->safe_psql(
		'postgres', q{
SELECT count(*) FROM slotted_counter.deltas d JOIN slotted_counter.counters c ON c.id = d.counter
WHERE c.name = 't'}) > 0 ? 'unfolded' : 'folded',
	'unfolded',
	'primary: the committed deltas of t are still unfolded (so the standby must read them)');

$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $t_check),
	'10|0|0',
	'standby: transactional values equal the primary\'s committed values, deltas unfolded');
is($standby->safe_psql('postgres', $b_check),
	'0|0', 'standby: buffered values equal the primary\'s as of the rollup');

# A pending increment on the primary stays invisible on the standby, even after more WAL from
# other commits has been replayed; a key read on the standby shows new commits afterwards.
my $pending = $primary->background_psql('postgres');
$pending->query_safe('BEGIN');
$pending->query_safe(q{SELECT sc_incr('t', 1, 500)});
$primary->safe_psql('postgres',
	q{BEGIN; SELECT sc_incr('t', 1, 7); SELECT sc_incr('t', 0, 1); COMMIT;});
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT sc_sum('t', 1), sc_sum('t', 0)}),
	'10|11',
	'standby: a key read before shows the newly committed value, not the primary\'s pending one');
is($primary->safe_psql('postgres', q{SELECT sc_sum('t', 1)}),
	'10', 'primary: other sessions do not see the pending increment either');
$pending->query_safe('ROLLBACK');
$pending->quit;

# Folding on the primary changes nothing in what the standby reads.
$primary->safe_psql('postgres', 'SELECT sc_rollup()');
is( $primary->safe_psql(
		'postgres', q{
SELECT count(*) FROM slotted_counter.deltas d JOIN slotted_counter.counters c ON c.id = d.counter
WHERE c.name = 't'}),
	'0',
	'primary: the rollup folded every delta');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT sc_sum('t', 1), sc_sum('t', 0), sc_sum('t', 2)}),
	'10|11|6', 'standby: the same values after the primary folded the deltas');

# Buffered: more increments without a rollup show on the standby only as far as they were
# flushed; after the next rollup the standby shows them, also for keys it has read before.
$primary->safe_psql('postgres',
	q{SELECT count(sc_incr('b', k, 1)) FROM generate_series(1, 100) k});
$primary->wait_for_catchup($standby);
my $b_lag = $standby->safe_psql('postgres',
	q{SELECT count(*) FROM generate_series(1, 100) k WHERE sc_sum('b', k) NOT BETWEEN 5 * k AND 5 * k + 1});
is($b_lag, '0', 'standby: unflushed buffered values lie between the last rollup and the truth');
$primary->safe_psql('postgres', 'SELECT sc_rollup()');
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres',
		q{SELECT count(*) FROM generate_series(1, 100) k WHERE sc_sum('b', k) <> 5 * k + 1}),
	'0',
	'standby: after the next rollup the buffered values are the primary\'s');
is($standby->safe_psql('postgres', q{SELECT sc_sum('b', 100)}),
	$primary->safe_psql('postgres', q{SELECT sc_sum('b', 100)}),
	'standby and primary agree on a buffered key after the rollup');

# Writes on the standby fail with 25006 and change nothing.
for my $sql (
	q{SELECT sc_incr('t', 1, 1)},
	q{SELECT sc_incr('t')},
	q{BEGIN; SELECT sc_incr('t', 1, 1); COMMIT;},
	q{SELECT sc_incr('b', 1, 1)})
{
	my ($ret, $stdout, $stderr) =
	  $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "standby: fails: $sql");
	like($stderr, qr/ERROR:  25006/, "standby: SQLSTATE 25006: $sql");
}
is($standby->safe_psql('postgres', q{SELECT sc_sum('t', 1), sc_sum('b', 1)}),
	'10|6', 'standby: the failed writes changed nothing');
$primary->wait_for_catchup($standby);
is($primary->safe_psql('postgres', q{SELECT sc_sum('t', 1), sc_sum('b', 1)}),
	'10|6', 'primary: the failed writes on the standby changed nothing');

# Promoted, the standby counts on from the committed values.
$primary->stop;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');
is($standby->safe_psql('postgres', q{BEGIN; SELECT sc_incr('t', 1, 1); COMMIT;}),
	'11', 'promoted: a transactional increment counts on from the committed value');
is($standby->safe_psql('postgres', q{SELECT sc_incr('b', 1, 1)}),
	'7', 'promoted: a buffered increment counts on from the rolled-up value');
is( $standby->safe_psql(
		'postgres', q{
SELECT sc_sum('t', 0),
       (SELECT count(*) FROM generate_series(2, 200) k WHERE sc_sum('t', k) <> 3 * k),
       (SELECT count(*) FROM generate_series(201, 300) k WHERE sc_sum('t', k) <> 0)}),
	'11|0|0', 'promoted: the other transactional values are intact');

$standby->stop;
done_testing();
