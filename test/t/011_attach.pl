# sc_attach under concurrent load, across a clean restart: once the load has stopped and a rollup
# has run, every row of the user's table holds exactly the real-time value of its key, for a
# buffered and a transactional counter; keys with no row are skipped and counted; the attachments
# survive the restart.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $node = preloaded_node('attach', qq{
slotted_counter.flush_interval = 100
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION slotted_counter;
CREATE TABLE posts (id integer PRIMARY KEY, views bigint NOT NULL DEFAULT 0,
                    likes bigint NOT NULL DEFAULT 0);
INSERT INTO posts (id) SELECT generate_series(1, 100);
SELECT sc_create('views', 'buffered');
SELECT sc_create('likes');
SELECT sc_attach('views', 'posts', 'id', 'views', '0');
SELECT sc_attach('likes', 'posts', 'id', 'likes', '0');
});

# Keys 1..110: 101..110 have no row in posts.
my $script = $node->basedir . '/attach.sql';
append_to_file($script, q{
\set k random(1, 110)
SELECT sc_incr('views', :k);
BEGIN;
SELECT sc_incr('likes', :k, 2);
COMMIT;
});

# A load that the restart cuts off (it is sized far beyond what it makes before).
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[
		'pgbench', '--no-vacuum', '--client=4', '--jobs=2', '--transactions=5000',
		"--file=$script", '-h', $node->host, '-p', $node->port, 'postgres'
	],
	'>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok($node->poll_query_until('postgres', q{SELECT sum(views) > 200 FROM posts}),
	'the attached column follows the load');
$node->restart;
$load->finish;

# More load after the restart, to completion.
$node->pgbench('--no-vacuum --client=4 --jobs=2 --transactions=300',
	0, [qr{actually processed: 1200/1200}], [qr{^$}], 'load after the restart',
	{ 'attach_after_restart.sql' => slurp_file($script) });

ok(wait_attached($node, 'postgres'), 'the attachments ran after the last flush');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM posts
WHERE views IS DISTINCT FROM sc_sum('views', id) OR likes IS DISTINCT FROM sc_sum('likes', id)}),
	'0',
	'after the load and a rollup, every row holds its key\'s exact value');
is( $node->safe_psql(
		'postgres', q{SELECT sum(views) > 1200 AND sum(likes) > 2400 FROM posts}),
	't', 'the rows did receive the load');
is( $node->safe_psql(
		'postgres', q{
SELECT attach_skipped > 0 AND attach_errors = 0 FROM slotted_counter.stats
WHERE datname = current_database()}),
	't', 'keys without a row were skipped and counted, and no run failed');
is( $node->safe_psql(
		'postgres', q{SELECT count(*) FROM slotted_counter.attachments WHERE last_run IS NOT NULL}),
	'2',
	'both attachments survived the restart and ran after it');

$node->stop;
done_testing();
