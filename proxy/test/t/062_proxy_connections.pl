# The router's own connections to its data nodes, bounded (src/connect.cpp):
#   1. slotted_counter_proxy.connect_timeout: a node that accepts the TCP connection and never
#      answers (a listening socket nobody serves) fails sc_sum and sc_incr with 08001 once the
#      setting expires, instead of holding the call; the session goes on with the other node.
#   2. slotted_counter_proxy.max_connections_per_node: with a cap of 1, a second role's call in the
#      same session is refused with 53300 before anything is sent; with a cap of 2 it reaches its
#      node; idle connections of roles acted as before a catalog change make room.
# The test waits for the errors, never for a time: the silent node never answers.

use strict;
use warnings;

use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my $data = preloaded_node('data0', '');
$data->safe_psql('postgres', 'CREATE EXTENSION slotted_counter; CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN');

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->start;
$router->safe_psql('postgres', 'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN');
$router->safe_psql('postgres', 'CREATE EXTENSION slotted_counter_proxy CASCADE');
my $string = sprintf('host=%s port=%d dbname=postgres', $data->host, $data->port);
$router->safe_psql('postgres', qq{SELECT sc_proxy_configure(ARRAY['$string', '$string'])});
$router->safe_psql('postgres', q{
SELECT sc_create('views', 'buffered');
SELECT sc_grant('views', 'ALL', r) FROM unnest(ARRAY['alice', 'bob']) AS r;});

# The outcome of sql on the router, in one session that stops at the first error: its output,
# then "ERROR <SQLSTATE>: <message>" for that error.
sub routed
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $router->psql('postgres', $sql, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $out if $ret == 0;
	return "failed: $err" unless $err =~ /ERROR:  ([0-9A-Z]{5}): ([^\n]*)/;
	return join("\n", grep { $_ ne '' } $out, "ERROR $1: $2");
}

# Two keys, one on each node (both nodes are the same database: node 1 is moved below).
my ($k0, $k1) = split /\|/, $router->safe_psql('postgres', q{
SELECT (SELECT k FROM generate_series(1, 100) k WHERE (sc_proxy_node_of('views', k)).node = 0 LIMIT 1),
       (SELECT k FROM generate_series(1, 100) k WHERE (sc_proxy_node_of('views', k)).node = 1 LIMIT 1)});

# 1. Node 1 becomes a socket that listens and never speaks (the kernel completes the handshake;
# nobody accepts, nobody answers the startup packet).
my $silent = IO::Socket::INET->new(Listen => 5, LocalAddr => '127.0.0.1', LocalPort => 0, Proto => 'tcp')
  or die "no listening socket: $!";
my $silent_port = $silent->sockport;
$router->safe_psql('postgres', qq{
DO \$\$ BEGIN
  EXECUTE format('ALTER SERVER slotted_counter_proxy OPTIONS (SET p1 %L)',
                 slotted_counter_proxy.node_string(1, 'host=127.0.0.1 port=$silent_port dbname=postgres', 'public'));
END \$\$;});

like(routed("SET slotted_counter_proxy.connect_timeout = '300ms'; SELECT sc_sum('views', $k1)"),
	qr/^ERROR 08001: could not connect to data node 1: no answer within 300 ms$/,
	'a node that never answers fails sc_sum with 08001 once connect_timeout expires');
like(routed("SET slotted_counter_proxy.connect_timeout = '300ms'; SELECT sc_incr('views', $k1)"),
	qr/^ERROR 08001: could not connect to data node 1/, '... and sc_incr');
is(routed("SET slotted_counter_proxy.connect_timeout = '300ms'; SELECT sc_incr('views', $k0)"),
	'1', 'the other node\'s keys go on');
$router->safe_psql('postgres', qq{
DO \$\$ BEGIN
  EXECUTE format('ALTER SERVER slotted_counter_proxy OPTIONS (SET p1 %L)',
                 slotted_counter_proxy.node_string(1, '$string', 'public'));
END \$\$;});
close $silent;

# 2. The cap, per node, per session.
is( routed(qq{SET slotted_counter_proxy.max_connections_per_node = 1;
SELECT sc_incr('views', $k0);
SET ROLE alice;
SELECT sc_incr('views', $k0);}),
	"2\nERROR 53300: this session already has 1 connection to data node 0",
	'with a cap of 1, a second role\'s connection to the same node is refused: 53300');
is( routed(qq{SET slotted_counter_proxy.max_connections_per_node = 2;
SELECT sc_incr('views', $k0);
SET ROLE alice;
SELECT sc_incr('views', $k0);
RESET ROLE;
SET ROLE bob;
SELECT sc_incr('views', $k0);}),
	"3\n4\nERROR 53300: this session already has 2 connections to data node 0",
	'with a cap of 2, the second role reaches its node and the third is refused');
is( routed(qq{SET slotted_counter_proxy.max_connections_per_node = 1;
SELECT sc_incr('views', $k1);
SET ROLE alice;
SELECT sc_incr('views', $k0);}),
	"1\n5",
	'the cap counts each node\'s connections apart');
is( routed(qq{SET slotted_counter_proxy.max_connections_per_node = 1;
SELECT sc_incr('views', $k0);
ALTER ROLE alice CONNECTION LIMIT 10;
SET ROLE alice;
SELECT sc_incr('views', $k0);}),
	"6\n7",
	'a connection opened before a change to the roles makes room for the next');
is($router->safe_psql('postgres', "SELECT sc_sum('views', $k0)"), '7',
	'a refused call counted nothing');

done_testing();
