# ALTER EXTENSION slotted_counter UPDATE from 0.3 to the current version (through 0.4 and 0.5) while pgbench counts into a buffered and
# a transactional counter through every query protocol (simple, extended, prepared): the update
# replaces the type and every function under the running clients, yet no client fails, every
# increment that pgbench saw succeed is counted exactly once, and the view and the column that
# name the counters work afterwards and after a restart.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('update_under_load', "slotted_counter.flush_interval = 100\n");

$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter VERSION '0.3';
SELECT sc_create('buf', 'buffered'), sc_create('txn');
CREATE VIEW both_counts AS SELECT sc_sum('buf', 1) AS buf, sc_sum('txn', 1) AS txn;
CREATE TABLE refs (id int PRIMARY KEY, c slotted_counter DEFAULT 'buf');
INSERT INTO refs VALUES (1, 'buf'), (2, 'txn');
INSERT INTO refs (id) VALUES (3);
});
is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'slotted_counter'}),
	'0.3', 'the extension starts at 0.3');
is($node->safe_psql('postgres', 'SELECT * FROM both_counts'), '0|0', 'the view works on 0.3');

my $script = $node->basedir . '/incr.sql';
append_to_file($script, "SELECT sc_incr('buf', 1, 1);\nSELECT sc_incr('txn', 1, 1);\n");

# One pgbench per protocol, all at once.
my @modes = qw(simple extended prepared);
my %run;
for my $mode (@modes)
{
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = "pgbench_$mode";
	$run{$mode} = {
		out => \$out,
		err => \$err,
		handle => IPC::Run::start(
			[
				'pgbench', '-n', '-c', '4', '-j', '2', '-T', '6', '-M', $mode, '-f', $script,
				'-h', $node->host, '-p', $node->port, 'postgres'
			],
			'>', \$out, '2>', \$err)
	};
}

# The update, while they count: once all 12 clients are connected and counting, 2 s in.
my $started = time;
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 12 AND sc_sum('buf', 1) > 0 AND sc_sum('txn', 1) > 0
FROM pg_stat_activity WHERE application_name LIKE 'pgbench\_%'}),
	'the 12 pgbench clients are counting');
sleep 1 while time - $started < 2;
my ($rc, $out, $err) = $node->psql('postgres', 'ALTER EXTENSION slotted_counter UPDATE');
is($rc, 0, 'ALTER EXTENSION slotted_counter UPDATE succeeds under load') or diag($err);
my ($buf_at_update, $txn_at_update) =
  split /\|/, $node->safe_psql('postgres', q{SELECT sc_sum('buf', 1), sc_sum('txn', 1)});

my $processed = 0;
# A client that fails aborts its script, and pgbench does not count that script: if it failed on
# the second statement, the first one's increment of 'buf' was acknowledged all the same.
my $buf_acknowledged_uncounted = 0;
for my $mode (@modes)
{
	my $r = $run{$mode};
	$r->{handle}->finish;
	my $status = $r->{handle}->result(0);
	my ($stdout, $stderr) = (${ $r->{out} }, ${ $r->{err} });
	note("pgbench -M $mode, exit status $status:\n$stdout\n$stderr");
	is($status, 0, "pgbench -M $mode exits with 0") or diag($stderr);
	unlike($stderr, qr/aborted|error/i, "no pgbench -M $mode client failed or aborted")
	  or diag($stderr);
	$buf_acknowledged_uncounted += () = $stderr =~ /aborted in command 1 /g;
	like($stdout, qr/number of failed transactions: 0 /m,
		"pgbench -M $mode reports no failed transaction");
	if ($stdout =~ /number of transactions actually processed: (\d+)/)
	{
		cmp_ok($1, '>', 0, "pgbench -M $mode processed transactions");
		$processed += $1;
	}
	else
	{
		fail("pgbench -M $mode reports the number of transactions it processed");
	}
}

is($node->safe_psql('postgres', q{SELECT e.extversion = a.default_version FROM pg_extension e
JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'slotted_counter'}),
	't', 'the extension is at its latest version');
cmp_ok($processed, '>', $buf_at_update, 'the clients went on counting after the update')
  and cmp_ok($processed, '>', $txn_at_update, 'into both counters');
is($node->safe_psql('postgres', q{SELECT sc_sum('buf', 1), sc_sum('txn', 1)}),
	"$processed|$processed",
	"each counter holds every increment pgbench saw succeed, once ($processed over the three runs)");
# What the counters must hold: every increment acknowledged to a client, once.
my ($buf, $txn) = ($processed + $buf_acknowledged_uncounted, $processed);
is($node->safe_psql('postgres', q{SELECT sc_sum('buf', 1), sc_sum('txn', 1)}), "$buf|$txn",
	'every acknowledged increment is counted once, also those of scripts that pgbench did not count'
	  . " ($buf_acknowledged_uncounted)");
is($node->safe_psql('postgres', 'SELECT * FROM both_counts'), "$buf|$txn",
	'the view made on 0.3 reads them');
is($node->safe_psql('postgres', 'SELECT id, c, sc_sum(c, 1) FROM refs ORDER BY id'),
	"1|buf|$buf\n2|txn|$txn\n3|buf|$buf",
	'the column made on 0.3 names the same counters');
is($node->safe_psql('postgres', 'INSERT INTO refs (id) VALUES (4) RETURNING c'),
	'buf', 'and keeps its default');
is( $node->safe_psql('postgres', q{
SELECT format_type(atttypid, atttypmod), atttypid = 'slotted_counter'::regtype
FROM pg_attribute WHERE attrelid = 'refs'::regclass AND attname = 'c'}),
	'slotted_counter|t', 'the column is of the new type');

$node->restart;
is($node->safe_psql('postgres', q{SELECT sc_sum('buf', 1), sc_sum('txn', 1)}),
	"$buf|$txn", 'a restart keeps both values');
is($node->safe_psql('postgres', 'SELECT * FROM both_counts'), "$buf|$txn",
	'and the view reads them');
is($node->safe_psql('postgres', q{SELECT sc_incr('buf', 1), sc_incr('txn', 1)}),
	($buf + 1) . '|' . ($txn + 1), 'counting goes on');

$node->stop;
done_testing();
