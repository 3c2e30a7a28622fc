# A full buffer brings the next flush forward. With 128 entries and 2,000 keys in use, and the
# flusher running only when asked (flush_interval = 0): transactional commits need entries whose
# deltas a flush folded, and buffered increments entries a flush wrote. A writer that finds no
# entry asks its database's flusher for a flush at once (src/buffer/load.cpp), so that:
#   - every transactional commit succeeds (they used to wait for room until a timed flush, and
#     with none fail with 53400 after 10 s), and every buffered increment too;
#   - the flusher flushed many times during the load, and every value is exact.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('full_buffer_flushes', qq{
slotted_counter.max_entries = 128
slotted_counter.flush_interval = 0
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('t'), sc_create('b', 'buffered');
CREATE TABLE truth (c text, k bigint);
});

my $flushes = q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()};
foreach my $c ('t', 'b')
{
	my $before = $node->safe_psql('postgres', $flushes) || 0;
	$node->pgbench(
		'--no-vacuum --client=4 --jobs=2 --transactions=500',
		0,
		[qr{actually processed: 2000/2000}],
		[qr{^$}],
		"$c: 2,000 increments of 2,000 keys through a 128-entry buffer, none failed",
		{
			"full_buffer_$c" => qq{\\set k random(1, 2000)
BEGIN;
SELECT sc_incr('$c', :k);
INSERT INTO truth VALUES ('$c', :k);
COMMIT;
}
		});
	my $during = $node->safe_psql('postgres', $flushes) - $before;
	cmp_ok($during, '>', 0, "$c: the flusher flushed when the buffer was full ($during flushes)");
	$node->safe_psql('postgres', 'SELECT sc_rollup()');
	is( $node->safe_psql('postgres', qq{
SELECT count(*) FROM (SELECT k, count(*) AS n FROM truth WHERE c = '$c' GROUP BY k) t
 WHERE sc_sum('$c', t.k) <> t.n}),
		'0', "$c: every key holds exactly its increments");
	is( $node->safe_psql('postgres', qq{
SELECT sum(value) FROM slotted_counter.key_values WHERE counter = '$c'::slotted_counter::integer}),
		'2000', "$c: and the table holds them all");
}

$node->stop;
done_testing();
