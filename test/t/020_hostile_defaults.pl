# The background workers set what they need, whatever the database's and the roles' defaults say.
# The flusher and the attacher connect as the bootstrap superuser, and PostgreSQL applies those
# defaults before their code runs; a database owner may set `role` and `session_authorization` on
# the database, which made the flusher act as the owner: every flush failed with "permission
# denied for table counters", sc_rollup() failed even for a superuser, and the attacher exited at
# every try. Each setting a default can turn against a worker (the session's role and
# authorization, a read-only default and a read-only transaction, serializable transactions, a
# search_path that finds nothing, 1 ms statement, lock and idle timeouts, replica
# session_replication_role, a synchronous_commit that waits for a synchronous standby that never
# connects, and from PostgreSQL 17 a 1 ms transaction timeout) is set on the database, then on
# the role the workers connect as, and the flusher is started anew under them: increments are
# flushed to the values table, sc_rollup() succeeds for the owner and for a superuser, the
# attacher writes the attached table, and a clean restart by a flusher started under them loses
# no acknowledged increment.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('hostile_defaults', "slotted_counter.flush_interval = 100\n");
my $super = $node->safe_psql('postgres', q{CREATE ROLE owner LOGIN; CREATE DATABASE app OWNER owner;
SELECT rolname FROM pg_roles WHERE oid = 10});
$node->safe_psql('app', q{CREATE EXTENSION slotted_counter});

# The test's own sessions choose their own settings (a client's options outrank every default);
# a superuser's also its authorization and role, which the defaults would make the owner.
my $own = '-c search_path=public -c default_transaction_read_only=off -c lock_timeout=0 '
  . '-c idle_in_transaction_session_timeout=0 -c default_transaction_isolation=read\ committed '
  . '-c synchronous_commit=local'
  . ($node->pg_version >= 17 ? ' -c transaction_timeout=0' : '');
$ENV{PGOPTIONS} .= " $own -c session_authorization=$super -c role=none";

sub as_owner
{
	my ($sql) = @_;
	local $ENV{PGOPTIONS} = "-c statement_timeout=$statement_timeout $own";
	return $node->safe_psql('app', $sql, extra_params => [ '-U', 'owner' ]);
}

as_owner(q{
SELECT sc_create('b', 'buffered'), sc_create('t');
CREATE TABLE posts (id bigint PRIMARY KEY, views bigint NOT NULL DEFAULT 0);
INSERT INTO posts (id) SELECT generate_series(1, 10);
SELECT sc_attach('b', 'posts', 'id', 'views', '0');
});

my %hostile = (
	role => q{'owner'},
	session_authorization => q{'owner'},
	default_transaction_read_only => 'on',
	transaction_read_only => 'on',
	default_transaction_isolation => q{'serializable'},
	search_path => 'nowhere',
	statement_timeout => q{'1ms'},
	lock_timeout => q{'1ms'},
	idle_in_transaction_session_timeout => q{'1ms'},
	session_replication_role => q{'replica'},
	synchronous_commit => q{'remote_apply'});
# PostgreSQL 17 arms a transaction timeout in every transaction, a worker's too.
$hostile{transaction_timeout} = q{'1ms'} if $node->pg_version >= 17;

# Sets every hostile default with `alter` (ALTER DATABASE app / ALTER ROLE ...): as the owner
# what an owner may set, as a superuser the rest. A setting the server refuses is reported.
sub set_hostile
{
	my ($alter) = @_;
	my ($by_owner, $by_super) = ('', '');
	for my $name (sort keys %hostile)
	{
		my $sql = "$alter SET $name = $hostile{$name};\n";
		if ($alter =~ /DATABASE/ && $name ne 'session_replication_role')
		{
			$by_owner .= $sql;
		}
		else
		{
			$by_super .= $sql;
		}
	}
	my $err;
	{
		local $ENV{PGOPTIONS} = "-c statement_timeout=$statement_timeout $own";
		$node->psql('app', $by_owner, stderr => \$err, on_error_stop => 0,
			extra_params => [ '-U', 'owner' ]) if $by_owner;
	}
	note("refused by the server: $err") if $err;
	$node->psql('app', $by_super, stderr => \$err, on_error_stop => 0);
	note("refused by the server: $err") if $err;
}

my $total = 0;

# Counts, as the owner, n over the attached keys 1..10 of the buffered counter and n into the
# transactional one.
sub count_some
{
	my ($n) = @_;
	as_owner(qq{SELECT count(sc_incr('b', g % 10 + 1, 1)) FROM generate_series(1, $n) g;
BEGIN; SELECT sc_incr('t', 1, $n); COMMIT;});
	$total += $n;
}

# sc_rollup() as the owner or as a superuser: 't', or the error.
sub rollup_as
{
	my ($who) = @_;
	my ($out, $err);
	local $ENV{PGOPTIONS} = "-c statement_timeout=$statement_timeout $own" if $who eq 'owner';
	$node->psql('app', 'SELECT sc_rollup() >= 0', stdout => \$out, stderr => \$err,
		extra_params => $who eq 'owner' ? [ '-U', 'owner' ] : []);
	return $out || $err;
}

# A flusher and an attacher started under the defaults: flushes, rollups and attachments work.
sub check_workers
{
	my ($under) = @_;
	count_some(100);
	is(rollup_as('owner'), 't', "$under: sc_rollup() succeeds for the owner");
	is(rollup_as('superuser'), 't', "$under: sc_rollup() succeeds for a superuser");
	is( $node->safe_psql(
			'app', q{SELECT sum(value) FROM slotted_counter.key_values
			         WHERE counter = 'b'::slotted_counter::integer}),
		$total, "$under: the flusher wrote every value to the table");
	ok( $node->poll_query_until(
			'app', "SELECT sc_rollup() >= 0 AND sum(views) = $total FROM posts"),
		"$under: the attacher wrote the attached table");
}

# Stops the flusher of app; the next write starts a new one.
sub restart_flusher
{
	$node->safe_psql('app', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	  WHERE backend_type = 'slotted_counter flusher' AND datname = 'app'});
	$node->poll_query_until('app', q{SELECT count(*) = 0 FROM pg_stat_activity
	  WHERE backend_type = 'slotted_counter flusher' AND datname = 'app'});
}

# A synchronous standby that never connects: a commit that waits for it waits forever.
$node->append_conf('postgresql.conf', "synchronous_standby_names = 'nobody'\n");
$node->reload;
set_hostile('ALTER DATABASE app');
restart_flusher();
check_workers('database defaults');

# The flusher started under the defaults stops cleanly, and the next start has everything.
count_some(100);
$node->restart;
is( as_owner(q{SELECT sc_sum_keys('b', ARRAY(SELECT generate_series(1, 10))::bigint[]),
                      sc_sum('t', 1)}),
	"$total|$total",
	'a clean restart by a flusher started under the defaults kept every acknowledged increment');

$node->safe_psql('app', 'ALTER DATABASE app RESET ALL');
set_hostile("ALTER ROLE $super");
restart_flusher();
check_workers('role defaults');

$node->stop;
done_testing();
