# The flusher reads only the entries that became dirty (each database's ring of dirty entries),
# and scans the whole buffer when the ring overflowed. Under load on few keys (the ring) and on
# many keys (overflow), with frequent flushes, every value reaches slotted_counter.key_values
# exactly: after the load and a rollup, each key's lagged row equals its real-time value and
# nothing is left dirty.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# auto_explain logs the plans of the flushes' statements that take long.
my $node = preloaded_node('dirty_ring', qq{
slotted_counter.flush_interval = 20
slotted_counter.max_entries = 50000
shared_preload_libraries = 'slotted_counter, auto_explain'
auto_explain.log_min_duration = '50ms'
auto_explain.log_nested_statements = on
});
$node->safe_psql('postgres',
	q{CREATE EXTENSION slotted_counter; SELECT sc_create('few', 'buffered'), sc_create('many', 'buffered')});

# 'few': 50 keys, far below the ring's size, 12,000 increments; 'many': 30,000 keys, more per
# interval than it holds, 20,000 increments.
for my $case (['few', 50, 3000], ['many', 30000, 5000])
{
	my ($counter, $keys, $per_client) = @$case;
	my $script = "\\set k random(1, $keys)\nSELECT sc_incr('$counter', :k);\n";
	my $calls = 4 * $per_client;
	$node->pgbench("--no-vacuum --client=4 --jobs=2 --transactions=$per_client",
		0, [qr{processed: $calls/$calls}], [qr{^$}], "$counter: load",
		{ "$counter.sql" => $script });
	$node->safe_psql('postgres', 'SELECT sc_rollup()');
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM generate_series(1, $keys) k
LEFT JOIN slotted_counter.key_values t ON t.counter = '$counter'::slotted_counter::integer AND t.key = k
WHERE COALESCE(t.value, 0) <> sc_sum('$counter', k)}),
		'0', "$counter: every lagged row equals the real-time value");
	is( $node->safe_psql(
			'postgres', qq{
SELECT (SELECT dirty_entries FROM slotted_counter.stats WHERE datname = current_database())}),
		'0', "$counter: nothing left dirty after the rollup");
}

# A key counted once more after its last flush is flushed by the next rollup (a clean entry
# turned dirty is noted in the ring), for both counters.
$node->safe_psql('postgres', q{SELECT sc_incr('few', 1), sc_incr('many', 29999)});
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is( $node->safe_psql(
		'postgres', q{
SELECT bool_and(t.value = sc_sum(c.name::slotted_counter, t.key))
FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE (c.name, t.key) IN (('few', 1), ('many', 29999))}),
	't', 'a single increment after a flush is flushed by the next one');

# The flush's UPDATE of keys flushed before is an index look-up per key, however the table grew
# since the statement was first planned: a plan made while the table was tiny joined every row of
# it to every key of a batch (a flush of 30,000 keys then took seconds, and sc_rollup timed out).
unlike(slurp_file($node->logfile), qr/Join Filter: \(\(t\.counter = u\.c\)/,
	'no flush joined the whole values table to a batch');

$node->stop;
done_testing();
