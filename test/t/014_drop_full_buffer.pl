# A transaction that holds a counter for sc_drop_buckets cannot have an increment of it written
# through (the flusher would wait for that transaction's own lock), and the flush that a full
# buffer asks for cannot write the counter's entries either (it skips a counter being dropped):
# once every entry of the buffer is the counter's own and dirty, an increment of a new key fails
# with 53400 at once, and changes nothing. Outside that transaction the same increment counts.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# The smallest buffer, 128 entries, flushed only when asked (by sc_rollup or a full buffer).
my $node = preloaded_node('drop_full_buffer', qq{
slotted_counter.max_entries = 128
slotted_counter.flush_interval = 0
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('h', 'buffered', '1 hour');
CREATE TABLE failed (key bigint, state text);
});

# In the dropping transaction, new keys one at a time (each in a subtransaction) until one fails:
# the earlier ones filled the buffer with the counter's dirty entries.
my ($ret, $stdout, $stderr) = $node->psql(
	'postgres', q{
BEGIN;
SELECT sc_drop_buckets('h', '2000-01-01');
DO $$
BEGIN
  FOR k IN 1 .. 1000 LOOP
    BEGIN
      PERFORM sc_incr('h', k, 1, '2026-01-01 10:00+00');
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO failed VALUES (k, SQLSTATE || ': ' || SQLERRM);
      RETURN;
    END;
  END LOOP;
END
$$;
COMMIT;
});
my ($key, $error) = split /\|/, $node->safe_psql('postgres', 'SELECT key, state FROM failed');
like($error // '', qr/^53400: no room in the slotted_counter buffer for counter "h"/,
	'an increment that would be written through fails with 53400 in the dropping transaction');

is( $node->safe_psql(
		'postgres',
		qq{SELECT sc_sum('h', $key) || ' ' || sc_sum_keys('h', ARRAY(SELECT generate_series(1, $key - 1)::bigint))}),
	'0 ' . ($key - 1), 'the failed increment changed nothing, the ones before it counted');

is($node->safe_psql('postgres', qq{SELECT sc_incr('h', $key, 1, '2026-01-01 10:00+00')}),
	'1', 'outside that transaction the increment counts');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is( $node->safe_psql(
		'postgres', q{SELECT sum(value) FROM slotted_counter.key_values}),
	$key, 'and every increment reaches the table');

$node->stop;
done_testing();
