# Transactions of any size (transactions/large_commit.hpp). A table of 1,000,000 counters moves
# into a transactional counter and into a buffered one in one statement each, and reads back
# exactly, after a restart and (transactional) after a crash. A large commit is exact while small
# commits count into its keys; a value that another commit pushed out of range or out of bounds
# fails it with 22003 or 23514 and nothing of it counts; a key expired by its retention counts from
# 0; a drop of its counter fails it with 42704; a rank index built before it is not used after it;
# a read does not wait for a large commit that waits for a lock the reader holds;
# slotted_counter.max_transaction_keys bounds its keys with 53400; a row the filter of stored keys
# did not see does not fail the commit that takes its key for new; the rows its reads found are
# updated where they were found.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('large_transactions', '');
my $max = '9223372036854775807';

$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE TABLE old_counts AS
  SELECT g::bigint AS id, (g % 1000 + 1)::bigint AS n FROM generate_series(1, 1000000) g;
SELECT sc_create('t', 'transactional'), sc_create('b', 'buffered');
});

# The keys of `c` whose value differs from old_counts.n plus `plus`, and whether the total agrees.
sub mismatches
{
	my ($c, $plus) = @_;
	return $node->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE sc_sum('$c', id) <> n + $plus),
       sc_total('$c') = sum(n + $plus)
  FROM old_counts});
}

# 1. The migration, one statement each. Another counter's keys are in the buffer before it.
$node->safe_psql('postgres', q{
SELECT sc_create('hot', 'transactional');
SELECT count(sc_incr('hot', g, 1)) FROM generate_series(1, 1000) g;
});
is($node->safe_psql('postgres', q{SELECT count(sc_set('t', id, n)) FROM old_counts}),
	'1000000', 'a transactional counter takes 1,000,000 keys in one statement');
is($node->safe_psql('postgres', q{
BEGIN;
SELECT sum(sc_sum('hot', g)) FROM generate_series(1, 1000) g;
SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_xact_all_tables
 WHERE relid = 'slotted_counter.key_values'::regclass;
COMMIT;}),
	"1000\n0", 'and leaves another counter\'s keys in the buffer (read without a table)');
is($node->safe_psql('postgres', q{SELECT count(sc_set('b', id, n)) FROM old_counts}),
	'1000000', 'so does a buffered one');
is(mismatches('t', 0), '0|t', 'the transactional counter reads back exactly');
is(mismatches('b', 0), '0|t', 'the buffered counter reads back exactly');
$node->restart;
is(mismatches('t', 0) . ' ' . mismatches('b', 0), '0|t 0|t', 'both, after a restart');
$node->stop('immediate');
$node->start;
is(mismatches('t', 0), '0|t', 'the transactional counter, after a crash');
is($node->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.deltas}), '0',
	'its keys out of the buffer are their rows alone');

# 2. Small commits into its keys while a large commit of 100,000 keys is open and commits: each
# logs what it counted in the same transaction.
$node->safe_psql('postgres', q{
CREATE TABLE small_log (k bigint);
CREATE PROCEDURE small_commits(n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM sc_incr('t', (i * 7919) % 100000 + 1, 1);
    INSERT INTO small_log VALUES ((i * 7919) % 100000 + 1);
    COMMIT;
  END LOOP;
END $$;
});
my $large = $node->background_psql('postgres');
$large->query_safe('BEGIN');
$large->query_safe(q{SELECT count(sc_incr('t', id, 1)) FROM old_counts WHERE id <= 100000});
my ($out, $err) = ('', '');
my $small = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
	  '-c', 'CALL small_commits(3000)' ],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$node->poll_query_until('postgres', 'SELECT count(*) >= 100 FROM small_log');
$large->query_safe('COMMIT');
$large->quit;
$small->finish;
is($err, '', 'the small commits all committed');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('t', o.id) <> o.n + (o.id <= 100000)::int
                                                  + coalesce(l.c, 0))
  FROM old_counts o LEFT JOIN (SELECT k, count(*) c FROM small_log GROUP BY k) l ON l.k = o.id}),
	'0', 'every key holds its value, the large commit and every small one');

# 3. Out of range and out of bounds at the commit: another large commit changed the keys since.
$node->safe_psql('postgres', qq{
SELECT sc_create('o', 'transactional'), sc_create('p', 'transactional');
SELECT count(sc_set('o', k, CASE k WHEN 7 THEN $max - 30 ELSE 1 END)),
       count(sc_set('p', k, 0))
  FROM generate_series(1, 30000) k;
});
my $late = $node->background_psql('postgres', on_error_stop => 0);
$late->query_safe('\set VERBOSITY verbose');
$late->query_safe('BEGIN');
$late->query_safe(
	q{SELECT count(sc_incr('o', k, CASE k WHEN 7 THEN 15 ELSE 1 END)) FROM generate_series(1, 30000) k});
$node->safe_psql('postgres',
	q{SELECT count(sc_incr('o', k, CASE k WHEN 7 THEN 20 ELSE 1 END)) FROM generate_series(1, 30000) k});
$late->query('COMMIT');
like($late->{stderr}, qr/22003: value of counter "o" out of range/,
	'a commit whose key would leave bigint fails with 22003');
$late->{stderr} = '';
$late->query_safe('BEGIN');
$late->query_safe(q{SELECT count(sc_incr_bounded('p', k, 1, 0, 1)) FROM generate_series(1, 30000) k});
$node->safe_psql('postgres', q{SELECT count(sc_incr('p', k, 1)) FROM generate_series(1, 30000) k});
$late->query(q{COMMIT});
like($late->{stderr}, qr/23514: bounded increment of counter "p" would leave its bounds/,
	'a commit whose bounded key would leave its bounds fails with 23514');
$late->quit;
is($node->safe_psql('postgres', qq{
SELECT sc_sum('o', 7) = $max - 10, sc_sum('o', 8), sc_sum('o', 30000), sc_total('p')}),
	't|2|2|30000', 'and nothing of either counted');

# 4. A key expired by its counter's retention counts from 0.
$node->safe_psql('postgres', q{
SELECT sc_create('r', 'transactional', retain => '1 hour');
SELECT count(sc_set('r', k, 5)) FROM generate_series(1, 30000) k;
UPDATE slotted_counter.key_values SET written_at = written_at - interval '2 hours'
 WHERE counter = 'r'::slotted_counter::integer AND key = 9;
});
$node->safe_psql('postgres', q{SELECT count(sc_incr('r', k, 1)) FROM generate_series(1, 30000) k});
is($node->safe_psql('postgres', q{SELECT sc_sum('r', 9), sc_sum('r', 10)}), '1|6',
	'an expired key counts from 0, the others add');

# 5. A drop of the counter before the commit fails it.
$node->safe_psql('postgres', q{SELECT sc_create('x', 'transactional')});
my $dropped = $node->background_psql('postgres', on_error_stop => 0);
$dropped->query_safe('\set VERBOSITY verbose');
$dropped->query_safe('BEGIN');
$dropped->query_safe(q{SELECT count(sc_incr('x', k, 1)) FROM generate_series(1, 30000) k});
$node->safe_psql('postgres', q{SELECT sc_drop('x')});
$dropped->query('COMMIT');
like($dropped->{stderr}, qr/42704: counter "x" does not exist/,
	'a commit into a counter dropped meanwhile fails with 42704');
$dropped->quit;

# 6. A rank index built before a large commit is not used after it.
$node->safe_psql('postgres', q{
SELECT sc_create('k', 'transactional');
SELECT count(sc_set('k', g, g)) FROM generate_series(1, 30000) g;
SELECT sc_rank('k', 30000);
SELECT sc_rollup();
});
is($node->safe_psql('postgres',
		q{SELECT rank_indexes FROM slotted_counter.stats WHERE datname = current_database()}),
	'1', 'the index is built');
$node->safe_psql('postgres', q{SELECT count(sc_set('k', g, 30001 - g)) FROM generate_series(1, 30000) g});
is($node->safe_psql('postgres', q{SELECT sc_rank('k', 30000), sc_rank('k', 1)}), '30000|1',
	'ranks follow the large commit');
$node->safe_psql('postgres', q{SELECT sc_rollup()});
is($node->safe_psql('postgres', q{SELECT sc_rank('k', 30000), sc_rank('k', 2)}), '30000|2',
	'and the index built after it');

# 7. A session holding a lock the large commit needs (SHARE on key_values, as
# sc_rebuild_counter_totals takes) reads a key of the counter out of the buffer while the commit
# waits for it: the read does not wait for the commit, which then goes on (no hidden deadlock).
# (A flush first: its complete fold leaves loads reading key_values alone, so the commit reaches
# the rows it writes itself before any lock it waits for.)
$node->safe_psql('postgres', q{SELECT sc_create('dl', 'transactional'); SELECT sc_rollup()});
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('SELECT sc_rebuild_counter_totals()');
my ($lout, $lerr) = ('', '');
my $committer = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
	  '-c', q{BEGIN; SELECT count(sc_incr('dl', k, 1)) FROM generate_series(1, 30000) k; COMMIT;} ],
	'>', \$lout, '2>', \$lerr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$node->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND query LIKE 'BEGIN; SELECT count(sc_incr(''dl''%'});
is($locker->query_safe(q{SELECT sc_sum('dl', 99999), sc_sum('dl', 1)}), '0|0',
	'a read of the counter does not wait for a large commit that waits for its lock');
$locker->query_safe('COMMIT');
$locker->quit;
$committer->finish;
is($lerr, '', 'the large commit then commits');
is($node->safe_psql('postgres', q{SELECT sc_total('dl'), sc_sum('dl', 30000)}), '30000|1',
	'and counts everything');

# 8. slotted_counter.max_transaction_keys.
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
\set VERBOSITY verbose
SET slotted_counter.max_transaction_keys = 1000;
BEGIN;
SELECT count(sc_incr('t', k, 1)) FROM generate_series(1, 1001) k;
COMMIT;
});
like($stderr, qr/53400: transaction changes more than 1000 keys of transactional counters/,
	'a transaction beyond max_transaction_keys fails with 53400');
is($node->safe_psql('postgres', q{SELECT sc_sum('t', 1000001), sc_sum('t', 1001) - 2 - 1}),
	'0|' . $node->safe_psql('postgres', q{SELECT count(*) FROM small_log WHERE k = 1001}),
	'and nothing of it counted');

# 9. A large commit writes the keys the filter of stored keys knows never had a row with a plain
# INSERT. A row written where the filter's triggers did not run (a superuser's INSERT with
# session_replication_role = replica, as a subscriber's apply writes) fails that INSERT on the
# unique index: the upsert writes the rows instead, adding to that row.
$node->safe_psql('postgres', q{SELECT sc_create('unseen', 'transactional')});
$node->poll_query_until('postgres', q{
SELECT stored_keys = 'valid' FROM slotted_counter.stats WHERE datname = current_database()})
  or die 'the filter of stored keys did not become valid';
$node->safe_psql('postgres', q{
SET session_replication_role = replica;
INSERT INTO slotted_counter.key_values (counter, key, bucket, value)
  SELECT id, 7, '-infinity', 100 FROM slotted_counter.counters WHERE name = 'unseen';
});
is($node->safe_psql('postgres', q{
SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database()}),
	'valid', 'the filter stays valid without the row');
($ret, $stdout, $stderr) = $node->psql('postgres',
	q{SELECT count(sc_incr('unseen', k, 1)) FROM generate_series(1, 30000) k});
is("$ret $stdout $stderr", '0 30000 ', 'a large commit of its key and new ones commits');
is($node->safe_psql('postgres', q{
SELECT string_agg(value::text, ',' ORDER BY key) FROM slotted_counter.key_values v
  JOIN slotted_counter.counters c ON c.id = v.counter
 WHERE c.name = 'unseen' AND v.key IN (6, 7, 8)}),
	'1,101,1', 'and adds to the unseen row');
$node->safe_psql('postgres', q{SELECT sc_rebuild_counter_totals()});
is($node->safe_psql('postgres', q{SELECT sc_sum('unseen', 7), sc_total('unseen')}), '101|30100',
	'which reads back once the totals and the filter are rebuilt');

# 10. The rows a large transaction's reads found are updated where they were found: its commit
# makes no probe of key_values' primary key (its statement's reads made them), and the values and
# the sums are exact.
my $pkey_probes = q{
SELECT pg_stat_clear_snapshot();
SELECT idx_scan FROM pg_stat_all_indexes WHERE indexrelname = 'key_values_pkey'};
my $probes_before = $node->safe_psql('postgres', $pkey_probes);
my @seen = split /\n/, $node->safe_psql('postgres', q{
BEGIN;
SELECT count(sc_incr('unseen', k, 1)) FROM generate_series(1, 30000) k;
SELECT pg_stat_get_xact_numscans('slotted_counter.key_values_pkey'::regclass);
COMMIT;
SELECT pg_stat_force_next_flush();});
is($seen[0], '30000', 'a large transaction adds to 30,000 keys that have rows');
is($node->safe_psql('postgres', $pkey_probes) - $probes_before - $seen[1], 0,
	'its commit updates their rows where its reads found them, without a probe');
is($node->safe_psql('postgres', q{
SELECT sc_sum('unseen', 7), sc_sum('unseen', 30000), sc_total('unseen'),
       (SELECT sum(value) FROM slotted_counter.key_values v
          JOIN slotted_counter.counters c ON c.id = v.counter WHERE c.name = 'unseen')}),
	'102|2|60100|60100', 'and each value and the sum are exact');

$node->stop;
done_testing();
