# What a role can steer through its own sessions on the data nodes, attacked. The router reaches
# a node as the calling role, so a role's own settings there (its search_path, its operators in its
# own schema) shape every statement the router sends as that role. Servers: A (data node 0, with a
# router in its own database in the schema "router", and a router of its own in the database r1),
# B (data node 1), and later C, a pg_basebackup clone of A. mallory, who may create schemas on the
# nodes, attacks; alice owns counters.
#   1. A node string with a password is refused (22023): every role reads the node strings.
#   2. The router's catalog. mallory plants an operator = (text, text) that is always true, and
#      = (name, name) that is always false, in a schema of her own on the nodes, and
#      ALTER ROLE mallory SET search_path = evil, pg_catalog, public. She cannot drop alice's
#      counter from the router, record it as spread and hers, squat a name, or register alice's
#      counter as spread on a second router: nothing changes, and alice's key 1 stays on its node.
#      Her own counter still works.
#   3. Routing loops. With the router's schema on her search_path (after public), her calls
#      through the router in A's database, by its own code and by PL/Proxy, are answered, with no
#      loop back into the router; a database default search_path through the router's schema is
#      accepted by sc_proxy_configure and loops no call either. A call in a session that a router
#      opened (slotted_counter_proxy.hop) is refused at once (55000), on both paths.
#   4. A read-only transaction writes nothing through the router (25006), by either path, to a
#      remote node or in-process.
#   5. A pg_basebackup clone of A, behind a proxy that gives its backends the PID of the router's
#      own backend: its keys are counted on the clone, not in A.

use strict;
use warnings;

use IO::Select;
use IO::Socket::UNIX;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Socket qw(SOCK_STREAM);
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my $a = preloaded_node('a', "max_connections = 30\nwal_level = replica\nmax_wal_senders = 2\n");
my $b = preloaded_node('b');
my $grants = 'CREATE ROLE alice LOGIN; CREATE ROLE mallory LOGIN;
GRANT CREATE ON DATABASE postgres TO alice, mallory; CREATE EXTENSION slotted_counter;';
$_->safe_psql('postgres', $grants) for ($a, $b);

sub node_string
{
	my ($node) = @_;
	return sprintf('host=%s port=%d dbname=postgres', $node->host, $node->port);
}
my $nodes = "ARRAY['" . node_string($a) . "', '" . node_string($b) . "']";
$a->safe_psql('postgres', q{
CREATE SCHEMA router;
CREATE EXTENSION slotted_counter_proxy SCHEMA router CASCADE;
GRANT USAGE ON SCHEMA router TO PUBLIC;});
$a->safe_psql('postgres', "SELECT router.sc_proxy_configure($nodes)");
$a->safe_psql('postgres', 'CREATE DATABASE r1');
$a->safe_psql('r1', 'CREATE EXTENSION slotted_counter_proxy CASCADE');
$a->safe_psql('r1', "SELECT sc_proxy_configure($nodes)");

# The outcome of sql in db of A as user: its output, or "SQLSTATE: message". options: more
# PGOPTIONS.
sub outcome
{
	my ($db, $user, $sql, $options) = @_;
	local $ENV{PGOPTIONS} = "$ENV{PGOPTIONS} " . ($options // '');
	my ($ret, $out, $err) = $a->psql($db, $sql,
		extra_params => [ '-U', $user, '-v', 'VERBOSITY=verbose' ]);
	return $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : $ret == 0 ? $out : "failed: $err";
}

# The router's row of a counter: "owner spread", or "none".
sub recorded
{
	my ($db, $counter) = @_;
	my $row = $a->safe_psql($db,
		"SELECT owner || ' ' || spread FROM slotted_counter_proxy.counters WHERE name = '$counter'");
	return $row eq '' ? 'none' : $row;
}

# 1. Passwords in node strings.
like( outcome('r1', 'postgres',
		"SELECT sc_proxy_configure(ARRAY['" . node_string($a) . " password=secret', '" . node_string($b) . "'])"),
	qr/^22023: node string 0 contains a password/, 'a node string with a password: 22023');
is( outcome('r1', 'mallory', q{SELECT count(*) FROM slotted_counter_proxy.nodes WHERE connstr ~ 'password'}),
	'0', '... and no role reads one');

is( outcome('r1', 'alice', q{SELECT sc_create('views', 'buffered'), sc_create('sold')}),
	'views|sold', 'alice creates her counters through the router');
is( outcome('r1', 'mallory', q{SELECT sc_create('bait', 'buffered')}),
	'bait', 'mallory creates one of her own');
is( outcome('postgres', 'mallory', q{SELECT router.sc_create('loop', 'buffered')}),
	'loop', '... and one through the router in A\'s database');

# 2. The planted operators and search_path.
for my $node ($a, $b)
{
	$node->safe_psql('postgres', q{
CREATE SCHEMA evil;
CREATE FUNCTION evil.always(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.always);
CREATE FUNCTION evil.never(name, name) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
CREATE OPERATOR evil.= (LEFTARG = name, RIGHTARG = name, FUNCTION = evil.never);
ALTER ROLE mallory SET search_path = evil, pg_catalog, public;},
		extra_params => [ '-U', 'mallory' ]);
}
is( $b->safe_psql('postgres', q{SELECT 'views'::text = 'bait'::text}, extra_params => [ '-U', 'mallory' ]),
	't', 'in mallory\'s sessions on the nodes, every text equals every other');

like( outcome('r1', 'mallory', q{SELECT slotted_counter_proxy.record_counter('views', 'drop')}),
	qr/^42883: /, 'no function records a drop of alice\'s counter for mallory');
like( outcome('r1', 'mallory',
		q{SELECT slotted_counter_proxy.record_counter('views', 'create', true)}),
	qr/^42883: /, '... nor records it as spread');
like( outcome('r1', 'mallory', q{SELECT slotted_counter_proxy.record_counter('squat', 'create', true)}),
	qr/^42883: /, '... nor squats a name');
is(recorded('r1', 'views') . ', ' . recorded('r1', 'squat'),
	'alice false, none', 'the router\'s catalog is unchanged');
like( outcome('postgres', 'mallory', q{SELECT router.sc_create('views', 'buffered', spread => true)}),
	qr/^42501: must be owner of counter "views" on every data node/,
	'on a second router (A\'s own), mallory cannot register alice\'s counter as spread: 42501');
like( outcome('postgres', 'mallory', q{SELECT router.sc_create('views', 'buffered')}),
	qr/^42501: must be owner of counter "views" on every data node/, '... nor as it is');
is(recorded('postgres', 'views'), 'none', '... and the second router does not route it');
is( outcome('r1', 'alice', q{SELECT count(*) FROM generate_series(1, 20) WHERE sc_incr('views', 1) > 0}),
	'20', 'alice increments her key 1 twenty times');
my $home = $a->safe_psql('postgres', 'SELECT abs(hashint8(1) % 2)');
is( join(' ', map { $_->safe_psql('postgres', q{SELECT sc_sum('views', 1)}) } $home ? ($b, $a) : ($a, $b)),
	'20 0', '... all on key 1\'s home node');
is( outcome('r1', 'mallory', q{SELECT sc_incr('bait', 1, 5), sc_sum('bait', 1)}),
	'5|5', 'mallory\'s own counter works under her search_path');

# 3. Routing loops.
my ($local_key) = grep { $a->safe_psql('postgres', "SELECT abs(hashint8($_) % 2)") eq '0' } 1 .. 10;
$a->safe_psql('postgres',
	'ALTER ROLE mallory SET search_path = evil, pg_catalog, public, router',
	extra_params => [ '-U', 'mallory' ]);
is( outcome('postgres', 'mallory',
		"SELECT router.sc_incr('loop', $local_key), router.sc_sum('loop', $local_key)"),
	'1|1', 'with the router on her search_path, mallory\'s sc_incr of a key of A is counted once');
is( outcome('postgres', 'mallory', q{SELECT key || ':' || value FROM router.sc_top('loop', 5)}),
	"$local_key:1", '... and sc_top (PL/Proxy, to A\'s own database) answers');
$a->safe_psql('postgres', 'ALTER DATABASE postgres SET search_path = "$user", public, router');
is(outcome('postgres', 'postgres', "SELECT router.sc_proxy_configure($nodes)"),
	'', 'a database default search_path through the router is accepted');
is( outcome('postgres', 'postgres',
		"SELECT router.sc_incr_once('loop', $local_key, 2, 'once'), router.sc_sum('loop', $local_key)"),
	'3|3', '... and loops no call');
$a->safe_psql('postgres', 'ALTER DATABASE postgres RESET search_path');
my $from_router = '-c slotted_counter_proxy.hop=on';
for my $call ("router.sc_incr('loop', $local_key)", "router.sc_sum('loop', 0)",
	"router.sc_top('loop', 1)", "router.sc_incr_once('loop', 1, 1, 'x')")
{
	like( outcome('postgres', 'postgres', "SELECT $call", $from_router),
		qr/^55000: a routed call cannot come from a router's connection/,
		"a session a router opened: $call is refused at once (55000)");
}

# 4. Read-only transactions.
my $sums = q{SELECT sc_sum('views', 1), sc_sum('views', 2), sc_sum('sold', 1)};
my $before = outcome('r1', 'alice', $sums);
my $read_only = '-c default_transaction_read_only=on';
my %writes = (
	'sc_incr()' => q{sc_incr('sold', 1)},
	'sc_incr() of a buffered counter' => q{sc_incr('views', 1)},
	'sc_incr_once()' => q{sc_incr_once('views', 1, 1, 'ro')},
	'sc_incr_batch()' => q{sc_incr_batch('views', '{1,2}', '{1,1}')},
	'sc_set()' => q{sc_set('views', 2, 7)});
for my $write (sort keys %writes)
{
	my ($function) = $write =~ /^(\S+)/;
	like( outcome('r1', 'alice', "SELECT $writes{$write}", $read_only),
		qr/^25006: cannot execute \Q$function\E in a read-only transaction/,
		"$write in a read-only transaction: 25006");
}
is(outcome('r1', 'alice', $sums), $before, '... and nothing was counted');
is( outcome('postgres', 'mallory', "SELECT router.sc_incr('loop', $local_key)", $read_only),
	'25006: cannot execute sc_incr() in a read-only transaction',
	'in-process, a buffered write in a read-only transaction: 25006 too');
is(outcome('r1', 'alice', q{SELECT sc_sum('views', 1)}, $read_only),
	'20', 'a read in a read-only transaction is answered');

# 5. A clone of A whose backends seem to be the router's own.
is( outcome('postgres', 'postgres', q{SELECT router.sc_create('ident', 'buffered')}),
	'ident', 'a counter of the router in A\'s database');
$a->backup('clone');
my $c = PostgreSQL::Test::Cluster->new('c');
$c->init_from_backup($a, 'clone');
$c->start;
my $session = $a->background_psql('postgres', on_error_stop => 0);
my $router_pid = $session->query_safe('SELECT pg_backend_pid()');
my $proxy_dir = PostgreSQL::Test::Utils::tempdir_short();
my $proxy = start_pid_proxy("$proxy_dir/.s.PGSQL.5432",
	$c->host . '/.s.PGSQL.' . $c->port, $router_pid);
END { kill 'KILL', $proxy if $proxy; }
$a->safe_psql('postgres',
	"SELECT router.sc_proxy_configure(ARRAY['" . node_string($a) . "', 'host=$proxy_dir port=5432 dbname=postgres'])");
my ($clone_key) = grep { $a->safe_psql('postgres', "SELECT abs(hashint8($_) % 2)") eq '1' } 1 .. 10;
is($session->query_safe("SELECT router.sc_incr('ident', $clone_key, 3)"),
	'3', 'through a proxy that gives the clone\'s backends the router\'s PID, a key of the clone');
is( $c->safe_psql('postgres', "SELECT sc_sum('ident', $clone_key)") . ' '
	  . $a->safe_psql('postgres', "SELECT public.sc_sum('ident', $clone_key)"),
	'3 0', '... is counted on the clone, not in A');
$session->quit;

done_testing();

# A proxy on the Unix socket `listen` to the server socket `target`, which passes everything
# through but gives the server's BackendKeyData the process id `pid`: what a clone in another PID
# namespace, or a pooler, may send.
sub start_pid_proxy
{
	my ($listen, $target, $pid) = @_;
	my $listener = IO::Socket::UNIX->new(Type => SOCK_STREAM, Local => $listen, Listen => 8)
	  or die "cannot listen on $listen: $!";
	my $proxy_pid = fork() // die "fork: $!";
	if ($proxy_pid)
	{
		close $listener;
		return $proxy_pid;
	}
	$SIG{CHLD} = 'IGNORE';
	while (1)
	{
		my $client = $listener->accept or next;
		my $relay = fork();
		if (defined $relay && $relay == 0)
		{
			my $server = IO::Socket::UNIX->new(Type => SOCK_STREAM, Peer => $target)
			  or POSIX::_exit(1);
			my ($pending, $passed) = ('', 0);
			my $select = IO::Select->new($client, $server);
			while (my @ready = $select->can_read)
			{
				for my $from (@ready)
				{
					my $bytes;
					POSIX::_exit(0) unless sysread($from, $bytes, 65536);
					if ($from == $client || $passed)
					{
						syswrite($from == $client ? $server : $client, $bytes);
						next;
					}
					# The server's messages up to BackendKeyData: a type byte, then a length that
					# counts itself.
					$pending .= $bytes;
					while (!$passed && length($pending) >= 5)
					{
						my $length = unpack('N', substr($pending, 1, 4));
						last if length($pending) < 1 + $length;
						my $message = substr($pending, 0, 1 + $length, '');
						if (substr($message, 0, 1) eq 'K')
						{
							substr($message, 5, 4) = pack('N', $pid);
							$passed = 1;
						}
						syswrite($client, $message);
					}
					syswrite($client, $pending) if $passed && $pending ne '';
				}
			}
			POSIX::_exit(0);
		}
		close $client;
	}
}
