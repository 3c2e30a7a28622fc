# Every SQL example of the documentation runs as written.
#
# test/docs/examples.py runs each Markdown file (README.md and docs/, but the maintainers' map
# docs/design.md) in a fresh database of this server: its ```sql blocks in order in one psql
# session, the errors a block says it raises, and the output a ```text block shows after one.
# The router's page makes its data nodes as databases of this same server, so the server has
# slotted_counter preloaded and both extensions (and PL/Proxy) installed.

use strict;
use warnings;

use File::Basename qw(dirname);
use Cwd qw(abs_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

use FindBin;
use lib $FindBin::RealBin;
use SlottedCounterTest;

my $top = abs_path(dirname(dirname($FindBin::RealBin)));
# A flusher per database that counts: the router's page has four at once (three data nodes and
# its router) besides the file's own database.
my $node = preloaded_node('docs', "max_worker_processes = 16\n");

my ($stdout, $stderr);
IPC::Run::run(
	[
		'python3', "$top/test/docs/examples.py", '--host', $node->host,
		'--port', $node->port
	],
	'>', \$stdout, '2>', \$stderr);

# One line per file, "ok   FILE" or "FAIL FILE" and its problems indented below.
my %result;
my $current;
for my $line (split /\n/, $stdout)
{
	if ($line =~ /^(ok|FAIL) +(\S+)$/)
	{
		$current = $2;
		$result{$current} = $1 eq 'ok' ? '' : 'failed';
	}
	elsif (defined $current)
	{
		$result{$current} .= "\n$line";
	}
}
note $stderr if $stderr ne '';

my @expected = ('README.md', map { s{^\Q$top\E/}{}r } grep { !/design\.md$/ }
	  glob("$top/docs/*.md $top/docs/*/*.md"));
for my $file (sort @expected)
{
	is($result{$file} // 'not run', '', "the examples of $file run as written");
}
is(scalar(keys %result), scalar(@expected), 'no other file was run');

done_testing();
