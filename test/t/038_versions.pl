# What differs between the PostgreSQL versions (src/compat.hpp), as a user sees it, on the version
# this runs on: the rule for giving a counter to a role (core's SET ROLE rule: the SET option of
# a membership since 16), the search_path of an attachment's run (PostgreSQL 17's for
# maintenance commands, on every version), the module's name and version (PostgreSQL 18), and
# write-through requests of many sessions at once (each process's slot in shared memory, indexed
# by MyProcNumber since 17, by MyBackendId before).
use strict;
use warnings;
use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Utils;
use Test::More;
use SlottedCounterTest;

# A buffer of 128 entries: part 4's batches find no room and are written through.
my $node = preloaded_node('versions',
	"slotted_counter.flush_interval = 0\nslotted_counter.max_entries = 128\n");
my $version = $node->safe_psql('postgres', 'SHOW server_version_num');
note "PostgreSQL $version";
$node->safe_psql('postgres', q{
CREATE EXTENSION slotted_counter;
CREATE ROLE giver LOGIN;
CREATE ROLE heir LOGIN;
CREATE ROLE stranger LOGIN;
GRANT CREATE ON DATABASE postgres TO giver, heir, stranger;
SET ROLE giver;
SELECT sc_create('given', 'buffered');
});

# 1. Giving a counter away: only to a role the giver may SET ROLE to.
my ($rc, $out, $err) = $node->psql('postgres', q{SELECT sc_alter_owner('given', 'stranger')},
	extra_params => [ '-U', 'giver' ]);
like($err, qr/must be able to SET ROLE "stranger"/, 'not a member: refused');
if ($version >= 160000)
{
	# A membership without the SET option gives the privileges (INHERIT) but not the right to
	# make the role an owner, as for ALTER TABLE ... OWNER TO.
	$node->safe_psql('postgres', 'GRANT heir TO giver WITH INHERIT TRUE, SET FALSE');
	($rc, $out, $err) = $node->psql('postgres', q{SELECT sc_alter_owner('given', 'heir')},
		extra_params => [ '-U', 'giver' ]);
	like($err, qr/must be able to SET ROLE "heir"/, 'a member WITH SET FALSE: refused');
	$node->safe_psql('postgres', 'REVOKE heir FROM giver');
	$node->safe_psql('postgres', 'GRANT heir TO giver WITH INHERIT FALSE, SET TRUE');
}
else
{
	$node->safe_psql('postgres', 'GRANT heir TO giver');
}
is( $node->safe_psql('postgres', q{SELECT sc_alter_owner('given', 'heir')},
		extra_params => [ '-U', 'giver' ]),
	'', 'a member who may SET ROLE: the counter is given');
is( $node->safe_psql('postgres',
		q{SELECT relowner::regrole FROM pg_class WHERE oid = 'slotted_counters.given'::regclass}),
	'heir', 'the counter has its new owner');

# 2. An attachment's code runs with search_path pg_catalog, pg_temp, whatever the database's.
$node->safe_psql('postgres', q{
ALTER DATABASE postgres SET search_path = public, pg_catalog;
CREATE TABLE public.seen (search_path text);
CREATE TABLE public.target (id bigint PRIMARY KEY, v bigint);
INSERT INTO public.target VALUES (1, 0);
CREATE FUNCTION public.record_path() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.seen VALUES (pg_catalog.current_setting('search_path'));
  RETURN NEW;
END $$;
CREATE TRIGGER record_path BEFORE UPDATE ON public.target FOR EACH ROW
  EXECUTE FUNCTION public.record_path();
SELECT sc_create('attached', 'buffered');
SELECT sc_attach('attached', 'public.target', 'id', 'v', '0');
SELECT sc_incr('attached', 1, 3);
});
is(wait_attached($node, 'postgres'), 1, 'the attachment ran');
is($node->safe_psql('postgres', 'SELECT v FROM public.target'), '3', 'it wrote the value');
is($node->safe_psql('postgres', 'SELECT search_path FROM public.seen'),
	'pg_catalog, pg_temp', 'its trigger ran with search_path pg_catalog, pg_temp');

# 3. PostgreSQL 18 lists loaded modules with the name and version their magic block gives.
SKIP:
{
	skip 'pg_get_loaded_modules() is new in PostgreSQL 18', 1 if $version < 180000;
	is( $node->safe_psql('postgres',
			q{SELECT module_name || ' ' || version FROM pg_get_loaded_modules()
			  WHERE file_name = 'slotted_counter.so'}),
		'slotted_counter 1.0', 'the library names itself and its version');
}

# 4. Write-through batches of many sessions at once, each with its own request in shared memory:
# six clients, 30 batches of 200 keys each, into a buffer of 128 entries.
$node->safe_psql('postgres', q{SELECT sc_create('through', 'buffered')});
$node->pgbench(
	'--no-vacuum --client=6 --jobs=6 --transactions=30',
	0,
	[qr{processed: 180/180}],
	[qr{^$}],
	'pgbench: concurrent batches written through',
	{
		'038_batches' => q{
\set k random(1, 5000)
SELECT cardinality(sc_incr_batch('through', ARRAY(SELECT generate_series(:k, :k + 199))::bigint[], array_fill(1::bigint, ARRAY[200])));
}
	});
is( $node->safe_psql('postgres', q{SELECT sc_rollup() >= 0;
SELECT sum(value) FROM slotted_counter.key_values WHERE counter = 'through'::slotted_counter::integer}),
	"t\n36000", 'every increment of every batch counted once');
is( $node->safe_psql('postgres',
		q{SELECT write_throughs > 0 FROM slotted_counter.stats WHERE datname = 'postgres'}),
	't', 'the batches were written through');

$node->stop;
done_testing();
