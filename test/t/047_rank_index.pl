# sc_rank through its index (buffer/rank_indexes.hpp). The first sc_rank of an unbucketed counter
# whose keys do not expire asks its flusher for an index, and the tables answer until the flush
# after it built one; from then on every rank must equal the count over slotted_counter.key_values
# ("the others as of the last flush", the key's own value now):
#   1. built by the flush after the first call, for a buffered and a transactional counter
#   2. after what flushes change: buffered increments, a key counted back to 0, negative values,
#      sc_set, transactional commits folded
#   3. while other sessions count (nothing reaches the tables until a flush), and after it
#   4. after write-throughs (a buffer too small for the keys): a batch written through makes the
#      index go, the next sc_rank asks again
#   5. a clean restart (shared memory, and the indexes, start empty)
#   6. a counter given a retention, and one dropped, lose their index
# The flusher runs only when asked (flush_interval = 0).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('rank_index',
	"slotted_counter.flush_interval = 0\nslotted_counter.max_entries = 50000\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('rb', 'buffered'), sc_create('rt');
SELECT cardinality(sc_incr_batch(c, ARRAY(SELECT generate_series(1, 20000)::bigint),
                                 ARRAY(SELECT ((k * 7919) % 1009)::bigint
                                         FROM generate_series(1, 20000) k)))
  FROM (VALUES ('rb'), ('rt')) v(c);
SELECT sc_rollup();
});

my $ready = q{SELECT rank_indexes FROM slotted_counter.stats WHERE datname = current_database()};

# Keys (every 67th of 1..20000, a key never counted and a negative one) whose rank differs from
# the count over key_values, whose rows are read once.
sub mismatches
{
	my ($c) = @_;
	return $node->safe_psql('postgres', qq{
WITH stored AS MATERIALIZED (
       SELECT key, value FROM slotted_counter.key_values
        WHERE counter = '$c'::slotted_counter::integer AND bucket = '-infinity' AND value <> 0),
     probe AS MATERIALIZED (
       SELECT k, sc_sum('$c', k) AS v, sc_rank('$c', k) AS r
         FROM (SELECT k FROM generate_series(1, 20000, 67) k UNION ALL
               VALUES (999999), (-7)) s(k))
SELECT count(*) FROM probe p
 WHERE p.r <> 1 + (SELECT count(*) FROM stored s WHERE s.value > p.v AND s.key <> p.k)});
}

# 1.
is($node->safe_psql('postgres', $ready), '0', 'no index before any sc_rank');
is(mismatches('rb') . mismatches('rt'), '00', 'the tables answer before the index is built');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $ready), '2', 'the flush after the first sc_rank built both indexes');
is(mismatches('rb') . mismatches('rt'), '00', 'every rank from the index equals the tables');

# 2.
$node->safe_psql('postgres', q{
SELECT sc_incr('rb', 5, 100000), sc_incr('rb', 6, -sc_sum('rb', 6)), sc_incr('rb', 7, -5000),
       sc_set('rb', 8, 777), sc_incr('rt', 5, 100000), sc_incr('rt', 6, -sc_sum('rt', 6)),
       sc_incr('rt', 7, -5000), sc_set('rt', 8, 777);
SELECT cardinality(sc_incr_batch(c, ARRAY(SELECT generate_series(1, 20000, 3)::bigint),
                                 ARRAY(SELECT ((k * 31) % 97 - 40)::bigint
                                         FROM generate_series(1, 20000, 3) k)))
  FROM (VALUES ('rb'), ('rt')) v(c);
});
is(mismatches('rb') . mismatches('rt'), '00', 'before the flush: the others as stored');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $ready), '2', 'the indexes stay');
is(mismatches('rb') . mismatches('rt'), '00', 'after the flush and the fold: the index follows');
is($node->safe_psql('postgres', q{SELECT sc_rank('rb', 5), sc_rank('rt', 5), sc_rank('rb', 6)}),
	'1|1|' . (1 + $node->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.key_values
	  WHERE counter = 'rb'::slotted_counter::integer AND value > 0})),
	'the largest ranks first; a key counted back to 0 after every key above 0');

# 3. Other sessions count.
my $script = $node->basedir . '/writes.sql';
open(my $fh, '>', $script) or die;
# Any key of 1..20033 but the checked ones (k = 1 + 67 n): the checked keys keep their values,
# and no key is written through (the stored values of the others stay as they are).
print $fh "\\set j random(0, 19700)\n\\set k 2 + 67 * (:j / 66) + :j % 66\n"
  . "SELECT sc_incr('rb', :k, 3), sc_incr('rt', :k, 2);\n";
close $fh;
# 9,000 calls; the ranks are checked in rounds until they are done (at least once).
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '3', '-j', '2', '-t', '3000', '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \my $out, '2>', \my $err);
my ($rounds, $during) = (0, 0);
do
{
	$during += mismatches('rb') + mismatches('rt');
	$rounds++;
	$pgbench->pump_nb if $pgbench->pumpable;
} while ($pgbench->pumpable);
$pgbench->finish;
like($out, qr{actually processed: 9000/9000}, 'the other sessions counted');
is($during, 0, "ranks equal the tables while other sessions count ($rounds rounds)");
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is(mismatches('rb') . mismatches('rt'), '00', 'and after their keys were flushed');

# 4. 25,000 new keys do not fit beside the 60,000 resident: some are written through, some in a
# batch written through, after which rb's index goes until the next sc_rank asks again.
$node->safe_psql('postgres', q{
SELECT count(sc_incr('rb', k, 11)) FROM generate_series(40001, 52000) k;
SELECT cardinality(sc_incr_batch('rb', ARRAY(SELECT generate_series(60001, 73000)::bigint),
                                 array_fill(13::bigint, ARRAY[13000])));
});
is( $node->safe_psql('postgres', q{SELECT write_throughs > 0 FROM slotted_counter.stats
  WHERE datname = current_database()}),
	't', 'keys were written through');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is(mismatches('rb') . mismatches('rt'), '00', 'ranks equal the tables after write-throughs');
$node->safe_psql('postgres', 'SELECT sc_rank(\'rb\', 1), sc_rollup()');
is($node->safe_psql('postgres', $ready), '2', 'an index that went is built again when asked');
is(mismatches('rb') . mismatches('rt'), '00', 'and equals the tables');

# 5.
$node->restart;
is($node->safe_psql('postgres', $ready), '0', 'a restart starts with no index');
is(mismatches('rb') . mismatches('rt'), '00', 'the tables answer');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $ready), '2', 'the indexes are built again');
is(mismatches('rb') . mismatches('rt'), '00', 'and equal the tables');

# 6.
$node->safe_psql('postgres', q{SELECT sc_alter_retention('rb', '1 day')});
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $ready), '1', 'a counter given a retention loses its index');
is(mismatches('rb'), '0', 'its ranks come from the tables');
$node->safe_psql('postgres', q{SELECT sc_drop('rt'); SELECT sc_rollup()});
is($node->safe_psql('postgres', $ready), '0', 'a dropped counter loses its index');

$node->stop;
done_testing();
