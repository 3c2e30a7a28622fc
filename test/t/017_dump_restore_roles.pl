# Owners, grants and attachments through pg_dump -Fc and pg_restore into another cluster, whose
# roles of the same names have other OIDs: they map by name, and the restored attachment runs as
# the table's owner there.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $old = preloaded_node('dump_old', "slotted_counter.flush_interval = 100\n");
my $new = preloaded_node('dump_new', "slotted_counter.flush_interval = 100\n");

$old->safe_psql('postgres', q{
CREATE DATABASE app;
CREATE ROLE app_owner LOGIN;
CREATE ROLE webapp LOGIN;
});
# Other roles first in the new cluster, so that the same names get other OIDs.
$new->safe_psql('postgres', q{
CREATE ROLE filler_1;
CREATE ROLE filler_2;
CREATE ROLE webapp LOGIN;
CREATE ROLE app_owner LOGIN;
CREATE DATABASE app;
});
$old->safe_psql('app', q{
CREATE EXTENSION slotted_counter;
GRANT CREATE ON DATABASE app TO app_owner;
CREATE TABLE posts (id bigint PRIMARY KEY, views bigint NOT NULL DEFAULT 0);
INSERT INTO posts (id) SELECT generate_series(1, 3);
ALTER TABLE posts OWNER TO app_owner;
});
$old->safe_psql('app', q{
SELECT sc_create('views', 'buffered');
SELECT sc_grant('views', 'SELECT, UPDATE', 'webapp');
SELECT sc_attach('views', 'posts', 'id', 'views', '0');
}, extra_params => [ '-U', 'app_owner' ]);
$old->safe_psql('app', q{SELECT sc_incr('views', 1, 5), sc_incr('views', 2, 7)},
	extra_params => [ '-U', 'webapp' ]);
ok(wait_attached($old, 'app'), 'the attachment ran before the dump');

my $oids = q{SELECT 'app_owner'::regrole::oid || ',' || 'webapp'::regrole::oid};
isnt($old->safe_psql('postgres', $oids), $new->safe_psql('postgres', $oids),
	'the roles have other OIDs in the new cluster');

my $dump = $old->basedir . '/app.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('app') ], 'pg_dump');
$new->command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('app'), $dump ],
	'pg_restore');

is( $new->safe_psql('app',
		q{SELECT c.name, s.relowner::regrole, s.relacl FROM slotted_counter.counters c
		  JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass}),
	'views|app_owner|{app_owner=rwU/app_owner,webapp=rw/app_owner}',
	'the owner and the grants (its sequence\'s) are restored by name');
is( $new->safe_psql('app',
		q{SELECT counter::slotted_counter, target, failures FROM slotted_counter.attachments}),
	'views|posts|0', 'the attachment is restored, naming its table');
is($new->safe_psql('app', q{SELECT sc_sum('views', 1)}, extra_params => [ '-U', 'webapp' ]),
	'5', 'the grantee reads the restored value');
$new->safe_psql('app', q{SELECT sc_incr('views', 1, 100)}, extra_params => [ '-U', 'webapp' ]);
ok(wait_attached($new, 'app'), 'the restored attachment runs');
is($new->safe_psql('app', q{SELECT views FROM posts WHERE id = 1}), '105',
	'and writes the table as its owner');
my ($rc, $out, $err) = $new->psql('app', q{SELECT sc_sum('views', 1)},
	extra_params => [ '-U', 'app_owner' ]);
is($out, '105', 'the owner reads it too');

$old->stop;
$new->stop;
done_testing();
