# The sharded form: three data nodes (slotted_counter) and a router (slotted_counter_proxy on
# PL/Proxy), four servers on one machine.
#   1. pgbench through the router over 10,000 keys of a buffered and of a transactional counter
#      and one spread hot key: every key reads the increments that returned, each key is stored
#      on the node its hash picks only, and the hot key's increments landed on every node.
#   2. A group sum, a top-n, a series and a batch across nodes equal the truth.
#   3. A transactional write inside a transaction block is refused unless asked for.
#   4. One node stopped (clean): calls for its keys fail clearly, the others succeed; after it
#      restarts nothing was lost.
#   5. A change of the node set that would re-route keys is refused; a node moved with pg_dump
#      and pg_restore (docs/router.md: "Changing the data nodes") is taken and reads the same.

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
$_->safe_psql('postgres', 'CREATE EXTENSION slotted_counter') for @data;

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "max_connections = 40\nlog_statement = none\n");
$router->start;

sub node_string
{
	my ($node, $db) = @_;
	return sprintf('host=%s port=%d dbname=%s connect_timeout=5',
		$node->host, $node->port, $db // 'postgres');
}
my $nodes = join(', ', map { "'" . node_string($_) . "'" } @data);

$router->safe_psql('postgres', 'CREATE EXTENSION slotted_counter_proxy CASCADE');

my ($ret, $out, $err) = $router->psql('postgres', "SELECT sc_create('c', 'buffered')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000: the router has no data nodes/,
	'a counter before sc_proxy_configure: 55000');

$router->safe_psql('postgres', "SELECT sc_proxy_configure(ARRAY[$nodes])");
$router->safe_psql('postgres', "SELECT sc_proxy_configure(ARRAY[$nodes])");
is( $router->safe_psql('postgres', qq{
SELECT array_agg(connstr ORDER BY node) = ARRAY[$nodes]
   AND (SELECT count(*) FROM pg_foreign_server WHERE srvname = 'slotted_counter_proxy') = 1
  FROM slotted_counter_proxy.nodes}),
	't', 'sc_proxy_configure, twice with the same nodes: the three nodes, in order, one server');

$router->safe_psql('postgres', q{
SELECT sc_create('views', 'buffered'),
       sc_create('sold', 'transactional'),
       sc_create('hot', 'buffered', spread => true),
       sc_create('hits', 'buffered', '1 hour');
CREATE TABLE truth (k bigint NOT NULL);
});
for my $i (0 .. 2)
{
	is( $data[$i]->safe_psql('postgres',
			q{SELECT string_agg(name || ' ' || durability, ',' ORDER BY name) FROM slotted_counter.counters}),
		'hits buffered,hot buffered,sold transactional,views buffered',
		"data node $i defines every counter the router created");
}

# 1. pgbench through the router.
my $script = $router->basedir . '/load.sql';
append_to_file($script, q{\set k random(1, 10000)
SELECT sc_incr('views', :k);
SELECT sc_incr('sold', :k, 2);
SELECT sc_incr('hot');
INSERT INTO truth VALUES (:k);
});
my ($bench_out, $bench_err) = ('', '');
IPC::Run::run(
	[
		'pgbench', '--no-vacuum', '--client=8', '--jobs=2', '--transactions=500',
		"--file=$script", '-h', $router->host, '-p', $router->port, 'postgres'
	],
	'>', \$bench_out, '2>', \$bench_err, IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
my ($tx) = $bench_out =~ /number of transactions actually processed: (\d+)/;
my $errors = () = $bench_err =~ /ERROR/g;
is($errors, 0, 'pgbench through the router: no call failed');
diag($bench_err) if $errors;
is($tx, 8 * 500, 'pgbench through the router: every client ran its transactions');
is($router->safe_psql('postgres', 'SELECT count(*) FROM truth'), $tx,
	'... and every one of them finished');

my $truth = q{(SELECT k, count(*) AS n FROM truth GROUP BY k) AS t
  RIGHT JOIN generate_series(1, 10000) AS g(k) USING (k)};
is( $router->safe_psql('postgres', qq{
SELECT count(*) FROM $truth
 WHERE sc_sum('views', g.k) <> coalesce(t.n, 0) OR sc_sum('sold', g.k) <> 2 * coalesce(t.n, 0)}),
	'0', 'every one of 10,000 keys of both counters reads its increments through the router');
is($router->safe_psql('postgres', "SELECT sc_sum('hot')"), $tx,
	'the spread hot key reads every increment');

$router->safe_psql('postgres', 'SELECT sc_rollup()');
for my $i (0 .. 2)
{
	is( $data[$i]->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE abs(hashint8(t.key) % 3) <> $i)
  FROM slotted_counter.key_values t JOIN slotted_counter.counters c ON c.id = t.counter
 WHERE c.name IN ('views', 'sold')}),
		'0', "data node $i stores only the keys whose hash picks it");
	my $share = $data[$i]->safe_psql('postgres', "SELECT sc_sum('hot')");
	ok($share > $tx / 10, "data node $i took a share of the hot key ($share of $tx)");
}
is( $data[0]->safe_psql('postgres', "SELECT sc_sum('views', 1) + sc_sum('views', 2)")
	  + $data[1]->safe_psql('postgres', "SELECT sc_sum('views', 1) + sc_sum('views', 2)")
	  + $data[2]->safe_psql('postgres', "SELECT sc_sum('views', 1) + sc_sum('views', 2)"),
	$router->safe_psql('postgres', "SELECT count(*) FROM truth WHERE k IN (1, 2)"),
	'a key is counted on one node only');

# 2. Group sum, top-n, series, batch.
is( $router->safe_psql('postgres', q{
SELECT sc_sum_keys('views', ARRAY(SELECT generate_series(1, 10000, 7)))
     = (SELECT count(*) FROM truth WHERE k % 7 = 1)}),
	't', 'sc_sum_keys of a group of keys on every node equals the truth');
is( $router->safe_psql('postgres', q{
SELECT string_agg(key || ':' || value, ',' ORDER BY value DESC, key) FROM sc_top('views', 10)}),
	$router->safe_psql('postgres', q{
SELECT string_agg(k || ':' || n, ',' ORDER BY n DESC, k)
  FROM (SELECT k, count(*) AS n FROM truth GROUP BY k ORDER BY n DESC, k LIMIT 10) AS t}),
	'sc_top merged from every node equals the truth');
is($router->safe_psql('postgres', q{SELECT key || ':' || value FROM sc_top('hot', 1)}),
	"0:$tx", 'sc_top of a spread counter adds up the shares');
# As drivers type them: n as int8 (beyond int: every key), intervals as varchar.
is( $router->safe_psql('postgres', q{
PREPARE top_long(varchar, int8) AS SELECT count(*) FROM sc_top($1, $2);
EXECUTE top_long('views', 5000000000);
PREPARE create_varchar(varchar, varchar, varchar, varchar) AS SELECT sc_create($1, $2, $3, $4);
EXECUTE create_varchar('per_day', 'buffered', '1 day', '30 days');
PREPARE retention_varchar(varchar, varchar) AS SELECT sc_alter_retention($1, $2);
EXECUTE retention_varchar('per_day', '7 days');
SELECT sc_drop('per_day');}),
	$router->safe_psql('postgres', q{SELECT count(DISTINCT k) FROM truth}) . "\nper_day\n\n",
	'the router takes n as bigint and intervals as varchar, as a data node does');
is( $router->safe_psql('postgres', q{
SELECT sum(sc_incr('hits', k, 1, '2026-01-01 10:30+00') + sc_incr('hits', k, 2, '2026-01-01 11:30+00'))
  FROM generate_series(1, 30) AS k;
SELECT string_agg(to_char(bucket AT TIME ZONE 'UTC', 'HH24') || '=' || value, ',')
  FROM sc_series('hits', 17, '2026-01-01 00:00+00', '2026-01-02 00:00+00');
SELECT sc_sum('hits', 17, '2026-01-01 11:00+00', '2026-01-02');}),
	"90\n10=1,11=2\n2",
	'a bucketed counter through the router: sc_incr at, sc_series, a range sum');
is( $router->safe_psql('postgres', q{
SELECT sc_total('views') = (SELECT count(*) FROM truth),
       sc_total('hits'), sc_total('hits', '2026-01-01 11:00+00', NULL);
SELECT string_agg(to_char(bucket AT TIME ZONE 'UTC', 'HH24') || '=' || value, ',')
  FROM sc_total_series('hits', '2026-01-01 00:00+00', '2026-01-02 00:00+00');}),
	"t|90|60\n10=30,11=60",
	'sc_total and sc_total_series add up every node');
is( $router->safe_psql('postgres', q{
WITH b AS (SELECT sc_incr_batch('views', ARRAY(SELECT generate_series(1, 30)),
                                ARRAY(SELECT 100::bigint FROM generate_series(1, 30))) AS r)
SELECT bool_and(b.r[k] = sc_sum('views', k)) AND
       bool_and(b.r[k] = 100 + (SELECT count(*) FROM truth WHERE truth.k = g.k))
  FROM b, generate_series(1, 30) AS g(k)}),
	't', 'sc_incr_batch split by node returns each key\'s new value in the batch\'s order');
is($router->safe_psql('postgres', "SELECT sc_set('hot', 0, 5)"), $tx,
	'sc_set of a spread key returns the old sum');
is( $router->safe_psql('postgres', "SELECT sc_sum('hot')") . ' '
	  . $data[1]->safe_psql('postgres', "SELECT sc_sum('hot')"),
	'5 0', '... and sets the sum, every other node\'s share to 0');

# 3. Transactional writes inside a transaction block.
($ret, $out, $err) = $router->psql('postgres', "BEGIN; SELECT sc_incr('sold', 1); COMMIT;",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/25001: transactional counter "sold" cannot be written through the router inside a transaction block/,
	'a transactional increment inside a block: 25001');
my $before = $router->safe_psql('postgres', "SELECT sc_sum('sold', 1)");
is( $router->safe_psql('postgres', q{
BEGIN;
SET LOCAL slotted_counter_proxy.allow_transaction_block = on;
SELECT sc_incr('sold', 1) > 0;
ROLLBACK;
SELECT sc_sum('sold', 1);}),
	"t\n" . ($before + 1),
	'... allowed when asked for, and then committed on its node whatever the block did');
is($router->safe_psql('postgres', "BEGIN; SELECT sc_incr('views', 1) > 0; COMMIT;"),
	't', 'a buffered increment inside a block is taken');

# Errors and privileges as on a single server: the nodes check them, as the role that called.
sub sqlstate_of
{
	my ($sql, @params) = @_;
	my ($r, $o, $e) = $router->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose', @params ]);
	return $e =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1 : "no error ($e)";
}
is(sqlstate_of("SELECT sc_incr('nope', 1)"), '42704', 'an unknown counter: 42704');
is(sqlstate_of("SELECT sc_incr('views', NULL)"), '22004', 'a NULL key: 22004');
is(sqlstate_of("SELECT sc_incr('views', 1, 9223372036854775807)"), '22003',
	'an overflow on its node: 22003, passed through');
is(sqlstate_of("SELECT sc_incr_batch('views', '{1,2}', '{1}')"), '22023',
	'a batch of unequal arrays: 22023');
is(sqlstate_of("SELECT sc_incr_bounded('hot', 0, 1, NULL, 10)"), '0A000',
	'a bound on a spread counter: 0A000');
is(sqlstate_of("SELECT sc_create('views', 'buffered')"), '42710', 'a duplicate name: 42710');
$_->safe_psql('postgres', 'CREATE ROLE app LOGIN') for (@data, $router);
is(sqlstate_of("SELECT sc_incr('views', 1)", '-U', 'app'), '42501',
	'a role without UPDATE on the counter: 42501 from its node');
$router->safe_psql('postgres', "SELECT sc_grant('views', 'UPDATE', 'app')");
is($router->psql('postgres', "SELECT sc_incr('views', 1) > 0", extra_params => [ '-U', 'app' ]),
	0, '... and after sc_grant through the router, its increment is taken');

# 4. One node stopped.
my ($on1) = $router->safe_psql('postgres',
	'SELECT k FROM generate_series(1, 100) AS k WHERE abs(hashint8(k) % 3) = 1 LIMIT 1');
my ($on2) = $router->safe_psql('postgres',
	'SELECT k FROM generate_series(1, 100) AS k WHERE abs(hashint8(k) % 3) = 2 LIMIT 1');
my $value1 = $router->safe_psql('postgres', "SELECT sc_sum('views', $on1)");
$router->safe_psql('postgres', "SELECT sc_incr('views', $on1, 10)");
$data[1]->stop('fast');
($ret, $out, $err) = $router->psql('postgres', "SELECT sc_incr('views', $on1)");
isnt($ret, 0, 'with data node 1 stopped, an increment of its key fails');
like($err, qr/ERROR:  could not connect to data node 1\nDETAIL:  connection to server on socket .*failed/,
	'... with an error that names the node and the connection that failed');
is(sqlstate_of("SELECT sc_incr('views', $on1)"), '08001', '... SQLSTATE 08001');
is($router->safe_psql('postgres', "SELECT sc_incr('views', $on2, 3) = sc_sum('views', $on2)"),
	't', '... while a key of another node is written and read');
$data[1]->start;
is($router->safe_psql('postgres', "SELECT sc_sum('views', $on1)"), $value1 + 10,
	'after a clean stop and start the node\'s keys lost nothing');

# 5. Changing the nodes.
($ret, $out, $err) = $router->psql('postgres',
	"SELECT sc_proxy_configure(ARRAY['" . node_string($data[0]) . "', '" . node_string($data[1]) . "'])",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000: the router already routes 4 counters over 3 data nodes/,
	'two nodes instead of three is refused: it would re-route existing keys');
$data[2]->safe_psql('postgres', 'CREATE DATABASE empty');
$data[2]->safe_psql('empty', 'CREATE EXTENSION slotted_counter');
($ret, $out, $err) = $router->psql('postgres',
	"SELECT sc_proxy_configure(ARRAY['" . node_string($data[0]) . "', '" . node_string($data[1])
	  . "', '" . node_string($data[2], 'empty') . "'])",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000: data node \(database empty on port \d+\) defines 0 of the 4 counters/,
	'a node string that reaches a database without the counters is refused');
$data[2]->safe_psql('postgres', 'CREATE DATABASE bare');
($ret, $out, $err) = $router->psql('postgres',
	"SELECT sc_proxy_configure(ARRAY['" . node_string($data[0]) . "', '" . node_string($data[1])
	  . "', '" . node_string($data[2], 'bare') . "'])",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/55000: data node \(database bare on port \d+\) has no slotted_counter/,
	'a node string that reaches a database without the extension is refused, and named');

my $sums = q{SELECT sum(sc_sum('views', k)) || ' ' || sum(sc_sum('sold', k))
  FROM generate_series(1, 10000) AS k};
my $sums_before = $router->safe_psql('postgres', $sums);
# The steps of docs/router.md "Changing the data nodes": no writes, flush, dump, restore, point.
$data[2]->safe_psql('postgres', 'SELECT sc_rollup()');
my $dump = $data[2]->basedir . '/node2.dump';
$data[2]->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $data[2]->connstr('postgres') ],
	'pg_dump of data node 2');
$data[2]->safe_psql('postgres', 'CREATE DATABASE moved');
$data[2]->command_ok([ 'pg_restore', '--exit-on-error', '-d', $data[2]->connstr('moved'), $dump ],
	'pg_restore into another database');
$router->safe_psql('postgres',
	"SELECT sc_proxy_configure(ARRAY['" . node_string($data[0]) . "', '" . node_string($data[1])
	  . "', '" . node_string($data[2], 'moved') . "'])");
$data[2]->safe_psql('postgres', "SELECT sc_incr('views', $on2, 1000000)");   # the old copy: no longer read
is($router->safe_psql('postgres', $sums), $sums_before,
	'after the move every key reads what it read before');

done_testing();
