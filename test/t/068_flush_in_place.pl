# The flush updates a key's row where it last wrote it (workers/flush_update.cpp), without a probe
# of the primary key, and never another key's row: after the rows moved (an UPDATE of another
# writer, VACUUM FULL), after their places were taken by other keys' rows (a DELETE, VACUUM and new
# keys), while another transaction holds the row, after a drop and re-create of the counter, and
# after a restart (the loads read where the rows are). A row that would pass the end of bigint
# fails the flush with 22003 and writes nothing. Every value and every total stays exact.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('flush_in_place',
	"slotted_counter.flush_interval = 0\nslotted_counter.idle_timeout = 0\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('c', 'buffered');
SELECT sc_create('d', 'buffered');
});
my $keys = 3000;

# Adds `by` to keys 1..$keys of counter `name` and flushes. The session's own probes (its loads)
# reach the statistics before it returns, not at its exit, when a count may already have begun.
sub count_all
{
	my ($name, $by) = @_;
	$node->safe_psql('postgres', qq{
SELECT cardinality(sc_incr_batch('$name', ARRAY(SELECT generate_series(1, $keys)::bigint),
                                 array_fill(${by}::bigint, ARRAY[$keys])));
SELECT sc_rollup();
SELECT pg_stat_force_next_flush()});
}

# Probes of key_values' primary key so far, as the statistics count them (the flusher reports
# its own after each step, before sc_rollup returns).
sub pkey_probes
{
	my $n = $node->safe_psql('postgres', q{
SELECT pg_stat_clear_snapshot();
SELECT idx_scan FROM pg_stat_all_indexes WHERE indexrelname = 'key_values_pkey'});
	return (split /\n/, $n)[-1];
}

# Whether keys 1..$keys of `name` each hold `value`, in the table and as read, and the total is
# theirs plus `others` (what the counter's other keys hold).
sub all_hold
{
	my ($name, $value, $others) = @_;
	$others //= 0;
	return $node->safe_psql('postgres', qq{
SELECT count(*) = $keys AND bool_and(k.value = $value)
       AND bool_and(sc_sum('$name', k.key) = $value)
       AND sc_total('$name') = ${keys}::bigint * $value + $others
  FROM slotted_counter.key_values k
 WHERE k.counter = (SELECT id FROM slotted_counter.counters WHERE name = '$name')
   AND k.key <= $keys});
}

count_all('c', 1);
is(all_hold('c', 1), 't', 'new keys: inserted');
my $before = pkey_probes();
count_all('c', 1);
is(all_hold('c', 2), 't', 'updated');
is(pkey_probes() - $before, 0, 'each key\'s row found where the flush wrote it, not by a probe');

# Another writer moves the rows (same values): the places the flush knows hold dead versions.
$node->safe_psql('postgres', q{
UPDATE slotted_counter.key_values SET value = value
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'c') AND key <= 1000});
count_all('c', 1);
is(all_hold('c', 3), 't', 'rows moved by another writer: found by key, each updated once');
$before = pkey_probes();
count_all('c', 1);
is(all_hold('c', 4), 't', 'then updated again');
is(pkey_probes() - $before, 0, 'where the flush that found them by key learned they are');

# A rewrite puts the rows elsewhere, some of them where other keys' rows were.
$node->safe_psql('postgres', 'VACUUM FULL slotted_counter.key_values');
count_all('c', 1);
is(all_hold('c', 5), 't', 'after VACUUM FULL: every key got its own delta, once');

# d's rows deleted by hand and vacuumed away, c's new keys inserted into the room they left: d's
# entries know places that now hold c's rows.
count_all('d', 1);
$node->safe_psql('postgres', q{
CREATE TABLE d_places AS SELECT ctid AS place FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'd');
DELETE FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'd');
VACUUM slotted_counter.key_values});
$node->safe_psql('postgres', qq{
SELECT cardinality(sc_incr_batch('c', ARRAY(SELECT generate_series($keys + 1, 2 * $keys)::bigint),
                                 array_fill(7::bigint, ARRAY[$keys])));
SELECT sc_rollup()});
is( $node->safe_psql('postgres', q{
SELECT count(*) > 0 FROM slotted_counter.key_values k JOIN d_places p ON k.ctid = p.place
 WHERE k.counter = (SELECT id FROM slotted_counter.counters WHERE name = 'c')}),
	't', 'c\'s new rows took places where d\'s rows were');
count_all('d', 1);
is( $node->safe_psql('postgres', qq{
SELECT count(*) = $keys AND bool_and(value = 7) FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'c') AND key > $keys}),
	't', 'd\'s flush changed none of c\'s rows at its old places');
is( $node->safe_psql('postgres', qq{
SELECT count(*) = $keys AND bool_and(value = 1) FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'd')}),
	't', 'd\'s rows written anew with what the flush had, as after any deletion by hand');
is(all_hold('c', 5, 7 * $keys), 't', 'c\'s older keys unchanged');

# A transaction holds a row while the flush updates it: the flush waits, then finds the row's
# new version by key.
my $holder = $node->background_psql('postgres');
$holder->query_safe(q{BEGIN; UPDATE slotted_counter.key_values SET value = value
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'c') AND key = 1});
$node->safe_psql('postgres', q{SELECT sc_incr('c', 1, 10)});
my $roller = $node->background_psql('postgres');
$roller->query_until(qr/rolling/, "\\echo rolling\nSELECT sc_rollup();\n");
ok( $node->poll_query_until('postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity
 WHERE backend_type = 'slotted_counter flusher' AND wait_event_type = 'Lock'}),
	'the flush waits for the transaction that holds the row');
$holder->query_safe('COMMIT');
$holder->quit;
ok( $node->poll_query_until('postgres', q{
SELECT value = 15 FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'c') AND key = 1}),
	'then updates the row it left, once');
$roller->quit;
is( $node->safe_psql('postgres', qq{
SELECT sc_sum('c', 1::bigint) = 15 AND sc_total('c') = 5 * ($keys - 1) + 15 + 7 * $keys}),
	't', 'read and totalled as written');

# A row whose value a superuser set by hand near the end of bigint: the flush that updates it in
# place refuses to wrap it, with the UPDATE's error, and writes nothing of its step.
$node->safe_psql('postgres', q{
SELECT sc_create('o', 'buffered');
SELECT sc_incr('o', 1, 1), sc_incr('o', 2, 1);
SELECT sc_rollup();
UPDATE slotted_counter.key_values SET value = 9223372036854775806
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'o') AND key = 1;
SELECT sc_incr('o', 1, 1), sc_incr('o', 2, 1);
SELECT sc_rollup();
SELECT sc_incr('o', 1, 1), sc_incr('o', 2, 1);});
my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT sc_rollup()");
like($err, qr/ERROR:  22003: could not flush counters: bigint out of range/,
	'a row that would pass the end of bigint: the flush fails with 22003');
is( $node->safe_psql('postgres', q{
SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'o')}),
	'1=9223372036854775807,2=2', 'and wrote nothing of its step, the other key\'s row included');
$node->safe_psql('postgres', q{
UPDATE slotted_counter.key_values SET value = 5
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'o') AND key = 1});
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is( $node->safe_psql('postgres', q{
SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'o')}),
	'1=6,2=3', 'once the row is mended, the next flush writes what was kept');

# A counter dropped and created again under its name: its new keys are new rows, none of the
# places its former entries knew.
$node->safe_psql('postgres', q{
SELECT sc_drop('o');
SELECT sc_create('o', 'buffered');
SELECT sc_incr('o', 1, 7), sc_incr('o', 2, 7);
SELECT sc_rollup();
SELECT sc_incr('o', 1, 1), sc_incr('o', 2, 1);
SELECT sc_rollup();});
is( $node->safe_psql('postgres', q{
SELECT string_agg(key || '=' || value, ',' ORDER BY key) || '|' || sc_total('o')
  FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'o')}),
	'1=8,2=8|16', 'a counter dropped and created again: its own rows, updated in place');

# After a restart the buffer is empty: each key's load reads where its row is, and the first flush
# updates it there.
$node->restart;
$node->safe_psql('postgres', qq{
SELECT cardinality(sc_incr_batch('d', ARRAY(SELECT generate_series(1, $keys)::bigint),
                                 array_fill(1::bigint, ARRAY[$keys])));
SELECT pg_stat_force_next_flush()});
$before = pkey_probes();
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is(pkey_probes() - $before, 0, 'after a restart: the rows found where the loads read them');
is( $node->safe_psql('postgres', qq{
SELECT count(*) = $keys AND bool_and(value = 2) AND sc_total('d') = 2 * $keys
  FROM slotted_counter.key_values
 WHERE counter = (SELECT id FROM slotted_counter.counters WHERE name = 'd')}),
	't', 'and updated');
is($node->safe_psql('postgres', q{
SELECT bool_and(t.value = s.total) FROM slotted_counter.counter_totals t
  JOIN (SELECT counter, bucket, sum(value) AS total FROM slotted_counter.key_values
         GROUP BY counter, bucket) s USING (counter, bucket)}),
	't', 'the sums agree with the rows');

done_testing();
