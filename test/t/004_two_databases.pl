# Two databases, each with the extension and a buffered counter of the same name.
#
# The counters are separate: increments in one database never show in the other, though both
# counters have the same name (and likely the same id). Each database gets its own flusher with
# no configuration (it starts with the first write there), each flusher writes its own
# database's key_values table, and both survive a restart.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('two_databases', qq{
slotted_counter.flush_interval = 100
});

my $flushers_query = q{
SELECT string_agg(datname || ':' || n, ',' ORDER BY datname) FROM (
  SELECT datname, count(*) AS n FROM pg_stat_activity
  WHERE backend_type = 'slotted_counter flusher' AND datname IN ('db1', 'db2')
  GROUP BY datname) f};
my $flushed_query = q{
SELECT string_agg(t.key || '=' || t.value, ',' ORDER BY t.key)
FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
WHERE c.name = 'c'};

$node->safe_psql('postgres', 'CREATE DATABASE db1');
$node->safe_psql('postgres', 'CREATE DATABASE db2');
$node->safe_psql('db1',
	q{CREATE EXTENSION slotted_counter; SELECT sc_create('c', 'buffered');});

ok($node->poll_query_until('postgres', $flushers_query, 'db1:1'),
	'a flusher starts for db1 once the extension is created there');

# db2 gets its extension while db1 is already counting: no restart, no configuration.
$node->safe_psql('db1',
	q{SELECT count(sc_incr('c', k, 10)) FROM generate_series(1, 100) k});
$node->safe_psql('db2',
	q{CREATE EXTENSION slotted_counter; SELECT sc_create('c', 'buffered');});
ok($node->poll_query_until('postgres', $flushers_query, 'db1:1,db2:1'),
	'each database has its own flusher');

$node->safe_psql('db2',
	q{SELECT count(sc_incr('c', k, 7)) FROM generate_series(51, 150) k});
$node->safe_psql('db1', q{SELECT count(sc_incr('c', 1, 1)) FROM generate_series(1, 5)});
$node->safe_psql('db2', q{SELECT count(sc_incr('c', 151, -3)) FROM generate_series(1, 2)});

is($node->safe_psql('db1', q{SELECT sc_incr('c', 0, 1)}),
	'1', 'key 0 of db1 starts at zero');
is($node->safe_psql('db2', q{SELECT sc_incr('c', 0, 2)}),
	'2', 'key 0 of db2 starts at zero, not at db1\'s value');

# Expected values, per key: db1 keys 1..100 = 10 (key 1: 15), key 0 = 1;
# db2 keys 51..150 = 7, key 151 = -6, key 0 = 2.
my $db1_check = q{
SELECT sc_sum('c', 0), sc_sum('c', 1),
       (SELECT count(*) FROM generate_series(2, 100) k WHERE sc_sum('c', k) <> 10),
       (SELECT count(*) FROM generate_series(101, 200) k WHERE sc_sum('c', k) <> 0)
};
my $db2_check = q{
SELECT sc_sum('c', 0), sc_sum('c', 151),
       (SELECT count(*) FROM generate_series(51, 150) k WHERE sc_sum('c', k) <> 7),
       (SELECT count(*) FROM generate_series(1, 50) k WHERE sc_sum('c', k) <> 0)
};
is($node->safe_psql('db1', $db1_check),
	'1|15|0|0', 'db1 sees only its own increments');
is($node->safe_psql('db2', $db2_check),
	'2|-6|0|0', 'db2 sees only its own increments');

# The flushers write each database's table on their own, with no sc_rollup().
my $db1_flushed = join(',', '0=1', '1=15', map { "$_=10" } 2 .. 100);
my $db2_flushed = join(',', '0=2', (map { "$_=7" } 51 .. 150), '151=-6');
ok($node->poll_query_until('db1', $flushed_query, $db1_flushed),
	'the db1 flusher writes the exact db1 values to db1\'s table');
ok($node->poll_query_until('db2', $flushed_query, $db2_flushed),
	'the db2 flusher writes the exact db2 values to db2\'s table');

is( $node->safe_psql(
		'db1',
		q{SELECT datname, dirty_entries FROM slotted_counter.stats WHERE datname = current_database()}),
	'db1|0',
	'db1 stats: nothing dirty once flushed');
is( $node->safe_psql(
		'db2',
		q{
SELECT flushes > 0 AND rows_written >= 102 FROM slotted_counter.stats
WHERE datname = current_database()}),
	't', 'db2 stats count the db2 flushes');

# Dirty values in both databases at shutdown are flushed by each flusher.
$node->safe_psql('db1', q{SELECT sc_incr('c', 1000, 11)});
$node->safe_psql('db2', q{SELECT sc_incr('c', 1000, 22)});
$node->restart;

is($node->safe_psql('db1', $db1_check . q{, sc_sum('c', 1000)}),
	'1|15|0|0|11', 'db1 values survive the restart, unmixed');
is($node->safe_psql('db2', $db2_check . q{, sc_sum('c', 1000)}),
	'2|-6|0|0|22', 'db2 values survive the restart, unmixed');
is($node->safe_psql('db1', q{SELECT sc_incr('c', 1000, 1)}),
	'12', 'db1 counts on after the restart');
is($node->safe_psql('db2', q{SELECT sc_incr('c', 1000, 1)}),
	'23', 'db2 counts on after the restart');
# A flusher starts with the first write in its database.
ok($node->poll_query_until('postgres', $flushers_query, 'db1:1,db2:1'),
	'after the restart each database has its flusher again, only one');
$node->safe_psql('db1', q{SELECT sc_incr('c', 1000, 1)});
my $key_1000 = q{SELECT value FROM slotted_counter.key_values WHERE key = 1000};
ok($node->poll_query_until('db1', $key_1000, '13'),
	'the new db1 flusher flushes on its own');
ok($node->poll_query_until('db2', $key_1000, '23'),
	'the new db2 flusher flushes on its own');

$node->stop;
done_testing();
