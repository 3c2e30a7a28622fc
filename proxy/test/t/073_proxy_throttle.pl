# Rate limiters through the router: one server whose databases node0 to node2 are the data nodes
# and "router" the router (slotted_counter_proxy).
#   1. sc_create with rate, per and burst (buffered and transactional, keys bigint and text, by
#      name and by position, the text form) makes the same limiter on every node.
#   2. sc_throttle through the router: a fresh key admits exactly its burst, each answer's fields;
#      a cost that does not fit takes nothing; a cost above the burst never fits; the key's limit
#      is kept on its home node only; 8 clients at once on 4 keys admit exactly each key's burst.
#   3. A transactional limiter: 25001 in a transaction block; allowed, the cost stays taken
#      whatever the block does (the node committed it); 25006 in a read-only transaction.
#   4. The wrong kind of counter, both ways: sc_throttle on a counter that is no limiter, and
#      every other call on a limiter (sc_incr and sc_sum by the router's own routing, to a node
#      and in-process by a router in a node's database; the others by PL/Proxy), fail with the
#      node's 42809 and its message, and change nothing.
#   5. A spread limiter is refused (0A000), before any node creates it; sc_throttle on a spread
#      counter: 0A000.
#   6. sc_create finds a node's counter of the same name that is not the limiter asked for
#      (another limit, no limit, a limit that differs between nodes): 42710; the same limiter
#      (a NULL burst is the rate, the retention the node's) is taken.
#   7. Privileges are the nodes'; sc_drop drops a limiter from the router and every node.

use strict;
use warnings;

use IPC::Run;
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

# The outcome of sql on the router (or in database db): "SQLSTATE: message" of its error, and
# its detail, hint and context lines when asked for.
sub outcome
{
	my ($sql, %opt) = @_;
	my ($ret, $out, $err) = $server->psql($opt{db} // 'router', $sql,
		extra_params => [ '-U', $opt{user} // 'postgres', '-v', 'VERBOSITY=verbose' ]);
	return "no error ($err)" unless $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/;
	my $outcome = $1;
	$outcome .= "\n$1" while $opt{full} && $err =~ /^((?:DETAIL|HINT|CONTEXT):  [^\n]*)/mg;
	return $outcome;
}

# 1. Limiters created through the router.
router(q{
SELECT sc_create('api', 'buffered', rate => 1, per => '1 hour', burst => 5),
       sc_create('api_t', rate => 1, per => '1 hour', burst => 5),
       sc_create('login', 'buffered', key_type => 'text', rate => 3, per => '1 day'),
       sc_create('login_t', key_type => 'text', rate => 3, per => '1 day'),
       sc_create('plain', 'buffered'),
       sc_create('hot', 'buffered', spread => true);
SELECT sc_create('by_position', 'buffered', NULL, NULL, false, false, 'text', 10, '1 minute'),
       sc_create('interval_form', 'buffered', NULL::interval, NULL, false, false, 'bigint', 10,
                 '1 minute', 20);});
is( router(q{
SELECT string_agg(format('%s %s %s %s', name, durability, spread, key_type), ', ' ORDER BY name)
  FROM slotted_counter_proxy.counters}),
	'api buffered f bigint, api_t transactional f bigint, by_position buffered f text, '
	  . 'hot buffered t bigint, interval_form buffered f bigint, login buffered f text, '
	  . 'login_t transactional f text, plain buffered f bigint',
	'the router records each limiter as any counter: durability, not spread, key type');
my $expected = 'api buffered bigint 05:00:00 1/01:00:00 5, '
  . 'api_t transactional bigint 05:00:00 1/01:00:00 5, '
  . 'by_position buffered text 00:01:00 10/00:01:00 10, '
  . 'hot buffered bigint <NULL> <NULL>/<NULL> <NULL>, '
  . 'interval_form buffered bigint 00:02:00 10/00:01:00 20, '
  . 'login buffered text 1 day 3/1 day 3, login_t transactional text 1 day 3/1 day 3, '
  . 'plain buffered bigint <NULL> <NULL>/<NULL> <NULL>';
is( on_nodes(q{
SELECT string_agg(format('%s %s %s %s %s/%s %s', name, durability, key_type,
                         coalesce(retain::text, '<NULL>'), coalesce(rate::text, '<NULL>'),
                         coalesce(per::text, '<NULL>'), coalesce(burst::text, '<NULL>')),
                  ', ' ORDER BY name)
  FROM slotted_counter.counters}),
	join("\n", map { "$_: $expected" } @nodes),
	'every node holds each limiter as asked, by name, by position and in the text form: a NULL '
	  . 'burst is the rate, the retention burst x per / rate');

# 2. sc_throttle through the router. Each call in a statement names the row (1 + 0 * g), so that
# it runs once per row; the intervals depend on the clock and are shown as checks of their range.
is( router(q{
SELECT c, count(*) FILTER (WHERE t.allowed),
       string_agg(t.allowed::text || t.remaining, ',' ORDER BY g),
       bool_and(t.retry_after = '0') FILTER (WHERE t.allowed),
       bool_and(t.retry_after > '59 minutes' AND t.retry_after <= '1 hour')
         FILTER (WHERE NOT t.allowed),
       bool_and(t.reset_after > g * interval '1 hour' - interval '1 minute'
                AND t.reset_after <= g * interval '1 hour') FILTER (WHERE t.allowed),
       bool_and(t.reset_after > '4 hours 59 minutes' AND t.reset_after <= '5 hours')
         FILTER (WHERE NOT t.allowed)
  FROM (VALUES ('api'), ('api_t')) AS v(c), generate_series(1, 20) AS g,
       LATERAL sc_throttle(c, 1, 1 + 0 * g) AS t
 GROUP BY c ORDER BY c}),
	join("\n", map { "$_|5|true4,true3,true2,true1,true0" . ',false0' x 15 . '|t|t|t|t' }
		  qw(api api_t)),
	'20 calls on a fresh key admit exactly the burst, the first five: no wait for those, each an '
	  . 'hour more to be full again; the others refused, to retry within the hour, full in five');
is( router(q{
SELECT c, k, count(*) FILTER (WHERE t.allowed), min(t.remaining)
  FROM (VALUES ('login'), ('login_t')) AS v(c),
       (VALUES ('alice', 5), ('bob', 1), ('Alice', 2)) AS k(k, n),
       LATERAL generate_series(1, n) AS g, LATERAL sc_throttle(c, k, 1 + 0 * g) AS t
 GROUP BY c, k ORDER BY c, k COLLATE "C"}),
	join("\n", map { ("$_|Alice|2|1", "$_|alice|3|0", "$_|bob|1|2") } qw(login login_t)),
	'text keys: each text has a burst of its own, compared by its bytes');
is( router(q{
SELECT t.allowed, t.remaining, t.retry_after = '0', t.reset_after > '0'
  FROM sc_throttle('api', 1, 0) AS t;
SELECT t.allowed, t.remaining, t.retry_after = '0', t.reset_after = '0'
  FROM sc_throttle('api', 2, 0) AS t;}),
	"t|0|t|t\nt|5|t|t", 'cost 0 reads and takes nothing: an empty key, and a fresh one, full');

is( router(q{
SELECT allowed, remaining FROM sc_throttle('api', 3, 3);
SELECT allowed, remaining, retry_after > '59 minutes' AND retry_after <= '1 hour'
  FROM sc_throttle('api', 3, 3);
SELECT allowed, remaining FROM sc_throttle('api', 3, 0);
SELECT allowed, remaining, retry_after = '0' FROM sc_throttle('api', 3, 2);}),
	"t|2\nf|2|t\nt|2\nt|0|t",
	'a cost above what is left is refused whole and takes nothing: the 2 left are admitted next');
is( router(q{
SELECT k, allowed, remaining, retry_after IS NULL
  FROM unnest(ARRAY[1, 4]::bigint[]) AS k, LATERAL sc_throttle('api_t', k, 6) ORDER BY k;
SELECT allowed, remaining FROM sc_throttle('api_t', 4, 5);}),
	"1|f|0|t\n4|f|5|t\nt|0",
	'a cost above the burst never fits (no retry_after), on an empty key and a full one; the '
	  . 'whole burst fits a full key');
is( router(q{
SELECT allowed, remaining FROM sc_throttle('api', '7', 4);
SELECT allowed, remaining FROM sc_throttle('api', 7, 0);
PREPARE untyped AS SELECT allowed, remaining FROM sc_throttle($1, $2, $3);
EXECUTE untyped('login', 'carol', 2);
EXECUTE untyped('api', '7', 1);}),
	"t|1\nt|1\nt|1\nt|0",
	'an untyped key: a bigint on a bigint limiter, a text on a text one, PREPAREd too');

# The key's limit is on its home node only: the others never saw it.
my ($home1, $home_alice, $home9, $home_carol) = split / /, router(q{
SELECT concat_ws(' ', abs(hashint8(1) % 3), abs(hashtext('alice') % 3), abs(hashint8(9) % 3),
                 abs(hashtext('carol') % 3))});
is( on_nodes(q{
SELECT (SELECT remaining FROM sc_throttle('api', 1, 0)) || ' '
       || (SELECT remaining FROM sc_throttle('login', 'alice', 0))}),
	join("\n",
		map { "node$_: " . ($_ == $home1 ? 0 : 5) . ' ' . ($_ == $home_alice ? 0 : 3) } 0 .. 2),
	'each key\'s limit is kept on its home node (hashint8, hashtext), the others\' keys are full');

# Eight clients at once, two on each of 4 keys, 100 calls a key: exactly the burst of 60 admitted
# for each (one unit a day comes back: none during the test).
router(q{
SELECT sc_create('load', 'buffered', rate => 1, per => '1 day', burst => 60),
       sc_create('load_t', 'transactional', rate => 1, per => '1 day', burst => 60);
CREATE TABLE answers (counter text, key bigint, allowed boolean, remaining bigint);});
my $script = $server->basedir . '/throttle.sql';
append_to_file($script, q{\set k :client_id % 4
INSERT INTO answers SELECT 'load', :k, allowed, remaining FROM sc_throttle('load', :k);
INSERT INTO answers SELECT 'load_t', :k, allowed, remaining FROM sc_throttle('load_t', :k);
});
my ($bench_out, $bench_err) = ('', '');
IPC::Run::run(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=50',
		"--file=$script", '-h', $server->host, '-p', $server->port, 'router'
	],
	'>', \$bench_out, '2>', \$bench_err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
my ($tx) = $bench_out =~ /number of transactions actually processed: (\d+)/;
is($tx // 'none', 400, 'pgbench through the router: every client ran its 50 transactions');
is(() = $bench_err =~ /ERROR/g, 0, '... and no call failed');
is( router(q{
SELECT string_agg(format('%s %s %s %s %s', counter, key, n, admitted, left_after), ', '
                  ORDER BY counter, key)
  FROM (SELECT counter, key, count(*) AS n, count(*) FILTER (WHERE allowed) AS admitted,
               min(remaining) AS left_after
          FROM answers GROUP BY counter, key) AS s}),
	join(', ', map { my $c = $_; map { "$c $_ 100 60 0" } 0 .. 3 } qw(load load_t)),
	'8 clients at once through the router: each key admitted exactly its burst of 60 of 100');

# 3. A transactional limiter in a transaction block, a read-only transaction.
like(outcome(q{BEGIN; SELECT * FROM sc_throttle('api_t', 9, 2); COMMIT;}),
	qr/^25001: transactional counter "api_t" cannot be written through the router inside a /,
	'a transactional limiter inside a transaction block: 25001');
is( router(q{
BEGIN;
SET LOCAL slotted_counter_proxy.allow_transaction_block = on;
SELECT allowed, remaining FROM sc_throttle('api_t', 9, 2);
ROLLBACK;
SELECT allowed, remaining FROM sc_throttle('api_t', 9, 0);
BEGIN;
SELECT allowed, remaining FROM sc_throttle('api', 9, 2);
ROLLBACK;
SELECT allowed, remaining FROM sc_throttle('api', 9, 0);}),
	"t|3\nt|3\nt|3\nt|3",
	'allowed in a block, its cost stays taken after ROLLBACK: the node committed it (a buffered '
	  . 'limiter\'s anyway)');
is(outcome(q{BEGIN READ ONLY; SELECT * FROM sc_throttle('api', 9, 0); COMMIT;}),
	'25006: cannot execute sc_throttle() in a read-only transaction',
	'sc_throttle in a read-only transaction: 25006, even with cost 0');

# Arguments: the router's errors before it sends anything, the node's after.
my %arguments = (
	q{SELECT * FROM sc_throttle('nope', 1)} => '42704: counter "nope" does not exist',
	q{SELECT * FROM sc_throttle(NULL, 1)} => '22004: counter must not be null',
	q{SELECT * FROM sc_throttle('api', NULL::bigint)} => '22004: key must not be null',
	q{SELECT * FROM sc_throttle('login', 5)} => '42804: counter "login" is keyed by text',
	q{SELECT * FROM sc_throttle('api', 'x')} =>
	  '22P02: invalid input syntax for type bigint: "x"',
	q{SELECT * FROM sc_throttle('api', 9, -1)} =>
	  "22023: public.sc_throttle(3): [node$home9] REMOTE ERROR: cost must not be negative",
	q{SELECT * FROM sc_throttle('login', 'carol', NULL)} =>
	  "22004: public.sc_throttle(3): [node$home_carol] REMOTE ERROR: cost must not be null");
for my $sql (sort keys %arguments)
{
	is(outcome($sql), $arguments{$sql}, "$sql: $arguments{$sql}");
}
# The keys the errors below name, and what they have left.
my $left = q{
SELECT remaining FROM sc_throttle('api', 9, 0);
SELECT remaining FROM sc_throttle('login', 'carol', 0);};
is(router($left), "3\n1", '... none of them took anything');

# 4. The wrong kind of counter, both ways.
like( outcome(q{SELECT * FROM sc_throttle('plain', 1)}, full => 1),
	qr/^42809: public\.sc_throttle\(3\): \[node\d\] REMOTE ERROR: counter "plain" is not a rate limiter
HINT:  Remote hint: A rate limiter is a counter created with a rate: /,
	'sc_throttle on a counter that is no limiter: the node\'s 42809 and message, by PL/Proxy');
my $context = qr/CONTEXT:  data node \d \(database node\d\)/;
like( outcome(q{SELECT sc_incr('api', 9)}, full => 1),
	qr/^42809: counter "api" is a rate limiter
DETAIL:  sc_incr\(\) does not apply to a rate limiter\.
HINT:  Call sc_throttle\(\) on it\.
$context$/,
	'sc_incr on a limiter by the router\'s own routing: the node\'s 42809, as the node wrote it');
for my $call (
	q{sc_incr('api', 9, 5, now())},
	q{sc_incr('login', 'carol')},
	q{sc_incr('api', '9')},
	q{sc_sum('api', 9)},
	q{sc_sum('login', 'carol')})
{
	(my $function = $call) =~ s/\(.*//;
	like( outcome("SELECT $call", full => 1),
		qr/^42809: counter "(api|login)" is a rate limiter
DETAIL:  $function\(\) does not apply to a rate limiter\./,
		"$call by the router's own routing: 42809, the node's message");
}
# The same from a router in node0's own database, which calls node0's keys in-process.
my $strings = join(', ',
	map { sprintf("'host=%s port=%d dbname=%s'", $server->host, $server->port, $_) } @nodes);
$server->safe_psql('node0', qq{
CREATE SCHEMA router;
CREATE EXTENSION slotted_counter_proxy SCHEMA router CASCADE;
SELECT router.sc_proxy_configure(ARRAY[$strings]);
SELECT router.sc_create('api', 'buffered', rate => 1, per => '1 hour', burst => 5);});
my $on_node0 = router(q{
SELECT k FROM generate_series(1, 100) AS k WHERE abs(hashint8(k) % 3) = 0 ORDER BY k LIMIT 1});
is( outcome("SELECT router.sc_incr('api', $on_node0)", db => 'node0', full => 1),
	qq{42809: counter "api" is a rate limiter
DETAIL:  sc_incr() does not apply to a rate limiter.
HINT:  Call sc_throttle() on it.},
	'sc_incr on a limiter by a router in the node\'s database, in-process: the node\'s 42809');
for my $call (
	q{sc_incr_bounded('api', 9, 1, 0, 10)},
	q{sc_incr_once('api', 9, 1, 'request-1')},
	q{sc_incr_batch('api', ARRAY[9, 2], ARRAY[1, 1])},
	q{sc_incr_batch_text('login', ARRAY['carol'], ARRAY[1])},
	q{sc_set('api', 9, 5)},
	q{sc_sum('api', 9, NULL, NULL)},
	q{sc_sum_keys('api', ARRAY[9, 2])},
	q{sc_series('api', 9, now() - interval '1 day', now())},
	q{sc_top('api', 3)},
	q{sc_top_text('login', 3)},
	q{sc_rank('api', 9)},
	q{sc_total('api')},
	q{sc_total_series('api', now() - interval '1 day', now())},
	q{sc_alter_retention('api', '1 day')})
{
	like(outcome("SELECT * FROM $call"),
		qr/^42809: \S+ \[node\d\] REMOTE ERROR: counter "(api|login)" is a rate limiter$/,
		"$call by PL/Proxy: 42809, the node's message");
}
is( router($left) . "\n"
	  . on_nodes(q{SELECT retain FROM slotted_counter.counters WHERE name = 'api'}),
	"3\n1\nnode0: 05:00:00\nnode1: 05:00:00\nnode2: 05:00:00",
	'... and none of them took anything or changed the limiter');

# 5. Spread.
for my $sql (
	q{SELECT sc_create('hot_limit', 'buffered', spread => true, rate => 1, per => '1 hour')},
	q{SELECT sc_create('hot_limit', 'buffered', NULL, NULL, false, true, 'bigint', 1, '1 hour')})
{
	like(outcome($sql, full => 1),
		qr/^0A000: rate limiter "hot_limit" cannot be spread over the data nodes
DETAIL:  Each node would admit a burst of its own for every key\.
HINT:  Create it without spread: each key's limit is kept on the key's node\.($|\n)/,
		"$sql: 0A000");
}
is( on_nodes(q{SELECT count(*) FROM slotted_counter.counters WHERE name = 'hot_limit'})
	  . "\n" . router(q{SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'hot_limit'}),
	"node0: 0\nnode1: 0\nnode2: 0\n0", '... before any node created it');
is(outcome(q{SELECT * FROM sc_throttle('hot', 1)}),
	'0A000: counter "hot" is spread over the data nodes: sc_throttle() needs each key on one node',
	'sc_throttle on a spread counter: 0A000, as sc_incr_bounded');

# 6. A counter of the same name on the nodes.
$server->safe_psql($_, q{
SELECT sc_create('taken', 'buffered'),
       sc_create('same', 'buffered', rate => 10, per => '1 minute'),
       sc_create('skewed', 'buffered', rate => 1, per => '1 hour')}) for @nodes[0, 1];
$server->safe_psql($nodes[2], q{
SELECT sc_create('taken', 'buffered'),
       sc_create('same', 'buffered', rate => 10, per => '1 minute'),
       sc_create('skewed', 'buffered', rate => 2, per => '1 hour')});
my $another = 'already exists on the data nodes with another definition';
for my $case (
	[ q{'taken', 'buffered', rate => 1, per => '1 hour'}, $another, 'no limit' ],
	[ q{'same', 'buffered'}, $another, 'a limit, asked for none' ],
	[ q{'same', 'buffered', rate => 10, per => '1 minute', burst => 11}, $another,
		'another burst' ],
	[ q{'same', 'buffered', rate => 10, per => '2 minutes'}, $another, 'another per' ],
	[ q{'same', 'buffered', rate => 20, per => '2 minutes', burst => 10}, $another,
		'another rate' ],
	[ q{'same', 'transactional', rate => 10, per => '1 minute'}, $another,
		'another durability' ],
	[ q{'same', 'buffered', key_type => 'text', rate => 10, per => '1 minute'}, $another,
		'another key type' ],
	[ q{'skewed', 'buffered', rate => 1, per => '1 hour'},
		'is defined differently on the data nodes', 'a limit that differs between nodes' ])
{
	my ($args, $message, $what) = @$case;
	my ($name) = $args =~ /^'(\w+)'/;
	is(outcome("SELECT sc_create($args)"), qq{42710: counter "$name" $message},
		"a node's counter of the same name with $what: 42710");
}
is( router(q{
SELECT sc_create('same', 'buffered', rate => 10, per => '60 seconds', burst => 10);
SELECT count(*) FROM slotted_counter_proxy.counters WHERE name IN ('taken', 'skewed');
SELECT allowed, remaining FROM sc_throttle('same', 1, 4);}),
	"same\n0\nt|6",
	'the same limit (a NULL burst is the rate, per as an equal interval) is taken and routed; '
	  . 'the others were not recorded');

# 7. Privileges, and sc_drop.
like(outcome(q{SELECT * FROM sc_throttle('same', 1)}, user => 'app'),
	qr/^42501: /, 'a role without UPDATE on the limiter: 42501 from its node');
router(q{SELECT sc_grant('same', 'UPDATE', 'app')});
is($server->safe_psql('router', q{SELECT remaining FROM sc_throttle('same', 1, 2)},
		extra_params => [ '-U', 'app' ]),
	'4', '... after sc_grant through the router, it throttles');

router(q{SELECT sc_drop('api'), sc_drop('login_t')});
is( on_nodes(q{SELECT count(*) FROM slotted_counter.counters WHERE name IN ('api', 'login_t')})
	  . "\n" . router(q{
SELECT count(*) FROM slotted_counter_proxy.counters WHERE name IN ('api', 'login_t')}),
	"node0: 0\nnode1: 0\nnode2: 0\n0", 'sc_drop of a limiter: gone from the router and every node');
is(outcome(q{SELECT * FROM sc_throttle('api', 1)}), '42704: counter "api" does not exist',
	'... sc_throttle on it: 42704');
is( router(q{
SELECT sc_create('api', 'buffered', rate => 1, per => '1 hour', burst => 5);
SELECT remaining FROM sc_throttle('api', 1, 0);}),
	"api\n5", '... and a new limiter of the same name starts full');

done_testing();
