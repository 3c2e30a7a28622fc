# A fixed-window rate limit under concurrency: 32 clients call sc_incr_bounded(..., NULL, 1000)
# on a '1 minute' counter, 3,840 calls over three windows, buffered and transactional. Every
# window admits exactly 1,000 (the value ends at the limit, never past it), every call that
# returned a value counted once, and the only error a client sees is the transactional
# COMMIT's 23514 when commits in flight at once could together pass the limit.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('bounded', "max_connections = 50\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('api_b', 'buffered', '1 minute'), sc_create('api_t', 'transactional', '1 minute');
});

my $clients = 32;
my $calls = 120;    # per client, windows 0, 1, 2 in turn: 1,280 calls per window
for my $counter (qw(api_b api_t))
{
	my $script = $node->basedir . "/$counter.sql";
	append_to_file($script,
		join('',
			map {
				"SELECT sc_incr_bounded('$counter', 7, 1, NULL, 1000, "
				  . "'2026-01-01 10:00+00'::timestamptz + interval '1 minute' * "
				  . ($_ % 3) . ");\n"
			} 1 .. $calls));
	my @runs;
	for my $c (1 .. $clients)
	{
		my ($out, $err) = ('', '');
		push @runs, { out => \$out, err => \$err, handle => IPC::Run::start(
			[ 'psql', '-X', '-At', '-P', 'null=NULL', '-f', $script, '-h', $node->host, '-p', $node->port,
			  'postgres' ],
			'>', \$out, '2>', \$err) };
	}
	my ($admitted, $refused, $other_errors, $limit_errors) = (0, 0, 0, 0);
	for my $run (@runs)
	{
		$run->{handle}->finish;
		for my $line (split /\n/, ${ $run->{out} })
		{
			if ($line =~ /^\d+$/) { $admitted++ }
			elsif ($line eq 'NULL') { $refused++ }
		}
		for my $line (split /\n/, ${ $run->{err} })
		{
			next unless $line =~ /ERROR/;
			if ($line =~ /bounded increment of counter "api_t" would leave its bounds/)
			{
				$limit_errors++;
			}
			else
			{
				$other_errors++;
				diag($line);
			}
		}
	}
	is($other_errors, 0, "$counter: no client saw an error but the limit's");
	is($node->safe_psql('postgres', qq{
SELECT string_agg(sc_sum('$counter', 7, t, t + interval '1 minute')::text, ',' ORDER BY t)
FROM generate_series('2026-01-01 10:00+00'::timestamptz, '2026-01-01 10:02+00', '1 minute') t}),
		'1000,1000,1000', "$counter: each window admitted exactly 1000");
	is($admitted, 3000, "$counter: the calls that returned a value are the 3000 counted");
	is($admitted + $refused + $limit_errors, $clients * $calls,
		"$counter: every call was admitted, refused or failed at COMMIT");
	note("$counter: $admitted admitted, $refused refused, $limit_errors failed at COMMIT");
}

# The values survive a restart (a clean stop writes the buffered ones).
$node->restart;
is($node->safe_psql('postgres', q{
SELECT sc_sum('api_b', 7), sc_sum('api_t', 7)}), '3000|3000', 'the counts survive a restart');

$node->stop;
done_testing();
