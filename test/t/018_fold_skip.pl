# A transaction that holds one counter (an open sc_drop_buckets) keeps only that counter's
# transactional entries in the buffer: every other counter's commits are folded and their entries
# evicted as usual, so commits of other counters never wait for room behind it (they used to fail
# with 53400 once the buffer was full), and every value stays exact.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('fold_skip', qq{
slotted_counter.max_entries = 256
slotted_counter.flush_interval = 100
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('held', 'transactional', '1 hour'), sc_create('busy');
SELECT sc_incr('held', 1, 1, now() - interval '2 hours');
});

# The holder: a tenant's drop of old buckets, left open.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; SELECT sc_drop_buckets('held', now() - interval '1 hour')});

# Another counter commits 1,000 keys, 50 per transaction: four times the buffer, each commit
# holding its keys in the buffer (more than a quarter of it, 64, would be a large commit, which
# writes its keys' rows itself and needs no room).
my ($rc, $out, $err) = $node->psql('postgres', q{
DO $$ BEGIN
  FOR b IN 0..19 LOOP
    PERFORM sc_incr('busy', k, 2) FROM generate_series(b * 50 + 1, b * 50 + 50) k;
    COMMIT;
  END LOOP;
END $$;});
is($rc, 0, 'commits of another counter go on while a transaction holds one');
is($err, '', 'and none of them waited for room and failed');
is( $node->safe_psql(
		'postgres', q{SELECT sc_sum_keys('busy', ARRAY(SELECT generate_series(1, 1000)::bigint))}),
	'2000', 'every commit counted, read back through loads of evicted keys');
is( $node->safe_psql(
		'postgres', q{SELECT evictions > 0 FROM slotted_counter.stats WHERE datname = current_database()}),
	't', 'the busy counter\'s entries were evicted');

$holder->query_safe('ROLLBACK');
$holder->quit;
is($node->safe_psql('postgres', q{SELECT sc_sum('held', 1)}), '1',
	'the held counter kept its value through the rolled-back drop');
$node->safe_psql('postgres', q{SELECT sc_incr('busy', 1, 1)});

# Reads after a bucket drop include the deltas a later commit kept until a fold of every counter:
# a fold that skips a counter held by another drop must not end that. An increment commits while
# a drop of every bucket is open (its delta survives the drop); a second drop, queued behind the
# first, holds the counter from the first one's commit on (no fold in between) while flushes
# run; the bucket's value is that increment all along.
$node->safe_psql('postgres', q{SELECT sc_create('cy', 'transactional', '1 hour')});
$node->safe_psql('postgres', q{SELECT sc_incr('cy', 1, 100)});
my $first = $node->background_psql('postgres');
$first->query_safe(q{BEGIN; SELECT sc_drop_buckets('cy', now() + interval '1 day')});
is($node->safe_psql('postgres', q{SELECT sc_incr('cy', 1, 5)}), '105',
	'an increment commits while a drop of its bucket is open');
my $second = $node->background_psql('postgres');
$second->query_until(qr/queued/, q{\echo queued
BEGIN;
SELECT sc_drop_buckets('cy', '2000-01-01');
});
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		              WHERE wait_event_type = 'Lock' AND query LIKE '%2000-01-01%'}),
	'the second drop waits for the first');
$first->query_safe('COMMIT');
$first->quit;
ok( $node->poll_query_until(
		'postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		              WHERE state = 'idle in transaction' AND query LIKE '%2000-01-01%'}),
	'and holds the counter from the first one\'s commit on');
my $flushes = $node->safe_psql('postgres',
	q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()});
ok( $node->poll_query_until(
		'postgres', qq{SELECT flushes >= $flushes + 3 FROM slotted_counter.stats
		               WHERE datname = current_database()}),
	'flushes run while the second drop holds the counter');
is( $node->safe_psql(
		'postgres', q{SELECT sc_sum('cy', 1, now() - interval '1 day', now() + interval '1 day')}),
	'5', 'the bucket reads the increment that the first drop kept');
is($node->safe_psql('postgres', q{SELECT sc_incr('cy', 1, 1)}), '6',
	'and counts on from it');
$second->query_safe('COMMIT');
$second->quit;
$node->safe_psql('postgres', q{SELECT sc_rollup()});
is($node->safe_psql('postgres', q{SELECT sc_sum('cy', 1)}), '6', 'after the fold too');

$node->restart;
is( $node->safe_psql(
		'postgres', q{SELECT sc_sum_keys('busy', ARRAY(SELECT generate_series(1, 1000)::bigint)),
		                     sc_sum('held', 1), sc_sum('cy', 1)}),
	'2001|1|6', 'and after a restart');

$node->stop;
done_testing();
