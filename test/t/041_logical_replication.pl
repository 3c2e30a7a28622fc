# A logical-replication publication of the extension's tables, as CDC tools and blue/green
# upgrades make one (FOR ALL TABLES), changes nothing for flushes, folds and drops, and a real
# subscriber receives the lagged values: slotted_counter.key_values (and the counters) as of the
# publisher's last flush.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SlottedCounterTest;

my $publisher = preloaded_node('publisher',
	"wal_level = logical\nmax_wal_senders = 10\nmax_replication_slots = 10\n"
	  . "slotted_counter.flush_interval = 0\n");
my $subscriber = preloaded_node('subscriber', "slotted_counter.flush_interval = 0\n");

$publisher->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE PUBLICATION everything FOR ALL TABLES;
CREATE PUBLICATION lagged_only FOR TABLE slotted_counter.key_values;
SELECT sc_create('views', 'buffered'), sc_create('sold'),
       sc_create('hits', 'buffered', '1 hour'), sc_create('gone', 'buffered');
SELECT count(sc_incr('views', k % 100)) FROM generate_series(1, 1000) k;
SELECT count(sc_incr('sold', k % 10, 2)) FROM generate_series(1, 100) k;
SELECT sc_incr('hits', 1, 5, '2026-01-01 10:00+00'), sc_incr('hits', 1, 7, '2026-01-01 11:00+00');
SELECT sc_incr('gone', 1, 1);
});

# Flushes (inserts, then updates of the same rows), the fold of transactional deltas (deletes),
# sc_drop_buckets and sc_drop (deletes), all under both publications.
is($publisher->safe_psql('postgres', 'SELECT sc_rollup() > 0'), 't', 'the first flush wrote');
$publisher->safe_psql('postgres', q{
SELECT count(sc_incr('views', k % 100)) FROM generate_series(1, 1000) k;
SELECT count(sc_incr('sold', k % 10, 2)) FROM generate_series(1, 100) k;});
is($publisher->safe_psql('postgres', 'SELECT sc_rollup() > 0'), 't',
	'a flush that updates rows and folds deltas succeeds under the publications');
is( $publisher->safe_psql('postgres',
		q{SELECT sc_drop_buckets('hits', '2026-01-01 11:00+00'); SELECT sc_drop('gone');}),
	"1\n", 'sc_drop_buckets and sc_drop succeed');
is( $publisher->safe_psql('postgres',
		q{SELECT flush_failures FROM slotted_counter.stats WHERE datname = 'postgres'}),
	'0', 'no flush failed');
is( $publisher->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.deltas}),
	'0', 'every delta was folded');

# A subscriber with the extension installed receives the tables.
$subscriber->safe_psql('postgres', 'CREATE EXTENSION slotted_counter');
my $connstr = $publisher->connstr . ' dbname=postgres';
$subscriber->safe_psql('postgres',
	"CREATE SUBSCRIPTION everything CONNECTION '$connstr' PUBLICATION everything");
$subscriber->wait_for_subscription_sync($publisher, 'everything');

# Then more counting, flushed, must arrive too.
$publisher->safe_psql('postgres', q{
SELECT count(sc_incr('views', k % 100)) FROM generate_series(1, 500) k;
SELECT sc_rollup();});
$publisher->wait_for_catchup('everything');

my $values = q{SELECT c.name, t.key, t.bucket, t.value FROM slotted_counter.key_values t
  JOIN slotted_counter.counters c ON c.id = t.counter ORDER BY 1, 2, 3};
is($subscriber->safe_psql('postgres', $values), $publisher->safe_psql('postgres', $values),
	"the subscriber's key_values rows are the publisher's");
is( $subscriber->safe_psql('postgres', q{SELECT string_agg(counter || ':' || value, ',' ORDER BY counter::text)
  FROM slotted_counter.lagged WHERE key = 3 AND counter IN ('views', 'sold')}),
	'sold:40,views:25', 'slotted_counter.lagged reads them there');
is( $subscriber->safe_psql('postgres', q{SELECT string_agg(name, ',' ORDER BY name)
  FROM slotted_counter.counters}),
	'hits,sold,views', 'the dropped counter is gone there too');
is( $subscriber->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.key_values
  WHERE bucket > '-infinity' AND bucket < '2026-01-01 11:00+00'}),
	'0', 'and so are the dropped buckets');

$subscriber->stop;
$publisher->stop;
done_testing();
