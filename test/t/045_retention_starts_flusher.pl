# A retention set on a counter of a database whose flusher has left (idle: no write since) is
# applied all the same: sc_alter_retention starts the flusher, which stays while the database has
# a counter with a retention, and deletes the keys idle for longer than it, with no further write
# and no client connected.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('retention_starts',
	"slotted_counter.flush_interval = 100\nslotted_counter.idle_timeout = 200\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('old_keys', 'buffered');
SELECT sc_incr('old_keys', k) FROM generate_series(1, 10) k;
SELECT sc_rollup();
});
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM slotted_counter.key_values WHERE counter = 'old_keys'::slotted_counter::integer}),
	'10', 'the keys are stored');

# No client writes: the flusher leaves once idle.
ok( $node->poll_query_until(
		'postgres', q{SELECT NOT EXISTS (SELECT FROM slotted_counter.stats
		              WHERE datname = current_database() AND worker_pid IS NOT NULL)}),
	'the idle flusher left');

# The keys were written more than a second ago; a retention of a second expires them all.
$node->safe_psql('postgres', q{
SELECT pg_sleep(1.1);
SELECT sc_alter_retention('old_keys', '1 second');
});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 0 FROM slotted_counter.key_values
		              WHERE counter = 'old_keys'::slotted_counter::integer}),
	'with no write since, the keys idle for longer than the retention are deleted');
is($node->safe_psql('postgres', q{SELECT sc_sum('old_keys', 1)}), '0', 'and read 0');

$node->stop;
done_testing();
