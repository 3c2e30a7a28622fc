# The flusher sets what it needs, whatever the database's and the roles' defaults say: with a
# read-only default, serializable transactions, replica session_replication_role, a search_path
# that finds nothing and a 1 ms lock_timeout for every role, flushes still write the values table,
# sc_rollup() reports success, and a clean restart loses no acknowledged increment (a read-only
# default used to make every flush fail, and the restart lose what was buffered).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('hostile_defaults', "slotted_counter.flush_interval = 100\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('t');
ALTER DATABASE postgres SET default_transaction_read_only = on;
ALTER DATABASE postgres SET default_transaction_isolation = 'serializable';
ALTER DATABASE postgres SET session_replication_role = 'replica';
ALTER DATABASE postgres SET search_path = nowhere;
ALTER ROLE ALL SET lock_timeout = '1ms';
});
# A new flusher, started under those defaults.
$node->restart;

# The application's sessions choose their own settings.
my $app = q{SET search_path = public; SET default_transaction_read_only = off; };
$node->safe_psql('postgres', $app . q{
SELECT count(sc_incr('b', g % 10, 1)) FROM generate_series(1, 500) g;
BEGIN; SELECT sc_incr('t', 1, 5); COMMIT;});

is($node->safe_psql('postgres', $app . q{SELECT sc_rollup() >= 0}), 't',
	'sc_rollup() succeeds under the hostile defaults');
is( $node->safe_psql(
		'postgres', q{SELECT sum(value) FROM slotted_counter.totals}),
	'505', 'the flush wrote every value to the table');
$node->safe_psql('postgres', $app . q{SELECT count(sc_incr('b', g % 10, 1)) FROM generate_series(1, 300) g});
$node->restart;
is( $node->safe_psql(
		'postgres', $app . q{SELECT sc_sum_keys('b', ARRAY(SELECT generate_series(0, 9)::bigint)),
		                            sc_sum('t', 1)}),
	'800|5', 'a clean restart kept every acknowledged increment');

$node->stop;
done_testing();
