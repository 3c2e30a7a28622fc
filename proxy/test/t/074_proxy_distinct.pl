# Distinct counters through the router: one server whose databases node0 to node2 are the data
# nodes and "router" the router (slotted_counter_proxy).
#   1. sc_create with kind => 'distinct' (buffered and transactional, keys bigint and text, with
#      and without log2m, bucketed, the text form) makes the same counter on every node.
#   2. sc_add of many keys through the router, each counter exact (fewer distinct elements than
#      its sketches list): sc_add answers true once per new element; each key's sketch is on its
#      home node only (hashint8, hashtext), as live counts and as stored rows; sc_count of every
#      key; sc_count_keys of groups over every node, elements shared (their union) and not (their
#      sum); sc_count_total, the union over every node; sc_sketch, byte for byte its home node's,
#      and slotted_counter_proxy.sketch_count of it.
#   3. Past the list of hashes: the router's counts, sketches and unions are those the nodes
#      compute from the same sketches; a bigint and a text element are two elements.
#   4. Buckets: sc_add with at, sc_count and sc_sketch over a range, sc_count_total over one.
#   5. The router's rules for writes: 25001 for a transactional sc_add in a transaction block
#      (allowed, it stays after ROLLBACK); 25006 in a read-only transaction, where reads work;
#      the router's errors on the arguments, and the node's.
#   6. The wrong kind of counter, both ways: sc_add, sc_count, sc_count_keys, sc_count_total and
#      sc_sketch on a plain counter, sc_incr, sc_sum, sc_total and sc_throttle on a distinct
#      counter, fail with the node's 42809, and change nothing.
#   7. A spread distinct counter is refused (0A000) before any node creates it, and sc_add on a
#      spread counter; a log2m out of range and a distinct counter with a rate fail on the nodes
#      (22023 both), which create nothing; sc_create finds a node's counter of the same name
#      that is not the distinct counter asked for (another log2m, another kind, a log2m that
#      differs between nodes): 42710; the same one is taken.
#   8. Privileges are the nodes'; sc_drop drops a distinct counter, its sketches with it, from the
#      router and every node.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my ($server, @nodes) = router_server('server');

sub router { return $server->safe_psql('router', $_[0]); }

# What every node answers to sql, one line each.
sub on_nodes
{
	my ($sql) = @_;
	return join("\n", map { "$_: " . $server->safe_psql($_, $sql) } @nodes);
}

# The outcome of sql on the router: "SQLSTATE: message" of its error, and its detail, hint and
# context lines when asked for.
sub outcome
{
	my ($sql, %opt) = @_;
	my ($ret, $out, $err) = $server->psql('router', $sql,
		extra_params => [ '-U', $opt{user} // 'postgres', '-v', 'VERBOSITY=verbose' ]);
	return "no error ($err)" unless $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/;
	my $outcome = $1;
	$outcome .= "\n$1" while $opt{full} && $err =~ /^((?:DETAIL|HINT|CONTEXT):  [^\n]*)/mg;
	return $outcome;
}

# 1. Distinct counters created through the router.
router(q{
SELECT sc_create('visits', 'buffered', kind => 'distinct'),
       sc_create('visits_t', kind => 'distinct', log2m => 12),
       sc_create('readers', 'buffered', key_type => 'text', kind => 'distinct', log2m => 10),
       sc_create('readers_t', key_type => 'text', kind => 'distinct'),
       sc_create('wide', 'buffered', kind => 'distinct', log2m => 12),
       sc_create('hourly', 'buffered', '1 hour', kind => 'distinct', log2m => 11),
       sc_create('plain', 'buffered');});
is( router(q{
SELECT string_agg(format('%s %s %s %s', name, durability, spread, key_type), ', ' ORDER BY name)
  FROM slotted_counter_proxy.counters}),
	'hourly buffered f bigint, plain buffered f bigint, readers buffered f text, '
	  . 'readers_t transactional f text, visits buffered f bigint, '
	  . 'visits_t transactional f bigint, wide buffered f bigint',
	'the router records each distinct counter as any counter: durability, not spread, key type');
my $expected = 'hourly buffered bigint 01:00:00 distinct 11, plain buffered bigint - count -, '
  . 'readers buffered text - distinct 10, readers_t transactional text - distinct 14, '
  . 'visits buffered bigint - distinct 14, visits_t transactional bigint - distinct 12, '
  . 'wide buffered bigint - distinct 12';
is( on_nodes(q{
SELECT string_agg(format('%s %s %s %s %s %s', name, durability, key_type,
                         coalesce(bucket::text, '-'), kind, coalesce(log2m::text, '-')),
                  ', ' ORDER BY name)
  FROM slotted_counter.counters}),
	join("\n", map { "$_: $expected" } @nodes),
	'every node holds each distinct counter as asked: kind, log2m (NULL: 14), bucket by the '
	  . 'text form');

# 2. Many keys through the router. Key k of a counter (k, or 'page-k' for text keys) gets the
# elements (k % groups) * elements + 1 .. + elements (for text keys 'user-' and that number):
# keys of one residue share their elements, keys of different residues share none, and the
# counter has groups * elements distinct elements in all, fewer than its sketches list (2^log2m
# x 5 / 64), so that every count is exact.
sub exact_counter
{
	my ($counter, $keys, $elements, $groups, $text) = @_;
	my $key = $text ? q{('page-' || k)} : 'k';
	my $element = "(k % $groups) * $elements + e";
	$element = "('user-' || $element)" if $text;
	my $node_of = $text ? "abs(hashtext('page-' || k) % 3)" : 'abs(hashint8(k) % 3)';
	my $rows = "generate_series(1::bigint, $keys) AS k";
	my $add = "SELECT count(*) FILTER (WHERE sc_add('$counter', $key, $element))
  FROM $rows, generate_series(1, $elements) AS e";
	is(router("$add;\n$add"), $keys * $elements . "\n0",
		"$counter: sc_add of $keys keys x $elements elements through the router is true once "
		  . 'per new element, false for each again');

	# Each key on its home node only, as the nodes count it now and as they store it.
	my @home = map {
		router(qq{
SELECT string_agg(k || ':' || $elements, ',' ORDER BY k) FROM $rows WHERE $node_of = $_})
	} 0 .. 2;
	is( on_nodes(qq{
SELECT string_agg(k || ':' || sc_count('$counter', $key), ',' ORDER BY k)
  FROM $rows WHERE sc_count('$counter', $key) <> 0}),
		join("\n", map { "node$_: $home[$_]" } 0 .. 2),
		"$counter: each node counts its own keys (those its hash names), all their elements, "
		  . 'and no other key');
	unless ($text)
	{
		router('SELECT sc_rollup()');
		is( on_nodes(qq{
SELECT string_agg(k || ':$elements', ',' ORDER BY k)
  FROM (SELECT key, counter FROM slotted_counter.key_sketches
        UNION
        SELECT key, counter FROM slotted_counter.sketch_deltas) AS s(k, id)
 WHERE id = '$counter'::slotted_counter::integer}),
			join("\n", map { "node$_: $home[$_]" } 0 .. 2),
			"$counter: after sc_rollup through the router, each key's stored sketches are on "
			  . 'its home node only');
	}

	is( router(qq{
SELECT count(*) FILTER (WHERE sc_count('$counter', $key) = $elements),
       count(*) FILTER (WHERE slotted_counter_proxy.sketch_count(sc_sketch('$counter', $key))
                              = $elements)
  FROM $rows}),
		"$keys|$keys",
		"$counter: sc_count through the router of every key is $elements, and so is "
		  . 'sketch_count of its sc_sketch');
	for my $node (0 .. 2)
	{
		my $sketches = qq{
SELECT count(*) || ' ' || md5(string_agg(sc_sketch('$counter', $key), ''::bytea ORDER BY k))
  FROM $rows WHERE $node_of = $node};
		is(router($sketches), $server->safe_psql("node$node", $sketches),
			"$counter: sc_sketch through the router is node$node\'s sketch, byte for byte, for "
			  . 'each of its keys');
	}

	# Groups: keys 2 x groups + 1 .. 3 x groups (every residue once: no element shared), the keys
	# of residue 0 (every element shared), every key, a key twice and a key never added to, none.
	my $array = $text ? "ARRAY(SELECT 'page-' || k FROM %s)" : 'ARRAY(SELECT k FROM %s)';
	my $type = $text ? 'text[]' : 'bigint[]';
	my $keys_fn = $text ? 'sc_count_keys_text' : 'sc_count_keys';
	my %group = (
		residues => sprintf($array, "generate_series(2 * ${groups}::bigint + 1, 3 * $groups) AS k"),
		shared => sprintf($array, "generate_series(${groups}::bigint, $keys, $groups) AS k"),
		all => sprintf($array, $rows),
		twice => sprintf($array, "unnest(ARRAY[1, 1, 2, $keys + 1]::bigint[]) AS k"));
	is( router(qq{
SELECT count(DISTINCT $node_of) FROM generate_series(2 * ${groups}::bigint + 1, 3 * $groups) AS k;
SELECT count(DISTINCT $node_of) FROM generate_series(${groups}::bigint, $keys, $groups) AS k;}),
		"3\n3", "$counter: both groups have keys on every node");
	is( router(qq{
SELECT $keys_fn('$counter', $group{residues}), $keys_fn('$counter', $group{shared}),
       $keys_fn('$counter', $group{all}), $keys_fn('$counter', $group{twice}),
       $keys_fn('$counter', '{}'::$type),
       sc_count_total('$counter')}),
		join('|',
			$groups * $elements, $elements, $groups * $elements, 2 * $elements, 0,
			$groups * $elements),
		"$counter: sc_count_keys through the router is the union of the nodes' unions (disjoint: "
		  . 'the sum; shared: the elements once; a key twice once; none: 0); sc_count_total the '
		  . 'union over every node');
}

exact_counter('visits', 200, 50, 20, 0);
exact_counter('visits_t', 60, 20, 10, 0);
exact_counter('readers', 30, 10, 6, 1);
exact_counter('readers_t', 60, 20, 10, 1);
# The total needs every node: an element of its own on a key of each.
my @own = split /\n/, router(q{
SELECT min('page-' || k) FROM generate_series(1, 60) AS k
 GROUP BY abs(hashtext('page-' || k) % 3) ORDER BY 1});
is( router(join('', map { "SELECT sc_add('readers_t', '$own[$_]', 'only-$_');\n" } 0 .. 2)
		  . q{SELECT sc_count_total('readers_t')}),
	"t\nt\nt\n203", 'sc_count_total: an element added on each node counts once more each');
is(on_nodes(q{SELECT sc_count_total('readers_t') < 203}), "node0: t\nnode1: t\nnode2: t",
	'... which no node has alone');
is( router(q{
SELECT sc_count('visits', '7'), sc_count_keys_text('visits', ARRAY['1', '2']),
       sc_count_keys('visits', ARRAY[1, 2]::bigint[]);}),
	'50|100|100', 'keys given as text to a counter keyed by bigint: read as bigints');
# 3. Past the list of hashes (320 at log2m 12): three keys of 2000 elements each, half shared by
# neighbours. The router's counts and unions are what a node makes of the same sketches.
my @wide = split /\n/, router(q{
SELECT min(k) FROM generate_series(1::bigint, 100) AS k GROUP BY abs(hashint8(k) % 3) ORDER BY 1});
is(scalar(@wide), 3, 'three keys, one on each node');
router(join('', map { qq{
SELECT count(sc_add('wide', $wide[$_], e))
  FROM generate_series($_ * 1000 + 1, $_ * 1000 + 2000) AS e;}
} 0 .. 2));
my $hex = router(qq{
SELECT string_agg(encode(sc_sketch('wide', k), 'hex'), ',' ORDER BY k)
  FROM unnest(ARRAY[@{[ join(', ', @wide) ]}]::bigint[]) AS k});
my $union = q{slotted_counter.sketch_union_agg(decode(h, 'hex'))};
my $from_hex = "FROM unnest(string_to_array('$hex', ',')) AS h";
my $on_node0 = $server->safe_psql('node0', qq{
SELECT string_agg(slotted_counter.sketch_count(decode(h, 'hex'))::text, ',') $from_hex;
SELECT slotted_counter.sketch_count($union), md5($union) $from_hex;});
is( router(qq{
SELECT string_agg(sc_count('wide', k)::text, ',' ORDER BY k)
  FROM unnest(ARRAY[@{[ join(', ', @wide) ]}]::bigint[]) AS k;
SELECT sc_count_keys('wide', ARRAY[@{[ join(', ', @wide) ]}]::bigint[]),
       md5(slotted_counter_proxy.sketch_union_agg(sc_sketch('wide', k)))
  FROM unnest(ARRAY[@{[ join(', ', @wide) ]}]::bigint[]) AS k;}),
	$on_node0,
	'estimates: the router\'s sc_count of each key and sc_count_keys of the three are the node\'s '
	  . 'sketch_count of the same sketches and of their union, byte for byte the node\'s');
my ($estimate) = $on_node0 =~ /\n(\d+)\|/;
is($estimate >= 4000 * 0.9 && $estimate <= 4000 * 1.1 ? 'near' : $estimate, 'near',
	'... an estimate of the 4000 elements');
is(router(q{SELECT sc_count_total('wide')}), $estimate, '... and sc_count_total the same');

is( router(q{
SELECT sc_add('visits', 5000, 42), sc_add('visits', 5000, '42'),
       sc_add('visits', 5000, 42::smallint), sc_add('visits', 5000, 42::integer);
SELECT sc_count('visits', 5000);
SELECT sc_add('readers', 'home', 42), sc_add('readers', 'home', '42'),
       sc_add('readers', 'home', 'Alice'), sc_add('readers', 'home', 'alice');
SELECT sc_count('readers', 'home');}),
	"t|t|f|f\n2\nt|t|t|t\n4",
	'a bigint and a text element are two elements, an integer of any width a bigint; a text is '
	  . 'its bytes');

# 4. Buckets.
is( router(q{
SELECT string_agg(sc_add('hourly', k, v, at)::text, ',' ORDER BY at)
  FROM (VALUES (7, 'alice', timestamptz '2024-03-01 09:00+00'),
               (7, 'bob', '2024-03-01 09:30+00'), (8, 'carol', '2024-03-01 09:10+00'),
               (7, 'alice', '2024-03-01 10:15+00'), (7, 'carol', '2024-03-01 10:45+00'),
               (8, 'erin', '2024-03-01 11:00+00'), (7, 'dave', '2024-03-01 12:00+00'),
               (7, 'bob', '2024-03-01 09:59+00')) AS v(k, v, at);}),
	'true,true,true,false,true,true,true,true',
	'sc_add with at through the router: an element new to its bucket is true (alice again at '
	  . '10:15), one its bucket has false (bob at 09:59)');
is( router(q{
SELECT sc_count('hourly', 7), sc_count('hourly', 7, '2024-03-01 09:00+00', '2024-03-01 10:00+00'),
       sc_count('hourly', 7, '2024-03-01 10:00+00', '2024-03-01 11:00+00'),
       sc_count('hourly', 7, '2024-03-01 09:00+00', '2024-03-01 11:00+00'),
       sc_count('hourly', 7, NULL, '2024-03-01 10:00+00'),
       sc_count('hourly', 7, '2024-03-01 11:00+00', NULL),
       sc_count('hourly', 8, '2024-03-01 12:00+00', '2024-03-01 13:00+00');
SELECT sc_count_total('hourly'),
       sc_count_total('hourly', '2024-03-01 09:00+00', '2024-03-01 10:00+00'),
       sc_count_total('hourly', '2024-03-01 10:00+00', '2024-03-01 12:00+00'),
       sc_count_total('hourly', '2024-03-01 12:00+00'),
       sc_count_total('hourly', until => '2024-03-01 09:00+00'),
       sc_count_keys('hourly', ARRAY[7, 8]);}),
	"4|2|2|3|2|1|0\n5|3|3|1|0|5",
	'sc_count over a range of buckets is the union of theirs (an open end is open), '
	  . 'sc_count_total over a range the union of every node\'s');
my $ranged = q{
SELECT md5(sc_sketch('hourly', 7, '2024-03-01 09:00+00', '2024-03-01 11:00+00'))
       || ' ' || md5(sc_sketch('hourly', 7))};
my ($home7) = router(q{SELECT abs(hashint8(7) % 3)});
is(router($ranged), $server->safe_psql("node$home7", $ranged),
	'sc_sketch over a range through the router is the home node\'s, byte for byte');
like(outcome(q{SELECT sc_count('visits', 1, '2024-03-01', '2024-03-02')}),
	qr/^22023: \S+ \[node\d\] REMOTE ERROR: /,
	'a range on a counter without buckets: the node\'s 22023');

# 5. The router's rules for writes.
like(outcome(q{BEGIN; SELECT sc_add('visits_t', 1, 999999); COMMIT;}),
	qr/^25001: transactional counter "visits_t" cannot be written through the router inside a /,
	'a transactional sc_add inside a transaction block: 25001');
is( router(q{
BEGIN;
SET LOCAL slotted_counter_proxy.allow_transaction_block = on;
SELECT sc_add('visits_t', 1, 999999);
ROLLBACK;
SELECT sc_count('visits_t', 1);
BEGIN;
SELECT sc_add('visits', 1, 999999);
ROLLBACK;
SELECT sc_count('visits', 1);}),
	"t\n21\nt\n51",
	'allowed in a block, the element stays after ROLLBACK: the node committed it (a buffered '
	  . 'counter\'s anyway)');
is(outcome(q{BEGIN READ ONLY; SELECT sc_add('visits', 1, 5); COMMIT;}),
	'25006: cannot execute sc_add() in a read-only transaction',
	'sc_add in a read-only transaction: 25006, on a buffered counter too');
is( router(q{
BEGIN READ ONLY;
SELECT sc_count('visits', 1), sc_count_keys('visits', ARRAY[1, 2]), sc_count_total('visits_t'),
       length(sc_sketch('readers', 'page-1')) > 0;
COMMIT;}),
	'51|101|201|t', '... where the reads work');

my ($home1, $home_page1) =
  split / /, router(q{SELECT abs(hashint8(1) % 3) || ' ' || abs(hashtext('page-1') % 3)});
my %arguments = (
	q{SELECT sc_add('nope', 1, 1)} => '42704: counter "nope" does not exist',
	q{SELECT sc_count('nope', 1)} => '42704: counter "nope" does not exist',
	q{SELECT sc_count_total('nope')} => '42704: counter "nope" does not exist',
	q{SELECT sc_add(NULL, 1, 1)} => '22004: counter must not be null',
	q{SELECT sc_add('visits', NULL::bigint, 1)} => '22004: key must not be null',
	q{SELECT sc_count('visits', NULL::bigint)} => '22004: key must not be null',
	q{SELECT sc_add('readers', 5, 'x')} => '42804: counter "readers" is keyed by text',
	q{SELECT sc_count_keys('readers', ARRAY[5])} => '42804: counter "readers" is keyed by text',
	q{SELECT sc_add('visits', 'x', 1)} => '22P02: invalid input syntax for type bigint: "x"',
	q{SELECT sc_count_keys('visits', ARRAY[1, NULL])} => '22004: keys must not contain nulls',
	q{SELECT sc_count_keys_text('visits', ARRAY['1', NULL])} =>
	  '22004: keys must not contain nulls',
	q{SELECT sc_add('visits', 1, NULL::bigint)} =>
	  "22004: public.sc_add(4): [node$home1] REMOTE ERROR: element must not be null",
	q{SELECT sc_add('readers', 'page-1', NULL::text)} =>
	  "22004: public.sc_add(4): [node$home_page1] REMOTE ERROR: element must not be null");
for my $sql (sort keys %arguments)
{
	is(outcome($sql), $arguments{$sql}, "$sql: $arguments{$sql}");
}
is(router(q{SELECT sc_count('visits', 1), sc_count('readers', 'page-1')}), '51|10',
	'... none of them added anything');

# 6. The wrong kind of counter, both ways.
my $not_distinct = qr/counter "plain" is not a distinct counter/;
for my $call (
	q{sc_add('plain', 1, 5)},
	q{sc_add('plain', '1', 'x')},
	q{sc_count('plain', 1)},
	q{sc_sketch('plain', 1)},
	q{sc_count_keys('plain', ARRAY[1, 2, 3])},
	q{sc_count_total('plain')})
{
	like(outcome("SELECT $call", full => 1),
		qr/^42809: \S+ \[node\d\] REMOTE ERROR: $not_distinct
HINT:  Remote hint: A distinct counter is a counter created with kind => 'distinct'\./,
		"$call: the node's 42809, by PL/Proxy");
}
my $context = qr/CONTEXT:  data node \d \(database node\d\)/;
for my $call (
	q{sc_incr('visits', 9999)},
	q{sc_incr('readers', 'x', 2)},
	q{sc_sum('visits', 9999)},
	q{sc_sum('readers', 'x')})
{
	(my $function = $call) =~ s/\(.*//;
	like( outcome("SELECT $call", full => 1),
		qr/^42809: counter "(visits|readers)" counts distinct elements
DETAIL:  $function\(\) does not apply to a distinct counter\.
HINT:  Call sc_add\(\) and sc_count\(\) on it\.
$context$/,
		"$call on a distinct counter by the router's own routing: 42809, the node's message");
}
for my $call (
	q{sc_incr_batch('visits', ARRAY[9999], ARRAY[1])},
	q{sc_set('visits', 9999, 5)},
	q{sc_total('visits')},
	q{sc_top('visits', 3)})
{
	like(outcome("SELECT * FROM $call"),
		qr/^42809: \S+ \[node\d\] REMOTE ERROR: counter "visits" counts distinct elements$/,
		"$call by PL/Proxy: 42809, the node's message");
}
like(outcome(q{SELECT * FROM sc_throttle('visits', 9999)}),
	qr/^42809: \S+ \[node\d\] REMOTE ERROR: counter "visits" is not a rate limiter$/,
	'sc_throttle on a distinct counter: the node\'s 42809');
is( router(q{SELECT sc_sum('plain', 1), sc_total('plain'), sc_count('visits', 9999)}),
	'0|0|0', '... and none of them counted anything');

# 7. Spread, and a counter of the same name on the nodes.
for my $sql (
	q{SELECT sc_create('hot_set', 'buffered', spread => true, kind => 'distinct')},
	q{SELECT sc_create('hot_set', 'buffered', NULL, NULL, false, true, 'bigint', NULL, NULL,
	                   NULL, 'distinct', 12)},
	q{SELECT sc_create('hot_set', 'buffered', '1 hour', spread => true, kind => 'distinct')})
{
	(my $call = $sql) =~ s/\s+/ /g;
	like(outcome($sql, full => 1),
		qr/^0A000: distinct counter "hot_set" cannot be spread over the data nodes
DETAIL:  Each node would answer sc_add\(\) from its own part of a key's sketch\.
HINT:  Create it without spread: each key's sketch is kept on the key's node\.($|\n)/,
		"$call: 0A000");
}
is( on_nodes(q{SELECT count(*) FROM slotted_counter.counters WHERE name = 'hot_set'})
	  . "\n" . router(q{SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'hot_set'}),
	"node0: 0\nnode1: 0\nnode2: 0\n0", '... before any node created it');
router(q{SELECT sc_create('hot', 'buffered', spread => true)});
is(outcome(q{SELECT sc_add('hot', 1, 1)}),
	'0A000: counter "hot" is spread over the data nodes: sc_add() needs each key on one node',
	'sc_add on a spread counter: 0A000, as sc_incr_bounded');
like( outcome(q{SELECT sc_create('bad', 'buffered', kind => 'distinct', log2m => 15)}),
	qr/^22023: \S+ \[node\d\] REMOTE ERROR: log2m must be between 4 and 14$/,
	'a log2m out of range: the node\'s 22023');
like(
	outcome(
		q{SELECT sc_create('bad', 'buffered', kind => 'distinct', rate => 1, per => '1 hour')}),
	qr/^22023: \S+ \[node\d\] REMOTE ERROR: a counter with a rate is a limiter, not of kind /,
	'a distinct counter with a rate: the node\'s 22023');
is( on_nodes(q{SELECT count(*) FROM slotted_counter.counters WHERE name = 'bad'})
	  . "\n" . router(q{SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'bad'}),
	"node0: 0\nnode1: 0\nnode2: 0\n0", '... neither is created anywhere');

$server->safe_psql($_, q{
SELECT sc_create('sketchy', 'buffered', kind => 'distinct', log2m => 12),
       sc_create('taken', 'buffered'),
       sc_create('lopsided', 'buffered', kind => 'distinct', log2m => 12)}) for @nodes[0, 1];
$server->safe_psql($nodes[2], q{
SELECT sc_create('sketchy', 'buffered', kind => 'distinct', log2m => 12),
       sc_create('taken', 'buffered'),
       sc_create('lopsided', 'buffered', kind => 'distinct', log2m => 13)});
my $another = 'already exists on the data nodes with another definition';
for my $case (
	[ q{'sketchy', 'buffered', kind => 'distinct', log2m => 10}, $another, 'another log2m' ],
	[ q{'sketchy', 'buffered', kind => 'distinct'}, $another, 'log2m 12, asked for 14' ],
	[ q{'sketchy', 'buffered'}, $another, 'kind distinct, asked for none' ],
	[ q{'sketchy', 'transactional', kind => 'distinct', log2m => 12}, $another,
		'another durability' ],
	[ q{'sketchy', 'buffered', key_type => 'text', kind => 'distinct', log2m => 12}, $another,
		'another key type' ],
	[ q{'taken', 'buffered', kind => 'distinct', log2m => 12}, $another,
		'kind count, asked for distinct' ],
	[ q{'lopsided', 'buffered', kind => 'distinct', log2m => 12},
		'is defined differently on the data nodes', 'a log2m that differs between nodes' ])
{
	my ($args, $message, $what) = @$case;
	my ($name) = $args =~ /^'(\w+)'/;
	is(outcome("SELECT sc_create($args)"), qq{42710: counter "$name" $message},
		"a node's counter of the same name with $what: 42710");
}
is( router(q{
SELECT sc_create('sketchy', 'buffered', kind => 'distinct', log2m => 12);
SELECT count(*) FROM slotted_counter_proxy.counters WHERE name IN ('taken', 'lopsided');
SELECT sc_add('sketchy', 1, 'x'), sc_count('sketchy', 1);}),
	"sketchy\n0\nt|1",
	'the same distinct counter is taken and routed; the others were not recorded');

# 8. Privileges, and sc_drop.
like(outcome(q{SELECT sc_add('visits', 1, 777777)}, user => 'app'),
	qr/^42501: \S+ \[node$home1\] REMOTE ERROR: permission denied for counter "visits"/,
	'a role without UPDATE on the counter: 42501 from its node');
router(q{SELECT sc_grant('visits', 'UPDATE', 'app')});
my $as_app = sub {
	return $server->safe_psql('router', $_[0], extra_params => [ '-U', 'app' ]);
};
is($as_app->(q{SELECT sc_add('visits', 1, 777777), sc_add('visits', 1, 777777)}), 't|f',
	'... after sc_grant of UPDATE through the router, it adds');
like(outcome(q{SELECT sc_count('visits', 1)}, user => 'app'),
	qr/^42501: \S+ \[node$home1\] REMOTE ERROR: permission denied for counter "visits"/,
	'... without SELECT, sc_count: 42501 from its node');
router(q{SELECT sc_grant('visits', 'SELECT', 'app')});
is( $as_app->(q{
SELECT sc_count('visits', 1), sc_count_keys('visits', ARRAY[1, 2]), sc_count_total('visits')}),
	'52|102|1003', '... and with it, every read');

my %ids = map {
	$_ => $server->safe_psql($_, q{
SELECT string_agg(id::text, ',') FROM slotted_counter.counters
 WHERE name IN ('visits', 'visits_t')})
} @nodes;
my $left = sub {
	my ($node) = @_;
	return $server->safe_psql($node, qq{
SELECT (SELECT count(*) FROM slotted_counter.key_sketches WHERE counter IN ($ids{$node}))
       + (SELECT count(*) FROM slotted_counter.sketch_deltas WHERE counter IN ($ids{$node}))
       + (SELECT count(*) FROM slotted_counter.key_values WHERE counter IN ($ids{$node})) > 0,
       (SELECT count(*) FROM slotted_counter.counters WHERE name IN ('visits', 'visits_t'))});
};
router('SELECT sc_rollup()');
is(join("\n", map { $left->($_) } @nodes), "t|2\nt|2\nt|2",
	'before the drop every node stores sketches of both counters');
like(outcome(q{SELECT sc_drop('visits')}, user => 'app'), qr/^42501: /,
	'sc_drop by a role that does not own it: 42501');
router(q{SELECT sc_drop('visits'), sc_drop('visits_t')});
is(join("\n", map { $left->($_) } @nodes)
	  . "\n" . router(q{
SELECT count(*) FROM slotted_counter_proxy.counters WHERE name IN ('visits', 'visits_t')}),
	"f|0\nf|0\nf|0\n0",
	'sc_drop of a distinct counter: gone from the router and every node, with its sketches');
is(outcome(q{SELECT sc_count('visits', 1)}), '42704: counter "visits" does not exist',
	'... sc_count on it: 42704');
is( router(q{
SELECT sc_create('visits', 'buffered', kind => 'distinct');
SELECT sc_count('visits', 1), sc_count_total('visits');}),
	"visits\n0|0", '... and a new distinct counter of the same name starts empty');

done_testing();
