# The router (slotted_counter_proxy) lets a role act on the data nodes as itself only, and changes
# its catalog only through the routed functions, for counters the caller owns on the nodes. The
# data nodes trust the router's connections (as in 033), so a connection as another role would be
# that role there. mallory attacks; alice (and bob, carol) own counters.
#   1. A user mapping that names another role is refused (the event trigger), for mallory and for
#      a superuser alike; one that names the role itself, or only a password, is taken.
#   2. A mapping that names another role anyway (a superuser's, with the trigger disabled; a
#      PUBLIC one; one left stale by a rename): every kind of routed call is refused before it
#      reaches a node, including in a session that had called before, and the nodes are unchanged;
#      sc_proxy_configure refuses to run while it exists, and refuses a node string with a user.
#   3. The catalog: no role writes it directly, and no SQL function writes it for a role (sc_create,
#      sc_drop and sc_alter_owner do, in C); a second router registers a counter for its owner
#      only. alice's own flows (create, write, read, grant, give away, drop) still work. (055 plants
#      operators and a search_path on the nodes against the same catalog.)

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my @data = map { preloaded_node("data$_") } 0 .. 1;
my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "log_statement = none\n");
$router->start;

my $roles = 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN;
CREATE ROLE mallory LOGIN; CREATE ROLE team NOLOGIN; GRANT team TO alice, bob;';
for my $node (@data)
{
	$node->safe_psql('postgres', "CREATE EXTENSION slotted_counter; $roles
GRANT CREATE ON DATABASE postgres TO alice, bob, carol, mallory, team;");
}
$router->safe_psql('postgres', $roles);

sub node_string
{
	my ($node, $extra) = @_;
	return sprintf("'host=%s port=%d dbname=postgres connect_timeout=5%s'",
		$node->host, $node->port, $extra // '');
}
my $nodes = join(', ', map { node_string($_) } @data);
for my $db ('postgres', 'router2')
{
	$router->safe_psql('postgres', "CREATE DATABASE $db") if $db ne 'postgres';
	$router->safe_psql($db, 'CREATE EXTENSION slotted_counter_proxy CASCADE');
	$router->safe_psql($db, "SELECT sc_proxy_configure(ARRAY[$nodes])");
}

# The outcome of sql as user on the router: 'ok', or "SQLSTATE: message".
sub outcome
{
	my ($user, $sql, $db) = @_;
	my ($ret, $out, $err) = $router->psql($db // 'postgres', $sql,
		extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
	return $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : $ret == 0 ? 'ok' : "failed: $err";
}

# What the data nodes hold: every counter's definition, owner and grantees, and every value.
sub nodes_state
{
	return join(
		"\n",
		map {
			$_->safe_psql('postgres', q{
SELECT sc_rollup() >= 0;
SELECT string_agg(format('%s %s %s %s', c.name, c.durability, s.relowner::regrole, s.relacl), '; '
                  ORDER BY c.name)
  FROM slotted_counter.counters c
  JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass;
SELECT coalesce(sum(value), 0) FROM slotted_counter.key_values;})
		} @data);
}

is( outcome('alice', q{
SELECT sc_create('views', 'buffered');
SELECT sc_create('mine', 'buffered');
SELECT sum(sc_incr('views', k)) FROM generate_series(1, 100) AS k;}),
	'ok', 'alice creates and increments her counters through the router');

# 1. Mappings that name another role.
my $mapping_refused = qr/^42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "postgres"/;
like( outcome('mallory',
		q{CREATE USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (user 'postgres')}),
	$mapping_refused, 'mallory cannot map herself to postgres: 42501');
like( outcome('mallory',
		q{CREATE USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (user 'alice', password 'x')}),
	qr/^42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "alice"/,
	'... nor to alice: 42501');
is( outcome('mallory',
		q{CREATE USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (password 'x')}),
	'ok', 'a mapping with a password only is taken');
like( outcome('mallory',
		q{ALTER USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (ADD user 'postgres')}),
	$mapping_refused, 'altering her own mapping to postgres: 42501');
is( $router->safe_psql('postgres',
		q{SELECT umoptions FROM pg_user_mappings WHERE usename = 'mallory'}),
	'{password=x}', '... and the mapping is unchanged');
is( outcome('mallory', q{
ALTER USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (ADD user 'mallory');
SELECT sc_create('mallory_own', 'buffered');
SELECT sc_incr('mallory_own', 1, 5);}),
	'ok', 'a mapping that names the role itself is taken, and routes her own calls');
like( outcome('postgres',
		q{ALTER USER MAPPING FOR PUBLIC SERVER slotted_counter_proxy OPTIONS (ADD user 'postgres')}),
	qr/^42501: user mapping for "public" on server "slotted_counter_proxy" connects as role "postgres"/,
	'a superuser cannot make the PUBLIC mapping name a user either');

# 2. Mappings that name another role anyway. mallory opens a session and calls through the router
# before her mapping turns bad: the verdict her session cached must not outlive the change.
my $session = $router->background_psql('postgres', on_error_stop => 0,
	extra_params => [ '-U', 'mallory', '-v', 'VERBOSITY=verbose' ]);
is($session->query(q{SELECT sc_sum('mallory_own', 1)}), '5',
	'mallory\'s session reads her own counter');
$router->safe_psql('postgres', q{
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping DISABLE;
ALTER USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (SET user 'postgres');
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping ENABLE;});
$session->{stderr} = '';
$session->query(q{SELECT sc_sum('mallory_own', 1)});
like($session->{stderr}, qr/ERROR:  42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "postgres"/,
	'once a superuser mapped mallory to postgres, her open session is refused: 42501');
$session->quit;

my $before = nodes_state();
my %calls = (
	'sc_incr' => q{SELECT sc_incr('views', 1)},
	'sc_incr at' => q{SELECT sc_incr('views', 1, 1, now())},
	'sc_incr_once' => q{SELECT sc_incr_once('views', 1, 1, 'request 1')},
	'sc_incr_bounded' => q{SELECT sc_incr_bounded('views', 1, 1, 0, 1000)},
	'sc_incr_batch (SPLIT)' => q{SELECT sc_incr_batch('views', '{1,2,3}', '{1,1,1}')},
	'sc_set (SPLIT)' => q{SELECT sc_set('views', 1, 0)},
	'sc_sum' => q{SELECT sc_sum('views', 1)},
	'sc_sum range' => q{SELECT sc_sum('views', 1, now() - interval '1 day', now())},
	'sc_series' => q{SELECT * FROM sc_series('views', 1, now() - interval '1 day', now())},
	'sc_sum_keys (SPLIT)' => q{SELECT sc_sum_keys('views', '{1,2,3}')},
	'sc_top (RUN ON ALL)' => q{SELECT * FROM sc_top('views', 10)},
	'sc_rank (home node, then RUN ON ALL)' => q{SELECT sc_rank('views', 1)},
	'sc_rollup (RUN ON ALL)' => q{SELECT sc_rollup()},
	'sc_grant' => q{SELECT sc_grant('views', 'ALL', 'mallory')},
	'sc_revoke' => q{SELECT sc_revoke('views', 'ALL', 'alice')},
	'sc_alter_owner' => q{SELECT sc_alter_owner('views', 'mallory')},
	'sc_alter_retention' => q{SELECT sc_alter_retention('views', '1 day')},
	'sc_drop_buckets' => q{SELECT sc_drop_buckets('views', now())},
	'sc_drop' => q{SELECT sc_drop('views')},
	'sc_create' => q{SELECT sc_create('mallory_new', 'buffered')},
	'node_grant called directly' =>
	  q{SELECT slotted_counter_proxy.node_grant('views', 'ALL', 'mallory', false)},
	'node_incr_batch called directly' =>
	  q{SELECT * FROM slotted_counter_proxy.node_incr_batch('views', '{0,1}', '{1,2}', '{1,2}', '{1,1}')},
	'node_alter_owner called directly' =>
	  q{SELECT slotted_counter_proxy.node_alter_owner('views', 'mallory')},
	'node_keys_above called directly' =>
	  q{SELECT slotted_counter_proxy.node_keys_above('views', 1, 0, NULL, NULL)});
for my $call (sort keys %calls)
{
	like(outcome('mallory', $calls{$call}), $mapping_refused,
		"mapped to postgres, mallory's $call is refused: 42501");
}
is(nodes_state(), $before, '... and the data nodes are unchanged');
is( $router->safe_psql('postgres',
		q{SELECT string_agg(name || ' ' || owner || ' ' || spread, ', ' ORDER BY name) FROM slotted_counter_proxy.counters}),
	'mallory_own mallory false, mine alice false, views alice false',
	'... and so is the router\'s catalog');

like( outcome('postgres', "SELECT sc_proxy_configure(ARRAY[$nodes])"),
	qr/^42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "postgres"/,
	'sc_proxy_configure refuses to run while such a mapping exists');
$router->safe_psql('postgres',
	q{ALTER USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (DROP user)});
is(outcome('postgres', "SELECT sc_proxy_configure(ARRAY[$nodes])"),
	'ok', '... and runs once it is gone');
like( outcome('postgres',
		'SELECT sc_proxy_configure(ARRAY[' . node_string($data[0], ' user=postgres') . ', ' . node_string($data[1]) . '])'),
	qr/^42501: option "p0" of server "slotted_counter_proxy" names a user/,
	'a node string that names a user is refused: 42501');
like( outcome('postgres',
		q{SELECT sc_proxy_configure(ARRAY['postgresql://postgres@localhost/postgres', } . node_string($data[1]) . '])'),
	qr/^42501: option "p0" of server "slotted_counter_proxy" names a user/,
	'... and so is a URI (it can name a user that PL/Proxy cannot replace)');
is( $router->safe_psql('postgres',
		q{SELECT count(*) FROM slotted_counter_proxy.nodes WHERE connstr LIKE '%user=%' OR connstr LIKE 'postgres%'}),
	'0', '... and the router keeps its nodes');
is(outcome('mallory', q{SELECT sc_incr('mallory_own', 1)}),
	'ok', 'mallory\'s mapping without a user routes her calls again');

# A PUBLIC mapping that names a user serves every role without a mapping of its own.
$router->safe_psql('postgres', q{
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping DISABLE;
ALTER USER MAPPING FOR PUBLIC SERVER slotted_counter_proxy OPTIONS (ADD user 'postgres');
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping ENABLE;});
like(outcome('bob', q{SELECT sc_sum('views', 1)}),
	qr/^42501: user mapping for "public" on server "slotted_counter_proxy" connects as role "postgres"/,
	'a PUBLIC mapping that names postgres: bob\'s call is refused');
is($router->safe_psql('postgres', q{SELECT sc_sum('views', 1) > 0}),
	't', '... while postgres itself, whose name it is, is served');
$router->safe_psql('postgres',
	q{ALTER USER MAPPING FOR PUBLIC SERVER slotted_counter_proxy OPTIONS (DROP user)});

# A role renamed after its mapping was made: the mapping names the old name, which another role
# may take.
is( outcome('carol', q{
CREATE USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (user 'carol');
SELECT sc_create('carol_c', 'buffered');}),
	'ok', 'carol maps herself to carol and creates a counter');
$_->safe_psql('postgres', 'ALTER ROLE carol RENAME TO carol2') for (@data, $router);
like(outcome('carol2', q{SELECT sc_incr('carol_c', 1)}),
	qr/^42501: user mapping for "carol2" on server "slotted_counter_proxy" connects as role "carol"/,
	'renamed to carol2, her mapping still names carol: refused');
is( outcome('carol2', q{
ALTER USER MAPPING FOR CURRENT_USER SERVER slotted_counter_proxy OPTIONS (SET user 'carol2');
SELECT sc_create('carol2_c', 'buffered');}),
	'ok', '... and after she maps herself to her new name, her calls are routed');
is($data[0]->safe_psql('postgres', q{SELECT relowner::regrole FROM pg_class WHERE oid = 'slotted_counters.carol2_c'::regclass}),
	'carol2', '... as carol2');

# 3. The router's catalog.
like(outcome('mallory', q{INSERT INTO slotted_counter_proxy.counters VALUES ('later', 'buffered', false, 'mallory')}),
	qr/^42501: permission denied for table counters/, 'mallory cannot insert into the catalog');
like(outcome('mallory', q{UPDATE slotted_counter_proxy.counters SET spread = true WHERE name = 'views'}),
	qr/^42501: permission denied for table counters/, '... nor update it');
like(outcome('mallory', q{DELETE FROM slotted_counter_proxy.counters WHERE name = 'views'}),
	qr/^42501: permission denied for table counters/, '... nor delete from it');
like(outcome('mallory', q{INSERT INTO slotted_counter_proxy.nodes VALUES (9, 'host=elsewhere')}),
	qr/^42501: permission denied for table nodes/, '... nor change the nodes');
my $not_owner = qr/^42501: must be owner of counter "views" on every data node/;
is(outcome('alice', q{SELECT sc_create('later', 'buffered')}),
	'ok', 'alice creates a counter');
like(outcome('mallory', q{SELECT sc_alter_owner('later', 'mallory')}),
	qr/^42501: /, 'mallory cannot give it to herself');
like(outcome('mallory', q{SELECT sc_drop('later')}),
	qr/^42501: must be owner of counter "later" on every data node/, '... nor drop it');
is( $router->safe_psql('postgres',
		q{SELECT string_agg(name || ' ' || owner || ' ' || spread, ', ' ORDER BY name) FROM slotted_counter_proxy.counters WHERE name IN ('views', 'later')}),
	'later alice false, views alice false', '... and the catalog is unchanged');

# A second router over the same nodes (database router2): even a role that may read the counter
# on the nodes cannot register it there.
is(outcome('alice', q{SELECT sc_grant('views', 'SELECT', 'mallory')}), 'ok',
	'alice lets mallory read views');
like(outcome('mallory', q{SELECT sc_create('views', 'buffered', spread => true)}, 'router2'),
	$not_owner, 'mallory cannot register alice\'s counter on a second router as spread');
like(outcome('mallory', q{SELECT sc_create('views', 'buffered')}, 'router2'),
	$not_owner, '... nor as it is');
is($router->safe_psql('router2', q{SELECT count(*) FROM slotted_counter_proxy.counters}),
	'0', '... so the second router routes nothing');
is(outcome('alice', q{SELECT sc_create('views', 'buffered')}, 'router2'),
	'ok', 'alice registers her counter on the second router');
is( $router->safe_psql('router2', q{SELECT sc_sum('views', 7) || ' ' || spread || ' ' || owner FROM slotted_counter_proxy.counters}),
	$router->safe_psql('postgres', q{SELECT sc_sum('views', 7)}) . ' false alice',
	'... which reads what the first router reads');

# alice's own flows.
is( outcome('alice', q{
CREATE USER MAPPING FOR alice SERVER slotted_counter_proxy OPTIONS (user 'alice', password 'secret');
SELECT sc_incr_batch('mine', '{1,2,3}', '{10,20,30}');
SELECT sc_grant('mine', 'SELECT', 'mallory');
SELECT sc_alter_owner('mine', 'team');}),
	'ok', 'alice, mapped to herself with a password, writes, grants and gives her counter to her team');
is( $router->safe_psql('postgres', q{SELECT owner FROM slotted_counter_proxy.counters WHERE name = 'mine'})
	  . ' ' . $data[1]->safe_psql('postgres', q{SELECT relowner::regrole FROM pg_class WHERE oid = 'slotted_counters.mine'::regclass}),
	'team team', '... the router and the nodes record the team');
is( outcome('mallory', q{SELECT sc_sum_keys('mine', '{1,2,3}') || ' ' || (SELECT key FROM sc_top('mine', 1))}),
	'ok', '... mallory reads it');
is($router->safe_psql('postgres', q{SELECT sc_sum_keys('mine', '{1,2,3}') || ' ' || (SELECT key FROM sc_top('mine', 1))}),
	'60 3', '... its values');
like(outcome('mallory', q{SELECT sc_drop('mine')}),
	qr/^42501: must be owner of counter "mine" on every data node/, 'mallory, a reader, may not drop it');
is(outcome('bob', q{SELECT sc_drop('mine')}), 'ok', 'bob, of the team, drops it');
is( $router->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter_proxy.counters WHERE name = 'mine'})
	  . ' ' . $data[0]->safe_psql('postgres', q{SELECT count(*) FROM slotted_counter.counters WHERE name = 'mine'}),
	'0 0', '... from the router and the nodes');

# Every PL/Proxy function of the router checks the caller before PL/Proxy connects: its cluster
# is slotted_counter_proxy.cluster() (write_cluster(...) for a write), or its RUN ON function
# calls it.
is( $router->safe_psql('postgres', q{
SELECT string_agg(p.proname, ', ')
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE l.lanname = 'plproxy'
   AND p.prosrc !~ 'CLUSTER slotted_counter_proxy\.(cluster\(\)|write_cluster\([^;]+\));'
   AND NOT (p.prosrc ~ 'RUN ON slotted_counter_proxy\.(write_hash|read_hashes)(_text)?\('
            AND p.prosrc ~ 'CLUSTER ''slotted_counter_proxy'';')}),
	'', 'every PL/Proxy function takes its cluster from cluster() or a RUN ON function that checks');
# ... and those functions of the library (the RUN ON and split functions of every call routed by
# key, and the CLUSTER of a call on a whole counter) make cluster()'s checks first: in a session a
# router opened, each refuses at once.
{
	local $ENV{PGOPTIONS} = ($ENV{PGOPTIONS} // '') . ' -c slotted_counter_proxy.hop=on';
	for my $call (
		q{slotted_counter_proxy.write_hash('sc_incr_once()', 'views', 1::bigint)},
		q{slotted_counter_proxy.write_hash('sc_incr_once()', 'views', '1'::text)},
		q{slotted_counter_proxy.read_hashes('views', 1::bigint)},
		q{slotted_counter_proxy.split_keys(NULL, 'views', '{1}'::bigint[], NULL)},
		q{slotted_counter_proxy.split_keys('sc_incr_batch()', 'views', '{1}'::text[], '{1}')},
		q{slotted_counter_proxy.set_route('views', 1::bigint, 1)},
		q{slotted_counter_proxy.top_n('views', 1, false)},
		q{slotted_counter_proxy.counter_cluster('views')})
	{
		like(outcome('postgres', "SELECT * FROM $call"),
			qr/^55000: a routed call cannot come from a router's connection/,
			"$call checks the caller first");
	}
}

done_testing();
