# Text keys (sc_create(..., key_type => 'text')) across everything that moves a value or a key's
# mapping (slotted_counter.keys) between the buffer, the tables and other servers:
#   a. a clean restart: every value and mapping comes back, buffered values not flushed before
#      the stop too; counting goes on where it stopped, new keys get keys of their own
#   b. a crash (stop 'immediate'): transactional values exact; buffered ones lose at most what
#      was counted since the last committed flush and never count twice (README's rule); no
#      stored value is left without its key's mapping, and counting goes on
#   c. pg_dump -Fc and pg_restore, as is and with --no-owner: keys, values, key types, owners
#      come back; existing keys count on, a new key gets a key of its own
#   d. a streaming standby reads text keys (a key it read as unknown too, once the primary wrote
#      it), refuses writes with 25006 (new keys too, at once), and counts on once promoted
#   e. load: 8 clients writing the same new keys at the same moment; pgbench with 8 clients over
#      100,000 possible keys: every total equals the transactions pgbench reports, every key its
#      writes, and the mapped keys are exactly the distinct keys written, while another session
#      reads the leaderboard
#   f. one session using more keys than its cache of ids (and the buffer) holds
# The flusher runs only when asked (flush_interval = 0) until e, and stays (idle_timeout = 0): by
# default it leaves after 2 s without a client, flushing first, which a busy machine can reach
# between the dump in d and the source's values read after it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('text_keys', qq{
slotted_counter.flush_interval = 0
slotted_counter.idle_timeout = 0
wal_level = replica
max_wal_senders = 4
max_connections = 40
});
$node->safe_psql('postgres', 'CREATE EXTENSION slotted_counter');

# Keys whose bytes matter (UTF-8 bytes, whatever the database's encoding): the empty key, a
# precomposed letter, the same letter with a combining accent, a key of 2,048 bytes, a trailing
# space; each with its value.
my %special = (
	q{''} => 7,
	qq{'\xc3\xa9'} => 11,
	qq{'e\xcc\x81'} => 13,
	q{repeat('x', 2048)} => 17,
	q{'a '} => 19,
	q{'a'} => 23);
my $special_sum = 0;
$special_sum += $_ for values %special;

# Writes the special keys into a counter.
sub write_special
{
	my ($n, $db, $c) = @_;
	$n->safe_psql($db,
		'SELECT ' . join(', ', map { "sc_incr('$c', $_, $special{$_})" } sort keys %special));
}

# How many special keys of a counter do not read their value.
sub special_wrong
{
	my ($n, $db, $c) = @_;
	return $n->safe_psql($db,
		'SELECT ' . join(' + ', map { "(sc_sum('$c', $_) <> $special{$_})::int" } sort keys %special));
}

# For keys 'key-<k>', k in [$from, $to]: how many do not read $expr (of k), their sum, and how
# many of them slotted_counter.keys maps.
sub key_check
{
	my ($n, $db, $c, $from, $to, $expr) = @_;
	return $n->safe_psql($db, qq{
SELECT (SELECT count(*) FROM generate_series($from, $to) k WHERE sc_sum('$c', 'key-' || k) <> $expr),
       sc_sum_keys_text('$c', ARRAY(SELECT 'key-' || k FROM generate_series($from, $to) k)),
       (SELECT count(*) FROM slotted_counter.keys
         WHERE counter = '$c'::slotted_counter::integer
           AND key IN (SELECT 'key-' || k FROM generate_series($from, $to) k))});
}

# Whether a counter holds together: its total is the sum over its mapped keys, each key has one
# id, and no stored value (key_values, deltas) lacks its key's mapping.
sub whole
{
	my ($n, $db, $c) = @_;
	# After a flush: a buffered counter's new text has its row once the flush wrote its value.
	$n->safe_psql($db, 'SELECT sc_rollup()');
	# Hash anti-joins whatever the statistics of tables just filled say (a nested loop over
	# 60,000 keys without them outlasts the statement timeout).
	return $n->safe_psql($db, qq{
SET enable_nestloop = off;
SELECT sc_total('$c') = (SELECT coalesce(sum(sc_sum('$c', key)), 0) FROM slotted_counter.keys
                          WHERE counter = '$c'::slotted_counter::integer)
   AND (SELECT count(DISTINCT id) = count(*) FROM slotted_counter.keys
         WHERE counter = '$c'::slotted_counter::integer)
   AND NOT EXISTS (SELECT FROM slotted_counter.key_values t WHERE t.counter = '$c'::slotted_counter::integer
                     AND NOT EXISTS (SELECT FROM slotted_counter.keys k
                                      WHERE k.counter = t.counter AND k.id = t.key))
   AND NOT EXISTS (SELECT FROM slotted_counter.deltas d WHERE d.counter = '$c'::slotted_counter::integer
                     AND NOT EXISTS (SELECT FROM slotted_counter.keys k
                                      WHERE k.counter = d.counter AND k.id = d.key))});
}

# Rows of slotted_counter.lagged of a counter that do not equal sc_sum of their key (read after a
# rollup, with nothing counted since).
sub lagged_wrong
{
	my ($n, $db, $c) = @_;
	return $n->safe_psql($db, qq{
SELECT count(*) FROM slotted_counter.lagged l
 WHERE l.counter = '$c' AND (l.key IS NOT NULL OR l.value <> sc_sum('$c', l.key_text))});
}

# a. A clean restart. Keys 1..1000 get k, are flushed, then k more (not flushed); keys 1001..1200
#    are new after the flush; the special keys; a bucketed counter in two fixed days.
$node->safe_psql('postgres', q{
SELECT sc_create('ra_b', 'buffered', key_type => 'text'), sc_create('ra_t', key_type => 'text'),
       sc_create('ra_h', 'buffered', '1 day', key_type => 'text');
SELECT count(sc_incr(c, 'key-' || k, k)) FROM generate_series(1, 1000) k, (VALUES ('ra_b'), ('ra_t')) v(c);
SELECT sc_rollup();
SELECT count(sc_incr(c, 'key-' || k, k)) FROM generate_series(1, 1200) k, (VALUES ('ra_b'), ('ra_t')) v(c);
SELECT count(sc_incr('ra_h', 'key-' || k, 1, '2026-01-01 10:00+00')) + count(sc_incr('ra_h', 'key-' || k, 2, '2026-01-02 10:00+00'))
  FROM generate_series(1, 100) k;
});
write_special($node, 'postgres', $_) for qw(ra_b ra_t);
my $expected_a = 1000 * 1001 + (1200 * 1201 / 2 - 1000 * 1001 / 2) + $special_sum;
is($node->safe_psql('postgres', q{SELECT sc_total('ra_b'), sc_total('ra_t')}),
	"$expected_a|$expected_a", 'restart: the totals before it');
$node->restart;
for my $c (qw(ra_b ra_t))
{
	is(key_check($node, 'postgres', $c, 1, 1000, '2 * k'), '0|' . (1000 * 1001) . '|1000',
		"restart: $c: keys flushed, then counted again, read every increment");
	is(key_check($node, 'postgres', $c, 1001, 1200, 'k'), '0|' . (1200 * 1201 / 2 - 1000 * 1001 / 2) . '|200',
		"restart: $c: keys first counted after the last flush read their values");
	is(special_wrong($node, 'postgres', $c), '0',
		"restart: $c: the empty key, multibyte keys, 2,048 bytes, a trailing space keep their values");
	is($node->safe_psql('postgres', qq{SELECT sc_total('$c'), (SELECT string_agg(key || ':' || value, ',') FROM sc_top_text('$c', 3))}),
		"$expected_a|key-1000:2000,key-999:1998,key-998:1996", "restart: $c: total and leaderboard");
	is($node->safe_psql('postgres', qq{SELECT count(*) FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer}),
		1200 + scalar(keys %special), "restart: $c: one mapping per key");
	is(whole($node, 'postgres', $c), 't', "restart: $c holds together");
}
is($node->safe_psql('postgres', q{
SELECT (SELECT string_agg(bucket AT TIME ZONE 'UTC' || '=' || value, ',') FROM sc_series('ra_h', 'key-5', NULL, NULL)),
       sc_sum('ra_h', 'key-5', '2026-01-02 00:00+00', NULL), sc_total('ra_h')}),
	'2026-01-01 00:00:00=1,2026-01-02 00:00:00=2|2|300', 'restart: the bucketed counter keeps its buckets');
# counting goes on: an existing key from its value, new keys from 0, nothing else moves
is($node->safe_psql('postgres', q{
SELECT sc_incr('ra_b', 'key-1'), sc_incr('ra_t', 'key-1'), sc_incr('ra_b', 'after-restart'),
       sc_incr('ra_t', 'after-restart', 2), sc_incr('ra_b', ''), sc_incr('ra_h', 'key-5', 4, '2026-01-02 11:00+00')}),
	'3|3|1|2|8|6', 'restart: counting goes on from the values, new keys from 0');
is($node->safe_psql('postgres', q{SELECT sc_total('ra_b'), sc_total('ra_t')}),
	($expected_a + 3) . '|' . ($expected_a + 3), 'restart: and nothing else moved');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
is(lagged_wrong($node, 'postgres', $_), '0', "restart: $_: lagged equals every key after a rollup")
  for qw(ra_b ra_t);

# b. A crash. Keys 1..500 get k and are flushed; then 1000 more each and new keys late-1..100
#    (buffered: not flushed; transactional: committed), while a transaction that wrote a new key
#    and an old one is open.
$node->safe_psql('postgres', q{
SELECT sc_create('cb', 'buffered', key_type => 'text'), sc_create('ct', key_type => 'text');
SELECT count(sc_incr(c, 'key-' || k, k)) FROM generate_series(1, 500) k, (VALUES ('cb'), ('ct')) v(c);
SELECT sc_rollup();
SELECT count(sc_incr(c, 'key-' || k, 1000)) FROM generate_series(1, 500) k, (VALUES ('cb'), ('ct')) v(c);
});
# each new transactional key in a transaction of its own
$node->safe_psql('postgres', join("\n",
		map { "SELECT sc_incr('cb', 'late-$_'), sc_incr('ct', 'late-$_');" } 1 .. 100));
my $open = $node->background_psql('postgres');
$open->query_safe(q{BEGIN; SELECT sc_incr('ct', 'never-committed', 5), sc_incr('ct', 'key-1', 100000)});
$node->stop('immediate');
eval { $open->quit; };
$node->start;
is(key_check($node, 'postgres', 'ct', 1, 500, 'k + 1000'), '0|' . (500 * 501 / 2 + 500 * 1000) . '|500',
	'crash: every committed transactional value is there');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('ct', 'late-' || k) <> 1), sc_sum('ct', 'never-committed'),
       (SELECT count(*) FROM sc_top_text('ct', 1000) WHERE key = 'never-committed')
  FROM generate_series(1, 100) k}),
	'0|0|0', 'crash: new transactional keys committed before it count, the open transaction\'s not');
is($node->safe_psql('postgres', q{SELECT sc_total('ct')}), 500 * 501 / 2 + 500 * 1000 + 100,
	'crash: the transactional total is exact');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('cb', 'key-' || k) NOT BETWEEN k AND k + 1000) FROM generate_series(1, 500) k}),
	'0', 'crash: buffered keys hold their flushed value, at most what was counted since, never more');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('cb', 'late-' || k) NOT BETWEEN 0 AND 1) FROM generate_series(1, 100) k}),
	'0', 'crash: buffered keys new since the flush read 0 or their one increment');
is(whole($node, 'postgres', $_), 't', "crash: $_ holds together") for qw(cb ct);
my $cb_before = $node->safe_psql('postgres', q{SELECT sc_total('cb')});
# counting goes on: every key again, and keys new after the crash
# (each call once: x NOT BETWEEN a AND b would call x twice)
is($node->safe_psql('postgres', q{
WITH w AS MATERIALIZED (
  SELECT k, sc_sum('cb', 'late-' || k) AS cb_before, sc_incr('cb', 'late-' || k) AS cb_late,
         sc_incr('ct', 'late-' || k) AS ct_late, sc_incr('cb', 'post-' || k) AS cb_post,
         sc_incr('ct', 'post-' || k, 3) AS ct_post
    FROM generate_series(1, 100) k)
SELECT count(*) FILTER (WHERE cb_late <> cb_before + 1 OR ct_late <> 2 OR cb_post <> 1 OR ct_post <> 3)
  FROM w}),
	'0', 'crash: keys written before and after it count on from what they read');
is($node->safe_psql('postgres', q{SELECT sc_total('cb')}), $cb_before + 200,
	'crash: the buffered total moved by what was counted since');
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $c (qw(cb ct))
{
	is(whole($node, 'postgres', $c), 't', "crash: $c holds together after counting on and a rollup");
	is(lagged_wrong($node, 'postgres', $c), '0', "crash: $c: lagged equals every key");
}

# c. pg_dump and pg_restore, into databases of the same server: as is, and with --no-owner.
#    The counters are a role's; transactional deltas are left unfolded for the dump.
$node->safe_psql('postgres', q{
CREATE ROLE tk_app LOGIN;
CREATE DATABASE app;
CREATE DATABASE restored;
CREATE DATABASE restored_no_owner;
GRANT CREATE ON DATABASE app TO tk_app;
GRANT CREATE ON DATABASE restored TO tk_app;
});
$node->safe_psql('app', 'CREATE EXTENSION slotted_counter');
my @as_app = (extra_params => [ '-U', 'tk_app' ]);
$node->safe_psql('app', q{
SELECT sc_create('d_b', 'buffered', key_type => 'text'), sc_create('d_t', key_type => 'text'),
       sc_create('d_h', 'transactional', '1 hour', key_type => 'text'), sc_create('d_n', 'buffered');
SELECT count(sc_incr(c, 'key-' || k, k)) FROM generate_series(1, 300) k, (VALUES ('d_b'), ('d_t')) v(c);
SELECT count(sc_incr('d_h', 'key-' || k, k, '2026-01-01 10:00+00')) FROM generate_series(1, 50) k;
SELECT count(sc_incr('d_n', k::text, k)) FROM generate_series(1, 50) k;
}, @as_app);
write_special($node, 'app', $_) for qw(d_b d_t);
# the buffered values into the tables; then transactional deltas that stay unfolded
$node->safe_psql('app', q{
SELECT sc_rollup() >= 0;
SELECT count(sc_incr('d_t', 'key-' || k, k)) FROM generate_series(1, 300) k;
}, @as_app);
# What a user reads, compared between the source and each copy (and checked on the source).
my $reads = q{
SELECT c.name, c.durability, c.bucket, c.key_type, s.relowner::regrole,
       (SELECT count(*) FROM slotted_counter.keys k WHERE k.counter = c.id),
       sc_total(c.name),
       (SELECT string_agg(t.key || ':' || t.value, ',') FROM sc_top_text(c.name, 3) t)
  FROM slotted_counter.counters c
  JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass
 ORDER BY c.name};
my $values = q{
SELECT c.name, md5(string_agg(k.key || '=' || sc_sum(c.name, k.key), ',' ORDER BY k.key))
  FROM slotted_counter.counters c JOIN slotted_counter.keys k ON k.counter = c.id
 GROUP BY c.name ORDER BY c.name};
my $lagged = q{
SELECT counter, key, key_text, bucket, value FROM slotted_counter.lagged ORDER BY 1, 3, 4};
my $source_reads = $node->safe_psql('app', $reads);
my $dt_total = 2 * 300 * 301 / 2 + $special_sum;
my $db_total = 300 * 301 / 2 + $special_sum;
is($source_reads,
	"d_b|buffered||text|tk_app|306|$db_total|key-300:300,key-299:299,key-298:298\n"
	  . "d_h|transactional|01:00:00|text|tk_app|50|1275|key-50:50,key-49:49,key-48:48\n"
	  . "d_n|buffered||bigint|tk_app|0|1275|50:50,49:49,48:48\n"
	  . "d_t|transactional||text|tk_app|306|$dt_total|key-300:600,key-299:598,key-298:596",
	'dump: what the source reads');
is(key_check($node, 'app', 'd_t', 1, 300, '2 * k'), '0|' . (300 * 301) . '|300',
	'dump: the source\'s transactional keys, deltas unfolded');
is($node->safe_psql('app', q{SELECT count(*) > 0 FROM slotted_counter.deltas}), 't',
	'dump: the source has unfolded deltas');
my $dump = $node->basedir . '/text_keys.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('app') ], 'dump: pg_dump -Fc');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'dump: pg_restore');
$node->command_ok(
	[ 'pg_restore', '--no-owner', '--exit-on-error', '-d', $node->connstr('restored_no_owner'), $dump ],
	'dump: pg_restore --no-owner');
my $source_values = $node->safe_psql('app', $values);
# The lagged values are the tables' rows: compared once each side has folded its deltas (a copy's
# first read starts its flusher, which folds them at once; the source's waits to be asked).
$node->safe_psql('app', 'SELECT sc_rollup() >= 0');
my $source_lagged = $node->safe_psql('app', $lagged);
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
for my $copy (qw(restored restored_no_owner))
{
	my $expected_reads = $source_reads;
	$expected_reads =~ s/\|tk_app\|/|$superuser|/g if $copy eq 'restored_no_owner';
	is($node->safe_psql($copy, $reads), $expected_reads,
		"dump: $copy: counters, key types, owners, mappings, totals, leaderboards");
	is($node->safe_psql($copy, $values), $source_values, "dump: $copy: every key's value");
	$node->safe_psql($copy, 'SELECT sc_rollup() >= 0');
	is($node->safe_psql($copy, $lagged), $source_lagged, "dump: $copy: the lagged values, key_text");
	is(special_wrong($node, $copy, $_), '0', "dump: $copy: $_: the special keys") for qw(d_b d_t);
	my @as = $copy eq 'restored' ? @as_app : ();
	is($node->safe_psql($copy, q{
SELECT sc_incr('d_b', 'key-1'), sc_incr('d_t', 'key-1'), sc_incr('d_b', 'brand-new'), sc_incr('d_t', 'brand-new', 2),
       sc_incr('d_h', 'key-1', 1, '2026-01-01 10:30+00'), sc_incr('d_n', '1'),
       sc_incr_batch_text('d_b', ARRAY['batch-new-1', 'batch-new-2', 'key-2'], ARRAY[1, 1, 1])}, @as),
		'2|3|1|2|2|2|{1,1,3}', "dump: $copy: existing keys count on, new keys from 0");
	is($node->safe_psql($copy, q{SELECT sc_total('d_b'), sc_total('d_t')}),
		($db_total + 5) . '|' . ($dt_total + 3), "dump: $copy: nothing else moved");
	is(whole($node, $copy, $_), 't', "dump: $copy: $_ holds together") for qw(d_b d_t d_h);
}

# d. A streaming standby, from a backup taken now; counters made after it.
$node->backup('tk_backup');
my $standby = PostgreSQL::Test::Cluster->new('text_keys_standby');
$standby->init_from_backup($node, 'tk_backup', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"shared_preload_libraries = 'slotted_counter'\nlog_statement = none\n");
$standby->start;
$node->safe_psql('postgres', q{
SELECT sc_create('sb_b', 'buffered', key_type => 'text'), sc_create('sb_t', key_type => 'text');
SELECT count(sc_incr(c, 'key-' || k, k)) FROM generate_series(1, 200) k, (VALUES ('sb_b'), ('sb_t')) v(c);
SELECT sc_rollup();
SELECT count(sc_incr('sb_t', 'key-' || k, k)) FROM generate_series(1, 200) k;
});
write_special($node, 'postgres', 'sb_t');
$node->wait_for_catchup($standby);
is(key_check($standby, 'postgres', 'sb_t', 1, 200, '2 * k'), '0|' . (200 * 201) . '|200',
	'standby: transactional text keys read their committed values, folded or not');
is(key_check($standby, 'postgres', 'sb_b', 1, 200, 'k'), '0|' . (200 * 201 / 2) . '|200',
	'standby: buffered text keys read their flushed values');
is(special_wrong($standby, 'postgres', 'sb_t'), '0', 'standby: the special keys');
is($standby->safe_psql('postgres', q{
SELECT (SELECT string_agg(key || ':' || value, ',') FROM sc_top_text('sb_t', 2)), sc_rank('sb_t', 'key-200'),
       sc_sum('sb_t', 'unknown'), sc_total('sb_t')}),
	'key-200:400,key-199:398|1|0|' . (200 * 201 + $special_sum), 'standby: leaderboard, rank, an unknown key, total');
is(lagged_wrong($standby, 'postgres', 'sb_b'), '0', 'standby: lagged of the buffered counter');
# one standby session reads a key the primary has not written yet, and a key it has
my $reader = $standby->background_psql('postgres');
is($reader->query_safe(q{SELECT sc_sum('sb_t', 'late'), sc_sum('sb_t', 'key-1')}), '0|2',
	'standby: a session reads an unknown key and a known one');
$node->safe_psql('postgres', q{SELECT sc_incr('sb_t', 'late', 5), sc_incr('sb_t', 'key-1', 10)});
$node->wait_for_catchup($standby);
is($reader->query_safe(q{SELECT sc_sum('sb_t', 'late'), sc_sum('sb_t', 'key-1')}), '5|12',
	'standby: the same session reads both as the primary wrote them since');
$reader->quit;
# writes fail with 25006, for keys the standby knows and new ones, and change nothing
for my $sql (
	q{SELECT sc_incr('sb_t', 'key-1')},
	q{SELECT sc_incr('sb_t', 'new-on-standby')},
	q{SELECT sc_incr('sb_b', 'key-1')},
	q{SELECT sc_incr('sb_b', 'new-on-standby')},
	q{SELECT sc_set('sb_b', 'new-on-standby-2', 5)},
	q{SELECT sc_incr_batch_text('sb_b', ARRAY['new-1', 'new-2'], ARRAY[1, 1])})
{
	my ($ret, $stdout, $stderr) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	like($stderr, qr/ERROR:  25006/, "standby: 25006: $sql");
}
is($standby->safe_psql('postgres', q{
SELECT sc_sum('sb_t', 'key-1'), sc_sum('sb_b', 'key-1'), sc_sum('sb_b', 'new-on-standby'),
       (SELECT count(*) FROM slotted_counter.keys WHERE key LIKE 'new-%')}),
	'12|1|0|0', 'standby: the failed writes changed nothing');
# promoted (the primary goes on as a server of its own): it counts on
$standby->promote;
is($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'), 1,
	'standby: promoted');
is($standby->safe_psql('postgres', q{
SELECT sc_incr('sb_t', 'key-1'), sc_incr('sb_b', 'key-1'), sc_incr('sb_t', 'promoted', 2), sc_incr('sb_b', 'promoted', 3),
       sc_incr_batch_text('sb_b', ARRAY['promoted', 'key-2'], ARRAY[1, 1])}),
	'13|2|2|3|{4,3}', 'promoted: old keys count on, new keys from 0');
is(whole($standby, 'postgres', $_), 't', "promoted: $_ holds together") for qw(sb_b sb_t);
$standby->stop;

# e. Load, with the periodic flush on (1 second) so that flushes and new keys' mappings overlap.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET slotted_counter.flush_interval = '1s';
SELECT pg_reload_conf();
SELECT sc_create('race_b', 'buffered', key_type => 'text'), sc_create('race_t', key_type => 'text'),
       sc_create('load_b', 'buffered', key_type => 'text'), sc_create('load_t', key_type => 'text');
CREATE TABLE written (k integer NOT NULL);
});
is($node->poll_query_until('postgres', q{SELECT current_setting('slotted_counter.flush_interval') = '1s'}), 1,
	'load: the periodic flush is on');

# 8 clients write the same 2,000 new keys, in the same order, at the same moment.
$node->pgbench(
	'--no-vacuum --client=8 --jobs=2 --transactions=1',
	0,
	[qr{actually processed: 8/8}],
	[qr{^$}],
	'load: 8 clients write the same new keys at once',
	{
		'048_race' => q{
SELECT count(sc_incr('race_b', 'same-' || g)) + count(sc_incr('race_t', 'same-' || g)) FROM generate_series(1, 2000) g;
}
	});
# After a flush: the rows of the texts that sessions of race_b gave ids are written by it.
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $c (qw(race_b race_t))
{
	is($node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM generate_series(1, 2000) g WHERE sc_sum('$c', 'same-' || g) <> 8),
       sc_total('$c'),
       (SELECT count(*) FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer),
       (SELECT count(DISTINCT key) FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer)}),
		'0|16000|2000|2000', "load: $c: every key counted 8 times, one mapping each");
}

# pgbench over 100,000 possible keys, each call logged by the same statement; a reader reads the
# leaderboard over and over until it ends (at least once).
my $script = $node->basedir . '/048_load.sql';
append_to_file($script, q{\set k random(1, 100000)
WITH logged AS (INSERT INTO written VALUES (:k)) SELECT sc_incr('load_b', 'k' || :k), sc_incr('load_t', 'k' || :k);
});
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=12500',
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err, IPC::Run::timeout(600));
# What must hold of sc_top_text at any moment: keys distinct, none NULL, largest first, each
# its own text (a text a session gave its id is read from the shared cache until the flush
# writes its row). The read is kept, then judged by a later statement.
my $top_check = q{
TRUNCATE top_read;
INSERT INTO top_read SELECT row_number() OVER (), key, value FROM sc_top_text('load_b', 50);
SELECT count(*) FILTER (WHERE key IS NULL) || '|' || (count(*) - count(DISTINCT key)) || '|'
    || (SELECT count(*) FROM top_read a JOIN top_read b ON b.n = a.n + 1 WHERE b.value > a.value) || '|'
    || count(*) FILTER (WHERE key !~ '^k[0-9]+$' OR sc_sum('load_b', key) < value)
  FROM top_read t};
my $top_reader = $node->background_psql('postgres');
$top_reader->query_safe('CREATE TEMP TABLE top_read (n bigint, key text, value bigint)');
$top_reader->set_query_timer_restart();    # the hang guard is per read, not for the whole load
my ($reads_done, @bad_reads) = (0);
do
{
	my $found = $top_reader->query_safe($top_check);
	push @bad_reads, $found if $found ne '0|0|0|0';
	$reads_done++;
	$load->pump_nb if $load->pumpable;
	usleep(200_000) if $load->pumpable;
} while ($load->pumpable);
$load->finish;
$top_reader->quit;
is($load->full_result(0), 0, 'load: pgbench exited with 0');
is(scalar(() = $err =~ /error/gi), 0, 'load: no call failed');
my ($tx) = $out =~ /number of transactions actually processed: (\d+)/;
is($tx, 100000, 'load: pgbench reports 100,000 transactions');
is(join(', ', @bad_reads), '',
	"load: every leaderboard read during the load was ordered, distinct and mapped ($reads_done reads; "
	  . 'a bad one shows NULL keys|repeated|out of order|not its text)');
is($node->safe_psql('postgres', q{SELECT count(*), count(DISTINCT k) > 50000 FROM written}), "$tx|t",
	'load: every transaction logged its key; most of the 100,000 keys were written');
# The mappings after a flush: load_b's last new keys have their rows once it wrote their values.
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $c (qw(load_b load_t))
{
	is($node->safe_psql('postgres', qq{SELECT sc_total('$c')}), $tx,
		"load: $c: the total equals the transactions pgbench reports");
	is($node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer)
     = (SELECT count(DISTINCT k) FROM written)}),
		't', "load: $c: as many mappings as distinct keys written");
	is($node->safe_psql('postgres', qq{
SELECT count(*) FROM (SELECT key FROM slotted_counter.keys WHERE counter = '$c'::slotted_counter::integer) m
  FULL JOIN (SELECT DISTINCT 'k' || k AS key FROM written) w USING (key)
 WHERE m.key IS NULL OR w.key IS NULL}),
		'0', "load: $c: the mapped keys are exactly the keys written");
	is($node->safe_psql('postgres', qq{
SELECT count(*) FROM (SELECT k, count(*) AS n FROM written GROUP BY k) w WHERE sc_sum('$c', 'k' || w.k) <> w.n}),
		'0', "load: $c: every key reads the number of its writes");
}
$node->safe_psql('postgres', 'SELECT sc_rollup()');
for my $c (qw(load_b load_t))
{
	is($node->safe_psql('postgres', qq{
SELECT count(*) FROM (SELECT k, count(*) AS n FROM written GROUP BY k) w
  FULL JOIN (SELECT key_text, value FROM slotted_counter.lagged WHERE counter = '$c') l ON l.key_text = 'k' || w.k
 WHERE l.value IS DISTINCT FROM w.n}),
		'0', "load: $c: after a rollup, lagged holds exactly every key's writes");
	is(whole($node, 'postgres', $c), 't', "load: $c holds together");
}

# f. One session uses more keys than its cache of ids holds (about 100,000: then it starts over),
#    more than the buffer holds too: every key still counts and reads exactly.
$node->safe_psql('postgres', q{SELECT sc_create('many', 'buffered', key_type => 'text')});
is($node->safe_psql('postgres', q{
SELECT cardinality(sc_incr_batch_text('many', ARRAY(SELECT 'm-' || g FROM generate_series(1, 120000) g),
                                      array_fill(1::bigint, ARRAY[120000])));
SELECT count(*) FILTER (WHERE sc_incr('many', 'm-' || g) <> 2) FROM generate_series(1, 120000) g;
SELECT count(*) FILTER (WHERE sc_sum('many', 'm-' || g) <> 2) FROM generate_series(1, 120000) g;
SELECT sc_total('many'), (SELECT count(*) FROM slotted_counter.keys WHERE counter = 'many'::slotted_counter::integer)}),
	"120000\n0\n0\n240000|120000", 'one session past its cache of keys: every key counts and reads exactly');

$node->stop;
done_testing();
