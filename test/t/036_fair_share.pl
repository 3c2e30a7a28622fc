# One database's dirty flood does not take another database's share of the buffer. Database
# "flood" keeps more keys dirty than the buffer holds (sc_incr_batch in two sessions); database
# "quiet" has its keys resident. While the flood runs:
#  - quiet's resident keys stay resident: reading them reads no table (the reading session scans
#    no index of slotted_counter.key_values in quiet), where before the flood's loads evicted them;
#  - quiet's new keys, committed one transaction each, find entries (taken from the flood, which
#    holds more than its share) and stay resident too (but for one written through at a moment
#    when every entry of the flood was dirty);
#  - every value is exact, in both databases, once the flood stopped.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# quiet's flusher stays (idle_timeout = 0): by default it leaves after 2 s without a client, and
# its leaving purges quiet's clean entries, which a busy machine can reach between two reads
# below (every one of quiet's resident keys then reads its table once more).
my $node = preloaded_node('fair_share',
	"slotted_counter.max_entries = 2000\nslotted_counter.flush_interval = 200\nmax_connections = 30\n"
	  . "slotted_counter.idle_timeout = 0\n");
$node->safe_psql('postgres', 'CREATE DATABASE flood; CREATE DATABASE quiet');
$node->safe_psql('flood',
	q{CREATE EXTENSION slotted_counter; SELECT sc_create('f', 'buffered');
CREATE TABLE truth (n bigint)});
$node->safe_psql('quiet',
	q{CREATE EXTENSION slotted_counter; SELECT sc_create('kept', 'buffered'), sc_create('new')});

# quiet: 200 keys counted and flushed (clean, resident).
$node->safe_psql('quiet',
	q{SELECT count(sc_incr('kept', k)) FROM generate_series(1, 200) k; SELECT sc_rollup()});

# Reads in quiet with `sql` (one row): returns its result and how many times it scanned the
# index of quiet's values table, which every read of a key that is not resident does. Counted by
# the reading session alone, in its transaction (a backend's own statistics, not yet reported):
# quiet's flusher scans the index too, when it folds and flushes, and the statistics of all
# sessions would count those, reported whenever it ends a flush.
sub quiet_read
{
	my ($sql) = @_;
	my $scans = q{SELECT pg_stat_get_xact_numscans('slotted_counter.key_values_pkey'::regclass)};
	my ($before, $result, $after) =
	  split /\n/, $node->safe_psql('quiet', "BEGIN; $scans; $sql; $scans; COMMIT");
	return ($result, $after - $before);
}

# The flood: batches of 600 random keys out of 3,000 in a 2,000-entry buffer, in two sessions,
# until told to stop (far fewer than the 100,000 each may make); each batch also records how many
# increments it made.
my $script = q{SELECT cardinality(sc_incr_batch('f',
  ARRAY(SELECT (random() * 2999)::bigint + 1 FROM generate_series(1, 600)),
  array_fill(1::bigint, ARRAY[600])));
INSERT INTO truth VALUES (600);
};
my $script_file = $node->basedir . '/flood.sql';
PostgreSQL::Test::Utils::append_to_file($script_file, $script);
my ($flood_out, $flood_err) = ('', '');
my $flood = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=2', '--jobs=2', '--transactions=100000',
		'--file=' . $script_file, $node->connstr('flood')
	],
	'>', \$flood_out, '2>', \$flood_err);

# Wait until the flood holds most of the buffer and keeps it dirty.
ok( $node->poll_query_until(
		'flood', q{SELECT dirty_entries >= 1000 FROM slotted_counter.stats WHERE datname = 'flood'}),
	'the flood keeps more than half of the buffer dirty');

my ($sum, $loads) = quiet_read(q{SELECT sum(sc_sum('kept', k)) FROM generate_series(1, 200) k});
is($sum, '200', 'quiet reads its 200 keys during the flood');
# Let the flood go on a while longer, with flushes and loads of its own, then read again.
$node->poll_query_until('flood', q{SELECT count(*) >= 40 FROM truth});
($sum, my $loads_later) = quiet_read(q{SELECT sum(sc_sum('kept', k)) FROM generate_series(1, 200) k});
is($sum, '200', 'and again later');
is($loads + $loads_later, 0, "the flood evicted none of quiet's resident keys: no read loaded one");

# quiet's new keys during the flood: one transaction each. A new key finds an entry the flood
# gives up once one of the flood's is clean; at a moment when every one of them is dirty, it is
# written through instead (slotted_counter.stats.write_throughs), and is not resident. So every
# key that was not written through is resident (on a quiet machine, all of them are).
my $write_throughs =
  q{SELECT write_throughs FROM slotted_counter.stats WHERE datname = current_database()};
my $through_before = $node->safe_psql('quiet', $write_throughs);
$node->safe_psql('quiet', q{DO $$
BEGIN
  FOR i IN 1..200 LOOP
    PERFORM sc_incr('new', i);
    COMMIT;
  END LOOP;
END
$$});
my $through = $node->safe_psql('quiet', $write_throughs) - $through_before;
($sum, $loads) = quiet_read(q{SELECT sum(sc_sum('new', k)) FROM generate_series(1, 200) k});
is($sum, '200', 'quiet counted 200 new keys during the flood');
is($loads, $through,
	"and they are resident, but for those written through: the flood, over its share, gave up entries"
);
cmp_ok($through, '<', 200, "quiet's new keys found entries");

# SIGTERM, not SIGINT: a command started in the background by a non-interactive shell ignores
# SIGINT, and so does every process it starts, pgbench here, which would then run to its end.
$flood->signal('TERM');
$flood->finish;

# Exact in both databases once the flood stopped. A batch of the flood that was running when
# pgbench was stopped completes and counts, but its row in truth is never written: the flood
# counted what truth says plus 0, 1 or 2 such batches (one per session).
is( $node->safe_psql('flood',
		q{SELECT sc_rollup() >= 0;
SELECT (SELECT sum(value) FROM slotted_counter.key_values) - (SELECT sum(n) FROM truth) IN (0, 600, 1200)}),
	"t\nt", "the flood's own counts are exact");
is($node->safe_psql('quiet', q{SELECT sc_rollup() >= 0, sc_sum('new', 7), sc_sum('kept', 200)}),
	't|1|1', "quiet's counts are exact");
unlike(slurp_file($node->logfile), qr/terminated by signal|no room in the slotted_counter buffer/,
	'nothing crashed and nothing ran out of room');

$node->stop;
done_testing();
