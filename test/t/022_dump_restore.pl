# A database that uses counters in every way a user would, through pg_dump -Fc and
# pg_restore --exit-on-error into another cluster: every counter of every kind (buffered,
# transactional, bucketed, attached), and every object of the user's that names one (views, a
# materialized view, a BEGIN ATOMIC function, a PL/pgSQL function, a column of the type) comes
# back with the same values, the grants still let the application role in, counting goes on where
# it stopped, and a counter dropped and created again under a restored view is the one it reads.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $old = preloaded_node('dump_all_old', "slotted_counter.flush_interval = 100\n");
my $new = preloaded_node('dump_all_new', "slotted_counter.flush_interval = 100\n");

$old->safe_psql('postgres', q{
CREATE ROLE app_owner LOGIN;
CREATE ROLE webapp LOGIN;
CREATE DATABASE app;
});
# The roles exist in the new cluster before the restore (other roles first, so that they get
# other OIDs: counters name their roles), and the owner may create counters in the new database
# (a database's own privileges are not part of a pg_dump of it).
$new->safe_psql('postgres', q{
CREATE ROLE filler;
CREATE ROLE webapp LOGIN;
CREATE ROLE app_owner LOGIN;
CREATE DATABASE app;
GRANT CREATE ON DATABASE app TO app_owner;
});

# The application's schema: the owner role owns the tables and creates the counters.
$old->safe_psql('app', q{
CREATE EXTENSION slotted_counter;
GRANT CREATE ON DATABASE app TO app_owner;
GRANT CREATE ON SCHEMA public TO app_owner;
CREATE TABLE posts (id bigint PRIMARY KEY, title text NOT NULL,
                    likes bigint NOT NULL DEFAULT 0);
INSERT INTO posts VALUES (1, 'first', 0), (2, 'second', 0), (3, 'third', 0);
ALTER TABLE posts OWNER TO app_owner;
});

my @as_owner = (extra_params => [ '-U', 'app_owner' ]);
my @as_webapp = (extra_params => [ '-U', 'webapp' ]);

$old->safe_psql('app', q{
SELECT sc_create('views', 'buffered');
SELECT sc_create('sales');
SELECT sc_create('hits', 'buffered', '1 hour', retain => '100 years');
SELECT sc_create('likes');
SELECT sc_attach('likes', 'posts', 'id', 'likes', '0');
SELECT sc_grant('views', 'SELECT, UPDATE', 'webapp');
SELECT sc_grant('sales', 'SELECT', 'webapp');

-- a view over a user table, one over the lagged values, a materialized view
CREATE VIEW post_stats AS
  SELECT p.id, p.title, sc_sum('views', p.id) AS views, sc_sum('sales', p.id) AS sales
  FROM posts p;
GRANT SELECT ON post_stats TO webapp;
CREATE VIEW lagged_views AS
  SELECT key, value FROM slotted_counter.lagged WHERE counter = 'views';
-- functions that name a counter: SQL with BEGIN ATOMIC, PL/pgSQL with a counter parameter
CREATE FUNCTION sales_of(k bigint) RETURNS bigint LANGUAGE sql
  BEGIN ATOMIC SELECT sc_sum('sales', k); END;
CREATE FUNCTION value_of(c slotted_counter, k bigint) RETURNS bigint LANGUAGE plpgsql
  AS $$ BEGIN RETURN sc_sum(c, k); END $$;
-- a column of counters, with a default
CREATE TABLE tracked (id int PRIMARY KEY, c slotted_counter NOT NULL DEFAULT 'views',
                      k bigint NOT NULL);
INSERT INTO tracked VALUES (1, 'views', 1), (2, 'sales', 2), (4, 'likes', 3);
INSERT INTO tracked (id, k) VALUES (3, 2);
}, @as_owner);

# Counting: the buffered counter by the application role, the transactional one with a rolled
# back increment that must not count, the bucketed one into two fixed past hours, the attached one.
$old->safe_psql('app', q{
SELECT sc_incr('views', 1, 10), sc_incr('views', 2, 20), sc_incr('views', 3, 30);
SELECT sc_incr('views', 1, 5);
}, @as_webapp);
$old->safe_psql('app', q{
SELECT sc_incr('sales', 1, 3), sc_incr('sales', 2, 4);
BEGIN;
SELECT sc_incr('sales', 1, 1000);
ROLLBACK;
SELECT sc_incr('hits', 1, 5, '2026-01-01 10:15+00'), sc_incr('hits', 1, 7, '2026-01-01 11:45+00');
SELECT sc_incr('hits', 2, 3, '2026-01-01 10:20+00');
SELECT sc_incr('likes', 1, 4), sc_incr('likes', 3, 9);
-- request ids of sc_incr_once, one per durability (delta 0: the values above stay as they are)
SELECT sc_incr_once('likes', 3, 0, 'evt-t'), sc_incr_once('views', 1, 0, 'evt-b');
}, @as_owner);
# The materialized view, made once there are values (the restore refreshes it).
$old->safe_psql('app', q{
CREATE MATERIALIZED VIEW hits_by_hour AS
  SELECT bucket, value FROM sc_series('hits', 1, NULL, NULL);
}, @as_owner);
ok(wait_attached($old, 'app'), 'the attachment ran before the dump');
is($old->safe_psql('app', 'SELECT id, likes FROM posts ORDER BY id'),
	"1|4\n2|0\n3|9", 'the attached column holds the likes');

# Everything a user reads, as one result per object, compared between the two clusters.
my %reads = (
	'the counters, their kinds, owners, grants and retention' => q{
SELECT c.id, c.name, c.durability, c.bucket, s.relowner::regrole, s.relacl, c.retain
FROM slotted_counter.counters c
JOIN pg_class s ON s.oid = ('slotted_counters.' || quote_ident(c.name))::regclass
ORDER BY c.id},
	'every value of every counter, exact (sc_sum)' => q{
SELECT c.name, k, sc_sum(c.name, k) FROM slotted_counter.counters c, generate_series(0, 4) k
ORDER BY 1, 2},
	'every lagged value' => q{
SELECT counter, key, bucket, value FROM slotted_counter.lagged ORDER BY 1, 2, 3},
	'the bucketed counter by hour and over a range' => q{
SELECT bucket, value, sc_sum('hits', 1, '2026-01-01 11:00+00', NULL),
       sc_sum('hits', 1, '2026-01-01 10:00+00', '2026-01-01 11:00+00')
FROM sc_series('hits', 1, NULL, NULL) ORDER BY bucket},
	# (without the zeros: a transactional counter's sc_top also lists, with 0, the keys that
	# sc_sum only read in this server's life, which the reads above do)
	'the leaderboards' => q{
SELECT * FROM (SELECT 'views', * FROM sc_top('views', 10) UNION ALL
               SELECT 'sales', * FROM sc_top('sales', 10) UNION ALL
               SELECT 'likes', * FROM sc_top('likes', 10)) t(counter, key, value)
WHERE value <> 0 ORDER BY 1, 3 DESC, 2},
	'the attachment' => q{
SELECT counter::slotted_counter, target, key_column, value_column, every, failures
FROM slotted_counter.attachments},
	'the request ids of sc_incr_once' => q{
SELECT counter::slotted_counter, request_id, key, result FROM slotted_counter.requests ORDER BY 1, 2},
	'the attached table' => q{SELECT * FROM posts ORDER BY id},
	'the view over a user table' => q{SELECT * FROM post_stats ORDER BY id},
	'the view over the lagged values' => q{SELECT * FROM lagged_views ORDER BY key},
	'the materialized view' => q{SELECT * FROM hits_by_hour ORDER BY bucket},
	'the BEGIN ATOMIC function' => q{SELECT k, sales_of(k) FROM generate_series(0, 3) k},
	'the PL/pgSQL function' =>
	  q{SELECT value_of('views', 1), value_of('hits', 1), value_of('likes', 3)},
	'the column of counters, and the values it names' => q{
SELECT id, c, k, value_of(c, k), sc_sum(c, k) FROM tracked ORDER BY id},);

# What the reads say on the old cluster (so that equal does not mean equally wrong): the rolled
# back increment is not in 'sales', and the buckets hold what was written into each hour.
my %expected = (
	'the counters, their kinds, owners, grants and retention' =>
	  "1|views|buffered||app_owner|{app_owner=rwU/app_owner,webapp=rw/app_owner}|\n"
	  . "2|sales|transactional||app_owner|{app_owner=rwU/app_owner,webapp=r/app_owner}|\n"
	  . "3|hits|buffered|01:00:00|app_owner||100 years\n"
	  . "4|likes|transactional||app_owner||",
	'every value of every counter, exact (sc_sum)' =>
	  join("\n", map { my ($c, @v) = @$_; map { "$c|$_|$v[$_]" } 0 .. 4 }
		  [ 'hits', 0, 12, 3, 0, 0 ], [ 'likes', 0, 4, 0, 9, 0 ],
		  [ 'sales', 0, 3, 4, 0, 0 ], [ 'views', 0, 15, 20, 30, 0 ]),
	'every lagged value' => join("\n",
		'hits|1|2026-01-01 10:00:00+00|5', 'hits|1|2026-01-01 11:00:00+00|7',
		'hits|2|2026-01-01 10:00:00+00|3', 'likes|1||4', 'likes|3||9', 'sales|1||3',
		'sales|2||4', 'views|1||15', 'views|2||20', 'views|3||30'),
	'the bucketed counter by hour and over a range' =>
	  "2026-01-01 10:00:00+00|5|7|5\n2026-01-01 11:00:00+00|7|7|5",
	'the leaderboards' =>
	  "likes|3|9\nlikes|1|4\nsales|2|4\nsales|1|3\nviews|3|30\nviews|2|20\nviews|1|15",
	'the request ids of sc_incr_once' => "likes|evt-t|3|9\nviews|evt-b|1|15",
	'the attached table' => "1|first|4\n2|second|0\n3|third|9",
	'the view over a user table' => "1|first|15|3\n2|second|20|4\n3|third|30|0",
	'the view over the lagged values' => "1|15\n2|20\n3|30",
	'the materialized view' =>
	  "2026-01-01 10:00:00+00|5\n2026-01-01 11:00:00+00|7",
	'the BEGIN ATOMIC function' => "0|0\n1|3\n2|4\n3|0",
	'the PL/pgSQL function' => '15|12|9',
	'the column of counters, and the values it names' =>
	  "1|views|1|15|15\n2|sales|2|4|4\n3|views|2|20|20\n4|likes|3|9|9",
	'the attachment' => 'likes|posts|id|likes|00:00:00|0',);

# The dump holds buffered values as of the last flush: flush first.
$old->safe_psql('app', 'SELECT sc_rollup()');
my %before;
for my $what (sort keys %reads)
{
	$before{$what} = $old->safe_psql('app', "SET TimeZone = UTC;\n$reads{$what}");
}
for my $what (sort keys %expected)
{
	is($before{$what}, $expected{$what}, "before the dump: $what");
}

my $dump = $old->basedir . '/app.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('app') ], 'pg_dump');
$new->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $new->connstr('app'), $dump ],
	'pg_restore --exit-on-error restores it without an error');

is( $new->safe_psql('app', q{
SELECT to_regclass('posts') IS NOT NULL AND to_regclass('tracked') IS NOT NULL
   AND to_regclass('post_stats') IS NOT NULL AND to_regclass('lagged_views') IS NOT NULL
   AND to_regclass('hits_by_hour') IS NOT NULL
   AND to_regprocedure('sales_of(bigint)') IS NOT NULL
   AND to_regprocedure('value_of(slotted_counter, bigint)') IS NOT NULL}),
	't', 'every table, view and function is restored');
is( $new->safe_psql('app', q{
SELECT string_agg(c.relname || ':' || pg_get_userbyid(c.relowner), ',' ORDER BY c.relname)
FROM pg_class c WHERE c.relname IN ('posts', 'tracked', 'post_stats', 'lagged_views', 'hits_by_hour')}),
	'hits_by_hour:app_owner,lagged_views:app_owner,post_stats:app_owner,posts:app_owner,tracked:app_owner',
	'with their owner');
is($new->safe_psql('app', q{SELECT e.extversion = a.default_version FROM pg_extension e
JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'slotted_counter'}),
	't', 'the extension is restored at its latest version');

for my $what (sort keys %reads)
{
	is($new->safe_psql('app', "SET TimeZone = UTC;\n$reads{$what}"),
		$before{$what}, "after the restore, equal: $what");
}

# The application role, with the grants it had: it reads the view and counts.
is($new->safe_psql('app', 'SELECT * FROM post_stats ORDER BY id', @as_webapp),
	$before{'the view over a user table'},
	'the application role reads the restored view (its GRANT and the counters\' grants)');
is($new->safe_psql('app', q{SELECT sc_incr('views', 1), sc_sum('sales', 2)}, @as_webapp),
	'16|4', 'the application role counts into and reads the counters granted to it');
my ($rc, $out, $err) = $new->psql('app', q{SELECT sc_incr('sales', 1)}, @as_webapp);
like($err, qr/permission denied for counter "sales"/,
	'but may still not write the counter it may only read');
($rc, $out, $err) = $new->psql('app', q{SELECT sc_sum('hits', 1)}, @as_webapp);
like($err, qr/permission denied for counter "hits"/, 'nor read the one never granted to it');

# The request ids came along: a repeat counts nothing and answers the first value.
is($new->safe_psql('app', q{SELECT sc_incr_once('likes', 3, 5, 'evt-t'), sc_incr_once('views', 1, 5, 'evt-b')},
		@as_owner),
	'9|15', 'a repeat of a request id applied before the dump counts nothing after the restore');

# Counting goes on where it stopped, in every kind of counter.
is( $new->safe_psql('app', q{
SELECT sc_incr('views', 2, 1), sc_incr('sales', 1, 1), sc_incr('hits', 1, 1, '2026-01-01 11:30+00'),
       sc_incr('likes', 3, 1)}, @as_owner),
	'21|4|8|10', 'each counter goes on from its restored value');
is( $new->safe_psql('app', q{
SELECT sc_sum('views', 1), sc_sum('views', 2), sc_sum('sales', 1), sc_sum('hits', 1),
       sc_sum('hits', 1, '2026-01-01 11:00+00', NULL), sc_sum('likes', 3)}),
	'16|21|4|13|8|10', 'and sc_sum reads the new values');
is($new->safe_psql('app', 'SELECT * FROM post_stats ORDER BY id'),
	"1|first|16|4\n2|second|21|4\n3|third|30|0", 'as does the restored view');
ok(wait_attached($new, 'app'), 'the restored attachment runs');
is($new->safe_psql('app', 'SELECT id, likes FROM posts ORDER BY id'),
	"1|4\n2|0\n3|10", 'and writes the new value into the table');
is($new->safe_psql('app', q{INSERT INTO tracked (id, k) VALUES (5, 1) RETURNING c, value_of(c, k)},
		@as_owner),
	'views|16', 'the column default is restored');

# A new counter gets an id of its own after the restored ones.
is($new->safe_psql('app', q{SELECT sc_create('fresh', 'buffered')::integer >
                            (SELECT max(id) FROM slotted_counter.counters WHERE name <> 'fresh')}),
	't', 'a counter created after the restore gets a new id');

# Dropped and created again, a counter that restored views and functions name is the new one.
$new->safe_psql('app', q{
SELECT sc_drop('views');
SELECT sc_drop('sales');
SELECT sc_create('views', 'buffered');
SELECT sc_create('sales');
SELECT sc_rollup();
}, @as_owner);
is($new->safe_psql('app', 'SELECT * FROM post_stats ORDER BY id'),
	"1|first|0|0\n2|second|0|0\n3|third|0|0",
	'the restored view reads the re-created counters: 0');
is($new->safe_psql('app', 'SELECT count(*) FROM lagged_views'),
	'0', 'the view over the lagged values has no rows of the dropped counter');
is( $new->safe_psql('app', q{SELECT sales_of(1), value_of('views', 1),
                             string_agg(c || '=' || sc_sum(c, k), ',' ORDER BY id) FROM tracked}),
	'0|0|views=0,sales=0,views=0,likes=10,views=0',
	'the functions and the column read the re-created counters too');
$new->safe_psql('app', q{SELECT sc_incr('views', 1, 2), sc_incr('sales', 1, 3)}, @as_owner);
is($new->safe_psql('app', 'SELECT views, sales FROM post_stats WHERE id = 1'),
	'2|3', 'and what is counted into them');
($rc, $out, $err) = $new->psql('app', 'SELECT * FROM post_stats', @as_webapp);
like($err, qr/permission denied for counter "views"/,
	'a re-created counter is a new, private one: the old grants do not carry over');

$old->stop;
$new->stop;
done_testing();
