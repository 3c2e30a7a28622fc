# The ids that sessions give the new texts of buffered counters themselves (core/text_ids.hpp,
# definitions/text_keys.hpp): no request to the flusher once its range is there; the texts are
# read (sc_sum, sc_top_text, key_text) before the flush writes their rows; the flush writes each
# row once, with the id every session used; a crash loses a given id only with the values that
# used it, never one without the other; a clean restart writes them; a drop of the counter or of
# the extension between the gift and the flush leaves nothing behind; a shared cache too small
# for the gifts falls back to the flusher and counts exactly; sessions racing on the same new
# texts, with long texts and a transactional counter's texts beside them, agree on one id each.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

# No periodic flush (sc_rollup flushes), and a flusher that stays while no client is connected.
my $flush_on_request = "slotted_counter.flush_interval = 0\nslotted_counter.idle_timeout = 0\n";
my $node = preloaded_node('given_text_ids', $flush_on_request . "max_prepared_transactions = 2\n");
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('g', 'buffered', key_type => 'text');
SELECT sc_create('t', 'transactional', key_type => 'text');
});

# What must hold of a counter keyed by text once flushed: its total is the sum over its rows of
# slotted_counter.keys, each id and text once, and no value without its row.
sub whole
{
	my ($n, $c) = @_;
	$n->safe_psql('postgres', 'SELECT sc_rollup()');
	return $n->safe_psql('postgres', qq{
SELECT sc_total('$c') = (SELECT coalesce(sum(sc_sum('$c', key)), 0) FROM slotted_counter.keys
                          WHERE counter = '$c'::slotted_counter::integer)
   AND (SELECT count(DISTINCT id) = count(*) AND count(DISTINCT key) = count(*)
          FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer)
   AND NOT EXISTS (SELECT FROM slotted_counter.key_values v
                    WHERE v.counter = '$c'::slotted_counter::integer
                      AND NOT EXISTS (SELECT FROM slotted_counter.keys k
                                       WHERE k.counter = v.counter AND k.id = v.key))});
}

sub requests_served
{
	return $node->safe_psql('postgres',
		q{SELECT coalesce(sum(write_throughs), 0) FROM slotted_counter.stats});
}

# The first new text asks the flusher (no range yet), which then reserves one.
is($node->safe_psql('postgres', q{SELECT sc_incr('g', '/first')}), '1', 'the first new text counts');
is($node->poll_query_until('postgres', q{
SELECT sc_incr('g', '/probe-' || pg_catalog.clock_timestamp()) = 1 AND
       (SELECT last_value > 1 FROM slotted_counter.keys_id_seq)}), 1,
	'the flusher reserved a range of ids');

# 1. A hundred new texts given their ids by the session: no request to the flusher.
my $served = requests_served();
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_incr('g', '/new/' || i, i) = i) FROM generate_series(1, 100) i}),
	'100', 'a hundred new texts count');
is(requests_served(), $served, 'no request went to the flusher for them');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.keys WHERE key LIKE '/new/%'}), '0',
	'their rows are not written before the flush');
is($node->safe_psql('postgres', q{
SELECT (SELECT sum(sc_sum('g', '/new/' || i)) FROM generate_series(1, 100) i),
       (SELECT string_agg(key || '=' || value, ',') FROM sc_top_text('g', 2))}),
	'5050|/new/100=100,/new/99=99',
	'sc_sum and sc_top_text read them, with their texts, before the flush');
# Many of them on the leaderboard at once: each has its text (read from the shared cache in one
# pass, not one a key).
$node->safe_psql('postgres',
	q{SELECT count(sc_incr('g', '/many/' || i, 100000 + i)) FROM generate_series(1, 3000) i});
is($node->safe_psql('postgres', q{
SELECT count(*), count(key), count(DISTINCT key), bool_and(key = '/many/' || (value - 100000))
  FROM sc_top_text('g', 3000)}), '3000|3000|3000|t',
	'sc_top_text gives 3,000 keys given just now each its own text');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT count(*), count(*) FILTER (WHERE sc_sum('g', key) = substr(key, 6)::bigint)
  FROM slotted_counter.keys WHERE key LIKE '/new/%'}), '100|100',
	'the flush wrote each row once, with the id the values use');
is(whole($node, 'g'), 't', 'g holds together');

# 2. Sessions racing on the same new texts, each in its own order, with long texts (asked of the
# flusher: too long to share) and a transactional counter's new texts (asked of the flusher, which
# gives none while a session may) beside them.
$node->pgbench('--no-vacuum --client=8 --jobs=2 --transactions=1000',
	0, [qr{actually processed: 8000/8000}], [qr{^$}],
	'race: 8 sessions write new texts at once',
	{
		'065_race' => q{\set k random(1, 3000)
SELECT sc_incr('g', 'race-' || :k), sc_incr('g', 'long-' || (:k % 50) || repeat('x', 120)),
       sc_incr('t', 'tx-' || (:k % 500));
}
	});
$node->safe_psql('postgres', 'SELECT sc_rollup()');    # its rows, seen by the next statement
is($node->safe_psql('postgres', q{
SELECT true,
       (SELECT sum(sc_sum('g', key)) FROM slotted_counter.keys
         WHERE counter = 'g'::slotted_counter::integer AND key LIKE 'race-%'),
       (SELECT sum(sc_sum('g', key)) FROM slotted_counter.keys
         WHERE counter = 'g'::slotted_counter::integer AND key LIKE 'long-%'),
       (SELECT sum(sc_sum('t', key)) FROM slotted_counter.keys
         WHERE counter = 't'::slotted_counter::integer AND key LIKE 'tx-%')}),
	't|8000|8000|8000', 'race: every call counted once, under one id per text');
is(whole($node, $_), 't', "race: $_ holds together") for qw(g t);

# 3. A crash before the flush: the given ids go with the values that used them; what was
# flushed stays, with its row.
$node->safe_psql('postgres', q{
SELECT sc_incr('g', '/flushed', 5);
SELECT sc_rollup();
SELECT sc_incr('g', '/crash/' || i) FROM generate_series(1, 50) i;
SELECT sc_incr('g', '/flushed', 1);
});
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', q{
SELECT sc_sum('g', '/flushed'), (SELECT count(*) FROM generate_series(1, 50) i WHERE sc_sum('g', '/crash/' || i) <> 0),
       (SELECT count(*) FROM slotted_counter.keys WHERE key LIKE '/crash/%')}),
	'5|0|0', 'crash: the flushed text keeps its value; the unflushed ones are gone with their ids');
is(whole($node, 'g'), 't', 'crash: g holds together');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_incr('g', '/crash/' || i, 2) = 2) FROM generate_series(1, 50) i}),
	'50', 'crash: the lost texts count again from 0');
is(whole($node, 'g'), 't', 'crash: g holds together after they are written again');

# 4. A clean restart before the flush: the last flush writes the ids with their values.
$node->safe_psql('postgres', q{SELECT sc_incr('g', '/restart/' || i, 3) FROM generate_series(1, 20) i});
$node->restart;
is($node->safe_psql('postgres', q{
SELECT count(*), sum(sc_sum('g', key)) FROM slotted_counter.keys WHERE key LIKE '/restart/%'}),
	'20|60', 'restart: the given ids were written with their values');
is(whole($node, 'g'), 't', 'restart: g holds together');

# 5. A clean restart whose last flush cannot write (a prepared transaction locks key_values):
# the values and the ids they use are saved, restored, read with their texts, and written once
# the lock goes.
$node->safe_psql('postgres', q{
BEGIN; LOCK TABLE slotted_counter.key_values IN EXCLUSIVE MODE; PREPARE TRANSACTION 'lock';
SELECT sc_incr('g', '/saved/' || i, 1000000) FROM generate_series(1, 10) i;
});
my $offset = -s $node->logfile;
$node->restart;
like(substr(slurp_file($node->logfile), $offset),
	qr/saved 10 values that could not be flushed, 0 request ids and [1-9][0-9]* ids of new text keys/,
	'saved: the ten values and the ids the session gave were saved (the first text after the '
	  . 'restart may have asked the flusher)');
is($node->safe_psql('postgres', q{
SELECT sum(sc_sum('g', '/saved/' || i)),
       (SELECT count(*) FROM sc_top_text('g', 10) WHERE key LIKE '/saved/%')
  FROM generate_series(1, 10) i}), '10000000|10', 'saved: restored, and read with their texts');
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'lock'});
is(whole($node, 'g'), 't', 'saved: written once the lock is gone, g holds together');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter.keys WHERE key LIKE '/saved/%' AND sc_sum('g', key) = 1000000}),
	'10', 'saved: each with its row');

# 6. A drop of the counter, and of the extension, between the gift and the flush.
$node->safe_psql('postgres', q{
SELECT sc_create('d', 'buffered', key_type => 'text');
SELECT sc_incr('d', '/gone/' || i) FROM generate_series(1, 30) i;
SELECT sc_drop('d');
SELECT sc_rollup();
SELECT sc_create('d', 'buffered', key_type => 'text');
});
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM slotted_counter.keys WHERE key LIKE '/gone/%'),
       sc_incr('d', '/gone/1', 7), sc_sum('d', '/gone/2')}),
	'0|7|0', 'drop: no row of the dropped counter\'s texts; the new counter starts from 0');
is(whole($node, 'd'), 't', 'drop: the new d holds together');
$node->safe_psql('postgres', q{
SELECT sc_incr('g', '/ext/' || i) FROM generate_series(1, 30) i;
DROP EXTENSION slotted_counter CASCADE;
CREATE EXTENSION slotted_counter;
SELECT sc_create('g', 'buffered', key_type => 'text');
});
is($node->safe_psql('postgres', q{
SELECT count(sc_incr('g', '/after/' || i)) FROM generate_series(1, 300) i}), '300',
	'extension: new texts count after DROP and CREATE EXTENSION');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is($node->safe_psql('postgres', q{
SELECT true, count(*), count(DISTINCT id), min(id) >= 1,
       count(*) FILTER (WHERE key LIKE '/ext/%')
  FROM slotted_counter.keys}), 't|300|300|t|0',
	'extension: the new sequence\'s ids, each once, and nothing of the dropped extension');
is(whole($node, 'g'), 't', 'extension: g holds together');

is($node->log_contains('were written already') ? 1 : 0, 0, 'no id was ever written twice');
$node->stop;

# 7. A shared cache far too small for the gifts (16 sets of 8 slots): the texts that find no slot
# are given their ids by the flusher, and everything counts once.
my $small = preloaded_node('given_text_ids_small',
	$flush_on_request . "slotted_counter.shared_text_keys = 16\n");
$small->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('s', 'buffered', key_type => 'text');
SELECT sc_incr('s', '/warm');
});
$small->pgbench('--no-vacuum --client=4 --jobs=2 --transactions=500',
	0, [qr{actually processed: 2000/2000}], [qr{^$}],
	'small cache: 4 sessions write new texts',
	{
		'065_small' => q{\set k random(1, 2000)
SELECT sc_incr('s', 'k' || :k), sc_incr_batch_text('s', ARRAY['b' || :k, 'b' || (:k + 1)], ARRAY[1, 1]);
}
	});
$small->safe_psql('postgres', 'SELECT sc_rollup()');
is($small->safe_psql('postgres', q{
SELECT true, sc_total('s'),
       (SELECT count(*) FROM slotted_counter.keys k WHERE sc_sum('s', k.key) = 0)}),
	't|6001|0', 'small cache: every call counted once');
is(whole($small, 's'), 't', 'small cache: s holds together');
is($small->log_contains('were written already') ? 1 : 0, 0,
	'small cache: no id was written twice');
$small->stop;

done_testing();
