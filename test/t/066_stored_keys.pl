# The filter of stored keys (core/stored_filter.hpp, shared/stored_keys.hpp): a key that was never
# stored is read as 0 without a probe of key_values, and never a key that has a row,
# whoever wrote it: the flush, a COPY or INSERT of a superuser, a restore; after a restart and a
# crash (rebuilt by the flusher); after an UPDATE of a key column, a TRUNCATE, a re-created
# extension, writes without triggers followed by sc_rebuild_counter_totals; while sessions count
# new and old keys and the filter is forgotten and rebuilt again and again; and with none. A new
# request id of sc_incr_once and a new text cost no probe either; an id stored applies once, a
# text stored keeps its id.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# Few request ids in shared memory: most of those a test writes have left it when it retries them.
my $node = preloaded_node('stored_keys',
	"slotted_counter.flush_interval = 0\nslotted_counter.idle_timeout = 0\n"
	  . "slotted_counter.max_request_ids = 128\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
CREATE ROLE rebuilder LOGIN;
GRANT EXECUTE ON FUNCTION slotted_counter.forget_stored_keys() TO rebuilder;
});

sub state
{
	my ($db) = @_;
	return $node->safe_psql($db // 'postgres',
		q{SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database()});
}

# Flushes until the flusher rebuilt the filter (it does after a flush).
sub wait_valid
{
	my ($db) = @_;
	return $node->poll_query_until($db // 'postgres', q{
SELECT sc_rollup() >= 0 AND (SELECT stored_keys FROM slotted_counter.stats
                              WHERE datname = current_database()) = 'valid'});
}

# Probes of key_values' indexes and scans of it since the last call, as the statistics count them.
my $scans = 0;
sub scans_since
{
	my ($db) = @_;
	my $now = $node->safe_psql($db // 'postgres', q{
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT seq_scan + coalesce(idx_scan, 0) FROM pg_stat_user_tables
 WHERE relid = 'slotted_counter.key_values'::regclass});
	$now = (split /\n/, $now)[-1];
	my $since = $now - $scans;
	$scans = $now;
	return $since;
}

# Scans of an index of the extension since the last call for it, as the statistics count them.
my %index_scans;
sub index_scans_since
{
	my ($index) = @_;
	my $now = $node->safe_psql('postgres', qq{
SELECT pg_stat_force_next_flush();
SELECT pg_stat_clear_snapshot();
SELECT idx_scan FROM pg_stat_user_indexes
 WHERE indexrelid = 'slotted_counter.$index'::regclass});
	$now = (split /\n/, $now)[-1];
	my $since = $now - ($index_scans{$index} // 0);
	$index_scans{$index} = $now;
	return $since;
}

# The sum of sc_sum of keys $from..$to of counter $c.
sub keys_sum
{
	my ($c, $from, $to) = @_;
	return $node->safe_psql('postgres', qq{
SELECT sum(sc_sum('$c', k)) FROM generate_series($from, $to) k});
}

# Every key of 1..$n of counter $c holds $each, and its total is the sum of its rows.
sub holds
{
	my ($db, $c, $n, $each) = @_;
	return $node->safe_psql($db, qq{
SELECT count(*) FILTER (WHERE sc_sum('$c', k) = $each) = $n
   AND sc_total('$c') = (SELECT sum(value) FROM slotted_counter.key_values
                          WHERE counter = '$c'::slotted_counter::integer)
  FROM generate_series(1, $n) k});
}

# 1. Valid after the first flush; new keys then cost no probe, and count from 0 (buffered and
# transactional).
is($node->safe_psql('postgres', q{
SELECT count(sc_incr('c', k, 3)) FROM generate_series(1, 10000) k}), '10000', 'counted');
ok(wait_valid(), 'the filter is valid after a flush');
scans_since();
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('c', k)) FROM generate_series(20001, 21000) k}), '1000',
	'new keys count from 0');
is(scans_since(), 0, 'and none of them probed key_values');
# So do a transactional counter's, while no committed increment waits for its fold.
$node->safe_psql('postgres', q{SELECT sc_create('tx', 'transactional'); SELECT sc_rollup()});
scans_since();
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('tx', k, 2)) FROM generate_series(1, 1000) k}), '2000',
	'new transactional keys count from 0');
is(scans_since(), 0, 'without a probe of key_values either');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
$node->restart;
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('tx', k)) FROM generate_series(1, 1000) k}), '3000',
	'and read their rows after a restart');

# 2. After a clean restart and after a crash the buffer is empty and the filter answers nothing
# until the flusher rebuilt it; the 10,000 keys read back exactly, before and after.
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $stop ('fast', 'immediate')
{
	$node->stop($stop);
	$node->start;
	# (the filter may be rebuilt already: a flusher starts with the server to write saved values)
	is(holds('postgres', 'c', 10000, 3), 't', "the keys read back after a $stop stop");
	$node->safe_psql('postgres', q{SELECT sc_sum('c', 1)});
	ok(wait_valid(), "rebuilt after a $stop stop");
	is(keys_sum('c', 9001, 10000), '3000',
		"stored keys read with the rebuilt filter after a $stop stop");
	is(keys_sum('c', 30001, 31000), '0',
		"never stored keys too");
}

# 3. Rows that others insert join the filter through the insert trigger: a superuser's COPY and
# INSERT, while it is valid.
ok(wait_valid(), 'valid before the copy');
my $cid = $node->safe_psql('postgres', q{SELECT 'c'::slotted_counter::integer});
my $rows = $node->basedir . '/rows.tsv';
open my $rows_fh, '>', $rows or die;
print $rows_fh "$cid\t$_\t5\n" for 40001 .. 41000;
close $rows_fh;
$node->safe_psql('postgres', qq{
COPY slotted_counter.key_values (counter, key, value) FROM '$rows';
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT 'c'::slotted_counter::integer, k, 5 FROM generate_series(41001, 42000) k;
});
is(state(), 'valid', 'a COPY and an INSERT leave it valid');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('c', k)) FROM generate_series(40001, 42000) k}), '12000',
	'the copied and inserted keys read their rows');

# 4. An UPDATE of a key column, sc_rebuild_counter_totals (and a TRUNCATE, in 5) make it answer
# nothing until rebuilt; the moved keys read their rows. Only a role granted it may forget it.
ok(wait_valid(), 'valid before the update');
$node->safe_psql('postgres', q{
UPDATE slotted_counter.key_values SET key = key + 100000
 WHERE counter = 'c'::slotted_counter::integer AND key BETWEEN 9001 AND 9100});
is(state(), 'invalid', 'an UPDATE of a key column invalidates it');
is(keys_sum('c', 109001, 109100), '300',
	'the moved keys read their rows');
ok(wait_valid(), 'rebuilt after the update');
is(keys_sum('c', 109101, 109200), '0',
	'keys never stored, after the rebuild');

$node->safe_psql('postgres', q{
ALTER TABLE slotted_counter.key_values DISABLE TRIGGER ALL;
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT 'c'::slotted_counter::integer, k, 9 FROM generate_series(50001, 50100) k;
ALTER TABLE slotted_counter.key_values ENABLE TRIGGER ALL;
});
is($node->safe_psql('postgres', 'SELECT sc_rebuild_counter_totals() > 0'), 't',
	'sc_rebuild_counter_totals');
is(state(), 'invalid', 'which invalidates the filter');
ok(wait_valid(), 'rebuilt after sc_rebuild_counter_totals');
# Disabling the triggers (as pg_restore --disable-triggers does around its COPY) invalidates it
# too, and enabling them again: rows written meanwhile are found without sc_rebuild_counter_totals.
$node->safe_psql('postgres', 'ALTER TABLE slotted_counter.key_values DISABLE TRIGGER ALL');
is(state(), 'invalid', 'disabling the triggers invalidates it');
ok(wait_valid(), 'rebuilt while they are disabled');
$node->safe_psql('postgres', q{
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT 'c'::slotted_counter::integer, k, 4 FROM generate_series(52001, 52100) k;
ALTER TABLE slotted_counter.key_values ENABLE TRIGGER ALL});
is(state(), 'invalid', 'enabling them again invalidates it');
ok(wait_valid(), 'rebuilt after they are enabled');
is(keys_sum('c', 52001, 52100), '400',
	'the rows written without triggers read back with the rebuilt filter');
is(keys_sum('c', 50001, 50100), '900',
	'the rows written without triggers read back');
ok(wait_valid(), 'rebuilt after sc_rebuild_counter_totals');
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT slotted_counter.forget_stored_keys()',
	extra_params => [ '-U', 'rebuilder' ]);
is($rc, 0, 'the role may forget it too');
$node->safe_psql('postgres', 'CREATE ROLE stranger LOGIN');
($rc, $out, $err) = $node->psql('postgres', 'SELECT slotted_counter.forget_stored_keys()',
	extra_params => [ '-U', 'stranger' ]);
like($err, qr/permission denied for function forget_stored_keys/, 'not a role without the grant');

# 5. A dropped and re-created extension has another table: the filter of the old one answers
# nothing for it; then a restore of a dump (COPY, triggers fire) reads back exactly.
$node->safe_psql('postgres', q{
SELECT count(sc_incr('c', k, 2)) FROM generate_series(1, 5000) k; SELECT sc_rollup();
CREATE DATABASE copy;
});
ok(wait_valid(), 'valid before the dump');
my $dump = $node->basedir . '/stored_keys.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ], 'dumped');
$node->safe_psql('copy', q{
CREATE EXTENSION slotted_counter; SELECT sc_create('x', 'buffered'); SELECT sc_incr('x', 1);
SELECT sc_rollup()});
ok(wait_valid('copy'), 'the second database has a valid filter');
$node->safe_psql('copy', 'TRUNCATE slotted_counter.key_values');
is(state('copy'), 'invalid', 'a TRUNCATE invalidates it');
ok(wait_valid('copy'), 'rebuilt after the truncate');
$node->safe_psql('copy', 'DROP EXTENSION slotted_counter');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('copy'), $dump ], 'restored');
is(holds('copy', 'c', 5000, 5), 't', 'the restored keys read back');
ok(wait_valid('copy'), 'rebuilt for the restored table');
is($node->safe_psql('copy', q{
SELECT sum(sc_incr('c', k)) FROM generate_series(200001, 201000) k}), '1000',
	'new keys of the restored counter count from 0');

# 6. Sessions counting new and old keys while the filter is forgotten and rebuilt again and
# again (a flush every 20 ms): every increment is in the values they return and in the table.
$node->safe_psql('postgres', q{
SELECT sc_create('r', 'buffered');
SELECT count(sc_incr('r', k)) FROM generate_series(1, 2000, 2) k;
SELECT sc_rollup();
CREATE TABLE seen (k bigint, v bigint);
});
my $script = $node->basedir . '/incr.sql';
open my $fh, '>', $script or die;
print $fh "\\set k random(1, 4000)\nINSERT INTO seen SELECT :k, sc_incr('r', :k);\n";
close $fh;
my $pgbench = IPC::Run::start(
	[ 'pgbench', '--no-vacuum', '--client=4', '--jobs=2', '--transactions=3000',
	  '-f', $script, $node->connstr('postgres') ],
	'>', \my $bench_out, '2>', \my $bench_err);
my $rebuilds = 0;
while ($pgbench->pumpable)
{
	$node->safe_psql('postgres', q{
SELECT sc_rollup(); SELECT slotted_counter.forget_stored_keys(); SELECT sc_rollup()});
	$rebuilds++;
	$pgbench->pump_nb;
	last if $rebuilds > 2000;
}
$pgbench->finish;
is($pgbench->result(0), 0, 'pgbench ran') or diag($bench_err);
cmp_ok($rebuilds, '>', 1, 'the filter was forgotten while they counted');
is($node->safe_psql('postgres', q{
SELECT bool_and(n = top) FROM (
  SELECT k, count(*) + CASE WHEN k % 2 = 1 AND k < 2000 THEN 1 ELSE 0 END AS n, max(v) AS top
    FROM seen GROUP BY k) s}), 't',
	'each key counted from its stored value: its last value is its increments, plus one if stored');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT sc_total('r') = (SELECT count(*) FROM seen) + 1000}), 't', 'and the table holds them all');

# 7. Request ids of sc_incr_once: a new id costs no probe of requests; an id stored before a
# restart applies once after it (the rebuild scans requests too), as does one a superuser
# inserted, and a transactional counter's.
$node->safe_psql('postgres', q{
SELECT sc_create('o', 'buffered'); SELECT sc_create('otx', 'transactional')});
ok(wait_valid(), 'valid before the request ids');
index_scans_since('requests_pkey');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr_once('o', 1, 1, 'id-' || i)) FROM generate_series(1, 500) i}), '125250',
	'new ids apply');
is(index_scans_since('requests_pkey'), 0, 'and none of them probed requests');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr_once('otx', 1, 1, 'id-' || i)) FROM generate_series(1, 500) i}), '125250',
	'new ids of a transactional counter apply');
is(index_scans_since('requests_pkey'), 500,
	'probing requests only for the conflict check of their insert');
my $once = q{
SELECT sum(sc_incr_once('o', 1, 1, 'id-' || i)) + sum(sc_incr_once('otx', 1, 1, 'id-' || i))
  FROM generate_series(1, 500) i};
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is(state(), 'valid', 'still valid after the flush that wrote the ids');
is($node->safe_psql('postgres', $once), '250500', 'retried after their flush, they apply once');
$node->restart;
is($node->safe_psql('postgres', $once), '250500', 'retried after a restart, they apply once');
ok(wait_valid(), 'rebuilt from key_values and requests');
is($node->safe_psql('postgres', $once), '250500', 'and once with the rebuilt filter');
is($node->safe_psql('postgres', q{SELECT sc_sum('o', 1) + sc_sum('otx', 1)}), '1000',
	'each id counted once');
$node->safe_psql('postgres', q{
INSERT INTO slotted_counter.requests (counter, request_id, key, result, applied_at)
  VALUES ('o'::slotted_counter::integer, 'by hand', 1, 77, now())});
is($node->safe_psql('postgres', q{SELECT sc_incr_once('o', 1, 1, 'by hand')}), '77',
	'an id a superuser inserted returns its result');
is($node->safe_psql('postgres', q{SELECT sc_sum('o', 1)}), '500', 'and counts nothing');

# 8. A rebuild waits, without stopping the flusher, for the transactions that were writing the
# tables when it cleared the filter: one that inserted an id and stays open keeps it
# "rebuilding" while flushes go on; once it commits, the filter is rebuilt and holds its id.
my ($open_in, $open_out) = ('', '');
my $open = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	'<', \$open_in, '>', \$open_out, '2>', \$open_out);
$open_in .= q{BEGIN;
INSERT INTO slotted_counter.requests (counter, request_id, key, result, applied_at)
  VALUES ('o'::slotted_counter::integer, 'open', 1, 88, now());
SELECT 'inserted';
};
$open->pump until $open_out =~ /inserted/;
$node->safe_psql('postgres', 'SELECT slotted_counter.forget_stored_keys()');
is($node->poll_query_until('postgres', q{
SELECT sc_rollup() >= 0 AND (SELECT stored_keys FROM slotted_counter.stats
                              WHERE datname = current_database()) = 'rebuilding'}), 1,
	'the rebuild waits for the open writer');
is($node->safe_psql('postgres', q{
SELECT sc_incr('o', 2, 1) = 1 AND sc_rollup() >= 0}), 't', 'while counts and flushes go on');
is($node->safe_psql('postgres', q{
SELECT stored_keys FROM slotted_counter.stats WHERE datname = current_database()}),
	'rebuilding', 'still waiting after them');
$open_in .= "COMMIT;\n";
$open->finish;
ok(wait_valid(), 'rebuilt once the writer committed');
is($node->safe_psql('postgres', q{SELECT sc_incr_once('o', 1, 1, 'open')}), '88',
	'and its id is in the filter');

# 9. Texts of counters keyed by text: a new text costs no probe of keys; a text stored before a
# restart keeps its id after it, as does one a superuser inserted.
$node->safe_psql('postgres', q{SELECT sc_create('t', 'buffered', key_type => 'text')});
ok(wait_valid(), 'valid before the texts');
# (the first new text asks the flusher, which then reserves a range of ids for the sessions)
is($node->poll_query_until('postgres', q{
SELECT sc_incr('t', '/warm-' || pg_catalog.clock_timestamp()) = 1 AND
       (SELECT last_value > 1 FROM slotted_counter.keys_id_seq)}), 1,
	'the flusher reserved a range of ids');
index_scans_since('keys_counter_key');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('t', '/page/' || i, 2)) FROM generate_series(1, 200) i}), '400',
	'new texts count from 0');
is(index_scans_since('keys_counter_key'), 0, 'and none of them probed keys');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('t', '/page/' || i, 2)) FROM generate_series(201, 500) i}), '600',
	'more new texts');
$node->safe_psql('postgres', q{
SELECT sc_rollup();
INSERT INTO slotted_counter.keys (counter, key) VALUES ('t'::slotted_counter::integer, '/by-hand')});
$node->safe_psql('postgres', q{
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT counter, id, 40 FROM slotted_counter.keys WHERE key = '/by-hand'});
is($node->safe_psql('postgres', q{SELECT sc_incr('t', '/by-hand')}), '41',
	'a text a superuser inserted keeps its id');
$node->restart;
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('t', '/page/' || i)) FROM generate_series(1, 500) i}), '1500',
	'the texts keep their ids after a restart');
ok(wait_valid(), 'rebuilt from the three tables');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('t', '/page/' || i)) FROM generate_series(1, 500) i}), '2000',
	'and with the rebuilt filter');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT count(*) = count(DISTINCT key) AND count(*) FILTER (WHERE key NOT LIKE '/warm-%') = 501
  FROM slotted_counter.keys WHERE counter = 't'::slotted_counter::integer}), 't',
	'one id per text');

# 10. With no filter: every load probes, and nothing else changes.
$node->append_conf('postgresql.conf', "slotted_counter.stored_keys_filter = 0\n");
$node->restart;
is(state(), 'off', 'no filter');
is(holds('copy', 'c', 5000, 5), 't', 'the keys read back without it');
is($node->safe_psql('postgres', q{
SELECT sum(sc_incr('c', k)) FROM generate_series(60001, 61000) k}), '1000',
	'new keys count from 0 without it');

$node->stop;
done_testing();
