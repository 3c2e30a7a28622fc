# A user session holds an ACCESS EXCLUSIVE lock on slotted_counter.key_values, so the flusher cannot
# write. Increments of a resident key must go on meanwhile, each returning
# the exact new value, and real-time reads of it must not wait either. Once the lock is gone, the
# flusher and a rollup write the exact value: nothing lost, nothing counted twice.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;
use Time::HiRes qw(usleep);

my $node = preloaded_node('table_lock', qq{
slotted_counter.flush_interval = 100
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
});
is($node->safe_psql('postgres', q{SELECT sc_incr('c', 1, 1)}),
	'1', 'the key is counted once, so it is resident');
$node->safe_psql('postgres', 'SELECT sc_rollup()');

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE slotted_counter.key_values IN ACCESS EXCLUSIVE MODE');

# An increment that waits for any lock fails at once (lock_timeout), instead of waiting for the
# user's lock: so a batch that returns its values did not wait.
my $incr = $node->background_psql('postgres', on_error_stop => 0);
$incr->query_safe(q{SET lock_timeout = '1ms'});

# 200 batches of 10 increments, one query every 20 ms, while the lock is held (and the flusher
# tries to write every 100 ms); each batch must return the next 10 values in order.
my $expected = 1;
my $wrong = 0;
my $batches = 0;
my %flusher_waits;
while ($batches < 200)
{
	my ($got, $failed) = $incr->query(
		q{SELECT string_agg(sc_incr('c', 1, 1)::text, ',') FROM generate_series(1, 10)});
	$batches++;
	my $want = join(',', $expected + 1 .. $expected + 10);
	$expected += 10;
	if ($failed || $got ne $want)
	{
		$wrong++;
		diag "batch $batches returned '$got', expected '$want', stderr: $incr->{stderr}"
		  if $wrong <= 3;
		# BackgroundPsql keeps stderr across queries; start the next one clean.
		$incr->{stderr} = '';
		last if $wrong >= 10;
	}
	if ($batches % 10 == 0)
	{
		$flusher_waits{
			$node->safe_psql(
				'postgres', q{
SELECT coalesce(wait_event_type || '/' || wait_event, 'running') FROM pg_stat_activity
WHERE backend_type = 'slotted_counter flusher' AND datname = 'postgres'})
		}++;
	}
	usleep(20_000);
}
my $during_lock = $expected - 1;
note 'flusher wait events sampled during the lock: '
  . join(', ', map { "$_ x$flusher_waits{$_}" } sort keys %flusher_waits);
is($wrong, 0,
	"$during_lock increments in $batches batches during the table lock returned the exact values"
);
# The flusher, meanwhile, could not write: its flushes wait for the lock and fail (lock_timeout).
ok( $node->poll_query_until(
		'postgres', q{SELECT flush_failures > 0 FROM slotted_counter.stats
		              WHERE datname = current_database()}),
	'the flusher was held up by the lock');

# A batch, a read and a negative delta, still under the lock.
my ($batch) = $incr->query(
	q{SELECT max(sc_incr('c', 1, 1)) FROM generate_series(1, 1000)});
is($batch, $expected + 1000, 'a batch of increments under the lock is exact');
$expected += 1000;
my ($neg) = $incr->query(q{SELECT sc_incr('c', 1, -10)});
is($neg, $expected - 10, 'a negative delta under the lock is exact');
$expected -= 10;
my ($sum) = $incr->query(q{SELECT sc_sum('c', 1)});
is($sum, $expected, 'sc_sum of the resident key does not wait for the lock');

is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM pg_locks
WHERE relation = 'slotted_counter.key_values'::regclass AND mode = 'AccessExclusiveLock' AND granted}),
	'1',
	'the key_values table is still locked after all those increments');
$locker->query_safe('COMMIT');
$locker->quit;

my $flushed_query = q{
SELECT t.value FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE c.name = 'c' AND t.key = 1};
ok($node->poll_query_until('postgres', $flushed_query, $expected),
	'once the lock is released the flusher writes the exact value by itself');

$incr->query_safe('RESET statement_timeout');
$incr->query_safe(q{SELECT sc_incr('c', 1, 5)});
$expected += 5;
$incr->query_safe('SELECT sc_rollup()');
is($node->safe_psql('postgres', $flushed_query),
	$expected, 'a rollup after the lock writes the exact value');
is($node->safe_psql('postgres', q{SELECT sc_sum('c', 1)}),
	$expected, 'the real-time value is exact after the rollup');
is($node->safe_psql('postgres', q{SELECT sc_incr('c', 1, 1)}),
	$expected + 1, 'increments go on after the rollup');
$incr->quit;

$node->restart;
is($node->safe_psql('postgres', q{SELECT sc_sum('c', 1)}),
	$expected + 1, 'the value is exact after a restart');

# A backend terminated while it loads a key (its load waits for the user's lock) must not leave
# that key half-loaded: once the lock is gone, the key counts again for everybody.
my $user_lock = $node->background_psql('postgres');
$user_lock->query_safe('BEGIN');
$user_lock->query_safe('LOCK TABLE slotted_counter.key_values');
my $loader = $node->background_psql('postgres');
$loader->query_until(qr/loading/, q{\echo loading
SELECT sc_incr('c', 4242, 1);
});
ok( $node->poll_query_until(
		'postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE query LIKE '%sc_incr(''c'', 4242%' AND wait_event_type = 'Lock'}),
	'the load of a new key waits for the lock');
$node->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%sc_incr(''c'', 4242%' AND wait_event_type = 'Lock'});
eval { $loader->quit; };
$user_lock->query_safe('COMMIT');
$user_lock->quit;
is($node->safe_psql('postgres', q{SET statement_timeout = '10s'; SELECT sc_incr('c', 4242, 1)}),
	'1', 'after the loader was terminated, the key counts again (its increment never happened)');
is($node->safe_psql('postgres', q{SELECT sc_sum('c', 4242)}), '1', 'and reads exactly');

$node->stop;
done_testing();
