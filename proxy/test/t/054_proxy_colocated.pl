# A router installed beside slotted_counter, in a data node's own database (docs/router.md, "A
# router in a data node"): two data nodes, A and B, and a router in A's database (schema "router")
# over both.
#   1. The router cannot take slotted_counter's schema; in a schema of its own it installs.
#   2. Keys of A are counted in-process, keys of B on B: where sc_proxy_node_of says, and the
#      router reads them all back; no connection from A to itself is kept for A's keys.
#   3. The in-process call acts as the caller: its counter privileges, the EXECUTE privilege on
#      slotted_counter's function and USAGE on its schema are checked for the calling role; a
#      transactional write inside a transaction block is refused as for a remote node.
#   4. pgbench through the router (six clients) and straight to A (two) at once: every key exact.
#   5. A database default search_path through the router's schema: the router's connections pin
#      their own, so sc_proxy_configure takes it and PL/Proxy's calls to A itself reach
#      slotted_counter, not the router again.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my $a = preloaded_node('a', "slotted_counter.flush_interval = 200\nmax_connections = 40\n");
my $b = preloaded_node('b', "slotted_counter.flush_interval = 200\n");
$_->safe_psql('postgres', 'CREATE EXTENSION slotted_counter') for ($a, $b);

sub node_string
{
	my ($node) = @_;
	return sprintf('host=%s port=%d dbname=postgres', $node->host, $node->port);
}

sub sqlstate_of
{
	my ($sql, @params) = @_;
	my ($r, $o, $e) = $a->psql('postgres', $sql,
		extra_params => [ '-v', 'VERBOSITY=verbose', @params ]);
	return $e =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1 : "no error ($e)";
}

# 1. Installation.
is(sqlstate_of('CREATE EXTENSION slotted_counter_proxy CASCADE'), '55000',
	"the router in slotted_counter's own schema: 55000");
$a->safe_psql('postgres', q{
CREATE SCHEMA router;
CREATE EXTENSION slotted_counter_proxy SCHEMA router CASCADE;
GRANT USAGE ON SCHEMA router TO PUBLIC;
});
$a->safe_psql('postgres',
	"SELECT router.sc_proxy_configure(ARRAY['" . node_string($a) . "', '" . node_string($b) . "'])");
$a->safe_psql('postgres', q{
SELECT router.sc_create('views', 'buffered'),
       router.sc_create('sold', 'transactional'),
       router.sc_create('urls', 'buffered', key_type => 'text');
});

# 2. Where the keys go.
$a->safe_psql('postgres', q{
SELECT router.sc_incr('views', k, k) FROM generate_series(1, 200) AS k;
SELECT router.sc_incr('urls', 'page-' || k) FROM generate_series(1, 50) AS k;
});
my $homes = $a->safe_psql('postgres', q{
SELECT string_agg(DISTINCT (router.sc_proxy_node_of('views', k)).node::text, ',')
  FROM generate_series(1, 200) AS k});
is($homes, '0,1', 'the 200 keys have homes on both nodes');
my $on_a = $a->safe_psql('postgres', q{
SELECT string_agg(k::text, ',' ORDER BY k) FROM generate_series(1, 200) AS k
 WHERE (router.sc_proxy_node_of('views', k)).node = 0});
my $on_b = $a->safe_psql('postgres', q{
SELECT string_agg(k::text, ',' ORDER BY k) FROM generate_series(1, 200) AS k
 WHERE (router.sc_proxy_node_of('views', k)).node = 1});
is( $a->safe_psql('postgres', qq{
SELECT count(*) FROM unnest('{$on_a}'::bigint[]) AS k WHERE public.sc_sum('views', k) <> k}),
	'0', "node 0's keys are counted in A's own slotted_counter");
is( $b->safe_psql('postgres', qq{
SELECT count(*) FROM unnest('{$on_b}'::bigint[]) AS k WHERE sc_sum('views', k) <> k}),
	'0', "node 1's keys are counted on B");
is( $b->safe_psql('postgres', qq{
SELECT count(*) FROM unnest('{$on_a}'::bigint[]) AS k WHERE sc_sum('views', k) <> 0}),
	'0', "... and B holds none of node 0's keys");
is( $a->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 200) AS k WHERE router.sc_sum('views', k) <> k}),
	'0', 'the router reads every key back, from A in-process and from B');
is( $a->safe_psql('postgres', q{
SELECT router.sc_sum_keys_text('urls', ARRAY(SELECT 'page-' || k FROM generate_series(1, 50) AS k))
     = 50
   AND (SELECT count(*) FROM generate_series(1, 50) AS k
         WHERE router.sc_sum('urls', 'page-' || k) <> 1) = 0}),
	't', 'text keys: PL/Proxy (sc_sum_keys_text) and the router\'s own routing agree');
is( $a->safe_psql('postgres', q{
SELECT string_agg(key || ':' || value, ',' ORDER BY value DESC, key)
  FROM router.sc_top('views', 3)}),
	'200:200,199:199,198:198', 'sc_top through the router merges A and B');
ok( $a->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity
 WHERE datname = 'postgres' AND application_name = 'slotted_counter_proxy'}),
	'no connection from A to itself is kept for its own keys');

# 3. The in-process call acts as the caller.
$a->safe_psql('postgres', 'CREATE ROLE app LOGIN');
$b->safe_psql('postgres', 'CREATE ROLE app LOGIN');
my ($local_key) = split /,/, $on_a;
my ($remote_key) = split /,/, $on_b;
is(sqlstate_of("SELECT router.sc_incr('views', $local_key)", '-U', 'app'), '42501',
	'a role without UPDATE on the counter: 42501 for a key of A, in-process');
is(sqlstate_of("SELECT router.sc_incr('views', $remote_key)", '-U', 'app'), '42501',
	'... and 42501 for a key of B, from B');
$a->safe_psql('postgres', "SELECT router.sc_grant('views', 'UPDATE, SELECT', 'app')");
is( $a->safe_psql('postgres',
		"SELECT router.sc_incr('views', $local_key) = $local_key + 1 "
		  . "AND router.sc_incr('views', $remote_key) = $remote_key + 1",
		extra_params => [ '-U', 'app' ]),
	't', 'granted through the router, app writes keys of A and of B');
$a->safe_psql('postgres', q{
REVOKE EXECUTE ON FUNCTION public.sc_incr(slotted_counter, bigint, bigint) FROM PUBLIC});
my ($ret, $out, $err) = $a->psql('postgres', "SELECT router.sc_incr('views', $local_key)",
	extra_params => [ '-U', 'app', '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42501: permission denied for function sc_incr/,
	"without EXECUTE on slotted_counter's sc_incr, the in-process call is refused");
$a->safe_psql('postgres', q{
GRANT EXECUTE ON FUNCTION public.sc_incr(slotted_counter, bigint, bigint) TO PUBLIC;
REVOKE USAGE ON SCHEMA public FROM PUBLIC});
($ret, $out, $err) = $a->psql('postgres', "SELECT router.sc_incr('views', $local_key)",
	extra_params => [ '-U', 'app', '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42501: permission denied for schema public/,
	"without USAGE on slotted_counter's schema, the in-process call is refused");
$a->safe_psql('postgres', 'GRANT USAGE ON SCHEMA public TO PUBLIC');
is( sqlstate_of("BEGIN; SELECT router.sc_incr('sold', $local_key); COMMIT;"),
	'25001', 'a transactional write of a key of A inside a block: 25001, as for B');
is( $a->safe_psql('postgres', qq{
BEGIN;
SET LOCAL slotted_counter_proxy.allow_transaction_block = on;
SELECT router.sc_incr('sold', $local_key);
ROLLBACK;
SELECT public.sc_sum('sold', $local_key);}),
	"1\n0", '... allowed, an in-process write counts in the block and rolls back with it');

# 4. Under load: through the router, and straight to A, at once.
my $router_script = $a->basedir . '/router.sql';
append_to_file($router_script, q{\set k random(1, 1000)
SELECT router.sc_incr('views', :k::bigint, 1);
});
my $direct_script = $a->basedir . '/direct.sql';
my $a_keys = $a->safe_psql('postgres', q{
SELECT string_agg(k::text, ',') FROM generate_series(1, 1000) AS k
 WHERE (router.sc_proxy_node_of('views', k)).node = 0});
my @a_keys = split /,/, $a_keys;
append_to_file($direct_script, "\\set i random(1, " . scalar(@a_keys) . ")\n"
	  . "SELECT public.sc_incr('views', (('{$a_keys}'::bigint[])[:i]), 1);\n");
$a->safe_psql('postgres', q{
CREATE TABLE before AS SELECT k, router.sc_sum('views', k) AS v FROM generate_series(1, 1000) AS k});
my @runs;
for my $run ([ $router_script, 6 ], [ $direct_script, 2 ])
{
	my ($out, $errs) = ('', '');
	push @runs,
	  [
		IPC::Run::start(
			[
				'pgbench', '--no-vacuum', "--client=$run->[1]", '--jobs=1', '--transactions=150',
				'-M', 'prepared', "--file=$run->[0]", '-h', $a->host, '-p', $a->port,
				'postgres'
			],
			'>', \$out, '2>', \$errs, IPC::Run::timeout(120)),
		\$out, \$errs
	  ];
}
my $calls = 0;
for my $run (@runs)
{
	$run->[0]->finish;
	my ($tx) = ${ $run->[1] } =~ /number of transactions actually processed: (\d+)/;
	is(${ $run->[2] } =~ /ERROR/ ? ${ $run->[2] } : '', '', 'a pgbench run: no call failed');
	$calls += $tx // 0;
}
is($calls, 8 * 150, 'pgbench through the router and straight to A: every call done');
is( $a->safe_psql('postgres', q{
SELECT sum(router.sc_sum('views', k) - v) FROM before}),
	$calls, 'every call of both runs is counted, once, on its key\'s node');
is( $a->safe_psql('postgres', qq{
SELECT count(*) FROM unnest('{$a_keys}'::bigint[]) AS k
 WHERE public.sc_sum('views', k) <> router.sc_sum('views', k)}),
	'0', 'A\'s keys read the same in A\'s slotted_counter and through the router');

# 5. A search_path through the router's schema.
$a->safe_psql('postgres', 'ALTER DATABASE postgres SET search_path = router, public');
is( $a->psql('postgres',
		"SELECT router.sc_proxy_configure(ARRAY['" . node_string($a) . "', '" . node_string($b) . "'])"),
	0, 'sc_proxy_configure takes a node whose search_path goes through the router');
is( $a->safe_psql('postgres', qq{
SELECT router.sc_incr_once('views', $local_key, 1, 'through the path') = router.sc_sum('views', $local_key)
   AND (SELECT count(*) FROM router.sc_top('views', 3)) = 3}),
	't', '... and PL/Proxy\'s calls to A itself reach slotted_counter there');
$a->safe_psql('postgres', 'ALTER DATABASE postgres RESET search_path');

done_testing();
