# A buffered batch is all or nothing under a cancel, a statement timeout and termination: batches
# of 3,000 keys (more than a quarter of the 2,000-entry buffer, so that part of each is written
# through by the flusher) are interrupted over and over -- double cancels a few milliseconds
# apart, a statement_timeout shorter than a batch, pg_terminate_backend. Each batch counts its
# own keys, so every batch is checked on its own: one acknowledged is counted exactly once, one
# that failed is counted wholly or not at all (a cancel that arrives after the function returned
# still fails the statement, as it does after nextval: the test reports how often), and no key
# holds a part of a batch.

use strict;
use warnings;

use POSIX ();
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $size = 3000;
my $node = preloaded_node('batch_interrupted',
	"slotted_counter.max_entries = 2000\nslotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{CREATE EXTENSION slotted_counter; SELECT sc_create('c', 'buffered')});

my $batch = 0;
my (%acknowledged, %failed);

sub batch_sql
{
	my ($n) = @_;
	my $lo = ($n - 1) * $size + 1;
	my $hi = $n * $size;
	return "SELECT cardinality(sc_incr_batch('c', ARRAY(SELECT generate_series($lo, $hi))::bigint[], "
	  . "array_fill(1::bigint, ARRAY[$size])))";
}

# Batches a session runs at most while it waits for its interruptions (a count, not a time).
my $max_batches = 3000;

# Runs `interrupt` (SQL; $pid stands for the pid of the session that runs batches) every few
# tens of milliseconds, in a child process, until stop_interrupter. Returns the child's pid.
sub interrupter
{
	my ($interrupt) = @_;
	my $child = fork();
	die "fork: $!" unless defined $child;
	return $child if $child;
	# The child ends by stop_interrupter's SIGTERM, at once: PostgreSQL 16's and later test modules
	# catch it with a die, which would run their END block in the child, stopping every node.
	$SIG{TERM} = $SIG{INT} = 'DEFAULT';
	(my $sql = $interrupt) =~
	  s/\$pid/(SELECT pid FROM pg_stat_activity WHERE application_name = 'batcher')/g;
	for (;;)
	{
		system($node->installed_command('psql'), '-X', '-q', '-d', $node->connstr('postgres'),
			'-c', $sql, '-o', '/dev/null');
		usleep(int(rand(30_000)));
	}
}

sub stop_interrupter
{
	my ($child) = @_;
	kill 'TERM', $child;
	waitpid($child, 0);
}

# Records the outcome of batch n: acknowledged, or failed with an error matching `expected`
# (anything else ends the test).
sub record
{
	my ($n, $ok, $stderr, $expected, $kind) = @_;
	if ($ok)
	{
		$acknowledged{$n} = 1;
		return 0;
	}
	$failed{$n} = $kind;
	BAIL_OUT("batch $n failed unexpectedly: $stderr") unless $stderr =~ $expected;
	return 1;
}

# Batches in one session, interrupted by `interrupt`, until `want` of them failed (or
# $max_batches ran); returns how many failed.
sub interrupted_session
{
	my ($want, $setup, $interrupt, $expected, $kind) = @_;
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	$session->set_query_timer_restart();    # the hang guard is per batch, not for them all
	$session->query_safe("SET application_name = 'batcher'; $setup");
	my $child = interrupter($interrupt);
	my $failures = 0;
	for (my $i = 0; $failures < $want && $i < $max_batches; $i++)
	{
		my $n = ++$batch;
		my ($out, $error) = $session->query(batch_sql($n));
		$failures += record($n, !$error && $out eq $size, $session->{stderr}, $expected, $kind);
		$session->{stderr} = '';
	}
	stop_interrupter($child);
	$session->quit;
	return $failures;
}

# The same with one connection per batch, for interruptions that end the connection.
sub interrupted_connections
{
	my ($want, $interrupt, $expected) = @_;
	my $child = interrupter($interrupt);
	my $failures = 0;
	for (my $i = 0; $failures < $want && $i < $max_batches; $i++)
	{
		my $n = ++$batch;
		my ($out, $err);
		my $rc = $node->psql('postgres', "SET application_name = 'batcher';\n" . batch_sql($n),
			stdout => \$out, stderr => \$err);
		$failures += record($n, $rc == 0 && $out eq $size, $err, $expected, 'terminated');
	}
	stop_interrupter($child);
	return $failures;
}

my $cancelled = interrupted_session(20, '',
	q{SELECT pg_cancel_backend($pid), pg_sleep(0.002 + random() * 0.004), pg_cancel_backend($pid)},
	qr/canceling statement due to user request/, 'cancelled');
cmp_ok($cancelled, '>=', 5, "double cancels interrupted batches ($cancelled)");

# A timeout that fires after a batch returned, as its statement ends, is taken by the next
# statement and reported there as a cancel "due to user request" (PostgreSQL's own behaviour for
# any statement whose timeout fires after its last check for interrupts): the next batch then
# fails before it changed anything, which the checks below hold it to like any other.
my $timed_out = interrupted_session(20, q{SET statement_timeout = '3ms'}, q{SELECT 1},
	qr/canceling statement due to (?:statement timeout|user request)/, 'timed out');
cmp_ok($timed_out, '>=', 5, "a statement_timeout shorter than a batch ended batches ($timed_out)");

my $terminated = interrupted_connections(20, q{SELECT pg_terminate_backend($pid)},
	qr/terminating connection|server closed the connection|connection to server was lost/);
cmp_ok($terminated, '>=', 2, "terminations ended batches ($terminated)");

is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'everything is flushed');
my %sum = map { split /\|/ } split /\n/, $node->safe_psql('postgres', qq{
SELECT (key - 1) / $size + 1, sum(value) FROM slotted_counter.key_values GROUP BY 1});
# A batch withdrawn while the flusher wrote its keys through takes back what it had added to
# the buffer; a flush that wrote those adds in between leaves rows of 0 (counted, then taken back).
my $parts = $node->safe_psql('postgres',
	q{SELECT count(*) FROM slotted_counter.key_values WHERE value NOT IN (0, 1)});
is($parts, '0', 'no key was counted twice');

my @wrong_ack = grep { ($sum{$_} // 0) != $size } keys %acknowledged;
is(scalar(@wrong_ack), 0,
	'every acknowledged batch is counted exactly once (' . scalar(keys %acknowledged) . ' batches)')
  or diag("acknowledged batches not counted whole: @wrong_ack");
my @half = grep { my $s = $sum{$_} // 0; $s != 0 && $s != $size } keys %failed;
is(scalar(@half), 0, 'every failed batch is counted wholly or not at all')
  or diag('failed batches counted in part: ' . join(' ', map { "$_=$sum{$_}" } @half));
for my $kind ('cancelled', 'timed out', 'terminated')
{
	my @all = grep { $failed{$_} eq $kind } keys %failed;
	my $whole = grep { defined $sum{$_} } @all;
	diag("$kind batches counted wholly: $whole of " . scalar(@all));
}
my @stray = grep { !$acknowledged{$_} && !$failed{$_} } keys %sum;
is(scalar(@stray), 0, 'no other keys were counted');

# A statement_timeout ends a batch whose keys the flusher cannot write yet (a session holds the
# table locked; the flusher's own lock timeout puts the request back each second) with the
# timeout's error, and nothing of it is counted, not even the keys that found room.
$node->safe_psql('postgres', q{SELECT sc_create('w', 'buffered')});
my $locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN; LOCK TABLE slotted_counter.key_values IN EXCLUSIVE MODE});
my ($out, $err);
$node->psql('postgres', q{SET statement_timeout = '2s';
SELECT cardinality(sc_incr_batch('w', ARRAY(SELECT generate_series(1, 30000))::bigint[],
  array_fill(1::bigint, ARRAY[30000])))}, stdout => \$out, stderr => \$err);
like($err, qr/canceling statement due to statement timeout/,
	'a batch waiting for its write-through ends with its statement_timeout');
$locker->query_safe('COMMIT');
$locker->quit;
is($node->safe_psql('postgres', q{SELECT sc_rollup() >= 0,
  sc_sum_keys('w', ARRAY(SELECT generate_series(1, 30000))::bigint[])}), 't|0',
	'and counted nothing');

$node->stop;
done_testing();
