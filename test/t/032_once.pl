# sc_incr_once under concurrency, an immediate stop and a restart, for both durabilities.
#   1. 32 clients send the same 300 request ids (ids n, key n % 10, delta 1): each id is applied
#      once (every key sums to its ids), and every client got the same value for each id.
#   2. A client sends ids 1..20000 one after the other while the server is stopped with
#      `pg_ctl -m immediate` (a crash) in the middle; after the restart every id is sent again.
#      Every id counts exactly once (the sum is N): an id lost in the crash is lost with its
#      increment and the retry applies it; one that was durable is not applied again, and its
#      retry returns what its first call returned.
#   3. 3000 ids written by one flush; after a clean restart every id repeats the first value
#      and counts nothing.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('once',
	"max_connections = 50\nslotted_counter.flush_interval = 100\nrestart_after_crash = on\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('race_b', 'buffered'), sc_create('race_t', 'transactional'),
       sc_create('crash_b', 'buffered'), sc_create('crash_t', 'transactional');
});

# 1. The same ids from 32 clients at once.
my $ids = 300;
for my $counter (qw(race_b race_t))
{
	my $script = $node->basedir . "/$counter.sql";
	append_to_file($script,
		join('', map { "SELECT $_, sc_incr_once('$counter', $_ % 10, 1, 'id-$_');\n" } 1 .. $ids));
	my @runs;
	for my $c (1 .. 32)
	{
		my ($out, $err) = ('', '');
		push @runs, { out => \$out, err => \$err, handle => IPC::Run::start(
			[ 'psql', '-X', '-At', '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
			'>', \$out, '2>', \$err) };
	}
	my (%value_of, $disagree, $errors);
	($disagree, $errors) = (0, 0);
	for my $run (@runs)
	{
		$run->{handle}->finish;
		$errors++ if ${ $run->{err} } =~ /ERROR/;
		diag(${ $run->{err} }) if ${ $run->{err} } =~ /ERROR/;
		for my $line (split /\n/, ${ $run->{out} })
		{
			my ($id, $value) = split /\|/, $line;
			$value_of{$id} //= $value;
			$disagree++ if $value_of{$id} ne $value;
		}
	}
	is($errors, 0, "$counter: no client saw an error");
	is(scalar(keys %value_of), $ids, "$counter: every id answered");
	is($disagree, 0, "$counter: every client got the first call's value for each id");
	is($node->safe_psql('postgres',
			"SELECT string_agg(sc_sum('$counter', k)::text, ',' ORDER BY k) FROM generate_series(0, 9) k"),
		join(',', map { $ids / 10 } 0 .. 9), "$counter: each id counted once");
}

# Under a steady load of new ids (8 pgbench clients, 12,000 calls), the flushes that write them go on:
# no process fails, and every call counted once.
my $load = $node->basedir . '/load.sql';
append_to_file($load, "\\set r random(1, 9000000000000000000)\nSELECT sc_incr_once('race_b', 0, 1, 'load-' || :r);\n");
my ($lout, $lerr) = ('', '');
IPC::Run::run(
	[ 'pgbench', '-n', '-c', '8', '-j', '2', '-t', '1500', '-f', $load, '-h', $node->host, '-p', $node->port,
	  'postgres' ],
	'>', \$lout, '2>', \$lerr);
my ($calls) = $lout =~ /number of transactions actually processed: (\d+)/;
like($lout, qr{actually processed: 12000/12000}, 'every call of the load ran');
like($lout, qr/number of failed transactions: 0 /, 'no call of the load failed');
unlike(slurp_file($node->logfile), qr/terminated by signal|was terminated by exception/,
	'no process of the server failed under the load');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{SELECT sc_sum('race_b', 0) - 30 =
  (SELECT count(*) FROM slotted_counter.requests WHERE request_id LIKE 'load-%')}),
	't', "each of the $calls calls of the load counted once, its id written with it");

# 2. Ids 1..N, an immediate stop in the middle, then every id again.
my $n = 20000;
my (%first_b, %first_t);
my $script = $node->basedir . '/crash.sql';
append_to_file($script,
	join('', map {
		"SELECT $_, sc_incr_once('crash_b', 1, 1, 'pay-$_'), sc_incr_once('crash_t', 1, 1, 'pay-$_');\n"
	} 1 .. $n));
my ($out, $err) = ('', '');
my $client = IPC::Run::start(
	[ 'psql', '-X', '-At', '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);
# Stop the server once a good part of the ids went through.
$node->poll_query_until('postgres',
	q{SELECT count(*) >= 2000 FROM slotted_counter.requests WHERE counter = 'crash_t'::slotted_counter::integer})
  or die 'the client did not get going';
$node->stop('immediate');
$client->finish;
for my $line (split /\n/, $out)
{
	my ($id, $b, $t) = split /\|/, $line;
	next unless defined $t;
	($first_b{$id}, $first_t{$id}) = ($b, $t);
}
my $returned = scalar keys %first_t;
cmp_ok($returned, '>', 0, "$returned calls returned before the immediate stop");
cmp_ok($returned, '<', $n, '... and the stop cut the client off');
$node->start;

# Every id again, as a sender retries what it has no answer for (and what it had one for).
($out, $err) = ('', '');
IPC::Run::run(
	[ 'psql', '-X', '-At', '-f', $script, '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);
is($err =~ /ERROR/ ? $err : '', '', 'every retry ran');
my %again_t;
my $changed_t = 0;
for my $line (split /\n/, $out)
{
	my ($id, $b, $t) = split /\|/, $line;
	$again_t{$id} = $t;
	$changed_t++ if exists $first_t{$id} && $first_t{$id} ne $t;
}
is($changed_t, 0, 'transactional: every call that returned before the crash returns the same value again');
is($node->safe_psql('postgres', q{SELECT sc_sum('crash_b', 1), sc_sum('crash_t', 1)}),
	"$n|$n", 'after the crash and the retries every id counted exactly once, both durabilities');
is($node->safe_psql('postgres', qq{SELECT max(sc_incr_once('crash_t', 1, 1, 'pay-' || i)) FROM generate_series(1, $n) i}),
	$n, 'the last id still answers with its value');

# Thousands of ids in one flush (their copies outlive the flush's transaction).
$node->safe_psql('postgres',
	q{SELECT count(sc_incr_once('crash_b', 2, 1, 'bulk-' || i)) FROM generate_series(1, 3000) i});
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.requests WHERE counter = 'crash_b'::slotted_counter::integer
   AND request_id LIKE 'bulk-%'}), 3000, 'one flush wrote 3000 ids');

# 3. A clean restart: every id repeats, nothing counts.
$node->safe_psql('postgres', 'SELECT sc_rollup()');
my $answers = qq{SELECT string_agg(sc_incr_once('crash_b', 1, 1, 'pay-' || i) || ':' ||
                                   sc_incr_once('crash_t', 1, 1, 'pay-' || i), ',' ORDER BY i)
                 FROM generate_series(1, $n) i};
my $before = $node->safe_psql('postgres', $answers);
$node->restart;
is($node->safe_psql('postgres', $answers), $before, 'after a clean restart every id repeats its value');
is($node->safe_psql('postgres', q{SELECT sc_sum('crash_b', 1), sc_sum('crash_t', 1)}),
	"$n|$n", '... and counts nothing');

done_testing();
