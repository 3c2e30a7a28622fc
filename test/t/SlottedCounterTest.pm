# SlottedCounterTest: what every TAP test of slotted_counter starts with.
package SlottedCounterTest;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Cluster;

our @EXPORT = qw(preloaded_node);

# A statement that hangs fails the test instead of hanging it.
$ENV{PGOPTIONS} = '-c statement_timeout=30s';

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

1;
