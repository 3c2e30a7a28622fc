# A read of a transactional counter in a database whose flusher left (idle: no client for
# slotted_counter.idle_timeout) starts one (shared/flusher_slots.hpp: FlusherForReads), whose
# first pass folds the committed deltas and builds the filter of stored keys (worker.cpp):
# reads of keys out of the buffer then probe key_values alone, never a pass over
# slotted_counter.deltas each, and read exact values.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('reads_start_flusher', "slotted_counter.idle_timeout = 100\n");
$node->safe_psql('postgres', 'CREATE EXTENSION slotted_counter');
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('t', 'transactional');
DO $$ BEGIN
  FOR k IN 1..200 LOOP
    PERFORM sc_incr('t', k, k);
    COMMIT;
  END LOOP;
END $$;
SELECT sc_rollup() >= 0;
});

# The flusher of app, seen from another database (a superuser sees every database's slot; app
# has a row while it has one).
my $state = q{SELECT worker_state FROM slotted_counter.stats WHERE datname = 'app'};
ok($node->poll_query_until('postgres', "SELECT NOT EXISTS ($state)"),
	'app\'s flusher left, idle, and gave its slot back');

# Whether a read of a key never stored (a new one each time, so never in the buffer) reads
# slotted_counter.deltas: it must until a fold after the slot was assigned.
my $read_scans = q{
SELECT pg_stat_get_xact_numscans('slotted_counter.deltas'::regclass)
  FROM (SELECT sc_sum('t', 1000000 + (random() * 1e9)::bigint) OFFSET 0) s};

# The sum of keys from..to read in one transaction of a session of its own, and how many scans of
# slotted_counter.deltas it made (a backend's count in its transaction includes what it has not
# reported yet of its transactions before).
sub read_keys
{
	my ($from, $to) = @_;
	return $node->safe_psql('app', qq{
BEGIN;
SELECT sum(sc_sum('t', k)) FROM generate_series($from, $to) k;
SELECT pg_stat_get_xact_numscans('slotted_counter.deltas'::regclass);
COMMIT;});
}

my $reader = $node->background_psql('app');
is($reader->query_safe(q{SELECT sc_sum('t', 1)}), '1', 'a read of a key with a row');
ok($node->poll_query_until('postgres', "SELECT EXISTS ($state)"), 'started a flusher');
ok($node->poll_query_until('app', $read_scans, '0'),
	'whose first fold, before any flush interval, ends the reads of the deltas');

# Keys 2..200 are out of the buffer (the flusher that left gave their entries back).
is(read_keys(2, 200), "20099\n0",
	'reads of 199 keys out of the buffer: exact, and no scan of the deltas');
$reader->quit;

# A crash leaves committed deltas unfolded: after the restart, the first read starts a flusher
# that folds them before its first flush interval.
# (With no interval and a flusher that stays, nothing folds them before the crash.)
$node->safe_psql('app', q{
ALTER SYSTEM SET slotted_counter.flush_interval = '1h';
ALTER SYSTEM SET slotted_counter.idle_timeout = 0;
});
$node->restart;
$node->safe_psql('app', q{
SELECT sc_rollup() >= 0;
DO $$ BEGIN
  FOR k IN 201..300 LOOP
    PERFORM sc_incr('t', k, 1);
    COMMIT;
  END LOOP;
END $$;});
is($node->safe_psql('app', 'SELECT count(*) FROM slotted_counter.deltas'), '100',
	'100 committed deltas, unfolded');
$node->stop('immediate');
$node->start;
$reader = $node->background_psql('app');
is($reader->query_safe(q{SELECT sc_sum('t', 201)}), '1', 'after the crash, a read');
ok($node->poll_query_until('app', 'SELECT count(*) = 0 FROM slotted_counter.deltas'),
	'the flusher it started folded them without waiting for its flush interval');
ok($node->poll_query_until('app', $read_scans, '0'), 'and reads no longer read the deltas');
is(read_keys(202, 300), "99\n0",
	'then reads of keys out of the buffer: exact, and no scan of the deltas');
$reader->quit;

$node->stop;
done_testing();
