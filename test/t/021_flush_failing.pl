# A flush that fails is visible at once and is not shouted at every retry: while a session holds
# a lock on slotted_counter.key_values, slotted_counter.stats shows the flusher failing, the failures
# in a row, the last error and its time; sc_rollup() reports the error; the log has one WARNING
# for the whole run of failures, and a line when flushes succeed again; nothing is lost.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('flush_failing', "slotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered');
SELECT sc_incr('b', 1, 1);
SELECT sc_rollup();
});
is( $node->safe_psql(
		'postgres', q{SELECT worker_state IN ('idle', 'flushing'), flush_failures, last_error IS NULL
		              FROM slotted_counter.stats WHERE datname = current_database()}),
	't|0|t', 'a healthy flusher: idle or in a flush (one every 100 ms), no failure, no error');

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN; LOCK TABLE slotted_counter.key_values');
$node->safe_psql('postgres', q{SELECT sc_incr('b', 1, 41)});
ok( $node->poll_query_until(
		'postgres', q{SELECT worker_state = 'failing' AND flush_failures >= 3
		              AND last_error LIKE '%lock timeout%' AND last_error_at > now() - interval '1 minute'
		              FROM slotted_counter.stats WHERE datname = current_database()}),
	'a failing flusher: failing, the failures in a row, the last error and its time');
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT sc_rollup()');
like($err, qr/could not flush counters: canceling statement due to lock timeout/,
	'sc_rollup() reports the error');
is($node->safe_psql('postgres', q{SELECT sc_sum('b', 1)}), '42', 'the value is exact meanwhile');
my $warnings = () = slurp_file($node->logfile) =~ /WARNING:  could not flush the counters/g;
is($warnings, 1, 'one WARNING for the whole run of failures');

$locker->query_safe('ROLLBACK');
$locker->quit;
ok( $node->poll_query_until(
		'postgres', q{SELECT worker_state <> 'failing' AND flush_failures = 0
		              FROM slotted_counter.stats WHERE datname = current_database()}),
	'flushes succeed again: no longer failing');
is( $node->safe_psql(
		'postgres', q{SELECT value FROM slotted_counter.key_values}),
	'42', 'and the value reached the table: nothing was lost');
like(slurp_file($node->logfile), qr/are flushed again, after \d+ failed attempts/,
	'the log says so');

$node->stop;
done_testing();
