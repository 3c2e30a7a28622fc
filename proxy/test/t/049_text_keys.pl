# Keys as text through the router (slotted_counter_proxy): three data nodes and a router.
#   1. sc_create(..., key_type => 'text') through the router: every node defines the counter keyed
#      by text and the router records it so; a node that defines the name otherwise is refused.
#   2. pgbench through the router with untyped placeholders (-M prepared) over 3,000 keys of a
#      buffered and a transactional counter keyed by text, of a counter keyed by bigint, and a
#      spread hot key: every key reads exactly its increments, and on the nodes themselves the
#      values add up to what was added and each text key lives on the node hashtext(key) picks,
#      and on no other.
#   3. Keys that differ in their bytes only ('a', 'a ', 'A', composed and decomposed accents, '',
#      2,048 bytes) are distinct keys, each on one node; a key in a nondeterministic collation goes
#      to the node of its bytes.
#   4. Reads: range sums and series of a bucketed counter, sc_total, sc_top_text merged from every
#      node (for a spread counter and for a counter keyed by bigint too).
#   5. The batch forms split by node; sc_set, sc_incr_once and sc_incr_bounded with text keys.
#   6. A counter keyed by bigint takes untyped and text keys where its bigint keys live; untyped
#      calls and PREPARE with unknown parameters are never ambiguous and take the text forms.
#   7. Errors: 42804, 22001 (nothing counted, also by a batch over every node), 22004, 22P02,
#      22003, 42704, 22023, 25001, 0A000.
#   8. A role acts on the nodes as itself only: with a mapping that names another role every text
#      form is refused before it reaches a node; a role gets the nodes' privileges; a second router
#      records a counter keyed by text for its owner only, with the key type the nodes define.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my @data = map { preloaded_node("data$_", "slotted_counter.flush_interval = 200\n") } 0 .. 2;
my $roles = 'CREATE ROLE alice LOGIN; CREATE ROLE app LOGIN; CREATE ROLE mallory LOGIN;';
$_->safe_psql('postgres', "CREATE EXTENSION slotted_counter; $roles
GRANT CREATE ON DATABASE postgres TO alice, mallory;") for @data;

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "max_connections = 40\nlog_statement = none\n");
$router->start;
$router->safe_psql('postgres', $roles);

my $nodes = join(', ',
	map { sprintf("'host=%s port=%d dbname=postgres connect_timeout=5'", $_->host, $_->port) }
	  @data);
for my $db ('postgres', 'router2')
{
	$router->safe_psql('postgres', "CREATE DATABASE $db") if $db ne 'postgres';
	$router->safe_psql($db, 'CREATE EXTENSION slotted_counter_proxy CASCADE');
	$router->safe_psql($db, "SELECT sc_proxy_configure(ARRAY[$nodes])");
}

# The outcome of sql on the router: 'ok', or "SQLSTATE: message" of its error.
sub outcome
{
	my ($sql, $user, $db) = @_;
	my ($ret, $out, $err) = $router->psql($db // 'postgres', $sql,
		extra_params => [ '-U', $user // 'postgres', '-v', 'VERBOSITY=verbose' ]);
	return $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : $ret == 0 ? 'ok' : "failed: $err";
}

sub sqlstate_of
{
	my $result = outcome(@_);
	return $result =~ /^([0-9A-Z]{5}):/ ? $1 : $result;
}

# The sum of a query's single value over the data nodes.
sub over_nodes
{
	my ($sql) = @_;
	my $sum = 0;
	$sum += $_->safe_psql('postgres', $sql) for @data;
	return $sum;
}

# Flushes every data node: a buffered counter's new text has its row in slotted_counter.keys
# once the flush that writes its value ran.
sub flush_nodes
{
	$_->safe_psql('postgres', 'SELECT sc_rollup()') for @data;
}

# 1. Counters keyed by text, created through the router.
$router->safe_psql('postgres', q{
SELECT sc_create('urls', 'buffered', key_type => 'text'),
       sc_create('titles', key_type => 'text'),
       sc_create('hot', 'buffered', spread => true, key_type => 'text'),
       sc_create('hits', 'buffered', '1 hour', key_type => 'text'),
       sc_create('odd', 'buffered', key_type => 'text'),
       sc_create('cased', 'buffered', key_type => 'text'),
       sc_create('views', 'buffered');
CREATE TABLE truth (k bigint NOT NULL);});
my $defined = 'cased buffered text,hits buffered text,hot buffered text,odd buffered text,'
  . 'titles transactional text,urls buffered text,views buffered bigint';
is( $router->safe_psql('postgres', q{
SELECT string_agg(name || ' ' || durability || ' ' || key_type, ',' ORDER BY name)
  FROM slotted_counter_proxy.counters}),
	$defined, 'the router records each counter\'s key type');
for my $i (0 .. 2)
{
	is( $data[$i]->safe_psql('postgres', q{
SELECT string_agg(name || ' ' || durability || ' ' || key_type, ',' ORDER BY name)
  FROM slotted_counter.counters}),
		$defined, "data node $i defines every counter with the key type the router was given");
}
$data[1]->safe_psql('postgres', q{SELECT sc_create('clash', 'buffered')});
like(outcome(q{SELECT sc_create('clash', 'buffered', key_type => 'text')}),
	qr/^42710: counter "clash" is defined differently on the data nodes/,
	'a name one node keys by bigint cannot be created keyed by text: 42710');
is( $router->safe_psql('postgres',
		q{SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'clash'}),
	'0', '... and the router does not record it');

# 2. pgbench through the router; its parameters are untyped (-M prepared sends no types), as a
# driver's placeholders are.
my $script = $router->basedir . '/load.sql';
append_to_file($script, q{\set k random(1, 3000)
SELECT sc_incr('urls', :k);
SELECT sc_incr('titles', 'Title ' || :k, 2);
SELECT sc_incr('views', :k);
SELECT sc_incr('hot', 'the hot key');
INSERT INTO truth VALUES (:k);
});
my ($bench_out, $bench_err) = ('', '');
IPC::Run::run(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=500',
		'--protocol=prepared', "--file=$script", '-h', $router->host, '-p', $router->port, 'postgres'
	],
	'>', \$bench_out, '2>', \$bench_err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
my ($tx) = $bench_out =~ /number of transactions actually processed: (\d+)/;
my $errors = () = $bench_err =~ /ERROR/g;
is($errors, 0, 'pgbench through the router with text keys: no call failed');
diag($bench_err) if $errors;
is($tx, 8 * 500, 'pgbench through the router: every client ran its transactions');
is($router->safe_psql('postgres', 'SELECT count(*) FROM truth'), $tx,
	'... and every one of them finished');

my $truth = q{(SELECT k, count(*) AS n FROM truth GROUP BY k) AS t
  RIGHT JOIN generate_series(1, 3000) AS g(k) USING (k)};
is( $router->safe_psql('postgres', qq{
SELECT count(*) FROM $truth
 WHERE sc_sum('urls', g.k::text) <> coalesce(t.n, 0)
    OR sc_sum('titles', 'Title ' || g.k) <> 2 * coalesce(t.n, 0)
    OR sc_sum('views', g.k) <> coalesce(t.n, 0)
    OR sc_sum('views', g.k::text) <> coalesce(t.n, 0)}),
	'0', 'every one of 3,000 keys of each counter reads its increments through the router');
is($router->safe_psql('postgres', q{SELECT sc_sum('hot', 'the hot key')}), $tx,
	'the spread hot key reads every increment');

$router->safe_psql('postgres', 'SELECT sc_rollup()');
is( over_nodes(q{SELECT sc_total('urls')}) . ' '
	  . over_nodes(q{SELECT sc_total('titles')}) . ' '
	  . over_nodes(q{SELECT sc_total('views')}) . ' '
	  . over_nodes(q{SELECT sc_total('hot')}),
	"$tx " . (2 * $tx) . " $tx $tx",
	'on the data nodes themselves the values of each counter add up to what was added');
my $distinct = $router->safe_psql('postgres', 'SELECT count(DISTINCT k) FROM truth');
flush_nodes();
is( over_nodes(q{
SELECT count(*) FROM slotted_counter.keys k JOIN slotted_counter.counters c ON c.id = k.counter
 WHERE c.name = 'urls'}) . ' ' . over_nodes(q{
SELECT count(*) FROM slotted_counter.keys k JOIN slotted_counter.counters c ON c.id = k.counter
 WHERE c.name = 'titles'}),
	"$distinct $distinct",
	'each text key written is known to one node only');
for my $i (0 .. 2)
{
	my $share = $data[$i]->safe_psql('postgres', q{SELECT sc_sum('hot', 'the hot key')});
	ok($share > $tx / 10, "data node $i took a share of the spread text key ($share of $tx)");
}

# 3. Keys that differ in their bytes only.
$router->safe_psql('postgres', q{
CREATE TABLE odd_keys (k text NOT NULL, n bigint NOT NULL);
INSERT INTO odd_keys VALUES
  ('', 1), ('a', 2), ('a ', 3), ('A', 4), (U&'\00E1', 5), (U&'a\0301', 6),
  (U&'\65E5\672C\8A9E', 7), (repeat(U&'\00E9', 1024), 8), ('{x,"y"}', 9), (E'line\nbreak', 10),
  ('42', 11), ('042', 12), (' 42', 13), ('NULL', 14), (repeat('z', 2048), 15);
SELECT sum(sc_incr('odd', k, n)) FROM odd_keys;});
is( $router->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('odd', k) = n), sc_sum_keys_text('odd', ARRAY(SELECT k FROM odd_keys))
  FROM odd_keys}),
	'15|120', '15 keys that differ in bytes only (2,048 bytes the longest) are 15 keys');
is( $router->safe_psql('postgres', q{
SELECT count(*) FROM sc_top_text('odd', 100) AS t FULL JOIN odd_keys o ON o.k = t.key AND o.n = t.value
 WHERE t.key IS NULL OR o.k IS NULL;
SELECT array_agg(value) FROM sc_top_text('odd', 4);}),
	"0\n{15,14,13,12}", '... and sc_top_text returns each with its value, largest first');
flush_nodes();
is( over_nodes(q{
SELECT count(*) FROM slotted_counter.keys k JOIN slotted_counter.counters c ON c.id = k.counter
 WHERE c.name = 'odd'}),
	'15', '... each known to one node');

# A collation that is not deterministic compares 'KEY1' and 'key1' equal, and hashes them alike:
# the router routes by the key's bytes whatever the collation of the argument.
$router->safe_psql('postgres', q{
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT sum(sc_set('cased', ('Key' || g) COLLATE ci, g)) FROM generate_series(1, 30) AS g;
SELECT sc_incr_batch_text('cased', ARRAY(SELECT 'Key' || g FROM generate_series(1, 30) AS g) COLLATE ci,
                          ARRAY(SELECT 100::bigint FROM generate_series(1, 30)));});
is( $router->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE sc_sum('cased', 'Key' || g) = 100 + g
                          AND sc_sum('cased', ('Key' || g) COLLATE ci) = 100 + g
                          AND sc_sum('cased', 'KEY' || g) = 0),
       sc_sum_keys_text('cased', ARRAY(SELECT 'Key' || g FROM generate_series(1, 30) AS g) COLLATE ci)
  FROM generate_series(1, 30) AS g}),
	'30|3465', 'keys given in a case-insensitive collation are written and read by their bytes');

# 4. Reads.
is( $router->safe_psql('postgres', q{
SELECT sum(sc_incr('hits', 'p' || k, 1, '2026-01-01 10:30+00') + sc_incr('hits', 'p' || k, 2, '2026-01-01 11:30+00'))
  FROM generate_series(1, 30) AS k;
SELECT string_agg(to_char(bucket AT TIME ZONE 'UTC', 'HH24') || '=' || value, ',')
  FROM sc_series('hits', 'p17', '2026-01-01 00:00+00', '2026-01-02 00:00+00');
SELECT sc_sum('hits', 'p17', '2026-01-01 11:00+00', '2026-01-02'), sc_sum('hits', 'p17'),
       sc_total('hits'), sc_total('hits', '2026-01-01 11:00+00', NULL);
SELECT string_agg(to_char(bucket AT TIME ZONE 'UTC', 'HH24') || '=' || value, ',')
  FROM sc_total_series('hits', '2026-01-01 00:00+00', '2026-01-02 00:00+00');}),
	"90\n10=1,11=2\n2|3|90|60\n10=30,11=60",
	'a bucketed counter keyed by text: sc_incr at, sc_series, range sums, totals');

# Twelve keys above every other, on every node, so that the top 10 is the same whatever the ties.
is( $router->safe_psql('postgres', q{
SELECT count(DISTINCT abs(hashtext('top' || g) % 3)) FROM generate_series(1, 12) AS g;
SELECT sum(sc_incr('urls', 'top' || g, 100000 + g)) FROM generate_series(1, 12) AS g;
SELECT string_agg(key || ':' || value, ',') FROM sc_top_text('urls', 10);}),
	"3\n1200078\n" . join(',', map { "top$_:" . (100000 + $_) } reverse 3 .. 12),
	'sc_top_text merges every node\'s top n, largest first');
is( $router->safe_psql('postgres', q{
SELECT count(*) || ' ' || sum(value) FROM sc_top_text('urls', 1000000)}),
	($distinct + 12) . ' ' . ($tx + 1200078),
	'... and, asked for every key, returns each key once with its whole value');
is($router->safe_psql('postgres', q{SELECT key || ':' || value FROM sc_top_text('hot', 1)}),
	"the hot key:$tx", 'sc_top_text of a spread counter adds up the shares');
is( $router->safe_psql('postgres',
		q{SELECT string_agg(key || ':' || value, ',') FROM sc_top_text('views', 5)}),
	$router->safe_psql('postgres',
		q{SELECT string_agg(key || ':' || value, ',') FROM sc_top('views', 5)}),
	'sc_top_text of a counter keyed by bigint reads as its sc_top');

# 5. Batches, sets, increments once and bounded.
is( $router->safe_psql('postgres', q{
SELECT sc_incr_batch_text('urls', ARRAY(SELECT 'batch' || g FROM generate_series(1, 300) AS g),
                          ARRAY(SELECT g::bigint FROM generate_series(1, 300) AS g))
     = ARRAY(SELECT g::bigint FROM generate_series(1, 300) AS g)}),
	't', 'sc_incr_batch_text of 300 new keys returns each one\'s value in the batch\'s order');
is( $router->safe_psql('postgres', q{
SELECT sc_sum_keys_text('urls', ARRAY(SELECT g::text FROM generate_series(1, 3000, 7) AS g) || '{1}')
     = (SELECT count(*) FROM truth WHERE k % 7 = 1)}),
	't', 'sc_sum_keys_text of a group over every node equals the truth (a repeated key counted once)');
is( $router->safe_psql('postgres', q{
WITH b AS (SELECT sc_incr_batch_text('urls', ARRAY(SELECT g::text FROM generate_series(1, 50) AS g),
                                     ARRAY(SELECT 1000::bigint FROM generate_series(1, 50))) AS r)
SELECT bool_and(b.r[g] = sc_sum('urls', g::text))
   AND bool_and(b.r[g] = 1000 + (SELECT count(*) FROM truth WHERE truth.k = g))
  FROM b, generate_series(1, 50) AS g}),
	't', '... and of keys already written, their new values');
is( $router->safe_psql('postgres', q{
SELECT sc_incr_batch_text('hot', '{the hot key,other}', '{5,7}') IS NOT NULL;
SELECT sc_sum('hot', 'the hot key'), sc_sum_keys_text('hot', '{the hot key,other,other}');}),
	"t\n" . ($tx + 5) . '|' . ($tx + 12), 'the batch forms on a spread counter');
is( $router->safe_psql('postgres', q{
SELECT sc_set('urls', 'top1', 5), sc_sum('urls', 'top1');
SELECT sc_set('hot', 'other', 100), sc_sum('hot', 'other');}),
	"100001|5\n7|100", 'sc_set of a text key returns the old value, of a spread one the old sum');
is( over_nodes(q{SELECT (sc_sum('hot', 'other') = 100)::int}) . ' '
	  . over_nodes(q{SELECT sc_sum('hot', 'other')}),
	'1 100', '... one node takes the value and every other node\'s share is 0');
is( $router->safe_psql('postgres', q{
SELECT sc_incr_once('titles', 'Moby Dick', 2, 'order 1'), sc_incr_once('titles', 'Moby Dick', 2, 'order 1'),
       sc_sum('titles', 'Moby Dick');
SELECT sc_incr_once('hot', 'once', 1, 'request 9'), sc_incr_once('hot', 'once', 1, 'request 9'),
       sc_sum('hot', 'once');}),
	"2|2|2\n1|1|1", 'sc_incr_once with a text key applies once (on a spread counter too)');
is( $router->safe_psql('postgres', q{
SELECT sc_incr_bounded('urls', 'stock', 6, 0, 10), sc_incr_bounded('urls', 'stock', 6, 0, 10) IS NULL,
       sc_sum('urls', 'stock')}),
	'6|t|6', 'sc_incr_bounded with a text key refuses what would leave the bounds');

# 6. A counter keyed by bigint takes keys as text; which form a call takes.
my ($before42, $before43) =
  split /\|/, $router->safe_psql('postgres', q{SELECT sc_sum('views', 42), sc_sum('views', 43)});
is( $router->safe_psql('postgres', q{
SELECT sc_incr('views', '42') >= 0, sc_incr('views', 42::bigint) >= 0, sc_incr('views', '42'::varchar) >= 0;
SELECT sc_sum('views', 42), sc_sum('views', '42');
SELECT sc_incr_batch_text('views', '{42,43}', '{10,10}') = sc_incr_batch('views', '{42,43}', '{0,0}');
SELECT sc_sum_keys_text('views', '{42,43}') = sc_sum_keys('views', '{42,43}');
SELECT sc_set('views', '43', 7), sc_sum('views', 43);}),
	"t|t|t\n" . ($before42 + 3) . '|' . ($before42 + 3) . "\nt\nt\n" . ($before43 + 10) . '|7',
	'on a counter keyed by bigint, a key as text is that bigint: the same value, through every form');
$router->safe_psql('postgres', 'SELECT sc_rollup()');
for my $i (0 .. 2)
{
	is( $data[$i]->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE abs(hashint8(t.key) % 3) <> $i)
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name = 'views';
SELECT count(*) FILTER (WHERE abs(hashtext(k.key) % 3) <> $i)
  FROM slotted_counter.keys k JOIN slotted_counter.counters c ON c.id = k.counter
 WHERE c.name <> 'hot';}),
		"0\n0",
		"data node $i holds only the bigint keys hashint8 picks for it, given as text or not, "
		  . 'and the text keys hashtext picks');
}

is( $router->safe_psql('postgres', q{
SELECT sc_incr('urls', '5') >= 1, sc_incr('views', '5') >= 1, sc_incr('views') >= 1,
       sc_incr('views', 5) >= 1, sc_incr('urls', 'v'::varchar) >= 1, sc_incr('urls', 'n'::name) >= 1}),
	't|t|t|t|t|t',
	'sc_incr(c, \'5\') takes the text form on both kinds; sc_incr(c) and sc_incr(c, 5) the bigint form');
is(outcome(q{SELECT sc_incr('urls', NULL)}), '22004: key must not be null',
	'sc_incr(c, NULL) is not ambiguous: the text form, 22004');
is(outcome(q{SELECT sc_sum('views', NULL)}), '22004: key must not be null',
	'... nor is sc_sum(c, NULL)');
like(outcome(q{SELECT sc_incr('urls')}), qr/^42804: counter "urls" is keyed by text/,
	'sc_incr(c) takes the bigint form, key 0: on a counter keyed by text, 42804 as on a node');
like(outcome(q{SELECT sc_incr('urls', 5)}), qr/^42804: counter "urls" is keyed by text/,
	'sc_incr(c, 5): 42804');
my $views8 = $router->safe_psql('postgres', q{SELECT sc_sum('views', 8)}) + 2;
is( $router->safe_psql('postgres', q{
PREPARE p01 AS SELECT sc_incr($1, $2);
PREPARE p02 AS SELECT sc_incr($1, $2, $3);
PREPARE p03 AS SELECT sc_incr($1, $2, $3, $4);
PREPARE p04 AS SELECT sc_incr_bounded($1, $2, $3, $4, $5);
PREPARE p05 AS SELECT sc_incr_bounded($1, $2, $3, $4, $5, $6);
PREPARE p06 AS SELECT sc_incr_once($1, $2, $3, $4);
PREPARE p07 AS SELECT sc_incr_once($1, $2, $3, $4, $5);
PREPARE p08 AS SELECT sc_set($1, $2, $3);
PREPARE p09 AS SELECT sc_set($1, $2, $3, $4);
PREPARE p10 AS SELECT sc_sum($1, $2);
PREPARE p11 AS SELECT sc_sum($1, $2, $3, $4);
PREPARE p12 AS SELECT * FROM sc_series($1, $2, $3, $4);
PREPARE p13 AS SELECT sc_incr_batch_text($1, $2, $3);
PREPARE p14 AS SELECT sc_sum_keys_text($1, $2);
PREPARE p15 AS SELECT * FROM sc_top_text($1, $2);
PREPARE p16 AS SELECT * FROM sc_top_text($1, $2, $3, $4);
PREPARE p17 AS SELECT sc_rank($1, $2);
PREPARE p18 AS SELECT sc_rank($1, $2, $3, $4);
SELECT string_agg(name || '(' || translate(parameter_types::text, '{}"', '') || ')', ' ' ORDER BY name)
  FROM pg_prepared_statements;
EXECUTE p01('urls', 'prepared');
EXECUTE p02('views', '8', 2);
EXECUTE p03('hits', 'p1', 1, '2026-01-01 10:45+00');
EXECUTE p10('urls', 'prepared');
EXECUTE p10('views', '8');
EXECUTE p14('urls', '{prepared,prepared}');}),
	'p01(text,text) p02(text,text,bigint) p03(text,text,bigint,timestamp with time zone) '
	  . 'p04(text,text,bigint,bigint,bigint) p05(text,text,bigint,bigint,bigint,timestamp with time zone) '
	  . 'p06(text,text,bigint,text) p07(text,text,bigint,text,timestamp with time zone) '
	  . 'p08(text,text,bigint) p09(text,text,bigint,timestamp with time zone) '
	  . 'p10(text,text) p11(text,text,timestamp with time zone,timestamp with time zone) '
	  . 'p12(text,text,timestamp with time zone,timestamp with time zone) '
	  . 'p13(text,text[],bigint[]) p14(text,text[]) p15(text,bigint) '
	  . 'p16(text,bigint,timestamp with time zone,timestamp with time zone) '
	  . 'p17(text,text) p18(text,text,timestamp with time zone,timestamp with time zone)'
	  . "\n1\n$views8\n2\n1\n$views8\n1",
	'PREPARE with unknown parameters: every function resolves, to its text form, on both kinds');

# 7. Errors.
my %keyed_by_text = (
	'sc_incr' => q{SELECT sc_incr('urls', 5)},
	'sc_incr at' => q{SELECT sc_incr('hits', 5, 1, now())},
	'sc_incr_bounded' => q{SELECT sc_incr_bounded('urls', 5, 1, 0, 9)},
	'sc_incr_once' => q{SELECT sc_incr_once('urls', 5, 1, 'request')},
	'sc_set' => q{SELECT sc_set('urls', 5, 1)},
	'sc_sum' => q{SELECT sc_sum('urls', 5)},
	'sc_sum()' => q{SELECT sc_sum('urls')},
	'sc_sum range' => q{SELECT sc_sum('hits', 5, NULL, NULL)},
	'sc_series' => q{SELECT * FROM sc_series('hits', 5, now() - interval '1 day', now())},
	'sc_incr_batch' => q{SELECT sc_incr_batch('urls', '{}', '{}')},
	'sc_sum_keys' => q{SELECT sc_sum_keys('urls', '{1}')},
	'sc_top' => q{SELECT * FROM sc_top('urls', 3)},
	'sc_rank' => q{SELECT sc_rank('urls', 5)},
	'sc_rank range' => q{SELECT sc_rank('hits', 5, NULL, NULL)});
for my $call (sort keys %keyed_by_text)
{
	like(outcome($keyed_by_text{$call}), qr/^42804: counter "(urls|hits)" is keyed by text/,
		"$call (bigint keys) on a counter keyed by text: 42804");
}
my $total = $router->safe_psql('postgres', q{SELECT sc_total('urls')});
like(outcome(q{SELECT sc_incr('urls', repeat('x', 2049))}),
	qr/^22001: .*key of counter "urls" is too long/, 'a key of 2,049 bytes: 22001 from its node');
is(sqlstate_of(q{SELECT sc_incr('urls', repeat(U&'\00E9', 1025))}), '22001',
	'... of 1,025 characters and 2,050 bytes: 22001');
is(sqlstate_of(q{SELECT sc_sum('urls', repeat('x', 2049))}), '22001', '... read: 22001');
like( outcome(q{
SELECT sc_incr_batch_text('urls', ARRAY(SELECT 'fine' || g FROM generate_series(1, 30) AS g) || repeat('x', 2049),
                          ARRAY(SELECT 1::bigint FROM generate_series(1, 31)))}),
	qr/^22001: key of counter "urls" is too long/,
	'a batch over every node with one key too long: 22001');
is( $router->safe_psql('postgres', q{
SELECT sc_total('urls'), sc_sum_keys_text('urls', ARRAY(SELECT 'fine' || g FROM generate_series(1, 30) AS g))}),
	"$total|0", '... and nothing was counted, on any node');

my %errors = (
	q{SELECT sc_incr('urls', NULL::text)} => '22004',
	q{SELECT sc_incr_once('urls', NULL, 1, 'request')} => '22004',
	q{SELECT sc_incr_bounded('urls', NULL, 1, 0, 9)} => '22004',
	q{SELECT sc_set('urls', NULL, 1)} => '22004',
	q{SELECT sc_sum('urls', NULL::text)} => '22004',
	q{SELECT * FROM sc_series('hits', NULL, now(), now())} => '22004',
	q{SELECT sc_incr(NULL, 'a')} => '22004',
	q{SELECT sc_incr_batch_text('urls', '{a,NULL}', '{1,1}')} => '22004',
	q{SELECT sc_incr_batch_text('urls', NULL, '{1}')} => '22004',
	q{SELECT sc_sum_keys_text('urls', '{NULL}')} => '22004',
	q{SELECT * FROM sc_top_text('urls', NULL)} => '22004',
	q{SELECT sc_incr_batch_text('urls', '{a,b}', '{1}')} => '22023',
	q{SELECT sc_incr_batch_text('urls', '{{a},{b}}', '{1,1}')} => '22023',
	q{SELECT * FROM sc_top_text('urls', -1)} => '22023',
	q{SELECT sc_incr('views', 'x')} => '22P02',
	q{SELECT sc_sum('views', 'x')} => '22P02',
	q{SELECT sc_set('views', 'x', 1)} => '22P02',
	q{SELECT sc_incr_batch_text('views', '{1,x}', '{1,1}')} => '22P02',
	q{SELECT sc_sum_keys_text('views', '{x}')} => '22P02',
	q{SELECT sc_incr('views', '99999999999999999999')} => '22003',
	q{SELECT sc_incr('nope', 'a')} => '42704',
	q{SELECT * FROM sc_top_text('nope', 1)} => '42704',
	q{SELECT sc_incr_bounded('hot', 'x', 1, 0, 10)} => '0A000',
	q{SELECT sc_rank('hot', 'x')} => '0A000',
	q{SELECT sc_rank('urls', NULL)} => '22004',
	q{SELECT sc_rank('urls', repeat('x', 2049))} => '22001',
	q{SELECT sc_rank('views', 'x')} => '22P02',
	q{SELECT sc_create('badtype', key_type => 'TEXT')} => '22023',
	q{BEGIN; SELECT sc_incr('titles', 'x'); COMMIT;} => '25001',
	q{BEGIN; SELECT sc_set('titles', 'x', 1); COMMIT;} => '25001',
	q{BEGIN; SELECT sc_incr_batch_text('titles', '{x}', '{1}'); COMMIT;} => '25001',
	# The nodes would commit these at once, the router's record with the block.
	q{BEGIN; SELECT sc_create('in_block', 'buffered'); COMMIT;} => '25001',
	q{BEGIN; SELECT sc_drop('titles'); ROLLBACK;} => '25001',
	q{BEGIN; SELECT sc_alter_owner('titles', 'alice'); ROLLBACK;} => '25001');
for my $sql (sort keys %errors)
{
	is(sqlstate_of($sql), $errors{$sql}, "$sql: $errors{$sql}");
}
is( $router->safe_psql('postgres', q{
SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'badtype';
SELECT sc_sum('titles', 'x');}),
	"0\n0", 'the refused calls recorded and counted nothing');
is( join(',', map { $_->safe_psql('postgres',
	q{SELECT count(*) FROM slotted_counter.counters WHERE name = 'in_block'}) } @data),
	'0,0,0', 'sc_create refused in a block created nothing on the data nodes');
is( $router->safe_psql('postgres', q{
SELECT owner FROM slotted_counter_proxy.counters WHERE name = 'titles';
SELECT sc_incr('titles', 'x', 0);}),
	"postgres\n0", 'sc_drop and sc_alter_owner refused in a block left the counter as it was');

# 8. Who acts on the data nodes.
is( outcome(q{
SELECT sc_create('alice_t', 'buffered', key_type => 'text');
SELECT sc_incr('alice_t', 'mine', 3);}, 'alice'),
	'ok', 'alice creates a counter keyed by text through the router and writes it');
like(outcome(q{SELECT sc_incr('alice_t', 'k')}, 'app'),
	qr/^42501: /, 'a role without UPDATE on it: 42501 from its node');
like(outcome(q{SELECT * FROM sc_top_text('alice_t', 5)}, 'app'),
	qr/^42501: /, '... without SELECT: 42501 for sc_top_text');
is( outcome(q{
SELECT sc_grant('alice_t', 'UPDATE', 'app');
SELECT sc_grant('alice_t', 'SELECT', 'app');}, 'alice'),
	'ok', 'alice grants app UPDATE and SELECT through the router');
is( $router->safe_psql('postgres', q{
SELECT sc_incr('alice_t', 'k', 2), sc_sum('alice_t', 'k'), sc_sum_keys_text('alice_t', '{k,mine}'),
       (SELECT string_agg(key || ':' || value, ',') FROM sc_top_text('alice_t', 5))},
		extra_params => [ '-U', 'app' ]),
	'2|2|5|mine:3,k:2', '... and app then writes and reads it as itself');

# A mapping that names another role: every text form is refused before it reaches a node.
my $mapping_refused =
  qr/^42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "postgres"/;
is( outcome(q{
CREATE USER MAPPING FOR mallory SERVER slotted_counter_proxy;
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping DISABLE;
ALTER USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (ADD user 'postgres');
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping ENABLE;}),
	'ok', 'a superuser maps mallory to postgres with the event trigger disabled');
my $nodes_state = sub {
	return join("\n", map { $_->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT string_agg(format('%s %s %s', c.name, s.relowner::regrole, s.relacl), '; ' ORDER BY c.name)
  FROM slotted_counter.counters c
  JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass;
SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values;
SELECT count(*) FROM slotted_counter.keys;}) } @data);
};
my $state_before = $nodes_state->();
my %calls = (
	'sc_incr' => q{SELECT sc_incr('alice_t', 'k')},
	'sc_incr at' => q{SELECT sc_incr('hits', 'k', 1, now())},
	'sc_incr on a bigint counter' => q{SELECT sc_incr('views', '1')},
	'sc_incr_once' => q{SELECT sc_incr_once('alice_t', 'k', 1, 'request 1')},
	'sc_incr_bounded' => q{SELECT sc_incr_bounded('alice_t', 'k', 1, 0, 1000)},
	'sc_incr_batch_text (SPLIT)' => q{SELECT sc_incr_batch_text('alice_t', '{a,b,c}', '{1,1,1}')},
	'sc_incr_batch_text on a bigint counter' => q{SELECT sc_incr_batch_text('views', '{1,2}', '{1,1}')},
	'sc_set (SPLIT)' => q{SELECT sc_set('alice_t', 'k', 0)},
	'sc_set of a spread counter' => q{SELECT sc_set('hot', 'k', 0)},
	'sc_set on a bigint counter' => q{SELECT sc_set('views', '1', 0)},
	'sc_sum' => q{SELECT sc_sum('alice_t', 'k')},
	'sc_sum range' => q{SELECT sc_sum('hits', 'k', now() - interval '1 day', now())},
	'sc_series' => q{SELECT * FROM sc_series('hits', 'k', now() - interval '1 day', now())},
	'sc_sum_keys_text (SPLIT)' => q{SELECT sc_sum_keys_text('alice_t', '{a,b,c}')},
	'sc_sum_keys_text of a spread counter' => q{SELECT sc_sum_keys_text('hot', '{a,b,c}')},
	'sc_top_text (RUN ON ALL)' => q{SELECT * FROM sc_top_text('alice_t', 10)},
	'sc_rank' => q{SELECT sc_rank('alice_t', 'k')},
	'sc_rank on a bigint counter' => q{SELECT sc_rank('views', '1')},
	'node_keys_above_text called directly' =>
	  q{SELECT slotted_counter_proxy.node_keys_above_text('alice_t', 'k', 0, NULL, NULL)},
	'sc_create keyed by text' => q{SELECT sc_create('mallory_t', 'buffered', key_type => 'text')},
	'node_incr_batch_text called directly' => q{
SELECT * FROM slotted_counter_proxy.node_incr_batch_text('alice_t', '{0,1}', '{1,2}', '{a,b}', '{1,1}')},
	'node_set_text called directly' =>
	  q{SELECT slotted_counter_proxy.node_set_text('alice_t', 'k', '{0,1,2}', '{1,1,1}', NULL)});
for my $call (sort keys %calls)
{
	like(outcome($calls{$call}, 'mallory'), $mapping_refused,
		"mapped to postgres, mallory's $call is refused: 42501");
}
is($nodes_state->(), $state_before, '... and the data nodes are unchanged');
$router->safe_psql('postgres',
	q{ALTER USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (DROP user)});
like(outcome(q{SELECT sc_sum('alice_t', 'k')}, 'mallory'), qr/^42501: (?!user mapping)/,
	'once her mapping names no user she reaches the nodes as herself, which refuse her alice\'s counter');

# A second router over the same nodes records the key type the nodes define, for the owner only.
like(outcome(q{SELECT sc_create('alice_t', 'buffered', key_type => 'text')}, 'mallory', 'router2'),
	qr/^42501: must be owner of counter "alice_t" on every data node/,
	'mallory cannot register alice\'s counter on a second router');
like(outcome(q{SELECT sc_create('alice_t', 'buffered')}, 'alice', 'router2'),
	qr/^42710: counter "alice_t" already exists on the data nodes with another definition/,
	'alice cannot register it there keyed by bigint: the nodes key it by text');
is( outcome(q{SELECT sc_create('alice_t', 'buffered', key_type => 'text')}, 'alice', 'router2'),
	'ok', '... and registers it keyed by text');
is( $router->safe_psql('router2', q{
SELECT string_agg(name || ' ' || key_type || ' ' || owner, ',') FROM slotted_counter_proxy.counters;
SELECT sc_sum('alice_t', 'k') || ' ' || sc_sum('alice_t', 'mine');}),
	"alice_t text alice\n2 3", '... which routes and reads it as the first router does');

done_testing();
