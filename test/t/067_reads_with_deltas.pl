# A read of many keys of a transactional counter while their committed deltas are not folded yet
# (after a crash, until the first fold) adds each key's deltas to its row, in one pass over the
# deltas: the values are exact (a key given twice counts once), and a read of 100,000 keys that have
# none is not 100,000 passes over them.
#
# 1,000 keys are set and folded into their rows; 1,000 keys (half of them the same) are then
# incremented by committed transactions whose deltas the crash leaves unfolded (the flusher's
# interval is an hour). After the restart the buffer is empty, so every key is read from the
# tables, rows and deltas together (the new flusher's first fold kept from the counter).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('reads_with_deltas', "slotted_counter.flush_interval = '1h'\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('t');
SELECT count(sc_set('t', k, k)) FROM generate_series(1, 1000) k;
SELECT sc_rollup() >= 0;
});
$node->safe_psql('postgres', q{
DO $$ BEGIN
  FOR b IN 0..9 LOOP
    PERFORM sc_incr('t', k, 1) FROM generate_series(501 + b * 100, 600 + b * 100) k;
    COMMIT;
  END LOOP;
END $$;});
is($node->safe_psql('postgres', 'SELECT count(*) FROM slotted_counter.deltas'),
	'1000', 'the increments are committed deltas, not folded');

$node->stop('immediate');
$node->start;

# The flusher that the first read starts folds at once (a new flusher's first pass): a session
# holding the counter's row, as a drop holds it, makes the fold skip the counter, so that the reads
# below run while its deltas are unfolded.
my $holder = $node->background_psql('postgres');
$holder->query_safe(
	q{BEGIN; SELECT id > 0 FROM slotted_counter.counters WHERE name = 't' FOR UPDATE});

# Keys 1..500: their rows (k); 501..1000: rows and deltas (k + 1); 1001..1500: deltas (1);
# 1501..2000 and 100,001..200,000: nothing.
is( $node->safe_psql(
		'postgres', q{SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(1, 2000)::bigint))}),
	'501500', 'rows and deltas of 2,000 keys read together');
is( $node->safe_psql(
		'postgres',
		q{SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(1, 2000)::bigint) ||
                          ARRAY(SELECT generate_series(901, 1100)::bigint))}),
	'501500', 'a key given twice counts once, as documented');
is( $node->safe_psql(
		'postgres',
		q{SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(100001, 200000)::bigint))}),
	'0', '100,000 keys without rows or deltas');
is($node->safe_psql('postgres', 'SELECT count(*) FROM slotted_counter.deltas'),
	'1000', 'the deltas were still unfolded while those reads ran');
$holder->query_safe('COMMIT');
$holder->quit;
is( $node->safe_psql(
		'postgres', q{SELECT sc_rollup() >= 0;
SELECT sc_sum_keys('t', ARRAY(SELECT generate_series(1, 2000)::bigint)),
       (SELECT count(*) FROM slotted_counter.deltas)}),
	"t\n501500|0", 'after the fold, the same');

$node->stop;
done_testing();
