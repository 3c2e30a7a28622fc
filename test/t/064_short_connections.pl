# An application that connects for each request (no pooler) keeps its database's flusher while it
# writes: the flusher counts connections about once a second, and a connection that writes one
# increment and leaves is seldom there then, but the rows the flusher writes for it count as a
# client's presence. Before, the flusher left (flushing everything and purging the database's
# buffer entries) after idle_timeout of checks that found no connection, and started again at the
# next write, over and over.
#
# idle_timeout is 6 s, flush_interval 1 s (so the flusher looks about once a second), and the
# writes come about once a second (each its own connection, nothing else connected): a flusher
# that counted connections alone would see one at a look rarely (a connection lasts a few tens of
# ms), so nearly surely leave during the run; this one must stay, unless the machine stalls a
# write by about 4 s.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('short_connections',
	"slotted_counter.flush_interval = 1000\nslotted_counter.idle_timeout = 6000\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('hits', 'buffered');
SELECT sc_incr('hits', 1);
});

my $flusher = q{SELECT worker_pid FROM slotted_counter.stats
                WHERE datname = current_database() AND worker_pid IS NOT NULL};
# The first write registers the flusher; it shows once it runs.
is($node->poll_query_until('postgres', "SELECT EXISTS ($flusher)"), 1, 'a flusher runs');
my $first = $node->safe_psql('postgres', $flusher);

my $writes = 12;
for my $i (1 .. $writes)
{
	usleep(1_000_000);
	$node->safe_psql('postgres', "SELECT sc_incr('hits', 1)");
}
is($node->safe_psql('postgres', $flusher), $first,
	'the flusher stayed while a client wrote through short connections');
is($node->safe_psql('postgres', q{SELECT sc_rollup() >= 0 AND sc_sum('hits', 1) = } . ($writes + 1)),
	't', 'every write counted');

# With no writes and no client, it still leaves. Watched from another database: a look from its
# own would be a client, which the flusher counts when it sees one.
is( $node->poll_query_until(
		'template1', "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $first)"),
	1, 'the flusher leaves once no client writes');

$node->stop;
done_testing();
