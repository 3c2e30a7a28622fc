# SlottedCounterTest: what every TAP test of slotted_counter starts with.
package SlottedCounterTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(preloaded_node router_server wait_attached $statement_timeout);

# A statement that hangs fails the test instead of hanging it, after as long as the framework
# waits for anything (PG_TEST_TIMEOUT_DEFAULT, 180 s unless set): a statement that is only slow,
# on a busy machine or under Valgrind, does not fail it.
our $statement_timeout = "${PostgreSQL::Test::Utils::timeout_default}s";
$ENV{PGOPTIONS} = "-c statement_timeout=$statement_timeout";

# preloaded_node(NAME, EXTRA_CONF): a new, started node with slotted_counter preloaded, plus
# the given postgresql.conf lines.
sub preloaded_node
{
	my ($name, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'slotted_counter'\nlog_statement = none\n"
		  . ($extra_conf // ''));
	$node->start;
	return $node;
}

# router_server(NAME): one started server whose databases node0 to node2 are data nodes
# (slotted_counter) and "router" their router (slotted_counter_proxy, configured), with a login
# role app; a flusher per database besides postgres. Returns the server and the nodes' names.
sub router_server
{
	my ($name) = @_;
	my $server = preloaded_node($name, "max_worker_processes = 16\n");
	my @nodes = map { "node$_" } 0 .. 2;
	$server->safe_psql('postgres', join('', map { "CREATE DATABASE $_;\n" } @nodes, 'router')
		  . "CREATE ROLE app LOGIN;\n");
	$server->safe_psql($_, 'CREATE EXTENSION slotted_counter') for @nodes;
	my $strings = join(', ',
		map { sprintf("'host=%s port=%d dbname=%s'", $server->host, $server->port, $_) } @nodes);
	$server->safe_psql('router', qq{
CREATE EXTENSION slotted_counter_proxy CASCADE;
SELECT sc_proxy_configure(ARRAY[$strings]);});
	return ($server, @nodes);
}

# wait_attached(NODE, DB): flushes, and waits until every attachment that was due has had a run
# since (attachments run in a worker of their own, after a flush), which saw everything counted
# before the call. True if they did in time.
sub wait_attached
{
	my ($node, $db) = @_;
	my $since = $node->safe_psql($db, 'SELECT sc_rollup() >= 0; SELECT clock_timestamp()');
	$since = (split /\n/, $since)[-1];
	return $node->poll_query_until($db, qq{
SELECT sc_rollup() >= 0 AND NOT EXISTS (SELECT FROM slotted_counter.attachments
  WHERE coalesce(last_attempt, '-infinity') + every <= '$since'::timestamptz)});
}

1;
