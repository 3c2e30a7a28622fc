# The router's own routing of sc_incr and sc_sum (src/routed.cpp, src/remote.cpp: libpq
# connections it keeps per (data node, role), statements prepared once), attacked. Two data nodes
# and a router, three servers on one machine.
#   1. Identity: a routed call reaches its node as the current role, and after SET ROLE in the same
#      session as the new role (each role its own kept connection); a role without UPDATE gets
#      42501 from its node, with a CONTEXT naming the node; a user mapping that names another role
#      (a superuser's, the event trigger disabled) refuses the call before it reaches a node, also
#      in a session that had a connection already.
#   2. The same routing as PL/Proxy: 1,000 bigint keys and 200 text keys written through the C path
#      read exactly through PL/Proxy's sc_sum_keys and sc_sum_keys_text, node by node;
#      sc_proxy_node_of names the node that holds each key (asked directly), the other holds 0.
#   3. Under load, pgbench through the router and pgbench straight to each key's node (keys looked
#      up with sc_proxy_node_of), concurrently, -M prepared, extended and simple, on a buffered and
#      a transactional counter: every key reads the same through the router and on its node, and
#      what both kinds of run counted.
#   4. A spread counter: routed writes land on both nodes, the routed sum is the nodes' sum,
#      sc_proxy_node_of refuses it (0A000).
#   5. Errors and their SQLSTATEs: 42704, 22004, 42804, 22P02, 22003 (the node's, with a CONTEXT
#      naming it), 25001 unless allowed; nothing is counted by a call that failed.
#   6. A cancel while the node does not answer (its backend stopped with SIGSTOP): 57014, and the
#      session's next routed call succeeds on a new connection.
#   7. A data node restarted (a clean stop, then a crash): the next sc_incr and sc_sum of sessions
#      that had connections to it succeed and read exactly.
#   8. A role renamed on the router and the nodes: its open session's next call reaches the node
#      under the new name (not a new role that took the old one).
#   9. A counter dropped and re-created through the router while a session holds prepared
#      statements: that session's next call writes the new counter, from 1.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

# A data node's backend stopped by section 6 is let go whatever happens, or the nodes' shutdown at
# the end would wait for it.
my $stopped_pid;
END { kill 'CONT', $stopped_pid if $stopped_pid; }

my @data = map { preloaded_node("data$_", "slotted_counter.flush_interval = 200\n") } 0 .. 1;
my $roles = join(' ', map { "CREATE ROLE $_ LOGIN;" } qw(alice bob carol dave mallory));
$_->safe_psql('postgres', "CREATE EXTENSION slotted_counter; $roles") for @data;

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "max_connections = 40\nlog_statement = none\n");
$router->start;
$router->safe_psql('postgres', $roles);

my @strings = map { sprintf('host=%s port=%d dbname=postgres connect_timeout=5', $_->host, $_->port) }
  @data;
$router->safe_psql('postgres', 'CREATE EXTENSION slotted_counter_proxy CASCADE');
$router->safe_psql('postgres',
	'SELECT sc_proxy_configure(ARRAY[' . join(', ', map { "'$_'" } @strings) . '])');
$router->safe_psql('postgres', q{
SELECT sc_create('views', 'buffered'),
       sc_create('bobs', 'buffered'),
       sc_create('r2', 'buffered'),
       sc_create('r2t', 'transactional', key_type => 'text'),
       sc_create('lb', 'buffered'),
       sc_create('lt', 'transactional'),
       sc_create('hot', 'buffered', spread => true),
       sc_create('temp', 'buffered');
SELECT sc_grant('views', 'ALL', r) FROM unnest(ARRAY['alice', 'bob', 'dave', 'mallory']) AS r;
SELECT sc_grant('bobs', 'ALL', 'bob');});

# The outcome of sql on the router as user: its output, or "ERROR <SQLSTATE>", and its stderr.
sub routed
{
	my ($sql, $user) = @_;
	my ($ret, $out, $err) = $router->psql('postgres', $sql,
		extra_params => [ '-U', $user // 'postgres', '-v', 'VERBOSITY=verbose' ]);
	my $result = $err =~ /ERROR:  ([0-9A-Z]{5}):/ ? "ERROR $1" : $ret == 0 ? $out : "failed: $err";
	return wantarray ? ($result, $err) : $result;
}

# A router session that stays open, as user.
sub session
{
	my ($user) = @_;
	return $router->background_psql('postgres', on_error_stop => 0, timeout => 60,
		extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
}

# The outcome of sql in a session: its output, or "ERROR <SQLSTATE>" (the session's stderr keeps
# the whole error).
sub in_session
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my $out = $session->query($sql);
	return "ERROR $1" if $session->{stderr} =~ /ERROR:  ([0-9A-Z]{5}):/;
	return $session->{stderr} eq '' ? $out : "stderr: $session->{stderr}";
}

# The routers' connections a data node serves for the given roles: their role names, sorted.
sub routed_roles
{
	my ($node, @users) = @_;
	my $in = join(', ', map { "'$_'" } @users);
	return $node->safe_psql('postgres', qq{
SELECT coalesce(string_agg(usename::text, ',' ORDER BY usename), '') FROM pg_stat_activity
 WHERE application_name = 'slotted_counter_proxy' AND usename IN ($in)});
}

# The pids of the backends serving user's routed connections on a data node, comma-separated.
sub routed_pid
{
	my ($node, $user) = @_;
	return $node->safe_psql('postgres', qq{
SELECT string_agg(pid::text, ',') FROM pg_stat_activity
 WHERE application_name = 'slotted_counter_proxy' AND usename = '$user'});
}

# Waits until a data node serves no routed connection of the given roles (a router backend that
# exited closes its connections; the node's backends exit soon after).
sub wait_no_routed
{
	my ($node, @users) = @_;
	my $in = join(', ', map { "'$_'" } @users);
	$node->poll_query_until('postgres', qq{
SELECT NOT EXISTS (SELECT FROM pg_stat_activity
                    WHERE application_name = 'slotted_counter_proxy' AND usename IN ($in))})
	  or die "the routed connections of @users on a data node did not close";
}

sub on_node
{
	my ($i, $sql) = @_;
	return $data[$i]->safe_psql('postgres', $sql);
}

# A key of each node, as the router names them.
my ($k0, $k1) = map {
	$router->safe_psql('postgres', qq{
SELECT k FROM generate_series(1, 100) AS k WHERE (sc_proxy_node_of('views', k)).node = $_
 ORDER BY k LIMIT 1})
} 0 .. 1;

# 1. Identity.
wait_no_routed($data[0], 'alice', 'bob', 'postgres');
my $s = session('postgres');
is(in_session($s, "SET ROLE alice; SELECT sc_incr('views', $k0)"), '1',
	'a routed sc_incr as alice (SET ROLE) is taken');
is(routed_roles($data[0], 'alice', 'bob', 'postgres'), 'alice',
	'... and data node 0 serves the router as alice, not as the session\'s user');
my $alice_pid = routed_pid($data[0], 'alice');
is(in_session($s, "SELECT sc_incr('views', $k0)"), '2', 'alice\'s second call is taken');
is(routed_pid($data[0], 'alice'), $alice_pid, '... on the connection the session keeps');
is(in_session($s, "SET ROLE bob; SELECT sc_incr('bobs', $k0)"), '1',
	'after SET ROLE bob, an increment of a counter only bob may write is taken');
is(routed_roles($data[0], 'alice', 'bob', 'postgres'), 'alice,bob',
	'... and data node 0 serves the router as bob too');
is(in_session($s, "SET ROLE alice; SELECT sc_incr('bobs', $k0)"), 'ERROR 42501',
	'back as alice in the same session, bob\'s counter is refused by the node: 42501');
is(on_node(0, "SELECT sc_sum('bobs', $k0)"), '1', '... and the node counted bob\'s call only');
is(in_session($s, "SET ROLE carol; SELECT sc_incr('views', $k0)"), 'ERROR 42501',
	'a role without UPDATE on the counter: 42501 from its node');
like($s->{stderr}, qr/^CONTEXT:  data node 0 \(database postgres\)$/m,
	'... with a CONTEXT that names the data node');
is(on_node(0, "SELECT sc_sum('views', $k0)"), '2', '... and nothing counted');
$s->quit;

my $m = session('mallory');
is(in_session($m, "SELECT sc_incr('views', $k0)"), '3',
	'mallory\'s session increments a counter she may write');
$router->safe_psql('postgres', q{
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping DISABLE;
CREATE USER MAPPING FOR mallory SERVER slotted_counter_proxy OPTIONS (user 'alice');
ALTER EVENT TRIGGER slotted_counter_proxy_user_mapping ENABLE;});
my $mapped = qr/ERROR:  42501: user mapping for "mallory" on server "slotted_counter_proxy" connects as role "alice"/;
is(in_session($m, "SELECT sc_incr('views', $k0)"), 'ERROR 42501',
	'once a superuser mapped mallory to alice, her open session\'s routed sc_incr is refused: 42501');
like($m->{stderr}, $mapped, '... naming the mapping');
is(in_session($m, "SELECT sc_sum('views', $k0)"), 'ERROR 42501', '... and so is her sc_sum');
my ($result, $err) = routed("SELECT sc_incr('views', $k0)", 'mallory');
is($result, 'ERROR 42501', 'a new session of mallory is refused too');
like($err, $mapped, '... naming the mapping');
is(routed("SELECT sc_incr('views', $k1)", 'mallory'), 'ERROR 42501',
	'... for a key of the other node too');
is(on_node(0, "SELECT sc_sum('views', $k0)") . ' ' . on_node(1, "SELECT sc_sum('views', $k1)"),
	'3 0', '... and neither node counted anything');
$router->safe_psql('postgres', 'DROP USER MAPPING FOR mallory SERVER slotted_counter_proxy');
is(in_session($m, "SELECT sc_incr('views', $k0)"), '4',
	'with the mapping dropped her session is served again');
$m->quit;

# 2. The same routing as PL/Proxy's functions.
my $text_key = q{(CASE WHEN k % 10 = 0 THEN 'Key ' ELSE 'user:' END || k || repeat(' ', k % 3))};
is( $router->safe_psql('postgres', qq{
SELECT count(sc_incr('r2', k)) FROM generate_series(1, 1000) AS k, generate_series(1, 1 + k % 3);
SELECT count(sc_incr('r2t', $text_key, 1)) FROM generate_series(1, 200) AS k, generate_series(1, 1 + k % 3);}),
	"2000\n401", '2,401 increments of 1,000 bigint keys and 200 text keys through the C path');
is( $router->safe_psql('postgres', qq{
SELECT sc_sum_keys('r2', ARRAY(SELECT generate_series(1, 1000)));
SELECT sc_sum_keys_text('r2t', ARRAY(SELECT $text_key FROM generate_series(1, 200) AS k));
SELECT count(*) FROM generate_series(1, 200) AS k WHERE sc_sum_keys_text('r2t', ARRAY[$text_key]) <> 1 + k % 3;}),
	"2000\n401\n0",
	'PL/Proxy\'s sc_sum_keys and sc_sum_keys_text read every increment, each text key its own');
my (%keys, %text_keys);
for my $i (0 .. 1)
{
	$keys{$i} = $router->safe_psql('postgres', qq{
SELECT array_agg(k ORDER BY k) FROM generate_series(1, 1000) AS k WHERE (sc_proxy_node_of('r2', k)).node = $i});
	$text_keys{$i} = $router->safe_psql('postgres', qq{
SELECT array_agg(k ORDER BY k) FROM generate_series(1, 200) AS k WHERE (sc_proxy_node_of('r2t', $text_key)).node = $i});
	is( $router->safe_psql('postgres', qq{
SELECT sc_sum_keys('r2', '$keys{$i}') = (SELECT sum(1 + k % 3) FROM unnest('$keys{$i}'::int[]) AS k)
   AND sc_sum_keys_text('r2t', ARRAY(SELECT $text_key FROM unnest('$text_keys{$i}'::int[]) AS k))
     = (SELECT sum(1 + k % 3) FROM unnest('$text_keys{$i}'::int[]) AS k)
   AND cardinality('$keys{$i}'::int[]) > 0 AND cardinality('$text_keys{$i}'::int[]) > 0}),
		't', "PL/Proxy's sums of the keys sc_proxy_node_of places on node $i are theirs");
}
for my $i (0 .. 1)
{
	my $other = 1 - $i;
	is( on_node($i, qq{
SELECT count(*) FROM unnest('$keys{$i}'::int[]) AS k WHERE sc_sum('r2', k) <> 1 + k % 3;
SELECT count(*) FROM unnest('$text_keys{$i}'::int[]) AS k WHERE sc_sum('r2t', $text_key) <> 1 + k % 3;
SELECT count(*) FROM unnest('$keys{$other}'::int[]) AS k WHERE sc_sum('r2', k) <> 0;
SELECT count(*) FROM unnest('$text_keys{$other}'::int[]) AS k WHERE sc_sum('r2t', $text_key) <> 0;}),
		"0\n0\n0\n0",
		"data node $i, asked directly, holds the value of every key sc_proxy_node_of names it for, and 0 for the others");
}
is( $router->safe_psql('postgres', qq{
SELECT count(*) FILTER (WHERE (sc_proxy_node_of('r2', k)).node <> abs(hashint8(k) % 2))
     + count(*) FILTER (WHERE (sc_proxy_node_of('r2t', $text_key)).node <> abs(hashtext($text_key COLLATE "C") % 2))
  FROM generate_series(1, 1000) AS k;
SELECT (sc_proxy_node_of('r2', $k0)).connstr = '$strings[0]', (sc_proxy_node_of('r2', $k1)).connstr = '$strings[1]';}),
	"0\nt|t", 'sc_proxy_node_of picks a key\'s node as PL/Proxy\'s RUN ON does, and gives its node string');

# 3. Under load, through the router and straight to the nodes.
my %node_keys;
for my $row (split /\n/,
	$router->safe_psql('postgres',
		q{SELECT (sc_proxy_node_of('lb', k)).node || ' ' || k FROM generate_series(1, 1000) AS k}))
{
	my ($node, $key) = split / /, $row;
	push @{ $node_keys{$node} }, $key;
}
is( $router->safe_psql('postgres', q{
SELECT count(*) FROM generate_series(1, 1000) AS k
 WHERE (sc_proxy_node_of('lb', k)).node <> (sc_proxy_node_of('lt', k)).node}),
	'0', 'a key has the same node in a buffered and in a transactional counter');
$router->safe_psql('postgres', 'CREATE TABLE truth (k bigint NOT NULL)');
for my $i (0 .. 1)
{
	my $list = join(',', @{ $node_keys{$i} });
	on_node($i, qq{
CREATE TABLE my_keys (i int PRIMARY KEY, k bigint NOT NULL);
INSERT INTO my_keys SELECT i, k FROM unnest('{$list}'::bigint[]) WITH ORDINALITY AS u(k, i);
CREATE TABLE truth (k bigint NOT NULL);});
}
my $routed_script = $router->basedir . '/routed.sql';
append_to_file($routed_script, q{\set k random(1, 1000)
SELECT sc_incr('lb', :k::bigint);
SELECT sc_incr('lt', :k::bigint);
INSERT INTO truth VALUES (:k);
});
my $direct_script = $router->basedir . '/direct.sql';
append_to_file($direct_script, q{\set i random(1, :n)
SELECT k AS key FROM my_keys WHERE i = :i \gset
SELECT sc_incr('lb', :key::bigint);
SELECT sc_incr('lt', :key::bigint);
INSERT INTO truth VALUES (:key);
});

my $total = 0;
for my $modes ([ 'prepared', 'extended' ], [ 'simple', 'prepared' ])
{
	my ($routed_mode, $direct_mode) = @$modes;
	my @runs;
	for my $target ('router', 0, 1)
	{
		my $node = $target eq 'router' ? $router : $data[$target];
		my $run = { name => $target eq 'router' ? "through the router (-M $routed_mode)"
			  : "straight to data node $target (-M $direct_mode)", out => '', err => '' };
		my @cmd = (
			'pgbench', '--no-vacuum', '-h', $node->host, '-p', $node->port,
			$target eq 'router'
			? ('--client=2', '--jobs=1', '--transactions=250', "--protocol=$routed_mode",
				"--file=$routed_script")
			: ('--client=1', '--transactions=200', "--protocol=$direct_mode",
				'-D', 'n=' . scalar(@{ $node_keys{$target} }), "--file=$direct_script"),
			'postgres');
		$run->{harness} =
		  IPC::Run::start(\@cmd, '>', \$run->{out}, '2>', \$run->{err}, IPC::Run::timeout(120));
		push @runs, $run;
	}
	for my $run (@runs)
	{
		$run->{harness}->finish;
		my ($tx) = $run->{out} =~ /number of transactions actually processed: (\d+)/;
		is($run->{err} =~ /ERROR/ ? $run->{err} : '', '', "pgbench $run->{name}: no call failed");
		is($tx, $run->{name} =~ /router/ ? 500 : 200, "pgbench $run->{name}: every transaction done");
		$total += $tx // 0;
	}
}

# What the runs counted, key by key: the truth tables of the router and of each node.
my %expected;
my $counted = 'SELECT k || \' \' || count(*) FROM truth GROUP BY k';
for my $row (map { split /\n/ } $router->safe_psql('postgres', $counted),
	on_node(0, $counted), on_node(1, $counted))
{
	my ($key, $n) = split / /, $row;
	$expected{$key} += $n;
}
for my $i (0 .. 1)
{
	my $list = join(',', @{ $node_keys{$i} });
	my $want = join(',',
		map { my $n = $expected{$_} // 0; "$_ $n $n" } sort { $a <=> $b } @{ $node_keys{$i} });
	my $read = qq{SELECT string_agg(k || ' ' || sc_sum('lb', k) || ' ' || sc_sum('lt', k), ',' ORDER BY k)
  FROM unnest('{$list}'::bigint[]) AS k};
	is($router->safe_psql('postgres', $read), $want,
		"through the router, each of data node $i\'s keys reads what both kinds of run counted");
	is(on_node($i, $read), $want,
		"on data node $i itself, each of its keys reads the same, buffered and transactional");
	my $others = join(',', @{ $node_keys{ 1 - $i } });
	is( on_node($i, qq{
SELECT count(*) FROM unnest('{$others}'::bigint[]) AS k WHERE sc_sum('lb', k) <> 0 OR sc_sum('lt', k) <> 0}),
		'0', "... and data node $i holds nothing of the other node's keys");
}
is( $router->safe_psql('postgres',
		q{SELECT sum(sc_sum('lb', k)) || ' ' || sum(sc_sum('lt', k)) FROM generate_series(1, 1000) AS k}),
	"$total $total", "the totals through the router equal the $total transactions pgbench reported");

# 4. A spread counter.
is($router->safe_psql('postgres', q{SELECT count(sc_incr('hot')) FROM generate_series(1, 200)}),
	'200', '200 routed increments of a spread counter');
my @shares = map { on_node($_, q{SELECT sc_sum('hot')}) } 0 .. 1;
cmp_ok($shares[0], '>', 0, "data node 0 took a share ($shares[0])");
cmp_ok($shares[1], '>', 0, "data node 1 took a share ($shares[1])");
is($shares[0] + $shares[1], 200, '... and the shares add up to the increments');
is($router->safe_psql('postgres', q{SELECT sc_sum('hot')}), $shares[0] + $shares[1],
	'the routed sc_sum is the sum of the nodes\' own');
($result, $err) = routed(q{SELECT * FROM sc_proxy_node_of('hot', 0)});
is($result, 'ERROR 0A000', 'sc_proxy_node_of of a spread counter: 0A000');
like($err, qr/ERROR:  0A000: counter "hot" is spread over the data nodes: its keys have no home node/,
	'... saying why');

# 5. Errors.
is(routed(q{SELECT sc_incr('nope', 1)}), 'ERROR 42704', 'sc_incr of an unknown counter: 42704');
is(routed(q{SELECT sc_sum('nope', 'x')}), 'ERROR 42704', 'sc_sum of an unknown counter: 42704');
is(routed(q{SELECT sc_proxy_node_of('nope', 1)}), 'ERROR 42704',
	'sc_proxy_node_of of an unknown counter: 42704');
is(routed(q{SELECT sc_incr(NULL::text, 1)}), 'ERROR 22004', 'a NULL counter: 22004');
is(routed(q{SELECT sc_sum(NULL::text, 'x')}), 'ERROR 22004', '... for sc_sum too');
is(routed(q{SELECT sc_incr('views', NULL::bigint)}), 'ERROR 22004', 'a NULL key: 22004');
is(routed(q{SELECT sc_incr('r2t', NULL::text)}), 'ERROR 22004', '... a NULL text key too');
is(routed(q{SELECT sc_sum('views', NULL::bigint)}), 'ERROR 22004', '... and in sc_sum');
is(routed(q{SELECT sc_incr('r2t', 1::bigint)}), 'ERROR 42804',
	'a bigint key on a counter keyed by text: 42804');
is(routed(q{SELECT sc_sum('r2t', 1::bigint)}), 'ERROR 42804', '... in sc_sum too');
is(routed(q{SELECT sc_incr('views', 'abc'::text)}), 'ERROR 22P02',
	'a text key that is not a number on a counter keyed by bigint: 22P02');
is(routed(q{SELECT sc_sum('views', 'abc'::text)}), 'ERROR 22P02', '... in sc_sum too');
is(routed(q{SELECT sc_incr('views', '99999999999999999999'::text)}), 'ERROR 22003',
	'... and one past a bigint: 22003');
is(routed(qq{SELECT sc_incr('views', '$k1'::text)}), '1',
	'a text key that is a bigint goes where the bigint goes');
is(routed(qq{BEGIN; SELECT sc_incr('lt', $k1); COMMIT;}), 'ERROR 25001',
	'a transactional counter inside a transaction block: 25001');
my $lt_before = on_node(1, "SELECT sc_sum('lt', $k1)");
is( routed(qq{
BEGIN;
SET LOCAL slotted_counter_proxy.allow_transaction_block = on;
SELECT sc_incr('lt', $k1) = $lt_before + 1;
ROLLBACK;}),
	't', '... accepted with slotted_counter_proxy.allow_transaction_block');
is(on_node(1, "SELECT sc_sum('lt', $k1)"), $lt_before + 1,
	'... and committed on its node whatever the block did');
($result, $err) = routed(qq{SELECT sc_incr('views', $k1, 9223372036854775807)});
is($result, 'ERROR 22003', 'an overflow on its node: 22003, passed through');
like($err, qr/^CONTEXT:  data node 1 \(database postgres\)$/m, '... with a CONTEXT naming the data node');
($result, $err) = routed(qq{SELECT sc_incr('views', $k1, NULL)});
is($result, 'ERROR 22004', 'a NULL delta: 22004');
like($err, qr/^CONTEXT:  data node 1 \(database postgres\)$/m, '... from its node');
is(routed(qq{SELECT sc_incr('views', $k1, NULL, now())}), 'ERROR 22004', '... with a time too');
is(on_node(1, "SELECT sc_sum('views', $k1)"), '1', '... and the failed calls counted nothing');

# 6. A cancel while the node does not answer.
my $d = session('dave');
is(in_session($d, "SELECT sc_incr('views', $k1)"), '2', 'dave\'s session increments a key of node 1');
$stopped_pid = routed_pid($data[1], 'dave');
like($stopped_pid, qr/^\d+$/, 'data node 1 serves dave\'s session on one connection');
$stopped_pid =~ /^\d+$/ or die "no single backend to stop: '$stopped_pid'";
kill 'STOP', $stopped_pid;
is(in_session($d, "SET statement_timeout = '1s'; SELECT sc_incr('views', $k1, 100)"),
	'ERROR 57014', 'with the node\'s backend stopped, the statement timeout cancels the call: 57014');
kill 'CONT', $stopped_pid;
my $cont = $stopped_pid;
$stopped_pid = undef;
my $after = in_session($d, "RESET statement_timeout; SELECT sc_incr('views', $k1)");
like($after, qr/^(3|103)$/, 'the next routed call in the same session succeeds');
is(on_node(1, "SELECT sc_sum('views', $k1)"), $after, '... and returned the node\'s value');
$data[1]->poll_query_until('postgres', "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $cont)")
  or die 'the stopped backend did not exit';
my $new_pid = routed_pid($data[1], 'dave');
like($new_pid, qr/^\d+$/, '... on one connection');
isnt($new_pid, $cont, '... a new one: the router closed the one it cancelled');
$d->quit;

# 7. A data node restarted.
my @sessions = (session('postgres'), session('postgres'));
my $value = on_node(1, "SELECT sc_sum('views', $k1)");
for my $session (@sessions)
{
	$value++;
	is(in_session($session, "SELECT sc_incr('views', $k1); SELECT sc_sum('views', $k1)"),
		"$value\n$value", 'a session writes and reads a key of node 1');
}
$data[1]->stop('fast');
$data[1]->start;
is(in_session($sessions[0], "SELECT sc_incr('views', $k1)"), $value + 1,
	'after node 1 restarted, the first routed sc_incr of a session that had a connection succeeds, exact');
is(in_session($sessions[1], "SELECT sc_sum('views', $k1)"), $value + 1,
	'... and so does the first sc_sum of another');
my $next = in_session($sessions[1], "SELECT sc_incr('views', $k1)");
is($next . ' ' . in_session($sessions[0], "SELECT sc_sum('views', $k1)"),
	on_node(1, "SELECT sc_sum('views', $k1) || ' ' || sc_sum('views', $k1)"),
	'... and their next calls read what the node holds');

# A crash of the node (an immediate stop): a transactional counter keeps what it committed.
my $lt = on_node(1, "SELECT sc_sum('lt', $k1)");
is(in_session($_, "SELECT sc_sum('lt', $k1)"), $lt, 'both sessions read a transactional key of node 1')
  for @sessions;
$data[1]->stop('immediate');
$data[1]->start;
is(in_session($sessions[0], "SELECT sc_incr('lt', $k1)"), $lt + 1,
	'after node 1 crashed and restarted, the first routed sc_incr of a session that had a connection succeeds');
is(in_session($sessions[1], "SELECT sc_sum('lt', $k1)"), $lt + 1, '... and so does the first sc_sum of another');
$_->quit for @sessions;

# 8. A role renamed.
wait_no_routed($data[0], 'alice');
my $alices = session('alice');
my $before = in_session($alices, "SELECT sc_incr('views', $k0)");
is(routed_roles($data[0], 'alice'), 'alice', 'alice\'s session reaches node 0 as alice');
$_->safe_psql('postgres', 'ALTER ROLE alice RENAME TO alice2') for (@data, $router);
# A new role takes the old name on the nodes: a connection by the old name would reach it.
$_->safe_psql('postgres', 'CREATE ROLE alice LOGIN') for @data;
is(in_session($alices, "SELECT sc_incr('views', $k0)"), $before + 1,
	'renamed to alice2 on the router and the nodes, her open session\'s next call is taken');
$data[0]->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'slotted_counter_proxy' AND usename IN ('alice', 'alice2')})
  or die 'alice\'s old connection did not close';
is(routed_roles($data[0], 'alice', 'alice2'), 'alice2', '... as alice2, not as the new alice');
is(in_session($alices, 'SELECT current_user'), 'alice2', '... who she is on the router');
$alices->quit;

# 9. A counter dropped and re-created while a session holds its prepared statements.
my $t = session('postgres');
is(in_session($t, "SELECT sc_incr('temp', $k0), sc_incr('temp', $k1), sc_sum('temp', $k0)"), '1|1|1',
	'a session writes and reads a counter on both nodes');
is(in_session($t, "SELECT sc_incr('temp', $k0, 5)"), '6', '... again');
$router->safe_psql('postgres', q{SELECT sc_drop('temp')});
$router->safe_psql('postgres', q{SELECT sc_create('temp', 'buffered')});
is(in_session($t, "SELECT sc_incr('temp', $k0), sc_sum('temp', $k0), sc_sum('temp', $k1)"), '1|1|0',
	'dropped and re-created through the router: the session\'s next sc_incr starts from 1');
$router->safe_psql('postgres', q{SELECT sc_drop('temp')});
$router->safe_psql('postgres', q{SELECT sc_create('temp', 'transactional', key_type => 'text')});
is(in_session($t, "SELECT sc_incr('temp', ${k0}::bigint)"), 'ERROR 42804',
	're-created keyed by text: the session\'s bigint key is refused (42804)');
is(in_session($t, q{SELECT sc_incr('temp', 'a'), sc_sum('temp', 'a')}), '1|1',
	'... and its text key is written from 1');
$t->quit;

done_testing();
