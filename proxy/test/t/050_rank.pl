# sc_rank through the router (slotted_counter_proxy): three data nodes and a router. A rank is
# 1 + the number of other keys above the key's value, over every node: the key's own value now
# (from its home node), the others' as of each node's last flush. The nodes flush only when asked
# (flush_interval = 0), so "as of the last flush" is the state sc_rollup on the router left.
#   1. A counter keyed by bigint (3,000 keys, ties within and across nodes, negative values and
#      zeros) and one keyed by text (2,000 keys): after sc_rollup, every key's rank equals the rank
#      counted from the union of the nodes' slotted_counter.lagged, before the nodes' rank indexes
#      exist and after; ties share a rank; a key never written, or whose increments add up to 0,
#      comes after every key above 0, and one below 0 after those at 0 too.
#   2. The key's own fresh increment counts at once, another key's only after the flush.
#   3. A bucketed counter (bigint and text keys): ranks over [since, until) equal the union's sums
#      over those buckets.
#   4. Which form a call takes: sc_rank(c, '5'), sc_rank(c, 5), NULL and PREPARE with unknown
#      parameters are never ambiguous (42725).
#   5. Errors as the router's other routed functions report them, and as a node's sc_rank does:
#      42804, 22004, 22001, 42704, 22P02, 22003, 22023; a spread counter: 0A000.
#   6. A role without SELECT on the counter: 42501 from the nodes; with it, the same ranks.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib "$FindBin::RealBin/../../../test/t";
use SlottedCounterTest;

my @data = map { preloaded_node("data$_", "slotted_counter.flush_interval = 0\n") } 0 .. 2;
$_->safe_psql('postgres', 'CREATE EXTENSION slotted_counter; CREATE ROLE app LOGIN') for @data;

my $router = PostgreSQL::Test::Cluster->new('router');
$router->init;
$router->append_conf('postgresql.conf', "log_statement = none\n");
$router->start;
my $nodes = join(', ',
	map { sprintf("'host=%s port=%d dbname=postgres connect_timeout=5'", $_->host, $_->port) }
	  @data);
$router->safe_psql('postgres', qq{
CREATE ROLE app LOGIN;
CREATE EXTENSION slotted_counter_proxy CASCADE;
SELECT sc_proxy_configure(ARRAY[$nodes]);
SELECT sc_create('scores', 'buffered'),
       sc_create('urls', 'buffered', key_type => 'text'),
       sc_create('hits', 'buffered', '1 hour'),
       sc_create('hits_t', 'buffered', '1 hour', key_type => 'text'),
       sc_create('hot', 'buffered', spread => true),
       sc_create('hot_t', 'buffered', spread => true, key_type => 'text');
-- The nodes' flushed rows, as each node's slotted_counter.lagged shows them.
CREATE TABLE lagged_all (node int NOT NULL, counter text NOT NULL, key text NOT NULL,
                         bucket timestamptz, value bigint NOT NULL);});

# The outcome of sql on the router (or on a node): 'ok', or "SQLSTATE: message" of its error.
sub outcome
{
	my ($sql, $user, $node) = @_;
	my ($ret, $out, $err) = ($node // $router)->psql('postgres', $sql,
		extra_params => [ '-U', $user // 'postgres', '-v', 'VERBOSITY=verbose' ]);
	return $err =~ /ERROR:  ([0-9A-Z]{5}: [^\n]*)/ ? $1 : $ret == 0 ? 'ok' : "failed: $err";
}

# Loads lagged_all on the router with every node's slotted_counter.lagged.
sub load_lagged
{
	my $copy = "TRUNCATE lagged_all;\n";
	for my $i (0 .. $#data)
	{
		my $rows = $data[$i]->safe_psql('postgres', qq{
COPY (SELECT $i, counter::text, key_text, bucket, value FROM slotted_counter.lagged) TO STDOUT});
		$copy .= "COPY lagged_all FROM STDIN;\n$rows\n\\.\n" if $rows ne '';
	}
	$router->safe_psql('postgres', $copy);
}

# The keys written to each counter (a key whose increments add up to 0 has no row on any node).
my %written = (
	scores => q{SELECT k::text FROM generate_series(1, 3000) AS k},
	urls => q{SELECT 'page/' || k FROM generate_series(1, 2000) AS k},
	hits => q{SELECT k::text FROM generate_series(1, 600) AS k},
	hits_t => q{SELECT 'k' || k FROM generate_series(1, 600) AS k});

# The rank of every key written to counter as the union of the nodes' rows in lagged_all gives it
# (its value: the sum of its rows, or of its buckets in [since, until) when a range is given, NULL
# for an open end; 0 without rows), 1 + the number of keys with a larger value other than 0,
# against the router's sc_rank of the key (given as key_type). Returns how many keys were
# compared, and how many differ.
sub mismatches
{
	my ($counter, $key_type, $range) = @_;
	my ($args, $buckets) = ('', 'true');
	if ($range)
	{
		my ($since, $until) = map { defined $_ ? "'$_'::timestamptz" : 'NULL::timestamptz' } @$range;
		$args = ", $since, $until";
		$buckets = "bucket >= coalesce($since, '-infinity') AND bucket < coalesce($until, 'infinity')";
	}
	return $router->safe_psql('postgres', qq{
WITH kv AS MATERIALIZED (
       SELECT w.key, coalesce(sum(l.value) FILTER (WHERE $buckets), 0) AS value
         FROM ($written{$counter}) AS w(key)
         LEFT JOIN lagged_all l ON l.counter = '$counter' AND l.key = w.key
        GROUP BY w.key),
     truth AS MATERIALIZED (
       SELECT k.key, 1 + (SELECT count(*) FROM kv o WHERE o.value > k.value AND o.value <> 0) AS rank
         FROM kv k)
SELECT count(*) || ' ' || count(*) FILTER (WHERE rank <> sc_rank('$counter', key::$key_type$args))
  FROM truth});
}

# 1. Many keys, with ties. Values (k * 7919) % 211 - 20 give every value in -20..190 to about 14 of
# the 3,000 keys, on every node.
$router->safe_psql('postgres', q{
SELECT cardinality(sc_incr_batch('scores', ARRAY(SELECT generate_series(1, 3000)::bigint),
                                 ARRAY(SELECT ((k * 7919) % 211 - 20)::bigint
                                         FROM generate_series(1, 3000) AS k)));
SELECT cardinality(sc_incr_batch_text('urls', ARRAY(SELECT 'page/' || k FROM generate_series(1, 2000) AS k),
                                      ARRAY(SELECT ((k * 31) % 97 - 10)::bigint
                                              FROM generate_series(1, 2000) AS k)));
SELECT sc_rollup() > 0;});
load_lagged();
is( $router->safe_psql('postgres', q{
SELECT string_agg(format('%s %s %s', counter, node, n), ', ' ORDER BY counter, node)
  FROM (SELECT counter, node, count(*) >= 500 AS n FROM lagged_all GROUP BY counter, node) AS s;
SELECT count(*) FROM (SELECT value FROM lagged_all WHERE counter = 'scores' AND value <> 0
                       GROUP BY value HAVING count(DISTINCT node) > 1) AS s;}),
	"scores 0 t, scores 1 t, scores 2 t, urls 0 t, urls 1 t, urls 2 t\n210",
	'after sc_rollup on the router every node holds 500 keys or more of each counter, '
	  . 'and each of the 210 values other than 0 is held by keys on two nodes or more');

my $ready = q{SELECT rank_indexes FROM slotted_counter.stats WHERE datname = current_database()};
is(join(' ', map { $_->safe_psql('postgres', $ready) } @data), '0 0 0',
	'no node has a rank index yet');
is(mismatches('scores', 'bigint'), '3000 0',
	'every one of 3,000 bigint keys ranks as the union of the nodes\' values says (nodes\' tables)');
is(mismatches('urls', 'text'), '2000 0',
	'every one of 2,000 text keys ranks as the union of the nodes\' values says (nodes\' tables)');
$router->safe_psql('postgres', 'SELECT sc_rollup()');
is(join(' ', map { $_->safe_psql('postgres', $ready) } @data), '2 2 2',
	'the flush after the first ranks built each node\'s indexes of both counters');
is(mismatches('scores', 'bigint') . ', ' . mismatches('urls', 'text'), '3000 0, 2000 0',
	'... and every key of both counters ranks the same from them');

is( $router->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE ranks > 1), count(*) FILTER (WHERE keys > 1),
       count(*) FILTER (WHERE value = 190 AND rank = 1)
  FROM (SELECT value, count(*) AS keys, count(DISTINCT sc_rank('scores', key::bigint)) AS ranks,
               min(sc_rank('scores', key::bigint)) AS rank
          FROM lagged_all WHERE counter = 'scores' AND value <> 0 GROUP BY value) AS s}),
	'0|210|1', 'ties share a rank: the keys of each of 210 tied values have one rank, the top ones 1');
my $above0 = $router->safe_psql('postgres',
	q{SELECT count(*) FROM lagged_all WHERE counter = 'scores' AND value > 0});
is( $router->safe_psql('postgres', q{
SELECT sc_rank('scores', 999999), sc_rank('scores', '999999'),
       sc_rank('scores', (SELECT min(k) FROM generate_series(1, 3000) AS k WHERE (k * 7919) % 211 = 20))}),
	join('|', ($above0 + 1) x 3),
	"a key never written ranks after the $above0 keys above 0, as does one whose increments add up to 0");
is( $router->safe_psql('postgres', q{
SELECT sc_rank('urls', 'never written') - 1 = count(*) FILTER (WHERE value > 0)
  FROM lagged_all WHERE counter = 'urls'}),
	't', '... and so does a text key never written');
my $negative = $router->safe_psql('postgres', q{
SELECT key FROM lagged_all WHERE counter = 'scores' AND value = -20 ORDER BY key::bigint LIMIT 1});
is( $router->safe_psql('postgres', qq{
SELECT sc_rank('scores', $negative) - 1 = count(*) FILTER (WHERE value <> 0 AND value > -20)
  FROM lagged_all WHERE counter = 'scores'}),
	't', 'a key below 0 ranks after every other key but those at 0');

# 2. The key's own value now, the others' as of the last flush. Keys ka (50) and kb (10) live on
# different nodes.
my ($ka, $kb) = split /\|/, $router->safe_psql('postgres', q{
SELECT a.key, b.key FROM lagged_all a, lagged_all b
 WHERE a.counter = 'scores' AND b.counter = 'scores' AND a.value = 50 AND b.value = 10
   AND a.node <> b.node
 ORDER BY a.key::bigint, b.key::bigint LIMIT 1});
# The rank of value among the flushed values: 1 + the keys other than ka and kb above it, and
# those of @others (the values the last flush left to ka or kb) above it.
my $flushed_above = sub {
	my ($value, @others) = @_;
	return $router->safe_psql('postgres', qq{
SELECT 1 + count(*) FROM lagged_all
 WHERE counter = 'scores' AND key NOT IN ('$ka', '$kb') AND value > $value AND value <> 0})
	  + scalar(grep { $_ > $value } @others);
};
my $rank_a = $flushed_above->(50, 10);
is($router->safe_psql('postgres', "SELECT sc_rank('scores', $ka)"), $rank_a,
	"key $ka (50) ranks $rank_a");
is( $router->safe_psql('postgres', qq{
SELECT sc_incr('scores', $ka, 100), sc_sum('scores', $ka), sc_rank('scores', $ka), sc_rank('scores', '$ka')}),
	"150|150|" . $flushed_above->(150, 10) . '|' . $flushed_above->(150, 10),
	"key $ka counted up to 150 ranks at once as 150 among the others' flushed values");
is( $router->safe_psql('postgres', qq{
SELECT sc_incr('scores', $kb, 1000), sc_rank('scores', $kb), sc_rank('scores', $ka)}),
	"1010|1|" . $flushed_above->(150, 10),
	"key $kb (another node) counted up to 1010 ranks 1 at once, but $ka does not see it above yet");
$router->safe_psql('postgres', 'SELECT sc_rollup()');
is($router->safe_psql('postgres', "SELECT sc_rank('scores', $ka), sc_rank('scores', $kb)"),
	($flushed_above->(150, 1010)) . '|1',
	"after sc_rollup on the router $ka ranks below $kb");
my ($t) = $router->safe_psql('postgres', q{
SELECT key FROM lagged_all WHERE counter = 'urls' AND value = 10 ORDER BY key LIMIT 1});
is( $router->safe_psql('postgres', qq{
SELECT sc_incr('urls', '$t', 1000), sc_rank('urls', '$t'), sc_rank('urls', 'page/1')}),
	'1010|1|' . $router->safe_psql('postgres', q{
SELECT 1 + count(*) FROM lagged_all WHERE counter = 'urls' AND key <> 'page/1'
   AND value > (SELECT value FROM lagged_all WHERE counter = 'urls' AND key = 'page/1')}),
	"text key $t counted up ranks 1 at once, while page/1 still ranks among the flushed values");
$router->safe_psql('postgres', 'SELECT sc_rollup()');
load_lagged();
is(mismatches('scores', 'bigint') . ', ' . mismatches('urls', 'text'), '3000 0, 2000 0',
	'after the flush every key of both counters ranks as the union of the nodes\' values says');

# 3. Bucketed counters: three hours of counts, each key's value per hour from its own formula.
$router->safe_psql('postgres', q{
SELECT sum(sc_incr('hits', k, (k * 7) % 23, '2026-01-01 10:30+00')
         + sc_incr('hits', k, (k * 11) % 29 - 5, '2026-01-01 11:30+00')
         + sc_incr('hits', k, k % 5, '2026-01-01 12:30+00')
         + sc_incr('hits_t', 'k' || k, (k * 13) % 31, '2026-01-01 10:30+00')
         + sc_incr('hits_t', 'k' || k, (k * 3) % 17, '2026-01-01 11:30+00'))
  FROM generate_series(1, 600) AS k;
SELECT sc_rollup() > 0;});
load_lagged();
my @ranges = (
	[ '2026-01-01 10:00+00', '2026-01-01 11:00+00' ],
	[ '2026-01-01 11:00+00', '2026-01-01 13:00+00' ],
	[ '2026-01-01 10:00+00', '2026-01-01 12:00+00' ],
	[ '2026-01-01 12:00+00', undef ],
	[ undef, undef ]);
for my $range (@ranges)
{
	my ($since, $until) = map { $_ // 'NULL' } @$range;
	is( mismatches('hits', 'bigint', $range) . ', ' . mismatches('hits_t', 'text', $range),
		'600 0, 600 0',
		"bucketed, bigint and text keys: every key's rank over [$since, $until) equals the union's");
}
is( $router->safe_psql('postgres', q{
SELECT sc_rank('hits', 5, '2026-01-01 10:00+00', '2026-01-01 11:00+00')
     = sc_rank('hits', '5', '2026-01-01 10:00+00', '2026-01-01 11:00+00'),
       sc_rank('hits', 5, '2026-01-01 10:00+00', '2026-01-01 11:00+00')
     <> sc_rank('hits', 5, '2026-01-01 11:00+00', '2026-01-01 12:00+00'),
       sc_rank('hits', 5, '2026-01-02', '2026-01-03'), sc_rank('hits_t', 'k5', '2026-01-02', NULL)}),
	't|t|1|1', 'a key ranks by its value over the range asked for; over an empty range every key is 1st');

# 4. Which form a call takes.
my $rank5 = $router->safe_psql('postgres', q{SELECT sc_rank('scores', 5::bigint)});
is( $router->safe_psql('postgres', q{
SELECT sc_rank('scores', '5'), sc_rank('scores', 5), sc_rank('scores', '5'::varchar),
       sc_rank('scores', 5, NULL, NULL), sc_rank('scores', '5', NULL, NULL);
SELECT sc_rank('urls', 'page/5') = sc_rank('urls', 'page/5'::varchar);
PREPARE r2 AS SELECT sc_rank($1, $2);
PREPARE r3 AS SELECT sc_rank($1, $2, $3);
PREPARE r4 AS SELECT sc_rank($1, $2, $3, $4);
SELECT string_agg(name || '(' || translate(parameter_types::text, '{}"', '') || ')', ' ' ORDER BY name)
  FROM pg_prepared_statements;
EXECUTE r2('scores', '5');
EXECUTE r2('urls', 'page/5');
EXECUTE r4('hits', '5', '2026-01-01 10:00+00', '2026-01-01 11:00+00');
EXECUTE r4('hits_t', 'k5', NULL, NULL);}),
	join('|', ($rank5) x 5) . "\nt\n"
	  . 'r2(text,text) r3(text,text,timestamp with time zone) '
	  . 'r4(text,text,timestamp with time zone,timestamp with time zone)' . "\n$rank5\n"
	  . $router->safe_psql('postgres', q{
SELECT sc_rank('urls', 'page/5'); SELECT sc_rank('hits', 5, '2026-01-01 10:00+00', '2026-01-01 11:00+00');
SELECT sc_rank('hits_t', 'k5')}),
	'sc_rank(c, \'5\') and sc_rank(c, 5) resolve, to the same rank on a counter keyed by bigint; '
	  . 'PREPARE with unknown parameters takes the text form');

# 5. Errors: as the routed sc_sum reports them, and as a node's own sc_rank.
my %errors = (
	q{sc_rank('urls', 5)} => [ '42804', q{sc_sum('urls', 5)} ],
	q{sc_rank('hits_t', 5, NULL, NULL)} => [ '42804', q{sc_sum('hits_t', 5, NULL, NULL)} ],
	q{sc_rank('scores', NULL)} => [ '22004', q{sc_sum('scores', NULL)} ],
	q{sc_rank('urls', NULL::text)} => [ '22004', q{sc_sum('urls', NULL::text)} ],
	q{sc_rank('scores', NULL::bigint)} => [ '22004', q{sc_sum('scores', NULL::bigint)} ],
	q{sc_rank(NULL, 5)} => [ '22004', q{sc_sum(NULL, 5)} ],
	q{sc_rank(NULL, 'a')} => [ '22004', q{sc_sum(NULL, 'a')} ],
	q{sc_rank('urls', repeat('x', 2049))} => [ '22001', q{sc_sum('urls', repeat('x', 2049))} ],
	q{sc_rank('hits_t', repeat('x', 2049), NULL, NULL)} =>
	  [ '22001', q{sc_sum('hits_t', repeat('x', 2049), NULL, NULL)} ],
	q{sc_rank('nope', 5)} => [ '42704', q{sc_sum('nope', 5)} ],
	q{sc_rank('nope', 'a')} => [ '42704', q{sc_sum('nope', 'a')} ],
	q{sc_rank('scores', 'x')} => [ '22P02', q{sc_sum('scores', 'x')} ],
	q{sc_rank('scores', '99999999999999999999')} => [ '22003', q{sc_sum('scores', '99999999999999999999')} ],
	q{sc_rank('scores', 5, now(), NULL)} => [ '22023', q{sc_sum('scores', 5, now(), NULL)} ],
	q{sc_rank('hits', 5, '2026-01-02', '2026-01-01')} =>
	  [ '22023', q{sc_sum('hits', 5, '2026-01-02', '2026-01-01')} ]);
# An outcome without the prefix PL/Proxy puts before a node's error (the function that relayed it).
sub reported
{
	my ($outcome) = @_;
	$outcome =~ s/^(\w{5}: )[\w.]+\(\d+\): \[\w+\] REMOTE ERROR: /$1/;
	return $outcome;
}
for my $call (sort keys %errors)
{
	my ($state, $sum) = @{ $errors{$call} };
	my $got = reported(outcome("SELECT $call"));
	like($got, qr/^$state: /, "$call: $state");
	is($got, reported(outcome("SELECT $sum")), "... as $sum reports it");
	is($got, outcome("SELECT $call", undef, $data[0]), '... and as a node\'s own sc_rank');
}

my $spread = qr/^0A000: counter "(hot|hot_t)" is spread over the data nodes: its keys cannot be ranked/;
like(outcome(q{SELECT sc_rank('hot', 0)}), $spread, 'a key of a spread counter: 0A000');
like(outcome(q{SELECT sc_rank('hot', '0', NULL, NULL)}), $spread, '... given as text too');
like(outcome(q{SELECT sc_rank('hot_t', 'x')}), $spread, '... and one of a spread counter keyed by text');
my ($ret, $out, $err) = $router->psql('postgres', q{SELECT sc_rank('hot', 0)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/DETAIL:  Every node holds a share of every key.*\nHINT:  Count the keys above sc_sum\(counter, key\) in sc_top\(counter, n\)/,
	'... with a detail that says why and a hint that says what does work');
is(outcome(q{SELECT sc_rank('hot', NULL::bigint)}), '22004: key must not be null',
	'a NULL key of a spread counter: 22004 first');

# 6. Privileges are the nodes'.
like(outcome(q{SELECT sc_rank('scores', 5)}, 'app'), qr/^42501: /,
	'a role without SELECT on the counter: 42501 from the nodes');
like(outcome(q{SELECT sc_rank('urls', 'page/5')}, 'app'), qr/^42501: /, '... by text key too');
$router->safe_psql('postgres', q{
SELECT sc_grant('scores', 'SELECT', 'app'), sc_grant('urls', 'SELECT', 'app')});
is( $router->safe_psql('postgres', q{SELECT sc_rank('scores', 5), sc_rank('urls', 'page/5')},
		extra_params => [ '-U', 'app' ]),
	$router->safe_psql('postgres', q{SELECT sc_rank('scores', 5), sc_rank('urls', 'page/5')}),
	'... and after sc_grant through the router it reads the ranks postgres reads');

done_testing();
