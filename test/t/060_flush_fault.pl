# Nothing fails a flush after its commit, and should something fail there anyway, the flush
# settles as committed. An assert-enabled build has a named fault point right after a flush step's
# commit (slotted_counter.fault_point = 'flush-after-commit': an "out of memory" there, where an
# allocation once was). With it set, sc_rollup() fails with that error, and then:
#   - the values table holds what the step committed, and sc_total answers at once (the commit
#     window it opened is closed: readers would wait for it forever);
#   - no entry stays claimed or dirty (counted again and flushed without the fault, every value
#     is exact), and a request id of sc_incr_once is durable: repeated, it counts nothing;
#   - the rank index follows the rows;
#   - after a clean restart nothing is counted twice (a claim left unsettled made the saved
#     values write the committed delta a second time).
# Skipped on a server built without assertions.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('flush_fault', "slotted_counter.flush_interval = 0\n");
if ($node->safe_psql('postgres', 'SHOW debug_assertions') ne 'on')
{
	$node->stop;
	plan skip_all => 'the fault points exist in assert-enabled builds only';
}
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('t');
SELECT count(sc_incr('b', k)) FROM generate_series(1, 1000) k;
SELECT sc_incr_once('b', 1001, 10, 'req-1');
BEGIN; SELECT sc_incr('t', 1, 7); COMMIT;
SELECT sc_rank('b', 1);
SELECT sc_rollup();
});

# Counted again, then flushed with the fault after the commit.
$node->safe_psql('postgres', q{
SELECT count(sc_incr('b', k)) FROM generate_series(1, 1000) k;
SELECT sc_incr_once('b', 1002, 20, 'req-2');
BEGIN; SELECT sc_incr('t', 1, 7); COMMIT;
ALTER SYSTEM SET slotted_counter.fault_point = 'flush-after-commit';
SELECT pg_reload_conf();
});
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT sc_rollup()');
like($err, qr/could not flush counters: out of memory/,
	'the flush fails with the error injected after its commit');

is( $node->safe_psql('postgres', q{
SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 'b'::slotted_counter::integer}),
	'2030', 'the values table holds what the step committed');
is($node->safe_psql('postgres', q{SELECT sc_total('b'), sc_total('t')}),
	'2030|14', 'sc_total answers: no commit window stays open');
is( $node->safe_psql('postgres', q{
SELECT dirty_entries FROM slotted_counter.stats WHERE datname = current_database()}),
	'0', 'no entry stays claimed or dirty');
is($node->safe_psql('postgres', q{SELECT sc_incr_once('b', 1002, 20, 'req-2')}),
	'20', 'the request id is durable: repeated, it returns its first value');

# Without the fault: counted again, flushed, every value exact, the rank index with the rows.
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET slotted_counter.fault_point;
SELECT pg_reload_conf();
});
$node->safe_psql('postgres', q{
SELECT count(sc_incr('b', k)) FROM generate_series(1, 1000) k;
SELECT sc_rollup();
});
my $exact = q{
SELECT count(*) FILTER (WHERE sc_sum('b', k) <> 3), sc_sum('b', 1001), sc_sum('b', 1002),
       sc_sum('t', 1), (SELECT sum(value) FROM slotted_counter.key_values
                         WHERE counter = 'b'::slotted_counter::integer)
  FROM generate_series(1, 1000) k};
is($node->safe_psql('postgres', $exact), '0|10|20|14|3030',
	'every value is exact, in the buffer and in the table');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 1002, 7) k
 WHERE sc_rank('b', k) <> 1 + (SELECT count(*) FROM slotted_counter.key_values s
                                WHERE s.counter = 'b'::slotted_counter::integer
                                  AND s.value > sc_sum('b', k) AND s.key <> k)}),
	'0', 'the rank index follows the rows');

$node->restart;
is($node->safe_psql('postgres', $exact), '0|10|20|14|3030',
	'a clean restart counts nothing twice');

$node->stop;
done_testing();
