# A command on a whole database (DROP, ALTER ... RENAME, CREATE DATABASE ... TEMPLATE) issued while
# the database's last client is still leaving: it waits for that client as core does, then has
# the flusher flush and leave, and succeeds. The flusher never leaves on its own here
# (idle_timeout = 0): the command cannot have succeeded by waiting it out.
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use SlottedCounterTest;

my $node = preloaded_node('database_commands', "slotted_counter.idle_timeout = 0\n");

# A database that counts, with its flusher running and a client connected to it.
sub counting_database
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
CREATE EXTENSION slotted_counter;
SELECT sc_create('views', 'buffered');
SELECT count(sc_incr('views', k % 10)) FROM generate_series(1, 1000) k;});
	$node->poll_query_until('postgres', qq{SELECT EXISTS (SELECT FROM pg_stat_activity
  WHERE backend_type = 'slotted_counter flusher' AND datname = '$db')})
	  or die "no flusher for $db";
	my $client = $node->background_psql($db);
	$client->query_safe('SELECT 1');
	return $client;
}

# Runs `command` (on postgres) while `client` is still connected, then lets the client go once
# the command waits; returns the command's psql exit status and standard error.
sub while_client_leaves
{
	my ($client, $command) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[
			$node->installed_command('psql'), '-X', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'), '-c', $command
		],
		'>', \$out, '2>', \$err);
	(my $pattern = $command) =~ s/'/''/g;
	$node->poll_query_until('postgres', qq{SELECT EXISTS (SELECT FROM pg_stat_activity
  WHERE query = '$pattern' AND state = 'active')})
	  or die "the command did not start";
	$client->quit;
	$h->finish;
	return ($h->result(0), $err);
}

my ($status, $err) = while_client_leaves(counting_database('app_drop'), 'DROP DATABASE app_drop');
is($status, 0, 'DROP DATABASE as the last client leaves: succeeds') or diag $err;
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'app_drop'}),
	'0', 'the database is gone');

($status, $err) =
  while_client_leaves(counting_database('app_old'), 'ALTER DATABASE app_old RENAME TO app_new');
is($status, 0, 'ALTER DATABASE ... RENAME as the last client leaves: succeeds') or diag $err;
is($node->safe_psql('app_new', q{SELECT sc_sum('views', 3)}), '100',
	'the renamed database counts on, every value kept');

($status, $err) = while_client_leaves(counting_database('app_source'),
	'CREATE DATABASE app_copy TEMPLATE app_source');
is($status, 0, 'CREATE DATABASE ... TEMPLATE as the last client leaves: succeeds') or diag $err;
is($node->safe_psql('app_copy', q{SELECT sum(value) FROM slotted_counter.key_values}), '1000',
	'the copy holds every value counted in the template (the flusher flushed before leaving)');

$node->stop;
done_testing();
