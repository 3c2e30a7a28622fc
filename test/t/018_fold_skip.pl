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

# Another counter commits 1,000 keys, 100 per transaction: four times the buffer.
my ($rc, $out, $err) = $node->psql('postgres', q{
DO $$ BEGIN
  FOR b IN 0..9 LOOP
    PERFORM sc_incr('busy', k, 2) FROM generate_series(b * 100 + 1, b * 100 + 100) k;
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
$node->restart;
is( $node->safe_psql(
		'postgres', q{SELECT sc_sum_keys('busy', ARRAY(SELECT generate_series(1, 1000)::bigint)),
		                     sc_sum('held', 1)}),
	'2001|1', 'and after a restart');

$node->stop;
done_testing();
