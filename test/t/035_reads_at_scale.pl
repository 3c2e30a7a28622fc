# Every read of slotted_counter over 100,000 keys while other sessions write, as users run them.
#
# Four counters of 100,000 keys each: b (buffered), t (transactional), hb and ht (their bucketed
# twins, '1 hour' buckets), in a buffer of 30,000 entries flushed every 50 ms, so entries are
# evicted and loaded all the time, and batches of 10,000 keys are written through. 8 pgbench
# clients increment them (single keys, transactions of several keys, rolled-back transactions,
# batches: 9,100 transactions and 13 batches) and churn new keys of two other counters, 2 clients
# of a second database increment a counter with the same name and id (7,000 transactions), and 2
# more read sc_top over and over (8 times). Meanwhile
# this test's own session increments them too (committed, and pending in an open transaction) and
# reads everything in rounds: sc_top (n = 1, 10, 1,000 and every key; unbucketed and bucketed,
# over all buckets and over ranges), sc_series, sc_sum (with and without a range), sc_sum_keys and
# slotted_counter.lagged.
#
# Every counter only grows, so the reads can be checked while the writers run, without timing: a
# value read later is never smaller than one read earlier, nor than the value before the writers,
# nor more than the final value; the lagged view is never ahead of a real-time read that follows
# it; a range never holds more than the whole; sc_top returns n rows in order, each key once, and
# every key whose earlier value already beat its n-th row. Once the writers stopped and a rollup
# ran, every read equals the truth: every increment is also inserted into a log table, in the same
# statement (a buffered increment counts even if its transaction rolls back, so those are single
# statements) or in the same transaction (a transactional one), and the log is summed apart.
#
# And no backend crashes: none "terminated by signal" in the log, the postmaster did not restart
# its processes, and the test's own session is still connected at the end.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('reads_at_scale', qq{
slotted_counter.max_entries = 30000
slotted_counter.flush_interval = 50
max_connections = 40
restart_after_crash = on
});

# b, t, hb, ht are read and checked; churn and churn_t only take room in the buffer. In the log,
# h is the bucket (hours after bucket_of(0)), r what the increment returned.
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('t'), sc_create('hb', 'buffered', '1 hour'),
       sc_create('ht', 'transactional', '1 hour'), sc_create('churn', 'buffered'),
       sc_create('churn_t');
CREATE TABLE log (c text, k bigint, h int, d bigint, r bigint);
CREATE FUNCTION bucket_of(h int) RETURNS timestamptz IMMUTABLE LANGUAGE sql
  AS $$ SELECT '2024-01-01 00:00+00'::timestamptz + h * interval '1 hour' $$;
-- What is read: a counter over a range of buckets (NULL: open; unbucketed counters have none).
-- While the writers run, sc_top of every key is read for the ranges marked every_key.
CREATE TABLE ranges (c text PRIMARY KEY, counter text, since timestamptz, until timestamptz,
                     every_key boolean);
INSERT INTO ranges VALUES ('b', 'b', NULL, NULL, true), ('t', 't', NULL, NULL, true),
  ('hb', 'hb', NULL, NULL, true), ('ht', 'ht', NULL, NULL, false),
  ('hb 1-3', 'hb', bucket_of(1), bucket_of(4), false), ('ht 1-3', 'ht', bucket_of(1), bucket_of(4), true),
  ('hb 2-', 'hb', bucket_of(2), NULL, false), ('ht -4', 'ht', NULL, bucket_of(5), false);
-- sc_sum_keys of groups (g: the keys k % 10 = g; -1: every key), round after round.
CREATE TABLE sum_keys_seen (round int, c text, g int, v bigint);
});

# The values before the writers: every key of every counter, about ten keys per value (ties),
# in bucket k % 6 for hb and ht.
my $seed = '(k * 7919 % 100003) / 10 + 1';
$node->safe_psql('postgres', qq{
INSERT INTO log SELECT 'b', u.k, NULL, u.d, u.r
FROM (SELECT array_agg(k ORDER BY k) AS ks, array_agg($seed ORDER BY k) AS ds
      FROM generate_series(1, 100000) k) a,
     unnest(a.ks, a.ds, sc_incr_batch('b', a.ks, a.ds)) u(k, d, r);
INSERT INTO log SELECT 'hb', k, k % 6, $seed, sc_incr('hb', k, $seed, bucket_of(k % 6))
FROM generate_series(1, 100000) k;
CREATE TABLE seed AS SELECT c, k, $seed AS v FROM generate_series(1, 100000) k,
  (VALUES ('b'), ('t'), ('hb'), ('ht 1-3')) c(c) WHERE c <> 'ht 1-3' OR k % 6 BETWEEN 1 AND 3;
});
# A transaction may change at most half the buffer's keys of transactional counters.
for my $from (map { $_ * 5000 + 1 } 0 .. 19)
{
	my $to = $from + 4999;
	$node->safe_psql('postgres', qq{
INSERT INTO log SELECT 't', k, NULL, $seed, sc_incr('t', k, $seed) FROM generate_series($from, $to) k;
INSERT INTO log SELECT 'ht', k, k % 6, $seed, sc_incr('ht', k, $seed, bucket_of(k % 6))
FROM generate_series($from, $to) k;
});
}
is( $node->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT count(*) FROM slotted_counter.lagged WHERE counter IN ('b', 't', 'hb', 'ht')}),
	"t\n400000", 'after a rollup, the lagged view has every value counted before the writers');

# Another database, whose counter b has the id of this one's: its keys are this one's, with
# values a thousand times larger than any here, so a read that took an entry of the wrong
# database would show it.
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('b', 'buffered'), sc_create('churn', 'buffered');
CREATE TABLE log (k bigint, d bigint, r bigint);
});
is( $node->safe_psql('other', q{SELECT 'b'::slotted_counter::integer}),
	$node->safe_psql('postgres', q{SELECT 'b'::slotted_counter::integer}),
	'the other database has a counter b with the same id');

# After a backend crash the postmaster restarts every process (restart_after_crash, as in
# production): the checkpointer's pid tells.
my $checkpointer_sql = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'};
my $checkpointer = $node->safe_psql('postgres', $checkpointer_sql);
my $stats_sql = q{SELECT write_throughs, evictions FROM slotted_counter.stats
WHERE datname = current_database()};
my ($write_throughs_before, $evictions_before) =
  split /\|/, $node->safe_psql('postgres', $stats_sql);
my $logged_before = $node->safe_psql('postgres', 'SELECT count(*) FROM log');

# The writers: pgbench, $transactions for each of its clients, each with its scripts.
sub start_pgbench
{
	my ($db, $clients, $transactions, %scripts) = @_;
	my @files;
	for my $name (sort keys %scripts)
	{
		my ($weight, $text) = @{ $scripts{$name} };
		my $file = $node->basedir . "/$name.sql";
		append_to_file($file, $text);
		push @files, "--file=$file\@$weight";
	}
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			'pgbench', '--no-vacuum', "--client=$clients", '--jobs=1', "--transactions=$transactions",
			@files, '-h', $node->host, '-p', $node->port, $db
		],
		'>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return { handle => $h, out => \$out, err => \$err, transactions => $clients * $transactions, what => "pgbench on $db, " . join(', ', sort keys %scripts) };
}

my $one_key = q{
\set k random(1, 100000)
\set k2 random(1, 100000)
\set d random(1, 1000)
\set d2 random(1, 1000)
\set h random(0, 5)
};
my @loads = (
	start_pgbench(
		'postgres', 7, 1300,
		b => [ 4, $one_key . q{
INSERT INTO log VALUES ('b', :k, NULL, :d, sc_incr('b', :k, :d));
} ],
		hb => [ 2, $one_key . q{
INSERT INTO log VALUES ('hb', :k, :h, :d, sc_incr('hb', :k, :d, bucket_of(:h)));
} ],
		t => [ 3, $one_key . q{
BEGIN;
INSERT INTO log VALUES ('t', :k, NULL, :d, sc_incr('t', :k, :d));
INSERT INTO log VALUES ('ht', :k2, :h, :d2, sc_incr('ht', :k2, :d2, bucket_of(:h)));
INSERT INTO log VALUES ('t', :k2, NULL, :d2, sc_incr('t', :k2, :d2));
COMMIT;
} ],
		# Increments so large that one counted would top every sc_top.
		rolled_back => [ 1, $one_key . q{
BEGIN;
INSERT INTO log VALUES ('t', :k, NULL, 1000000000, sc_incr('t', :k, 1000000000));
INSERT INTO log VALUES ('ht', :k, :h, 1000000000, sc_incr('ht', :k, 1000000000, bucket_of(:h)));
ROLLBACK;
} ],
		churn => [ 2, q{
\set k random(1, 10000000)
SELECT sc_incr('churn', :k), sc_incr('churn_t', :k);
} ]),
	# More keys than a quarter of the buffer: some are written through.
	start_pgbench(
		'postgres', 1, 13,
		batch => [ 1, q{
WITH a AS MATERIALIZED (
  SELECT array_agg((random() * 99999)::bigint + 1) AS ks, array_agg((random() * 9)::bigint + 1) AS ds
  FROM generate_series(1, 10000)),
r AS MATERIALIZED (SELECT sc_incr_batch('b', ks, ds) AS rs FROM a)
INSERT INTO log SELECT 'b', u.k, NULL, u.d, u.r FROM a, r, unnest(a.ks, a.ds, r.rs) u(k, d, r);
} ]),
	# Other sessions reading sc_top over and over; a division by zero means a wrong result.
	start_pgbench(
		'postgres', 2, 4,
		top_readers => [ 1, q{
SELECT 1 / (count(*) = n AND count(DISTINCT k) = n AND bool_and(k BETWEEN 1 AND 100000)
            AND bool_and(v BETWEEN 1 AND 100000000) AND bool_and(pv > v OR (pv = v AND pk < k)) IS NOT FALSE)::int
FROM (SELECT r.c, r.n, x.k, x.v, lag(x.v) OVER w AS pv, lag(x.k) OVER w AS pk
      FROM (VALUES ('b', 10), ('t', 10), ('b', 1000), ('hb', 10)) r(c, n),
      LATERAL sc_top(r.c, r.n) WITH ORDINALITY x(k, v, o)
      WINDOW w AS (PARTITION BY r.c, r.n ORDER BY x.o)) s
GROUP BY c, n;
} ]),
	start_pgbench(
		'other', 2, 3500,
		other_b => [ 1, q{
\set k random(1, 100000)
\set c random(1, 10000000)
INSERT INTO log VALUES (:k, 1000000000, sc_incr('b', :k, 1000000000));
SELECT sc_incr('churn', :c);
} ]));

# A backend that crashes takes every session with it while the server restarts: these waits and
# connections fail then, and the test goes on to say so.
sub poll_surviving
{
	my ($query) = @_;
	for (1 .. 100)
	{
		my $ok = eval { $node->poll_query_until('postgres', $query) };
		return $ok if defined $ok;
		note("polling failed: $@");
	}
	return 0;
}

# Reads start once the writers count (or once a crash restarted the server: checked below).
poll_surviving(qq{SELECT count(*) > $logged_before + 1000 OR ($checkpointer_sql) <> $checkpointer FROM log})
  or diag('the writers never counted');

# The rounds of reads, in one session that lives through the test.
my $reader = eval {
	my $session = $node->background_psql('postgres');
	$session->set_query_timer_restart();    # the hang guard is per round, not for them all
	$session->query_safe('SET client_min_messages = warning');
	$session;
};
my $connect_error = $@;

sub round_sql
{
	my ($round) = @_;
	my $own = ($round * 7919) % 100000 + 1;
	my $step = 997;
	my $first = $round % $step + 1;
	my $g = $round % 10;
	return qq{
-- This session counts too: buffered, and transactional committed...
INSERT INTO log SELECT 'b', k, NULL, 7, sc_incr('b', k, 7) FROM generate_series($first, 100000, 1009) k;
INSERT INTO log SELECT 't', k, NULL, 3, sc_incr('t', k, 3) FROM generate_series($first, 100000, 1013) k;
-- ... and pending: its own increments count in its reads, until it rolls them back.
BEGIN;
SELECT sc_incr('t', $own, 1000000000), sc_incr('ht', $own, 1000000000, bucket_of(2)) \\g /dev/null
SELECT 'own pending increments not read', count(*) FILTER (WHERE ok IS NOT TRUE), string_agg(what, ', ') FILTER (WHERE ok IS NOT TRUE) FROM (
  SELECT 'sc_top(t, 1)', (SELECT k = $own AND v >= 1000000000 FROM sc_top('t', 1) x(k, v))
  UNION ALL SELECT 'sc_top(ht, 1)', (SELECT k = $own AND v >= 1000000000 FROM sc_top('ht', 1) x(k, v))
  UNION ALL SELECT 'sc_top(ht, 1, 1-3)',
    (SELECT k = $own AND v >= 1000000000 FROM sc_top('ht', 1, bucket_of(1), bucket_of(4)) x(k, v))
  UNION ALL SELECT 'sc_sum(t)', sc_sum('t', $own) >= 1000000000
  UNION ALL SELECT 'sc_sum(ht, 2)', sc_sum('ht', $own, bucket_of(2), bucket_of(3)) >= 1000000000
  UNION ALL SELECT 'sc_series(ht)', (SELECT sum(value) >= 1000000000 FROM sc_series('ht', $own, NULL, NULL))
  UNION ALL SELECT 'sc_sum_keys(t)', sc_sum_keys('t', ARRAY[$own, $own % 100000 + 1]::bigint[]) >= 1000000000
  UNION ALL SELECT 'sc_sum_keys(ht)', sc_sum_keys('ht', ARRAY[$own]::bigint[]) >= 1000000000) s(what, ok);
ROLLBACK;
SELECT 'rolled back increments read', count(*) FILTER (WHERE ok IS NOT TRUE), string_agg(what, ', ') FILTER (WHERE ok IS NOT TRUE) FROM (
  SELECT 'sc_top(t, 1)', (SELECT v < 1000000000 FROM sc_top('t', 1) x(k, v))
  UNION ALL SELECT 'sc_top(ht, 1)', (SELECT v < 1000000000 FROM sc_top('ht', 1) x(k, v))
  UNION ALL SELECT 'sc_sum(t)', sc_sum('t', $own) < 1000000000
  UNION ALL SELECT 'sc_sum(ht)', sc_sum('ht', $own) < 1000000000) s(what, ok);

-- The lagged values, then sc_top of every key, then sc_top(n): each read after the one before.
-- (n = 200000 stands for every key.)
DROP TABLE IF EXISTS lagged_read, top, sums, series, series_sums;
CREATE TEMP TABLE lagged_read AS SELECT counter::text AS counter, key AS k, bucket, value AS v
  FROM slotted_counter.lagged WHERE counter IN ('b', 't', 'hb', 'ht');
CREATE TEMP TABLE top AS SELECT r.c, 200000 AS n, x.k, x.v, x.o
  FROM ranges r, LATERAL sc_top(r.counter, 200000, r.since, r.until) WITH ORDINALITY x(k, v, o)
  WHERE r.every_key;
INSERT INTO top SELECT r.c, n.n, x.k, x.v, x.o
  FROM ranges r JOIN (VALUES (10), (1000)) n(n) ON n.n = 10 OR r.c IN ('b', 'hb 1-3'),
  LATERAL sc_top(r.counter, n.n, r.since, r.until) WITH ORDINALITY x(k, v, o);
-- Then sc_sum of the first of those keys, over the range and over everything.
CREATE TEMP TABLE sums AS SELECT t.c, t.k, t.v, sc_sum(r.counter, t.k, r.since, r.until) AS ranged,
  sc_sum(r.counter, t.k) AS whole
  FROM (SELECT DISTINCT ON (c, k) c, k, v FROM top WHERE n < 200000 AND o <= 100 ORDER BY c, k, v DESC) t
  JOIN ranges r USING (c);
-- Then sc_series of a sample of keys, then their sc_sum.
CREATE TEMP TABLE series AS SELECT r.c, s.k, x.bucket, x.value AS v, x.o
  FROM ranges r, generate_series($first, 100000, $step) s(k),
  LATERAL sc_series(r.counter, s.k, r.since, r.until) WITH ORDINALITY x(bucket, value, o)
  WHERE r.counter IN ('hb', 'ht');
CREATE TEMP TABLE series_sums AS SELECT r.c, s.k, sc_sum(r.counter, s.k, r.since, r.until) AS v
  FROM ranges r, generate_series($first, 100000, $step) s(k) WHERE r.counter IN ('hb', 'ht');
-- Then sc_sum_keys of every key, and of a tenth of them.
INSERT INTO sum_keys_seen SELECT $round, r.c, g.g, sc_sum_keys(r.counter, g.keys)
  FROM ranges r, (SELECT $g AS g, array_agg(k) AS keys FROM generate_series($g, 100000, 10) k WHERE k > 0
                  UNION ALL SELECT -1, array_agg(k) FROM generate_series(1, 100000) k) g
  WHERE r.since IS NULL AND r.until IS NULL;
ANALYZE lagged_read, top, series, series_sums;

SELECT 'sc_top not ordered by value desc then key, a key twice, or a key out of range', count(*),
  string_agg(DISTINCT c || ' n=' || n, ', ') FROM (
  SELECT c, n, k, v, lag(v) OVER w AS pv, lag(k) OVER w AS pk, count(*) OVER (PARTITION BY c, n, k) AS times
  FROM top WINDOW w AS (PARTITION BY c, n ORDER BY o)) s
  WHERE times > 1 OR k NOT BETWEEN 1 AND 100000 OR NOT (pv > v OR (pv = v AND pk < k));
SELECT 'sc_top returned a key never counted (value 0) or a negative value', count(*),
  string_agg(DISTINCT c || ' n=' || n, ', ') FROM top WHERE v <= 0;
SELECT 'sc_top(n) without n rows', count(*), string_agg(c || ' n=' || n || ': ' || coalesce(rows, 0), ', ') FROM (
  SELECT r.c, n.n, t.rows FROM ranges r JOIN (VALUES (10), (1000)) n(n) ON n.n = 10 OR r.c IN ('b', 'hb 1-3')
  LEFT JOIN (SELECT c, n, count(*) AS rows FROM top GROUP BY c, n) t USING (c, n)) s
  WHERE rows IS DISTINCT FROM n;
SELECT 'sc_top(every key) left out a key, or read less than before the writers', count(*),
  string_agg(DISTINCT s.c, ', ') FROM seed s LEFT JOIN top t ON t.c = s.c AND t.n = 200000 AND t.k = s.k
  WHERE t.v IS NULL OR t.v < s.v;
SELECT 'lagged ahead of sc_top read after it', count(*), string_agg(DISTINCT g.c, ', ') FROM (
  SELECT r.c, l.k, sum(l.v) AS v FROM lagged_read l JOIN ranges r ON r.counter = l.counter
    AND (r.since IS NULL OR l.bucket >= r.since) AND (r.until IS NULL OR l.bucket < r.until)
  WHERE r.every_key GROUP BY r.c, l.k) g
  LEFT JOIN top t ON t.c = g.c AND t.n = 200000 AND t.k = g.k WHERE g.v > coalesce(t.v, 0);
SELECT 'sc_top(n) read less than sc_top(every key) before it', count(*), string_agg(DISTINCT s.c || ' n=' || s.n, ', ')
  FROM top s JOIN top a ON a.c = s.c AND a.n = 200000 AND a.k = s.k WHERE s.n < 200000 AND s.v < a.v;
SELECT 'sc_top(n) left out a key that already beat its n-th row', count(*), string_agg(DISTINCT last.c || ' n=' || last.n, ', ')
  FROM (SELECT c, n, k AS nk, v AS nv FROM top WHERE n < 200000 AND o = n) last
  JOIN top a ON a.c = last.c AND a.n = 200000 AND (a.v > last.nv OR (a.v = last.nv AND a.k < last.nk))
  WHERE NOT EXISTS (SELECT FROM top s WHERE s.c = last.c AND s.n = last.n AND s.k = a.k);
SELECT 'sc_sum read after sc_top less than it, or a range more than the whole', count(*), string_agg(DISTINCT c, ', ')
  FROM sums WHERE ranged < v OR whole < ranged;
SELECT 'sc_series not in bucket order, a zero, or a bucket out of range', count(*), string_agg(DISTINCT s.c, ', ') FROM (
  SELECT c, k, bucket, v, lag(bucket) OVER (PARTITION BY c, k ORDER BY o) AS pb FROM series) s JOIN ranges r USING (c)
  WHERE v <= 0 OR bucket <= pb OR bucket < coalesce(r.since, bucket_of(0)) OR bucket >= coalesce(r.until, bucket_of(6))
  OR bucket <> date_trunc('hour', bucket);
SELECT 'sc_series left out a bucket or read less than lagged before it', count(*), string_agg(DISTINCT r.c, ', ')
  FROM lagged_read l JOIN ranges r ON r.counter = l.counter
    AND (r.since IS NULL OR l.bucket >= r.since) AND (r.until IS NULL OR l.bucket < r.until)
  JOIN generate_series($first, 100000, $step) s(k) ON s.k = l.k
  LEFT JOIN series x ON x.c = r.c AND x.k = l.k AND x.bucket = l.bucket
  WHERE r.counter IN ('hb', 'ht') AND (x.v IS NULL OR x.v < l.v);
SELECT 'sc_series summed less than sc_top before it, or more than sc_sum after it', count(*), string_agg(DISTINCT s.c, ', ')
  FROM series_sums s LEFT JOIN (SELECT c, k, sum(v) AS v FROM series GROUP BY c, k) x USING (c, k)
  LEFT JOIN top t ON t.c = s.c AND t.n = 200000 AND t.k = s.k
  WHERE coalesce(x.v, 0) < coalesce(t.v, 0) OR coalesce(x.v, 0) > s.v;
SELECT 'sc_sum_keys less than the sum of sc_top before it, or less than in the round before', count(*), string_agg(DISTINCT s.c, ', ')
  FROM sum_keys_seen s
  LEFT JOIN (SELECT c, $g AS g, sum(v) AS v FROM top WHERE n = 200000 AND k % 10 = $g GROUP BY 1
             UNION ALL SELECT c, -1, sum(v) FROM top WHERE n = 200000 GROUP BY 1) t USING (c, g)
  LEFT JOIN sum_keys_seen p ON p.c = s.c AND p.g = s.g AND p.round = s.round - 1
  WHERE s.round = $round AND (s.v < coalesce(t.v, 0) OR s.v < coalesce(p.v, 0));
};
}

# Rounds while the writers run (at least one, which starts while they do).
my %violations;
my @details;
my ($rounds, $read_error) = (0, '');
$read_error = "no session: $connect_error" unless defined $reader;
while (defined $reader)
{
	$rounds++;
	my $out = eval { $reader->query_safe(round_sql($rounds)) };
	if (!defined $out)
	{
		$read_error = "round $rounds: $@";
		last;
	}
	for my $line (split /\n/, $out)
	{
		my ($check, $count, $where) = split /\|/, $line;
		$violations{$check} += $count;
		push @details, "round $rounds: $check: $count ($where)" if $count;
	}
	$_->{handle}->pumpable && $_->{handle}->pump_nb for @loads;
	last unless $loads[0]{handle}->pumpable;
	last if $rounds == 30;
}
is($read_error, '', "$rounds rounds of reads, every read succeeded while the writers ran");
diag(join("\n", @details)) if @details;
is($violations{$_}, 0, "while the writers ran: $_, never") for sort keys %violations;

for my $load (@loads)
{
	$load->{handle}->finish;
	my ($tx) = ${ $load->{out} } =~ /number of transactions actually processed: (\d+)/;
	is(${ $load->{err} } =~ /error|abort/i ? ${ $load->{err} } : '', '', "$load->{what}: no call failed");
	is($tx // 0, $load->{transactions}, "$load->{what}: every transaction ran");
}

# What a user would notice if a backend crashed.
my $crashes = join("\n",
	grep { /terminated by signal|Failed process was running/ } split /\n/, slurp_file($node->logfile));
is($crashes, '', 'no backend crashed');
my $crashed = $crashes ne '';
poll_surviving('SELECT true');
is($node->safe_psql('postgres', $checkpointer_sql), $checkpointer, 'the postmaster did not restart its processes');
is(eval { $reader->query_safe('SELECT 1') } // "lost: $@", '1', "the test's own session is still connected");
eval { $reader->quit };

# Once the writers stopped and a rollup ran: every read equals the truth that the log holds.
# Each check lists (at most 5 of) the rows that differ: none. After a crash, buffered increments
# since the last flush are lost by design, so there is no truth to compare with.
sub differ
{
	my ($db, $sql, $what) = @_;
	my ($ret, $out, $err) = $node->psql($db, $sql);
	is($ret == 0 ? $out : "failed: $err", '', $what);
}

SKIP:
{
	skip 'a backend crashed: the buffered increments since the last flush are lost', 15 if $crashed;

	my ($write_throughs_after, $evictions_after) = split /\|/, $node->safe_psql('postgres', $stats_sql);
	cmp_ok($write_throughs_after, '>', $write_throughs_before, 'increments were written through while the reads ran');
	cmp_ok($evictions_after, '>', $evictions_before, 'entries were evicted while the reads ran');

	is($node->safe_psql('postgres', 'SELECT sc_rollup() >= 0'), 't', 'a rollup after the writers');
	$node->safe_psql('postgres', q{
CREATE TABLE truth_buckets AS SELECT c, k, bucket_of(h) AS bucket, sum(d)::bigint AS v FROM log GROUP BY c, k, h;
CREATE TABLE truth AS SELECT r.c, t.k, sum(t.v)::bigint AS v,
  row_number() OVER (PARTITION BY r.c ORDER BY sum(t.v) DESC, t.k) AS o
  FROM ranges r JOIN truth_buckets t ON t.c = r.counter
  AND (r.since IS NULL OR t.bucket >= r.since) AND (r.until IS NULL OR t.bucket < r.until)
  GROUP BY r.c, t.k;
CREATE INDEX ON truth (c, k);
-- Groups of keys: every key; a hundredth; a seventh, each key twice (it counts once); keys never counted.
CREATE TABLE groups AS SELECT -1 AS g, array_agg(k) AS keys FROM generate_series(1, 100000) k
  UNION ALL SELECT 3, array_agg(k) FROM generate_series(3, 100000, 100) k
  UNION ALL SELECT -2, array_agg(k) FROM (SELECT generate_series(1, 100000, 7) UNION ALL SELECT generate_series(1, 100000, 7)) s(k)
  UNION ALL SELECT -3, array_agg(k) FROM generate_series(100001, 100100) k;
CREATE TABLE group_keys AS SELECT DISTINCT g, unnest(keys) AS k FROM groups;
ANALYZE truth_buckets, truth, groups, group_keys;
CREATE TABLE final_top AS SELECT r.c, n.n, x.k, x.v, x.o FROM ranges r, (VALUES (1), (10), (1000), (200000)) n(n),
  LATERAL sc_top(r.counter, n.n, r.since, r.until) WITH ORDINALITY x(k, v, o);
});

	differ('postgres', q{
SELECT c, n, o, f.k, f.v, e.k AS expected_k, e.v AS expected_v FROM (SELECT * FROM final_top WHERE v <> 0) f
FULL JOIN (SELECT c, n.n, k, v, o FROM truth, (VALUES (1), (10), (1000), (200000)) n(n) WHERE o <= n.n) e
USING (c, n, o) WHERE f.k IS DISTINCT FROM e.k OR f.v IS DISTINCT FROM e.v ORDER BY c, n, o LIMIT 5},
		'sc_top(n) is the top n of the truth, n = 1, 10, 1000 and every key, over every range');
	differ('postgres', q{
SELECT c, n, count(*) FROM final_top WHERE v = 0 GROUP BY c, n ORDER BY c, n},
		'sc_top returns no key that was never counted (a value of 0)');

	differ('postgres', q{
WITH keys AS MATERIALIZED (
  SELECT r.c, r.counter, r.since, r.until, s.k, coalesce(e.v, 0) AS expected
  FROM ranges r CROSS JOIN generate_series(1, 100010) s(k) LEFT JOIN truth e ON e.c = r.c AND e.k = s.k
  WHERE r.counter IN ('b', 't') OR s.k % 100 = 3 OR s.k > 100000),
read AS MATERIALIZED (
  SELECT c, k, expected, sc_sum(counter, k, since, until) AS ranged,
    CASE WHEN since IS NULL AND until IS NULL THEN sc_sum(counter, k) ELSE expected END AS whole
  FROM keys)
SELECT * FROM read WHERE ranged IS DISTINCT FROM expected OR whole IS DISTINCT FROM expected
ORDER BY 1, 2 LIMIT 5},
		'sc_sum, with and without a range, is the truth: every key of b and t, a hundredth of hb and ht');

	differ('postgres', q{
WITH s AS (SELECT r.c, k.k, x.bucket, x.value, x.o FROM ranges r, generate_series(7, 100000, 200) k(k),
    LATERAL sc_series(r.counter, k.k, r.since, r.until) WITH ORDINALITY x(bucket, value, o)
    WHERE r.counter IN ('hb', 'ht')),
e AS (SELECT r.c, b.k, b.bucket, b.v, row_number() OVER (PARTITION BY r.c, b.k ORDER BY b.bucket) AS o
    FROM ranges r JOIN truth_buckets b ON b.c = r.counter
    AND (r.since IS NULL OR b.bucket >= r.since) AND (r.until IS NULL OR b.bucket < r.until)
    WHERE r.counter IN ('hb', 'ht') AND b.k % 200 = 7)
SELECT c, k, o, s.bucket, s.value, e.bucket AS expected_bucket, e.v AS expected_v FROM s FULL JOIN e USING (c, k, o)
WHERE s.bucket IS DISTINCT FROM e.bucket OR s.value IS DISTINCT FROM e.v ORDER BY 1, 2, 3 LIMIT 5},
		'sc_series is the truth, bucket by bucket in order, over every range (500 keys)');

	differ('postgres', q{
SELECT * FROM (SELECT r.c, g.g, sc_sum_keys(r.counter, g.keys) AS read,
    (SELECT coalesce(sum(e.v), 0) FROM group_keys x JOIN truth e ON e.k = x.k WHERE x.g = g.g AND e.c = r.c) AS expected
  FROM ranges r, groups g WHERE r.since IS NULL AND r.until IS NULL) s
WHERE read IS DISTINCT FROM expected ORDER BY 1, 2 LIMIT 5},
		'sc_sum_keys of every key, of a hundredth, of keys listed twice, of keys never counted, is the truth');
	differ('postgres', q{
SELECT r.c, sc_sum_keys(r.counter, g.keys), (SELECT sum(sc_sum(r.counter, k)) FROM unnest(g.keys) k)
FROM ranges r, groups g WHERE r.since IS NULL AND r.until IS NULL AND g.g = 3
  AND sc_sum_keys(r.counter, g.keys) <> (SELECT sum(sc_sum(r.counter, k)) FROM unnest(g.keys) k)},
		'sc_sum_keys of 1,000 keys is the sum of their sc_sum');
	differ('postgres', q{
SELECT s.round, s.c, s.g, s.v AS read_while_writing, t.v AS final FROM sum_keys_seen s
JOIN (SELECT c, k % 10 AS g, sum(v) AS v FROM truth GROUP BY 1, 2 UNION ALL SELECT c, -1, sum(v) FROM truth GROUP BY 1) t
USING (c, g) WHERE s.v > t.v ORDER BY 1, 2, 3 LIMIT 5},
		'no sc_sum_keys read while the writers ran exceeded the final sum');

	for my $view ('slotted_counter.lagged', 'slotted_counter.key_values')
	{
		my $counter = $view eq 'slotted_counter.key_values' ? 'counter::slotted_counter::text' : 'counter::text';
		differ('postgres', qq{
SELECT c, k, bucket, l.v, e.v AS expected FROM
  (SELECT $counter AS c, key AS k, coalesce(bucket, '-infinity') AS bucket, value AS v FROM $view
   WHERE $counter IN ('b', 't', 'hb', 'ht')) l
FULL JOIN (SELECT c, k, coalesce(bucket, '-infinity') AS bucket, v FROM truth_buckets) e USING (c, k, bucket)
WHERE l.v IS DISTINCT FROM e.v ORDER BY 1, 2, 3 LIMIT 5},
			"$view is the truth, row by row");
	}

	# What every buffered increment returned: its key's value right after it, so per key, in the
	# order of those values, each is the one before plus its delta.
	differ('postgres', q{
SELECT * FROM (SELECT c, k, h, d, r, lag(r, 1, 0::bigint) OVER (PARTITION BY c, k, h ORDER BY r) AS before
               FROM log WHERE c IN ('b', 'hb')) s
WHERE r <> before + d ORDER BY 1, 2, 3 LIMIT 5},
		'every buffered increment returned its key\'s value right after it');

	# The other database: its own values, nothing of this one's.
	differ('other', q{
WITH truth AS (SELECT k, sum(d)::bigint AS v, row_number() OVER (ORDER BY sum(d) DESC, k) AS o FROM log GROUP BY k)
SELECT * FROM (SELECT x.*, t.k AS expected_k, t.v AS expected_v
  FROM sc_top('b', 200000) WITH ORDINALITY x(k, v, o) FULL JOIN truth t USING (o)) s
WHERE k IS DISTINCT FROM expected_k OR v IS DISTINCT FROM expected_v ORDER BY o LIMIT 5},
		'in the other database, sc_top of its counter b is its own truth');
	differ('other', q{
SELECT * FROM (SELECT k, sum(d) AS v FROM log GROUP BY k) t
FULL JOIN (SELECT key AS k, value FROM slotted_counter.lagged WHERE counter = 'b') l USING (k)
WHERE t.v IS DISTINCT FROM l.value OR t.v <> sc_sum('b', k) LIMIT 5},
		'in the other database, lagged and sc_sum of b are its own truth');
}

$node->stop;
done_testing();
