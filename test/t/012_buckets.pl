# Bucketed counters under load across a bucket boundary: clients count at a clock of their own
# that starts 2.4 seconds before 2026-02-01 00:00 UTC and moves 1 ms a call (a sequence), so that
# the run of 4,800 calls crosses an hour, a day and a month at once, halfway, however fast it runs.
# Every increment is logged (with its time) in the statement that makes it; afterwards every
# bucket of every key equals the log's count for it: in real time, in the lagged table after a
# rollup, and after a restart. The buffer is smaller than the keys and buckets counted, so
# entries are evicted and written through while the boundary passes.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('buckets', qq{
slotted_counter.flush_interval = 50
slotted_counter.max_entries = 128
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('hits', 'buffered', '1 hour');
SELECT sc_create('visits', 'transactional', '1 day');
SELECT sc_create('monthly', 'buffered', '1 month');
CREATE TABLE log (k bigint NOT NULL, at timestamptz NOT NULL);
CREATE SEQUENCE ticks;
});

my $script = q{
\set k random(1, 60)
INSERT INTO log SELECT :k, at
FROM (SELECT '2026-01-31 23:59:57.6+00'::timestamptz + nextval('ticks') * interval '1 ms' AS at) c
WHERE sc_incr('hits', :k, 1, at) > 0 AND sc_incr('visits', :k, 1, at) > 0
  AND sc_incr('monthly', :k, 1, at) > 0;
};
$node->pgbench('--no-vacuum --client=6 --jobs=2 --transactions=800',
	0, [qr{processed: 4800/4800}], [qr{^$}], 'load across the boundary',
	{ 'buckets.sql' => $script });

is( $node->safe_psql(
		'postgres', q{
SELECT count(DISTINCT date_trunc('hour', at, 'UTC')) || ' hours, '
    || count(DISTINCT date_trunc('month', at, 'UTC')) || ' months' FROM log}),
	'2 hours, 2 months',
	'the load crossed the boundary');

# Mismatches between the log and one counter's buckets, read with `reader` (a set of
# (k, bucket, value) rows).
sub mismatches
{
	my ($unit, $reader) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM
  (SELECT k, date_trunc('$unit', at, 'UTC') AS bucket, count(*) AS value FROM log GROUP BY 1, 2) e
  FULL JOIN ($reader) r USING (k, bucket)
WHERE e.value IS DISTINCT FROM r.value});
}

sub series
{
	my ($counter) = @_;
	return "SELECT k, s.bucket, s.value FROM generate_series(1, 60) k, "
	  . "sc_series('$counter', k, NULL, NULL) s";
}

sub lagged
{
	my ($counter) = @_;
	return "SELECT key AS k, bucket, value FROM slotted_counter.key_values "
	  . "WHERE counter = '$counter'::slotted_counter::integer";
}

my %unit = (hits => 'hour', visits => 'day', monthly => 'month');
for my $counter (sort keys %unit)
{
	is(mismatches($unit{$counter}, series($counter)), '0',
		"$counter: every bucket exact in real time");
}

# Range reads agree with the log too: the sum from the boundary on, and the top keys of the
# month before it.
is( $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM log WHERE at >= '2026-02-01 00:00+00')
     = (SELECT sum(sc_sum('hits', k, '2026-02-01 00:00+00', NULL)) FROM generate_series(1, 60) k)}),
	't', 'hits: a range sum equals the log');
is( $node->safe_psql(
		'postgres', q{
SELECT array_agg(key ORDER BY value DESC, key) = (SELECT array_agg(k ORDER BY n DESC, k) FROM
  (SELECT k, count(*) AS n FROM log WHERE at < '2026-02-01+00' GROUP BY k ORDER BY 2 DESC, 1 LIMIT 5) l)
FROM sc_top('monthly', 5, NULL, '2026-02-01+00')}),
	't', 'monthly: the top keys of January equal the log');

is( $node->safe_psql(
		'postgres', q{SELECT sum(evictions) > 0 FROM slotted_counter.stats}),
	't', 'the small buffer evicted entries');

# A rollup writes the buffered values and folds the transactional deltas into key_values.
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $counter (sort keys %unit)
{
	is(mismatches($unit{$counter}, lagged($counter)), '0',
		"$counter: every lagged row exact after a rollup");
}

$node->restart;
for my $counter (sort keys %unit)
{
	is(mismatches($unit{$counter}, series($counter)), '0',
		"$counter: every bucket exact after a restart");
}
$node->stop;
done_testing();
