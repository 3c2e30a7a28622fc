# Transactional counters under a crash in the middle of a load.
#
# Each pgbench transaction increments a transactional counter on two random keys and inserts
# the same (key, delta) pairs into a plain table in the same transaction; about a third of the
# transactions roll back. Whatever moment the crash hits, a transaction is either committed
# with both its increments and its rows or gone with both, so after the restart every key's
# value equals the sum of its rows in the plain table, exactly. That holds after an immediate
# stop of the server, and after the flusher is killed with SIGKILL while it folds deltas into
# the key_values (the postmaster then restarts everything). A rollup afterwards neither loses a
# delta nor folds one twice. During the load no incrementer ever waits on a row or transaction lock.
# The load is sized far beyond what it makes before it is cut off (48,000 transactions; the stop
# follows the first few thousand).

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

my $clients = 8;
my $keys = 50;

my $node = preloaded_node('txn_crash', qq{
slotted_counter.flush_interval = 20
restart_after_crash = on
synchronous_commit = on
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c');
CREATE TABLE ref (key bigint NOT NULL, delta bigint NOT NULL);
CREATE SEQUENCE attempts;
});
is( $node->safe_psql(
		'postgres', q{SELECT durability FROM slotted_counter.counters WHERE name = 'c'}),
	'transactional',
	'sc_create with the default durability makes a transactional counter');

# One transaction: two increments (one of a random delta), the matching rows, and one time in
# three a rollback. nextval is not transactional, so the sequence counts every attempt.
my $script = $node->basedir . '/txn.sql';
append_to_file(
	$script, q{\set k1 random(1, 50)
\set k2 random(1, 50)
\set d random(1, 5)
\set r random(1, 3)
BEGIN;
SELECT nextval('attempts');
SELECT sc_incr('c', :k1, :d);
INSERT INTO ref VALUES (:k1, :d);
SELECT sc_incr('c', :k2, 1);
INSERT INTO ref VALUES (:k2, 1);
\if :r = 1
ROLLBACK;
\else
COMMIT;
\endif
});

# Every key whose value differs from the sum of its rows, as "key:value/expected", and the
# number of keys compared.
my $mismatch_query = qq{
SELECT coalesce(string_agg(k || ':' || sc_sum('c', k) || '/' || coalesce(r.s, 0), ','
                           ORDER BY k) FILTER (WHERE sc_sum('c', k) <> coalesce(r.s, 0)), 'none')
       || ' of ' || count(*)
FROM generate_series(0, $keys + 1) k
LEFT JOIN (SELECT key, sum(delta) AS s FROM ref GROUP BY key) r ON r.key = k};
my $exact = 'none of ' . ($keys + 2);

# The same comparison against the table alone, once a rollup has folded every delta.
my $totals_mismatch_query = q{
SELECT count(*) FROM (
  SELECT t.key, t.value FROM slotted_counter.key_values t
  JOIN slotted_counter.counters c ON c.id = t.counter WHERE c.name = 'c' AND t.value <> 0
  EXCEPT ALL
  SELECT key, sum(delta) FROM ref GROUP BY key
  UNION ALL
  (SELECT key, sum(delta) FROM ref GROUP BY key
   EXCEPT ALL
   SELECT t.key, t.value FROM slotted_counter.key_values t
   JOIN slotted_counter.counters c ON c.id = t.counter WHERE c.name = 'c')) d};

# The load's sessions carry their own application_name (the test framework sets PGAPPNAME for
# every other connection, the samplers' included).
sub start_load
{
	my ($out, $err) = @_;
	return IPC::Run::start(
		[
			'pgbench', '--no-vacuum', "--client=$clients", '--jobs=2', '--transactions=6000',
			"--file=$script", '-h', $node->host, '-p', $node->port,
			'dbname=postgres application_name=txn_load'
		],
		'>', $out, '2>', $err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
}

# Samples pg_stat_activity for the load's sessions, 50 ms apart, until $n samples saw the load
# running (a session in a statement; when the machine is busy its client may be the one waiting)
# or 100 times that many samples were taken. Returns the number of samples that saw a load session
# waiting on a row or transaction lock, the number of samples that saw the load running, and a
# tally of the wait events seen.
# Incrementers waiting for one another would wait on a row or transaction lock (Lock/tuple,
# Lock/transactionid). A relation extension lock (Lock/extend) is taken by any insert-heavy
# load, this test's own reference-table inserts included, and is not such a wait.
sub sample_waits
{
	my ($n) = @_;
	my $sampler = $node->background_psql('postgres');
	my ($lock_samples, $busy_samples) = (0, 0);
	my %events;
	for (my $taken = 0; $busy_samples < $n && $taken < 100 * $n; $taken++)
	{
		my $row = $sampler->query_safe(
			q{
SELECT count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event <> 'extend') || '|' || count(*) || '|'
       || coalesce(string_agg(DISTINCT wait_event_type || '/' || wait_event, ' '), '')
FROM pg_stat_activity WHERE application_name = 'txn_load' AND state <> 'idle'});
		my ($locks, $busy, $seen) = split /\|/, $row, 3;
		$lock_samples++ if $locks > 0;
		$busy_samples++ if $busy > 0;
		$events{$_}++ for split / /, $seen // '';
		usleep(50_000);
	}
	$sampler->quit;
	return ($lock_samples, $busy_samples, \%events);
}

sub check_exact
{
	my ($when) = @_;
	is($node->safe_psql('postgres', $mismatch_query),
		$exact, "$when: every key's value equals the sum of its committed rows");
	is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', "$when: sc_rollup succeeds");
	is($node->safe_psql('postgres', $mismatch_query),
		$exact, "$when: still exact after a rollup");
	is($node->safe_psql('postgres', $totals_mismatch_query),
		'0', "$when: after the rollup the key_values table alone holds the exact values");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM slotted_counter.deltas d
JOIN slotted_counter.counters c ON c.id = d.counter WHERE c.name = 'c'}),
		'0',
		"$when: after the rollup no delta is left unfolded");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) = count(DISTINCT t.key) FROM slotted_counter.key_values t
JOIN slotted_counter.counters c ON c.id = t.counter WHERE c.name = 'c'}),
		't',
		"$when: the key_values table holds one row per key");
}

# A commit that returned survives an immediate stop; an open transaction does not.
$node->safe_psql('postgres', q{SELECT sc_incr('c', 0, 41); SELECT sc_incr('c', 0, 1)});
my $open = $node->background_psql('postgres');
$open->query_safe('BEGIN');
$open->query_safe(q{SELECT sc_incr('c', 0, 1000)});
$open->query_safe(q{SELECT sc_incr('c', 51, 1000)});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{SELECT sc_sum('c', 0), sc_sum('c', 51)}),
	'42|0',
	'after an immediate stop: committed increments are there, those of an open transaction are not');
eval { $open->quit; };
$node->safe_psql('postgres', q{INSERT INTO ref VALUES (0, 42)});

# Phase 1: an immediate stop in the middle of the load.
my ($out, $err) = ('', '');
my $pgbench = start_load(\$out, \$err);
ok($node->poll_query_until('postgres', 'SELECT count(*) >= 2000 FROM ref'),
	'phase 1: the load is running');
my ($lock_samples, $busy_samples, $events) = sample_waits(30);
note 'wait events of the load: ' . join(', ', map { "$_ x$events->{$_}" } sort keys %$events);
is($lock_samples, 0, 'phase 1: no load session ever waited on a row or transaction lock');
is($busy_samples, 30, 'phase 1: 30 samples saw the load running');
is( $node->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'txn_load'}), 't',
	'phase 1: pgbench is still running at the stop');
$node->stop('immediate');
eval { $pgbench->finish; };
isnt(($pgbench->full_results)[0], 0, 'phase 1: pgbench was cut off by the stop');
note "pgbench stdout:\n$out\npgbench stderr:\n$err";
$node->start;

my ($committed, $attempted) = split /\|/,
  $node->safe_psql('postgres',
	q{SELECT count(*) / 2, (SELECT last_value FROM attempts) FROM ref WHERE key <> 0 OR delta <> 42});
note "phase 1: $committed transactions committed of $attempted attempted";
ok( $committed >= 1000 && $committed < 0.85 * $attempted,
	'phase 1: many transactions committed and many rolled back');
check_exact('phase 1, after the immediate stop');

# Phase 2: the flusher killed with SIGKILL while the load runs and it folds deltas.
my $flusher_query = q{
SELECT pid FROM pg_stat_activity
WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'};
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($flusher_query) f"),
	'phase 2: the flusher runs');
my $ref_before = $node->safe_psql('postgres', 'SELECT count(*) FROM ref');
my $flushes_query =
  q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()};
my $flushes_before = $node->safe_psql('postgres', $flushes_query);
($out, $err) = ('', '');
$pgbench = start_load(\$out, \$err);
ok( $node->poll_query_until(
		'postgres', 'SELECT count(*) >= ' . ($ref_before + 2000) . ' FROM ref'),
	'phase 2: the load is running');
($lock_samples, $busy_samples, $events) = sample_waits(20);
is($lock_samples, 0, 'phase 2: no load session ever waited on a row or transaction lock');
my $flusher_pid = $node->safe_psql('postgres', $flusher_query);
ok($flusher_pid =~ /^\d+$/, "phase 2: the flusher's pid is $flusher_pid");
ok($node->poll_query_until('postgres', "SELECT ($flushes_query) > $flushes_before"),
	'phase 2: the flusher has been flushing during the load');
my $log_offset = -s $node->logfile;
ok(kill('KILL', $flusher_pid), 'phase 2: SIGKILL sent to the flusher');
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $log_offset);
eval { $pgbench->finish; };
isnt(($pgbench->full_results)[0], 0, 'phase 2: pgbench was cut off by the crash restart');
note "pgbench stdout:\n$out\npgbench stderr:\n$err";
ok($node->poll_query_until('postgres', 'SELECT true'),
	'phase 2: the server accepts connections after the crash restart');
is($node->safe_psql('postgres', "SELECT count(*) > $ref_before FROM ref"), 't',
	'phase 2: the load committed transactions before the crash');
check_exact('phase 2, after the flusher was killed');

# Counting goes on from the exact values, and a clean restart keeps them.
my $k7 = $node->safe_psql('postgres', q{SELECT sc_sum('c', 7)});
is($node->safe_psql('postgres', q{BEGIN; SELECT sc_incr('c', 7, 3); COMMIT;}),
	$k7 + 3, 'increments go on from the exact value after the crashes');
$node->safe_psql('postgres', q{INSERT INTO ref VALUES (7, 3)});
$node->restart;
is($node->safe_psql('postgres', $mismatch_query),
	$exact, 'after a clean restart every value is still exact');

$node->stop;
done_testing();
