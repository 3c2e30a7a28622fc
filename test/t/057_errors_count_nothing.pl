# An error means nothing counted; a duplicate is 42710; a dropped extension is no flusher's error.
#
# 1. A single key's wait for its write-through, cancelled: the buffer is full of values the
#    flusher cannot write (a session holds the values table locked). It used to fail with 57014
#    while its request stayed, and the flusher counted it once the table was free; now the
#    cancel withdraws the request, and nothing is counted.
# 2. Buffered calls cancelled twice at varied moments (pg_cancel_backend from another session, a
#    few milliseconds apart): batches that need write-throughs (3,000 keys, more than a batch may
#    pin), batches that do not (200 keys), and single keys (written through when a batch filled
#    the buffer). Each call counts its own keys, and the counters are compared with the calls'
#    outcomes: a call that succeeded counted once, and one that failed, before or in the call,
#    counted nothing. Each call is the last statement of a DO block, whose error context tells
#    where it failed: a cancel that comes after the call returned fails the statement at its next
#    check for interrupts (here the block's end), and the call counted what it returned, as
#    nextval's value stays taken (shared/late_cancel.hpp); those are reported, not checked.
# 3. sc_create racing sc_drop of the same name answers 42710 (or succeeds), never 42P07: the
#    guard of the counter just dropped could still be in the creating session's caches.
# 4. An extension dropped while the flusher waits to flush: the flusher leaves without a
#    WARNING.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('errors_count_nothing',
	"slotted_counter.max_entries = 2000\nslotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{CREATE EXTENSION slotted_counter;
SELECT sc_create('big', 'buffered'), sc_create('small', 'buffered'), sc_create('one', 'buffered'),
       sc_create('locked', 'buffered');
});

# 1. The buffer full of values that cannot be flushed (the table is locked), a single key's
# write-through waits until it is cancelled.
my $locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN; LOCK TABLE slotted_counter.key_values IN EXCLUSIVE MODE});
my $filler = $node->background_psql('postgres', on_error_stop => 0);
$filler->query_until(qr/filling/, q{\echo filling
SELECT count(sc_incr('locked', g)) FROM generate_series(1, 5000) g;
});
my $waiter = $node->background_psql('postgres', on_error_stop => 0);
$waiter->query_until(qr/waiting/, q{\echo waiting
SELECT sc_incr('locked', 0);
});
my $waiting = q{SELECT count(*) = 2 FROM pg_stat_activity
  WHERE query LIKE 'SELECT %sc_incr(''locked''%' AND wait_event_type = 'Extension'};
ok($node->poll_query_until('postgres', $waiting), 'a single key waits for its write-through');
$node->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity
  WHERE query LIKE 'SELECT %sc_incr(''locked''%'});
my ($out, $error) = $waiter->query('SELECT 1');
like($waiter->{stderr}, qr/canceling statement due to user request/,
	'the cancel ends the wait with 57014');
$waiter->quit;
$filler->quit;
$locker->query_safe('COMMIT');
$locker->quit;
is($node->safe_psql('postgres', q{SELECT sc_rollup() >= 0, sc_sum('locked', 0)}),
	't|0', 'and nothing of it is counted, once the table is free');

# 2. The victim's session, and an interrupter that cancels it twice, again and again, until it
# is terminated.
my $victim = $node->background_psql('postgres', on_error_stop => 0);
my $pid = $victim->query_safe('SELECT pg_backend_pid()');
my $interrupter = IPC::Run::start(
	[
		'psql', '-X', '-q', '-d', $node->connstr('postgres') . ' application_name=interrupter',
		'-c', qq{DO \$\$ BEGIN LOOP
  PERFORM pg_cancel_backend($pid); PERFORM pg_sleep(random() * 0.005);
  PERFORM pg_cancel_backend($pid); PERFORM pg_sleep(0.002 + random() * 0.02);
END LOOP; END \$\$}
	],
	'>', \my $interrupter_out, '2>', \my $interrupter_err);

# Per kind of call, per call: where it failed ('' if it did not): 'before' the call (its
# arguments), in the 'call', or 'after' it returned (the DO block's own end).
my %size = (big => 3000, small => 200, one => 1);
my %calls = (big => [], small => [], one => []);
my %failed = (big => 0, small => 0, one => 0);

# Runs call n of `kind`, the last statement of a DO block, on its own keys.
sub call
{
	my ($kind, $n) = @_;
	my ($lo, $hi) = (($n - 1) * $size{$kind} + 1, $n * $size{$kind});
	my $sql = $kind eq 'one'
	  ? "DO \$\$DECLARE v bigint; BEGIN v := sc_incr('one', $n); END\$\$"
	  : "DO \$\$DECLARE k bigint[] := ARRAY(SELECT generate_series($lo, $hi)); "
	  . "d bigint[] := array_fill(1::bigint, ARRAY[$size{$kind}]); r bigint[]; "
	  . "BEGIN r := sc_incr_batch('$kind', k, d); END\$\$";
	my ($out, $error) = $victim->query($sql);
	my $stderr = $victim->{stderr};
	$victim->{stderr} = '';
	BAIL_OUT("a $kind call failed unexpectedly: $stderr")
	  if $error && $stderr !~ /canceling statement due to user request/;
	my $where =
	   !$error ? ''
	  : $stderr =~ /at assignment$/m ? 'call'
	  : $stderr =~ /PL\/pgSQL function inline_code_block$/m ? 'after'
	  : 'before';
	push @{ $calls{$kind} }, $where;
	$failed{$kind}++ if $where eq 'before' || $where eq 'call';
}

for my $n (1 .. 200)
{
	call($_, $n) for ('big', 'one', 'small');
}
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE application_name = 'interrupter'});
$interrupter->finish;
$victim->quit;

is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'everything is flushed');
note('write-throughs: '
	  . $node->safe_psql('postgres',
		q{SELECT write_throughs FROM slotted_counter.stats WHERE datname = current_database()}));
for my $kind ('big', 'small', 'one')
{
	my %counted = split /[|\n]/, $node->safe_psql('postgres', qq{
SELECT (key - 1) / $size{$kind} + 1, sum(value) FROM slotted_counter.key_values
WHERE counter = '$kind'::slotted_counter::integer GROUP BY 1});
	my @calls = @{ $calls{$kind} };
	my @wrong = grep {
		my $got = $counted{ $_ + 1 } // 0;
		$calls[$_] eq '' ? $got != $size{$kind} : $calls[$_] ne 'after' && $got != 0
	} 0 .. $#calls;
	is(scalar(@wrong), 0,
		"$kind: a call counted once if it succeeded, nothing if it failed ($failed{$kind} of "
		  . scalar(@calls) . ' failed)')
	  or diag('calls (where it failed: what it counted): '
		  . join(' ', map { ($_ + 1) . "=$calls[$_]:" . ($counted{ $_ + 1 } // 0) } @wrong));
	my @after = grep { $calls[$_] eq 'after' } 0 .. $#calls;
	note("$kind: statements cancelled after the call returned: " . scalar(@after)
		  . ', their calls counted: ' . scalar(grep { $counted{ $_ + 1 } } @after));
}

# 3. Two sessions create a counter and count into it, two drop it, over and over.
$node->safe_psql('postgres', q{
CREATE TABLE outcomes (what text, sqlstate text);
CREATE FUNCTION try(what text, sql text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  INSERT INTO outcomes VALUES (what, '00000');
EXCEPTION WHEN others THEN
  INSERT INTO outcomes VALUES (what, SQLSTATE);
END $$;
});
my %scripts = (
	create => q{SELECT try('create', $$SELECT sc_create('ch_2', 'buffered')$$);
SELECT try('count', $$SELECT sc_incr_batch('ch_2', ARRAY(SELECT generate_series(1, 2000))::bigint[],
  array_fill(1::bigint, ARRAY[2000]))$$);},
	drop => q{SELECT try('drop', $$SELECT sc_drop('ch_2')$$);});
my @runs;
for my $what (sort keys %scripts)
{
	my $file = $node->basedir . "/$what.sql";
	append_to_file($file, $scripts{$what});
	push @runs,
	  IPC::Run::start(
		[
			'pgbench', '--no-vacuum', '--client=2', '--transactions=100', "--file=$file",
			'-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', \my $pgbench_out, '2>', \my $pgbench_err);
}
$_->finish for @runs;
my $outcomes = $node->safe_psql('postgres',
	q{SELECT string_agg(what || ' ' || sqlstate || ' ' || n, ', ' ORDER BY what, sqlstate)
	  FROM (SELECT what, sqlstate, count(*) AS n FROM outcomes GROUP BY 1, 2) o});
note("outcomes: $outcomes");
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM outcomes WHERE (what, sqlstate) NOT IN
		  (('create', '00000'), ('create', '42710'), ('drop', '00000'), ('drop', '42704'),
		   ('count', '00000'), ('count', '42704'))}),
	'0',
	'sc_create racing sc_drop succeeds or answers 42710, sc_drop 42704');

# 4. DROP EXTENSION waits for a session's lock on its last table, holding the others; the
# flusher waits for its lock on the counters; the DROP commits while it waits.
my $logstart = -s $node->logfile;
$locker = $node->background_psql('postgres');
$locker->query_safe(q{BEGIN; LOCK TABLE slotted_counter.attachments IN ACCESS SHARE MODE});
my $dropper = $node->background_psql('postgres', on_error_stop => 0);
$dropper->query_until(qr/dropping/, q{\echo dropping
DROP EXTENSION slotted_counter CASCADE;
});
$locker->query_safe(q{
DO $$ BEGIN
  WHILE NOT EXISTS (SELECT FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher'
                    AND wait_event_type = 'Lock') LOOP
    PERFORM pg_stat_clear_snapshot(); PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
COMMIT});
$locker->quit;
$dropper->quit;
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
		  WHERE backend_type = 'slotted_counter flusher'}),
	'the flusher of a database whose extension was dropped leaves');
unlike(slurp_file($node->logfile, $logstart), qr/WARNING:[^\n]*does not exist/,
	'and says nothing of the tables that went with it');

$node->stop;
done_testing();
