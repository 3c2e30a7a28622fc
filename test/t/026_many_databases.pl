# 100 databases, each counting now and then, with the default settings (16 flusher slots, 8 worker
# processes): a database's flusher leaves once no client has been connected to it for
# slotted_counter.idle_timeout, flushing first and giving its slot back, and the next write starts
# one again. Every value stays exact, and a database that comes back counts on from its values.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('many_databases');
is($node->safe_psql('postgres', q{
SELECT current_setting('slotted_counter.max_databases'), current_setting('max_worker_processes'),
       current_setting('slotted_counter.idle_timeout')}),
	'16|8|2s', 'the default settings');

my $failed = 0;
for my $i (1 .. 100)
{
	$node->safe_psql('postgres', "CREATE DATABASE db_$i");
	my ($rc, $out, $err) = $node->psql("db_$i", qq{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('t');
SELECT count(sc_incr('b', k)) + count(sc_incr('t', k)) FROM generate_series(1, $i) k;});
	if ($rc != 0)
	{
		diag("database $i: $err");
		$failed++;
	}
}
is($failed, 0, '100 databases created and counted into, one after another');

# Each flusher leaves about idle_timeout after its database's client left.
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher'}),
	'the flushers left');

# Every value was flushed before its flusher left: the tables hold them all.
my $wrong = 0;
for my $i (1 .. 100)
{
	my $got = $node->safe_psql("db_$i", q{
SELECT count(*), sum(value) FROM slotted_counter.key_values WHERE key = 1});
	$wrong++ unless $got eq '2|2';
}
is($wrong, 0, 'every database\'s values are in its tables');

# Databases come back, in another order, and count on from their values.
$wrong = 0;
for my $i (reverse 1 .. 100)
{
	my $got = $node->safe_psql("db_$i", q{SELECT sc_incr('b', 1), sc_incr('t', 1), sc_sum('b', 0)});
	$wrong++ unless $got eq '2|2|0';
}
is($wrong, 0, 'they count on from their values, in another order');
is( $node->safe_psql('db_7', q{SELECT sc_rollup() >= 0, sc_sum('b', 7), sc_sum('t', 7), sc_sum('b', 8)}),
	't|1|1|0', 'a database\'s values are exact');
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'slotted_counter flusher'}),
	'and the flushers left again');

$node->stop;
done_testing();
