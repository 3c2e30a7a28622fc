# The extension's waits show in pg_stat_activity under their names (wait_event_type Extension):
# on PostgreSQL 17 and later each has its own name (SlottedCounterWriteThrough, ...), listed in
# pg_wait_events; on 15 and 16 every one shows as "Extension", the one name an extension has
# there. Each wait is forced, then looked for: a batch waiting for a write-through that a user's
# lock holds up, and the flusher waiting between flushes. Then DROP DATABASE stops a database's
# flusher, whose pid it reads and signals under the slots lock (workers/databases.cpp).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('wait_events', qq{
slotted_counter.flush_interval = 100
slotted_counter.idle_timeout = 0
slotted_counter.max_entries = 2000
});

my $named = $node->safe_psql('postgres', 'SHOW server_version_num') >= 170000;
# The name a wait shows under on this server.
sub shown { return $named ? $_[0] : 'Extension' }

$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
SELECT sc_incr('c', 1, 1);
});

# A batch larger than the buffer has its keys written through by the flusher, which cannot
# write while a user holds a lock on the values table (its lock timeout puts the request back
# each second): the batch waits for the write-through as long as the lock is held.
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE slotted_counter.key_values IN EXCLUSIVE MODE');
my $batch = $node->background_psql('postgres');
$batch->query_until(qr/writing/, q{\echo writing
SELECT cardinality(sc_incr_batch('c', ARRAY(SELECT generate_series(1, 30000))::bigint[],
  array_fill(1::bigint, ARRAY[30000])));
});
my $want = shown('SlottedCounterWriteThrough');
ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		               WHERE query LIKE '%sc_incr_batch(%' AND wait_event_type = 'Extension'
		               AND wait_event = '$want' AND pid <> pg_backend_pid()}),
	"a batch waiting for its write-through shows as $want");
$locker->query_safe('COMMIT');
$locker->quit;
$batch->quit;
is( $node->safe_psql(
		'postgres', q{SELECT sc_rollup() >= 0, sc_total('c')}),
	't|30001', 'once the lock is gone the batch is written through, nothing lost');

# The flusher, between two flushes.
$want = shown('SlottedCounterFlusherMain');
ok( $node->poll_query_until(
		'postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		               WHERE backend_type = 'slotted_counter flusher'
		               AND wait_event_type = 'Extension' AND wait_event = '$want'}),
	"the flusher between its flushes shows as $want");

if ($named)
{
	# Every name is registered, of type Extension, once for the whole server.
	is( $node->safe_psql(
			'postgres', q{SELECT string_agg(name, ',' ORDER BY name) FROM pg_wait_events
			              WHERE type = 'Extension' AND name LIKE 'SlottedCounter%'}),
		join(',', sort qw(SlottedCounterPartitionWriter SlottedCounterCommitWindow
			  SlottedCounterLoad SlottedCounterWriteThrough SlottedCounterRequestId
			  SlottedCounterBucketDrops SlottedCounterFlusherStart SlottedCounterRollup
			  SlottedCounterWorkersStop SlottedCounterFlusherMain)),
		'pg_wait_events lists every wait of the extension');
}

# DROP DATABASE waits for the database's flusher, which leaves after its last flush.
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('d', 'buffered');
SELECT sc_incr('d', 1, 1);
});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		              WHERE backend_type = 'slotted_counter flusher' AND datname = 'other'}),
	"the other database's flusher runs");
$node->safe_psql('postgres', 'DROP DATABASE other');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE datname = 'other'}),
	'0', 'DROP DATABASE stopped the flusher (signalled under the slots lock) and went through');

done_testing();
