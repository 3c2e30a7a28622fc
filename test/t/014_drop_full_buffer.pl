# A transaction that holds a counter for sc_drop_buckets cannot have an increment of it written
# through (the flusher would wait for that transaction's own lock): with every entry of the
# buffer dirty, such an increment fails with 53400 at once, and changes nothing. Outside that
# transaction the same increment is written through.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# The smallest buffer, 128 entries, flushed only on request: 128 dirty keys fill it.
my $node = preloaded_node('drop_full_buffer', qq{
slotted_counter.max_entries = 128
slotted_counter.flush_interval = 0
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('h', 'buffered', '1 hour');
SELECT sc_incr('h', k, 1, '2026-01-01 10:00+00') FROM generate_series(1, 128) k;
});

my ($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{
\set VERBOSITY verbose
BEGIN;
SELECT sc_drop_buckets('h', '2000-01-01');
SELECT sc_incr('h', 1000, 1, '2026-01-01 10:00+00');
ROLLBACK;
});
like($stderr, qr/ERROR:  53400: no room in the slotted_counter buffer for counter "h"/,
	'an increment that would be written through fails with 53400 in the dropping transaction');

is( $node->safe_psql(
		'postgres',
		q{SELECT sc_sum('h', 1000) || ' ' || sc_sum_keys('h', ARRAY(SELECT generate_series(1, 128)::bigint))}),
	'0 128', 'the failed increment changed nothing');

is($node->safe_psql('postgres', q{SELECT sc_incr('h', 1000, 1, '2026-01-01 10:00+00')}),
	'1', 'outside that transaction the increment is written through');
is( $node->safe_psql(
		'postgres', q{SELECT write_throughs > 0 FROM slotted_counter.stats WHERE datname = 'postgres'}),
	't', 'by the flusher');

$node->stop;
done_testing();
