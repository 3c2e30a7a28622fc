# sc_total from slotted_counter.counter_totals (one row per counter and bucket, kept by triggers on key_values)
# and the buffer: exact while flushes commit under it, after a crash, and after a restore.
#   a. load: pgbench adds 1 per call to four counters (buffered and transactional, with and
#      without buckets) over 100,000 keys, 8,000 calls, while the flusher flushes every 10 ms; a
#      reader reads each total 2,000 times in a row, in rounds until the load is done: a total that
#      ever goes down counted a flush twice or not at all. At the end each total equals the calls
#      pgbench reports, and every sum equals its rows.
#   b. a crash (stop 'immediate') during the load, once flushes committed under it and it
#      committed transactional increments: after recovery every sum equals its rows,
#      and each total equals the sum of its keys' rows and deltas (the buffer lost what it held).
#   c. pg_dump -Fc and pg_restore into a new database: the sums are made again from the rows; a
#      data-only restore with --disable-triggers, then sc_rebuild_counter_totals().
#   d. each writer of key_values, one at a time: the flush's new keys (below the executor) and its
#      updates (which keep the sums themselves, their rows firing no row trigger), its upserts after
#      a row it expected was deleted or appeared; a large commit of new keys; and a superuser's
#      INSERT, multi-row INSERT, COPY, UPDATE of a value and of a bucket, upsert and DELETE (the
#      bigint's ends among the values), in savepoints rolled back and kept: after each, every sum
#      equals its rows, and a key inserted by hand reads back (the filter of stored keys took it).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('sums', qq{
slotted_counter.flush_interval = 10ms
max_connections = 40
});
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b');
SELECT sc_create('t', 'transactional');
SELECT sc_create('h', bucket => '1 hour');
SELECT sc_create('ht', 'transactional', bucket => '1 hour');
});

# Every (counter, bucket) whose sum is not the sum of its rows.
my $mismatched = q{
SELECT count(*) FROM (SELECT counter, bucket, sum(value) AS v FROM slotted_counter.key_values
                      GROUP BY counter, bucket) t
  FULL JOIN slotted_counter.counter_totals s ON s.counter = t.counter AND s.bucket = t.bucket
 WHERE coalesce(t.v, 0) <> coalesce(s.value, 0)};
# How many times a total read 2,000 times in a row went down.
sub decreases
{
	my ($c) = @_;
	return qq{
SELECT count(*) FILTER (WHERE d < 0) FROM (
  SELECT v - lag(v) OVER (ORDER BY i) AS d FROM (
    SELECT i, sc_total('$c') AS v FROM generate_series(1, 2000) i) x) y};
}

# a. load
my $script = $node->basedir . '/051_load.sql';
append_to_file($script, q{\set k random(1, 100000)
SELECT sc_incr('b', :k::bigint), sc_incr('t', :k::bigint), sc_incr('h', :k::bigint), sc_incr('ht', :k::bigint);
});
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=1000',
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err, IPC::Run::timeout(600));
my $reader = $node->background_psql('postgres');
$reader->set_query_timer_restart();    # the hang guard is per read, not for the whole load
my ($rounds, $bad) = (0, 0);
do
{
	$bad += $reader->query_safe(decreases($_)) for qw(b t h ht);
	$rounds++;
	$load->pump_nb if $load->pumpable;
} while ($load->pumpable);
$load->finish;
is($load->full_result(0), 0, 'load: pgbench exited with 0');
is(scalar(() = $err =~ /error/gi), 0, 'load: no call failed');
my ($tx) = $out =~ m{number of transactions actually processed: (\d+)/8000};
is($tx, 8000, 'load: pgbench made its 8,000 calls');
note("load: $rounds rounds of reads until pgbench was done");
$bad += $reader->query_safe(decreases($_)) for qw(b t h ht);
is($bad, 0, 'load: no total read during the load ever went down');
$reader->quit;
is($node->safe_psql('postgres', q{SELECT sc_total('b'), sc_total('t'), sc_total('h'), sc_total('ht')}),
	"$tx|$tx|$tx|$tx", 'load: every total equals the calls pgbench reports');
is($node->safe_psql('postgres', q{SELECT sum(value) FROM sc_total_series('h', NULL, NULL)}), $tx,
	'load: the series of a bucketed counter adds up to its total');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', $mismatched), '0', 'load: every sum equals its rows');

# b. a crash during a load (sized far beyond what it makes before the stop)
($out, $err) = ('', '');
my $flushes_query = q{SELECT flushes FROM slotted_counter.stats WHERE datname = current_database()};
my $flushes_before = $node->safe_psql('postgres', $flushes_query);
$load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=5000',
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err, IPC::Run::timeout(600));
# The load runs, commits transactional increments, and flushes commit under it.
ok( $node->poll_query_until('postgres',
		"SELECT sc_total('t') > $tx AND ($flushes_query) >= $flushes_before + 2"),
	'crash: the load counts and flushes commit');
$node->stop('immediate');
$load->finish;
$node->start;
is($node->safe_psql('postgres', $mismatched), '0', 'crash: every sum equals its rows after recovery');
for my $c (qw(b t h ht))
{
	is($node->safe_psql('postgres', qq{
SELECT sc_total('$c') = (SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values WHERE counter = '$c'::slotted_counter::integer)
                      + (SELECT coalesce(sum(delta), 0) FROM slotted_counter.deltas WHERE counter = '$c'::slotted_counter::integer)}),
		't', "crash: $c: the total equals the sum of its keys");
}
is($node->safe_psql('postgres', qq{SELECT sc_total('t') > $tx}), 't',
	'crash: the transactional counter kept what the second load committed');

# c. dump and restore
my $totals = $node->safe_psql('postgres', q{SELECT sc_total('b'), sc_total('t'), sc_total('h'), sc_total('ht')});
my $dump = $node->basedir . '/051.dump';
$node->command_ok(['pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres')], 'restore: pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE copy');
$node->command_ok(['pg_restore', '-d', $node->connstr('copy'), $dump], 'restore: pg_restore');
is($node->safe_psql('copy', q{SELECT sc_total('b'), sc_total('t'), sc_total('h'), sc_total('ht')}), $totals,
	'restore: every total comes back');
is($node->safe_psql('copy', $mismatched), '0', 'restore: the sums were made again from the rows');
is($node->safe_psql('copy', 'SELECT count(*) >= 4 FROM slotted_counter.counter_totals'), 't',
	'restore: a sum per counter and bucket');

# A data-only restore with --disable-triggers bypasses the triggers: sc_rebuild_counter_totals() (a
# superuser's) makes the sums again. (pg_restore reports the counters' guard sequences, which a
# data-only dump does not create: its exit status is not the point here.)
$node->safe_psql('postgres', 'CREATE DATABASE copy_data');
$node->safe_psql('copy_data', 'CREATE EXTENSION slotted_counter');
run_log(['pg_restore', '--data-only', '--disable-triggers', '-d', $node->connstr('copy_data'), $dump]);
is($node->safe_psql('copy_data', 'SELECT count(*) FROM slotted_counter.counter_totals'), '0',
	'data-only restore without triggers: no sums');
$node->safe_psql('copy_data', 'CREATE ROLE sums_user');
my ($rc, $out, $err) = $node->psql('copy_data', 'SET ROLE sums_user; SELECT sc_rebuild_counter_totals()');
like($err, qr/permission denied for function sc_rebuild_counter_totals/, 'sc_rebuild_counter_totals: superusers only');
is($node->safe_psql('copy_data', 'SELECT sc_rebuild_counter_totals() >= 4'), 't',
	'sc_rebuild_counter_totals makes a sum per counter and bucket');
is($node->safe_psql('copy_data', $mismatched), '0', 'sc_rebuild_counter_totals: every sum equals its rows');
is($node->safe_psql('copy_data', q{SELECT sc_total('b'), sc_total('t'), sc_total('h'), sc_total('ht')}), $totals,
	'sc_rebuild_counter_totals: every total comes back');

# d. each writer, one at a time (statements of fewer keys than a large commit takes, so that the
# flusher writes them, but the large commit's)
# The load's counters go first: their 400,000 keys filled the buffer, whose new keys would be
# written through rather than flushed.
$node->safe_psql('postgres', q{
SELECT sc_drop('b'), sc_drop('t'), sc_drop('h'), sc_drop('ht');
SELECT sc_create('fb', 'buffered'), sc_create('fh', 'buffered', bucket => '1 day'),
       sc_create('ft', 'transactional')});
sub writes_ok
{
	my ($sql, $what) = @_;
	$node->safe_psql('postgres', $sql);
	is($node->safe_psql('postgres', $mismatched), '0', "$what: every sum equals its rows");
}
writes_ok(q{
SELECT count(sc_incr('fb', g, g)), count(sc_incr('fh', g, 1, at => '2026-01-01'))
  FROM generate_series(1, 10000) g;
SELECT sc_rollup();}, 'the flush of new keys');
writes_ok(q{
SELECT count(sc_incr('fb', g, 2)), count(sc_incr('fh', g, 1, at => '2026-01-01'))
  FROM generate_series(1, 10000) g;
SELECT sc_rollup();}, 'the flush of keys with rows');
is($node->safe_psql('postgres', q{SELECT sc_total('fb') = 10000 * 10001 / 2 + 20000, sc_total('fh')}),
	't|20000', 'the flushes: the totals are the calls');
# A row the flush expects gone (its UPDATE finds none), a row it does not expect there (its
# insertion meets one): both written again as upserts.
writes_ok(q{
DELETE FROM slotted_counter.key_values WHERE counter = 'fb'::slotted_counter::integer AND key = 5;
INSERT INTO slotted_counter.key_values (counter, key, value)
  VALUES ('fb'::slotted_counter::integer, 30001, 7);
SELECT sc_incr('fb', 5, 1), sc_incr('fb', 30001, 1), sc_incr('fb', 6, 1);
SELECT sc_rollup();}, 'the flush\'s upserts');
is($node->safe_psql('postgres', q{SELECT sc_sum('fb', 30001), sc_sum('fb', 6)}),
	'8|9', 'the flush\'s upserts: a row inserted by hand counts on');
writes_ok(q{SELECT count(sc_set('ft', g, g)) FROM generate_series(1, 60000) g},
	'a large commit of new keys');
is($node->safe_psql('postgres', q{SELECT sc_total('ft') = 60000::numeric * 60001 / 2}), 't',
	'a large commit of new keys: the total');
my $ft = $node->safe_psql('postgres', q{SELECT 'ft'::slotted_counter::integer});
writes_ok(qq{
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES ($ft, 70001, 3);
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT $ft, g, 1 FROM generate_series(70002, 70100) g;
UPDATE slotted_counter.key_values SET value = value * 2 WHERE counter = $ft AND key <= 10;
UPDATE slotted_counter.key_values SET bucket = '2026-01-02'
  WHERE counter = 'fh'::slotted_counter::integer AND key <= 10;
INSERT INTO slotted_counter.key_values (counter, key, value)
  SELECT $ft, g, 5 FROM generate_series(70050, 70150) g
  ON CONFLICT ON CONSTRAINT key_values_pkey DO UPDATE SET value = excluded.value - 9;
DELETE FROM slotted_counter.key_values WHERE counter = $ft AND key BETWEEN 20 AND 30;
INSERT INTO slotted_counter.key_values (counter, key, value)
  VALUES ($ft, 70201, -9223372036854775808), ($ft, 70202, 9223372036854775807);
UPDATE slotted_counter.key_values SET value = value / 2 WHERE counter = $ft AND key IN (70201, 70202);},
	'a superuser\'s INSERT, UPDATE, upsert and DELETE');
writes_ok(qq{
BEGIN;
SAVEPOINT a;
INSERT INTO slotted_counter.key_values (counter, key, value) VALUES ($ft, 80001, 100);
ROLLBACK TO a;
SAVEPOINT b;
DO \$\$BEGIN
  UPDATE slotted_counter.key_values SET value = value + 1000 WHERE counter = $ft AND key <= 100;
  RAISE division_by_zero;
EXCEPTION WHEN division_by_zero THEN NULL;
END\$\$;
UPDATE slotted_counter.key_values SET value = value + 1 WHERE counter = $ft AND key = 1;
RELEASE b;
COMMIT;}, 'statements rolled back to savepoints');
$node->safe_psql('postgres', qq{
COPY slotted_counter.key_values (counter, key, value) FROM PROGRAM 'seq 90001 90300 | sed "s/^/$ft\t/; s/\$/\t4/"'});
is($node->safe_psql('postgres', $mismatched), '0', 'a superuser\'s COPY: every sum equals its rows');
is($node->safe_psql('postgres', q{SELECT sc_sum('ft', 70001), sc_sum('ft', 70100), sc_sum('ft', 90300)}),
	'3|-4|4', 'rows inserted by hand read back');
is($node->safe_psql('postgres', qq{SELECT sc_total('ft') = (SELECT sum(value) FROM slotted_counter.key_values WHERE counter = $ft)}),
	't', 'the transactional total is its rows');

done_testing();
