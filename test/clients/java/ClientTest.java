// slotted_counter through PgJDBC with its default settings: PreparedStatement with ? placeholders,
// setString for a counter (sent as varchar), setLong or setInt for keys and deltas, and statements
// prepared on the server from their fifth execution on (prepareThreshold). Connects to
// PGHOST:PGPORT/PGDATABASE as PGUSER. Prints "ok pgjdbc: ..." or "not ok pgjdbc: ...: why".

import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.postgresql.util.PGInterval;

public class ClientTest {
    static final String STACK = "pgjdbc";
    static final int WORKERS = 20;
    // More rounds than prepareThreshold (5), so that the server-prepared form runs too.
    static final int ROUNDS = 12;

    /** A typed SQL NULL, bound with setNull as an application binds a missing value. */
    enum Null {
        BIGINT(Types.BIGINT), TIMESTAMPTZ(Types.TIMESTAMP_WITH_TIMEZONE), INTERVAL(Types.OTHER),
        TEXT(Types.VARCHAR);
        final int sqlType;
        Null(int sqlType) { this.sqlType = sqlType; }
    }

    /** A value bound with setObject, as code that passes parameters as Object[] binds them. */
    static final class AsObject {
        final Object value;
        AsObject(Object value) { this.value = value; }
        @Override public String toString() { return "setObject(" + value + ")"; }
    }

    static String url() {
        String host = System.getenv().getOrDefault("PGHOST", "127.0.0.1");
        String port = System.getenv().getOrDefault("PGPORT", "5432");
        String db = System.getenv().getOrDefault("PGDATABASE", "postgres");
        return "jdbc:postgresql://" + host + ":" + port + "/" + db;
    }

    static Connection connect() throws SQLException {
        return DriverManager.getConnection(url(), System.getenv().getOrDefault("PGUSER", "postgres"), "");
    }

    static PreparedStatement prepare(Connection c, String sql, Object... params) throws SQLException {
        PreparedStatement ps = c.prepareStatement(sql);
        for (int i = 0; i < params.length; i++) {
            Object p = params[i];
            int at = i + 1;
            if (p instanceof String) ps.setString(at, (String) p);
            else if (p instanceof Long) ps.setLong(at, (Long) p);
            else if (p instanceof Integer) ps.setInt(at, (Integer) p);
            else if (p instanceof Null) ps.setNull(at, ((Null) p).sqlType);
            else if (p instanceof Array) ps.setArray(at, (Array) p);
            else if (p instanceof AsObject) ps.setObject(at, ((AsObject) p).value);
            else ps.setObject(at, p);
        }
        return ps;
    }

    static ResultSet query(PreparedStatement ps) throws SQLException {
        ResultSet rs = ps.executeQuery();
        if (!rs.next()) throw new AssertionError("no row from " + ps);
        return rs;
    }

    static long oneLong(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = prepare(c, sql, params); ResultSet rs = query(ps)) {
            long v = rs.getLong(1);
            if (rs.wasNull()) throw new AssertionError("NULL from " + sql);
            return v;
        }
    }

    static String oneString(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = prepare(c, sql, params); ResultSet rs = query(ps)) {
            return rs.getString(1);
        }
    }

    static List<Long> oneArray(Connection c, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = prepare(c, sql, params); ResultSet rs = query(ps)) {
            return Arrays.asList((Long[]) rs.getArray(1).getArray());
        }
    }

    /** Rows of two columns, the first read as text, the second as a number. */
    static List<String> pairs(Connection c, String sql, Object... params) throws SQLException {
        List<String> out = new ArrayList<>();
        try (PreparedStatement ps = prepare(c, sql, params); ResultSet rs = ps.executeQuery()) {
            while (rs.next()) {
                Object first = rs.getObject(1) instanceof Timestamp
                        ? rs.getObject(1, OffsetDateTime.class).toInstant() : rs.getObject(1);
                out.add(first + "=" + rs.getLong(2));
            }
        }
        return out;
    }

    static void isNull(Object actual, String what) {
        if (actual != null) throw new AssertionError(what + ": got " + actual + ", expected NULL");
    }

    static void eq(Object actual, Object expected, String what) {
        if (!expected.equals(actual)) {
            throw new AssertionError(what + ": got " + actual + ", expected " + expected);
        }
    }

    static void expectSqlstate(Connection c, String sqlstate, String sql, Object... params) throws SQLException {
        try (PreparedStatement ps = prepare(c, sql, params)) {
            ps.executeQuery().close();
        } catch (SQLException e) {
            eq(e.getSQLState(), sqlstate, "SQLSTATE of " + sql + " " + Arrays.toString(params) + " (" + e.getMessage() + ")");
            return;
        }
        throw new AssertionError(sql + " " + Arrays.toString(params) + " succeeded, expected SQLSTATE " + sqlstate);
    }

    static void exec(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(sql);
        }
    }

    static Array bigints(Connection c, long... values) throws SQLException {
        Long[] boxed = new Long[values.length];
        for (int i = 0; i < values.length; i++) boxed[i] = values[i];
        return c.createArrayOf("bigint", boxed);
    }

    static Array texts(Connection c, String... values) throws SQLException {
        return c.createArrayOf("text", values);
    }

    static OffsetDateTime at(int hour, int minute) {
        return OffsetDateTime.of(2021, 11, 21, hour, minute, 0, 0, ZoneOffset.UTC);
    }

    // ---- the README's examples

    static void pageViews() throws Exception {
        try (Connection c = connect()) {
            eq(oneString(c, "SELECT sc_create(?, ?)", "page_views", "buffered"), "page_views", "sc_create");
            for (long n = 1; n <= 7; n++) {
                eq(oneLong(c, "SELECT sc_incr(?, ?)", "page_views", 42), n, "view " + n + " of post 42");
            }
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "page_views", 42, 10), 17L, "adding 10");
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "page_views", 42L, -2L), 15L, "adding -2");
            for (int i = 0; i < 7; i++) {
                eq(oneLong(c, "SELECT sc_sum(?, ?)", "page_views", 42L), 15L, "sc_sum of post 42");
                eq(oneLong(c, "SELECT sc_sum(?, ?)", "page_views", 42), 15L, "sc_sum of post 42 (int key)");
            }
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "page_views", 43L), 0L, "an unseen post");
        }
    }

    static void copiesSold() throws Exception {
        try (Connection c = connect(); Connection other = connect()) {
            exec(c, "CREATE TABLE sales (book bigint NOT NULL)");
            eq(oneString(c, "SELECT sc_create(?)", "copies_sold"), "copies_sold", "sc_create");
            c.setAutoCommit(false);
            try (PreparedStatement ps = prepare(c, "INSERT INTO sales VALUES (?)", 7L)) { ps.executeUpdate(); }
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "copies_sold", 7L), 1L, "incr in the open sale");
            eq(oneLong(other, "SELECT sc_sum(?, ?)", "copies_sold", 7L), 0L, "another session's sum before the commit");
            c.commit();
            eq(oneLong(other, "SELECT sc_sum(?, ?)", "copies_sold", 7L), 1L, "another session's sum after the commit");

            try (PreparedStatement ps = prepare(c, "INSERT INTO sales VALUES (?)", 7L)) { ps.executeUpdate(); }
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "copies_sold", 7L), 2L, "incr in a sale that will roll back");
            c.rollback();
            c.setAutoCommit(true);
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "copies_sold", 7L), 1L, "sum after the rollback");
            eq(oneLong(c, "SELECT count(*) FROM sales WHERE book = ?", 7L), 1L, "sales rows");
            eq(oneLong(other, "SELECT sc_sum(?, ?)", "copies_sold", 7L), 1L, "another session's sum after the rollback");
        }
    }

    static void teamPoints() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?)", "points", "buffered");
            exec(c, "CREATE TABLE friends (user_id bigint, friend_id bigint)");
            long[][] friends = {{1, 2}, {1, 3}, {4, 1}};
            for (long[] f : friends) {
                try (PreparedStatement ps = prepare(c, "INSERT INTO friends VALUES (?, ?)", f[0], f[1])) { ps.executeUpdate(); }
            }
            Map<Long, Integer> answers = new TreeMap<>(Map.of(1L, 3, 2L, 5, 3L, 1, 4L, 2, 5L, 4));
            for (Map.Entry<Long, Integer> a : answers.entrySet()) {
                for (long n = 1; n <= a.getValue(); n++) {
                    eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "points", a.getKey(), 10L), 10 * n, "points of user " + a.getKey());
                }
            }
            eq(oneLong(c, "SELECT sc_sum_keys(?, ?)", "points", bigints(c, 2, 3, 1)), 90L, "team of user 1");
            eq(oneLong(c, "SELECT sc_sum_keys(?, ?)", "points", bigints(c, 1, 1, 2)), 80L, "a key listed twice counts once");
            // The README's own query, the group read from a table.
            String team = "SELECT sc_sum_keys(?, ARRAY(SELECT friend_id FROM friends WHERE user_id = ?) || ?::bigint)";
            eq(oneLong(c, team, "points", 1L, 1L), 90L, "team of user 1 from friends");
            eq(oneLong(c, team, "points", 4L, 4L), 50L, "team of user 4 from friends");
            eq(pairs(c, "SELECT * FROM sc_top(?, ?)", "points", 3), List.of("2=50", "5=40", "1=30"), "top 3");
            eq(pairs(c, "SELECT * FROM sc_top(?, ?)", "points", 10),
                    List.of("2=50", "5=40", "1=30", "4=20", "3=10"), "top 10 of 5 users");
            // sc_rank: the others as of the last flush
            oneLong(c, "SELECT sc_rollup()");
            eq(oneLong(c, "SELECT sc_rank(?, ?)", "points", 5L), 2L, "rank of user 5");
            eq(oneLong(c, "SELECT sc_rank(?, ?)", "points", 99L), 6L, "rank of a user without points");
            eq(oneLong(c, "SELECT sc_total(?)", "points"), 150L, "points of every user");
        }
    }

    static void hitsPerHour() throws Exception {
        try (Connection c = connect()) {
            eq(oneString(c, "SELECT sc_create(?, ?, ?)", "hits", "buffered", new PGInterval("1 hour")), "hits",
                    "sc_create with a bucket width");
            String incr = "SELECT sc_incr(?, ?, ?, ?)";
            for (long n = 1; n <= 3; n++) eq(oneLong(c, incr, "hits", 42L, 1L, at(10, 15)), n, "hit at 10:15");
            for (long n = 4; n <= 5; n++) eq(oneLong(c, incr, "hits", 42L, 1L, at(10, 45)), n, "hit at 10:45");
            for (long n = 1; n <= 4; n++) eq(oneLong(c, incr, "hits", 42L, 1L, at(11, 5)), n, "hit at 11:05");
            eq(oneLong(c, incr, "hits", 42L, 1L, at(9, 59)), 1L, "hit at 9:59");
            eq(oneLong(c, incr, "hits", 7L, 2L, at(10, 20)), 2L, "2 hits of page 7 at 10:20");
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "hits", 42L), 1L, "a hit in the current hour");

            String ranged = "SELECT sc_sum(?, ?, ?, ?)";
            eq(oneLong(c, ranged, "hits", 42L, at(10, 0), at(11, 0)), 5L, "hits from 10:00 to 11:00");
            eq(oneLong(c, ranged, "hits", 42L, at(10, 0), Null.TIMESTAMPTZ), 10L, "hits since 10:00");
            eq(oneLong(c, ranged, "hits", 42L, at(10, 30), at(11, 30)), 4L,
                    "hits in the buckets that start from 10:30 to 11:30");
            eq(oneLong(c, ranged, "hits", 42L, at(23, 0), Null.TIMESTAMPTZ), 1L, "hits since the day after");
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "hits", 42L), 11L, "hits over all hours");

            eq(pairs(c, "SELECT * FROM sc_series(?, ?, ?, ?)", "hits", 42L, at(9, 0), at(12, 0)),
                    List.of(at(9, 0).toInstant() + "=1", at(10, 0).toInstant() + "=5", at(11, 0).toInstant() + "=4"),
                    "sc_series from 9:00 to 12:00");
            eq(pairs(c, "SELECT * FROM sc_top(?, ?, ?, ?)", "hits", 10, at(10, 0), at(11, 0)),
                    List.of("42=5", "7=2"), "top pages from 10:00 to 11:00");
            eq(pairs(c, "SELECT * FROM sc_total_series(?, ?, ?)", "hits", at(9, 0), at(12, 0)),
                    List.of(at(9, 0).toInstant() + "=1", at(10, 0).toInstant() + "=7", at(11, 0).toInstant() + "=4"),
                    "sc_total_series from 9:00 to 12:00");
            eq(oneLong(c, "SELECT sc_total(?, ?, ?)", "hits", at(10, 0), at(11, 0)), 7L,
                    "hits of every page from 10:00 to 11:00");

            eq(oneLong(c, "SELECT sc_set(?, ?, ?, ?)", "hits", 42L, 100L, at(10, 30)), 5L,
                    "sc_set of the 10:00 bucket returns its old value");
            eq(oneLong(c, ranged, "hits", 42L, at(10, 0), at(11, 0)), 100L, "the 10:00 bucket after sc_set");
            eq(oneLong(c, ranged, "hits", 42L, at(11, 0), at(12, 0)), 4L, "the 11:00 bucket after sc_set");
        }
    }

    /** Retention set with placeholders, and a payment webhook delivered three times. */
    static void retentionAndOnce() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?, ?, ?)", "hits_kept", "buffered", new PGInterval("1 hour"), new PGInterval("90 days"));
            oneString(c, "SELECT sc_create(name => ?, durability => ?, retain => ?)", "sessions_kept", "buffered", new PGInterval("30 minutes"));
            oneString(c, "SELECT sc_alter_retention(?, ?)", "hits_kept", new PGInterval("7 days"));
            oneString(c, "SELECT sc_alter_retention(?, ?)", "sessions_kept", Null.INTERVAL);
            eq(oneString(c, "SELECT retain::text FROM slotted_counter.counters WHERE name = ?", "hits_kept"), "7 days",
               "retain changed through a placeholder");
            isNull(oneString(c, "SELECT retain::text FROM slotted_counter.counters WHERE name = ?", "sessions_kept"),
                   "retain removed with a NULL placeholder");
            expectSqlstate(c, "22023", "SELECT sc_alter_retention(?, ?)", "hits_kept", new PGInterval("-1 seconds"));
            for (String durability : new String[] {"buffered", "transactional"}) {
                String name = "revenue_" + durability;
                oneString(c, "SELECT sc_create(?, ?)", name, durability);
                String once = "SELECT sc_incr_once(?, ?, ?, ?)";
                for (int delivery = 1; delivery <= 3; delivery++)
                    eq(oneLong(c, once, name, 42L, 1999L, "evt_3Nq"), 1999L, durability + ": delivery " + delivery);
                eq(oneLong(c, once, name, 42L, 500L, "evt_4Xz"), 2499L, durability + ": another event counts");
                eq(oneLong(c, "SELECT sc_sum(?, ?)", name, 42L), 2499L, durability + ": counted once each");
                expectSqlstate(c, "22004", once, name, 42L, 1L, Null.TEXT);
            }
        }
    }

    /** A rate limit on a per-minute counter and a stock that never goes below zero. */
    static void boundedIncrements() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?, ?)", "api_limit", "buffered", new PGInterval("1 minute"));
            String bounded = "SELECT sc_incr_bounded(?, ?, ?, ?, ?, ?)";
            for (long n = 1; n <= 3; n++)
                eq(oneLong(c, bounded, "api_limit", 7L, 1L, Null.BIGINT, 3L, at(10, 15)), n, "call " + n + " admitted");
            isNull(oneString(c, bounded, "api_limit", 7L, 1L, Null.BIGINT, 3L, at(10, 15)), "the fourth call in the minute is refused");
            eq(oneLong(c, bounded, "api_limit", 7L, 1L, Null.BIGINT, 3L, at(10, 16)), 1L, "the next minute admits again");

            oneString(c, "SELECT sc_create(?)", "stock_left");
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "stock_left", 1L, 2L), 2L, "2 in stock");
            String sell = "SELECT sc_incr_bounded(?, ?, ?, ?, ?)";
            c.setAutoCommit(false);
            isNull(oneString(c, sell, "stock_left", 1L, -3L, 0L, Null.BIGINT), "selling 3 of 2 is refused");
            eq(oneLong(c, sell, "stock_left", 1L, -2L, 0L, Null.BIGINT), 0L, "selling 2 of 2");
            c.commit();
            c.setAutoCommit(true);
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "stock_left", 1L), 0L, "sold out, never below zero");
            expectSqlstate(c, "22023", sell, "stock_left", 1L, 1L, 5L, 4L);
        }
    }

    static void buyersReset() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?)", "buyers_total", "buffered");
            for (long n = 1; n <= 7; n++) eq(oneLong(c, "SELECT sc_incr(?)", "buyers_total"), n, "buyer " + n);
            eq(oneLong(c, "SELECT sc_set(?, ?, ?)", "buyers_total", 0L, 0L), 7L, "sc_set returns the old value");
            eq(oneLong(c, "SELECT sc_sum(?)", "buyers_total"), 0L, "sum after the reset");
            eq(oneLong(c, "SELECT sc_incr(?)", "buyers_total"), 1L, "first buyer after the reset");

            // On a transactional counter the reset belongs to its transaction.
            oneString(c, "SELECT sc_create(?)", "orders_total");
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "orders_total", 3L, 5L), 5L, "5 orders");
            c.setAutoCommit(false);
            eq(oneLong(c, "SELECT sc_set(?, ?, ?)", "orders_total", 3L, 0L), 5L, "transactional sc_set returns the old value");
            c.rollback();
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "orders_total", 3L), 5L, "a rolled back reset");
            eq(oneLong(c, "SELECT sc_set(?, ?, ?)", "orders_total", 3L, 1L), 5L, "reset to 1");
            c.commit();
            c.setAutoCommit(true);
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "orders_total", 3L), 1L, "a committed reset");
        }
    }

    static void nullsAndArrays() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?)", "batch", "buffered");
            for (int i = 0; i < 7; i++) {
                expectSqlstate(c, "22004", "SELECT sc_incr(?, ?)", "batch", Null.BIGINT);
                expectSqlstate(c, "22004", "SELECT sc_sum(?, ?)", "batch", Null.BIGINT);
                expectSqlstate(c, "22004", "SELECT sc_incr(?, ?, ?)", "batch", Null.BIGINT, 1L);
                expectSqlstate(c, "42704", "SELECT sc_sum(?, ?)", "no_such_counter", 1L);
                eq(oneLong(c, "SELECT sc_sum_keys(?, ?)", "batch", bigints(c)), 0L, "an empty group");
                eq(oneArray(c, "SELECT sc_incr_batch(?, ?, ?)", "batch", bigints(c), bigints(c)), List.of(), "an empty batch");
            }
            eq(oneArray(c, "SELECT sc_incr_batch(?, ?, ?)", "batch", bigints(c, 1, 2, 1), bigints(c, 5, 1, 2)),
                    List.of(5L, 1L, 7L), "a batch with a key twice");
            eq(oneLong(c, "SELECT sc_sum_keys(?, ?)", "batch", bigints(c, 1, 2)), 8L, "sum of the batch");
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "batch", 1L), 7L, "key 1 after the batch");
        }
    }

    // ---- counters keyed by text (README "Keys as text"): setString and setObject with a String
    // send varchar, which takes the text form of a function; setLong and setInt send integers,
    // which take the bigint form; createArrayOf("text", ...) sends text[].

    static final String URL = "/blog/hot-counters?utm_source=news&page=2";

    /** Seed 002: page views by URL on a buffered counter keyed by text. */
    static void viewsByUrl() throws Exception {
        try (Connection c = connect()) {
            eq(oneString(c, "SELECT sc_create(?, ?, key_type => ?)", "views_by_url", "buffered", "text"), "views_by_url",
                    "sc_create with key_type => 'text'");
            eq(oneString(c, "SELECT key_type FROM slotted_counter.counters WHERE name = ?", "views_by_url"), "text",
                    "counters.key_type");
            for (long n = 1; n <= 7; n++) {
                eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_url", URL), n, "view " + n + " of the URL (setString)");
            }
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_url", new AsObject(URL)), 8L, "view 8 of the URL (setObject)");
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "views_by_url", URL, 9L), 17L, "adding 9");
            for (long n = 1; n <= 3; n++) {
                eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_url", new AsObject("/about")), n, "view " + n + " of /about");
            }
            for (int i = 0; i < 7; i++) {
                eq(oneLong(c, "SELECT sc_sum(?, ?)", "views_by_url", URL), 17L, "sc_sum of the URL");
                eq(oneLong(c, "SELECT sc_sum(?, ?)", new AsObject("views_by_url"), new AsObject(URL)), 17L,
                        "sc_sum of the URL (setObject)");
            }
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "views_by_url", "/never-seen"), 0L, "a URL never counted");
            eq(pairs(c, "SELECT * FROM sc_top_text(?, ?)", "views_by_url", 10L), List.of(URL + "=17", "/about=3"),
                    "sc_top_text: key and value, largest first");
            try (PreparedStatement ps = prepare(c, "SELECT key, value FROM sc_top_text(?, ?)", "views_by_url", 1L);
                 ResultSet rs = query(ps)) {
                eq(rs.getMetaData().getColumnTypeName(1), "text", "sc_top_text's key column type");
                eq(rs.getString("key"), URL, "sc_top_text's key read with getString");
            }
            // sc_rank: the others as of the last flush
            oneLong(c, "SELECT sc_rollup()");
            eq(oneLong(c, "SELECT sc_rank(?, ?)", "views_by_url", URL), 1L, "rank of the URL");
            eq(oneLong(c, "SELECT sc_rank(?, ?)", "views_by_url", "/about"), 2L, "rank of /about");
            eq(oneLong(c, "SELECT sc_rank(?, ?)", "views_by_url", "/never-seen"), 3L, "rank of a URL never counted");
        }
    }

    /** Seed 004: copies sold by title on a transactional counter keyed by text. */
    static void salesByTitle() throws Exception {
        try (Connection c = connect(); Connection other = connect()) {
            eq(oneString(c, "SELECT sc_create(?, key_type => ?)", "sales_by_title", "text"), "sales_by_title",
                    "sc_create, transactional by default");
            c.setAutoCommit(false);
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "sales_by_title", "Moby Dick", 2L), 2L, "two copies in the open sale");
            eq(oneLong(other, "SELECT sc_sum(?, ?)", "sales_by_title", "Moby Dick"), 0L,
                    "another session's sum before the sale commits");
            c.commit();
            eq(oneLong(other, "SELECT sc_sum(?, ?)", "sales_by_title", "Moby Dick"), 2L, "another session's sum after the commit");
            for (long n = 3; n <= 9; n++) {
                eq(oneLong(c, "SELECT sc_incr(?, ?)", "sales_by_title", "Moby Dick"), n, "sale " + n);
                c.commit();
            }
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "sales_by_title", "Moby Dick"), 10L, "a sale that will roll back");
            eq(oneLong(c, "SELECT sc_incr(?, ?, ?)", "sales_by_title", "Ulysses", 5L), 5L,
                    "the first sale of a new title, rolled back");
            c.rollback();
            c.setAutoCommit(true);
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "sales_by_title", "Moby Dick"), 9L, "sum after the rollback");
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "sales_by_title", "Ulysses"), 0L, "the rolled back title");
            eq(pairs(c, "SELECT key AS title, value AS copies FROM sc_top_text(?, ?)", "sales_by_title", 5L),
                    List.of("Moby Dick=9"), "sc_top_text: the rolled back title is not ranked");
        }
    }

    /** Keys compare by their bytes; the array forms take a text array; a key has at most 2048 bytes. */
    static void textKeysExact() throws Exception {
        String[] keys = {"/search?q=naïve ☕", "/search?q=naive", "/home", "/home "};
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?, key_type => ?)", "url_hits", "buffered", "text");
            eq(oneArray(c, "SELECT sc_incr_batch_text(?, ?, ?)", "url_hits", texts(c, keys), bigints(c, 1, 2, 3, 4)),
                    List.of(1L, 2L, 3L, 4L), "sc_incr_batch_text: four keys, each its own value");
            eq(oneArray(c, "SELECT sc_incr_batch_text(?, ?, ?)", "url_hits", texts(c, keys[0], keys[1], keys[0]),
                    bigints(c, 10, 10, 10)), List.of(11L, 12L, 21L), "a batch with a key twice");
            long[] expected = {21, 12, 3, 4};
            for (int i = 0; i < keys.length; i++) {
                eq(oneLong(c, "SELECT sc_sum(?, ?)", "url_hits", keys[i]), expected[i], "sc_sum of '" + keys[i] + "'");
            }
            eq(oneLong(c, "SELECT sc_sum_keys_text(?, ?)", "url_hits", texts(c, keys)), 40L, "sc_sum_keys_text");
            eq(oneLong(c, "SELECT sc_sum_keys_text(?, ?)", "url_hits", texts(c, "/home", "/home", "/home ")), 7L,
                    "a key listed twice counts once");
            eq(oneLong(c, "SELECT sc_sum_keys_text(?, ?)", "url_hits", texts(c)), 0L, "an empty group");
            eq(oneArray(c, "SELECT sc_incr_batch_text(?, ?, ?)", "url_hits", texts(c), bigints(c)), List.of(), "an empty batch");
            eq(pairs(c, "SELECT * FROM sc_top_text(?, ?)", "url_hits", 10L),
                    List.of(keys[0] + "=21", keys[1] + "=12", keys[3] + "=4", keys[2] + "=3"),
                    "sc_top_text returns the keys as they were given");

            eq(oneLong(c, "SELECT sc_incr(?, ?)", "url_hits", "é".repeat(1024)), 1L, "a key of 2048 bytes");
            for (String tooLong : List.of("x".repeat(2049), "é".repeat(1024) + "x")) {
                expectSqlstate(c, "22001", "SELECT sc_incr(?, ?)", "url_hits", tooLong);
                expectSqlstate(c, "22001", "SELECT sc_incr(?, ?)", "url_hits", new AsObject(tooLong));
                expectSqlstate(c, "22001", "SELECT sc_incr_batch_text(?, ?, ?)", "url_hits", texts(c, "/home", tooLong),
                        bigints(c, 1, 1));
            }
            eq(oneLong(c, "SELECT sc_total(?)", "url_hits"), 41L, "the keys too long counted nothing");
            for (int i = 0; i < 7; i++) expectSqlstate(c, "22004", "SELECT sc_incr(?, ?)", "url_hits", Null.TEXT);
        }
    }

    /**
     * setString on a counter keyed by bigint reads the string as a number; setLong and setInt on a
     * counter keyed by text send integers, which it refuses.
     */
    static void keyKinds() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?)", "views_by_id", "buffered");
            oneString(c, "SELECT sc_create(?, ?, key_type => ?)", "views_by_path", "buffered", "text");
            for (long n = 1; n <= 3; n++) eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_id", "42"), n, "'42', view " + n);
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_id", new AsObject("42")), 4L, "setObject(\"42\")");
            eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_id", 42L), 5L, "setLong(42) is the same key as '42'");
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "views_by_id", "42"), 5L, "sc_sum with setString(\"42\")");
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "views_by_id", 42L), 5L, "sc_sum with setLong(42)");
            eq(pairs(c, "SELECT * FROM sc_top_text(?, ?)", "views_by_id", 10L), List.of("42=5"),
                    "sc_top_text of a counter keyed by bigint");
            expectSqlstate(c, "22P02", "SELECT sc_incr(?, ?)", "views_by_id", "/home");

            eq(oneLong(c, "SELECT sc_incr(?, ?)", "views_by_path", "42"), 1L, "'42' on a text counter");
            for (int i = 0; i < 7; i++) {
                expectSqlstate(c, "42804", "SELECT sc_incr(?, ?)", "views_by_path", 42L);
                expectSqlstate(c, "42804", "SELECT sc_incr(?, ?)", "views_by_path", 42);
                expectSqlstate(c, "42804", "SELECT sc_sum(?, ?)", "views_by_path", 42L);
                expectSqlstate(c, "42804", "SELECT sc_rank(?, ?)", "views_by_path", 42L);
                expectSqlstate(c, "42804", "SELECT sc_incr(?, ?, ?)", "views_by_path", 42L, 1L);
                expectSqlstate(c, "42804", "SELECT * FROM sc_top(?, ?)", "views_by_path", 10L);
                expectSqlstate(c, "42804", "SELECT sc_sum_keys(?, ?)", "views_by_path", bigints(c, 42));
            }
            eq(oneLong(c, "SELECT sc_sum(?, ?)", "views_by_path", "42"), 1L, "the refused calls counted nothing");
        }
    }

    // ---- 20 connections

    interface Work<T> { T run(Connection c) throws Exception; }

    /** Runs work on every connection, each in a thread of its own, started together. */
    static <T> List<T> inThreads(List<Connection> conns, Work<T> work) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(conns.size());
        try {
            CyclicBarrier start = new CyclicBarrier(conns.size());
            List<Future<T>> futures = new ArrayList<>();
            for (Connection c : conns) {
                futures.add(pool.submit(() -> {
                    start.await(60, TimeUnit.SECONDS);
                    return work.run(c);
                }));
            }
            List<T> out = new ArrayList<>();
            for (Future<T> f : futures) out.add(f.get(120, TimeUnit.SECONDS));
            return out;
        } finally {
            pool.shutdownNow();
        }
    }

    static List<Long> countHotKey(Connection c, String counter) throws SQLException {
        List<Long> values = new ArrayList<>();
        for (int r = 0; r < ROUNDS; r++) values.add(oneLong(c, "SELECT sc_incr(?, ?)", counter, 1L));
        return values;
    }

    /** Asserts that sorted values are 1..total, each once, as a buffered counter hands them out. */
    static void eachOnce(List<Long> sorted, long total, String what) {
        List<Long> missing = new ArrayList<>(), repeated = new ArrayList<>();
        Set<Long> seen = new HashSet<>(sorted);
        for (long v = 1; v <= total && missing.size() < 10; v++) if (!seen.contains(v)) missing.add(v);
        for (int i = 1; i < sorted.size() && repeated.size() < 10; i++) {
            if (sorted.get(i).equals(sorted.get(i - 1)) && !repeated.contains(sorted.get(i))) repeated.add(sorted.get(i));
        }
        if (sorted.size() != total || !missing.isEmpty() || !repeated.isEmpty()) {
            throw new AssertionError(what + ": " + sorted.size() + " values, expected 1.." + total
                    + " each once; missing " + missing + ", repeated " + repeated);
        }
    }

    static List<Long> sortedAll(List<List<Long>> lists) {
        List<Long> out = new ArrayList<>();
        lists.forEach(out::addAll);
        out.sort(null);
        return out;
    }

    static List<Connection> connections() throws SQLException {
        List<Connection> conns = new ArrayList<>();
        for (int i = 0; i < WORKERS; i++) conns.add(connect());
        return conns;
    }

    static void closeAll(List<Connection> conns) {
        for (Connection c : conns) {
            try { c.close(); } catch (SQLException ignored) { /* already gone */ }
        }
    }

    static void concurrentExact(String durability) throws Exception {
        String counter = "hot_" + durability;
        long total = (long) WORKERS * ROUNDS;
        try (Connection c = connect()) { oneString(c, "SELECT sc_create(?, ?)", counter, durability); }
        List<Connection> conns = connections();
        List<Long> values;
        try {
            values = sortedAll(inThreads(conns, c -> countHotKey(c, counter)));
        } finally {
            closeAll(conns);
        }
        if (durability.equals("buffered")) {
            eachOnce(values, total, "values returned to concurrent callers");
        } else {
            eq(values.get(0) >= 1 && values.get(values.size() - 1) <= total, true, "values within 1..total");
        }
        try (Connection c = connect()) { eq(oneLong(c, "SELECT sc_sum(?, ?)", counter, 1L), total, "the total"); }
    }

    static void recreateUnderPrepared() throws Exception {
        String[][] names = {{"buffered", "recreated_buffered"}, {"transactional", "recreated_transactional"}};
        long total = (long) WORKERS * ROUNDS;
        try (Connection admin = connect()) {
            for (String[] n : names) oneString(admin, "SELECT sc_create(?, ?)", n[1], n[0]);
            List<Connection> conns = connections();
            try {
                for (String when : List.of("before the re-create", "after the re-create")) {
                    if (when.startsWith("after")) {
                        admin.setAutoCommit(false);
                        for (String[] n : names) {
                            oneString(admin, "SELECT sc_drop(?)", n[1]);
                            oneString(admin, "SELECT sc_create(?, ?)", n[1], n[0]);
                        }
                        admin.commit();
                        admin.setAutoCommit(true);
                    }
                    List<Map<String, List<Long>>> results = inThreads(conns, c -> {
                        Map<String, List<Long>> out = new TreeMap<>();
                        for (String[] n : names) out.put(n[0], countHotKey(c, n[1]));
                        out.put("prepared", List.of(oneLong(c,
                                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE ?", "%sc_incr%")));
                        return out;
                    });
                    List<List<Long>> buffered = new ArrayList<>(), transactional = new ArrayList<>();
                    for (Map<String, List<Long>> r : results) {
                        if (r.get("prepared").get(0) < 1) throw new AssertionError("a connection has no prepared sc_incr " + when);
                        buffered.add(r.get("buffered"));
                        transactional.add(r.get("transactional"));
                    }
                    eachOnce(sortedAll(buffered), total, "buffered values returned " + when);
                    List<Long> t = sortedAll(transactional);
                    eq(t.get(0) >= 1 && t.get(t.size() - 1) <= total, true, "transactional values within 1..total " + when);
                    for (String[] n : names) {
                        eq(oneLong(admin, "SELECT sc_sum(?, ?)", n[1], 1L), total, n[0] + " total " + when);
                    }
                }
            } finally {
                closeAll(conns);
            }
        }
    }

    // A counter's name written into a statement (prepared on the server after 5 runs) and into a
    // view reaches the counter created again under that name after a drop.
    static void literalNames() throws Exception {
        try (Connection c = connect()) {
            oneString(c, "SELECT sc_create(?, ?)", "literal_views", "buffered");
            try (Statement st = c.createStatement()) {
                st.execute("CREATE VIEW literal_view AS SELECT sc_sum('literal_views', 1) AS v");
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT sc_incr('literal_views', 1)")) {
                List<Long> before = new ArrayList<>();
                for (int i = 0; i < 10; i++) before.add(single(ps));
                eq(before, List.of(1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L, 9L, 10L), "values before the re-create");
                eq(oneLong(c, "SELECT v FROM literal_view"), 10L, "the view before the re-create");
                oneString(c, "SELECT sc_drop(?)", "literal_views");
                oneString(c, "SELECT sc_create(?, ?)", "literal_views", "buffered");
                List<Long> after = new ArrayList<>();
                for (int i = 0; i < 3; i++) after.add(single(ps));
                eq(after, List.of(1L, 2L, 3L), "values after the re-create");
                eq(oneLong(c, "SELECT v FROM literal_view"), 3L, "the view after the re-create");
            }
            try (Statement st = c.createStatement()) {
                st.execute("DROP VIEW literal_view");
                st.execute("SELECT sc_drop('literal_views', if_exists => true)");
                st.execute("SELECT sc_drop('literal_views', if_exists => true)");
            }
        }
    }

    static long single(PreparedStatement ps) throws SQLException {
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    /**
     * The types a Java program has at hand: a long for every number (sc_top's n too) and a String
     * for every interval (setString sends varchar, which no implicit cast makes an interval).
     */
    static void naturalTypes() throws Exception {
        try (Connection c = connect()) {
            eq(oneString(c, "SELECT sc_create(?, ?, ?)", "views_by_hour", "buffered", "1 hour"), "views_by_hour",
                    "sc_create with the bucket width from setString");
            eq(oneString(c, "SELECT sc_create(?, ?, ?, ?)", "views_kept", "buffered", "1 day", "30 days"), "views_kept",
                    "sc_create with bucket and retention from setString");
            eq(oneString(c, "SELECT bucket::text || ' ' || retain::text FROM slotted_counter.counters WHERE name = ?",
                    "views_kept"), "1 day 30 days", "both intervals read from the strings");
            oneString(c, "SELECT sc_alter_retention(?, ?)", "views_kept", "7 days");
            eq(oneString(c, "SELECT retain::text FROM slotted_counter.counters WHERE name = ?", "views_kept"), "7 days",
                    "sc_alter_retention from setString");
            expectSqlstate(c, "22007", "SELECT sc_alter_retention(?, ?)", "views_kept", "a week");
            for (long k = 1; k <= 4; k++) oneLong(c, "SELECT sc_incr(?, ?, ?)", "views_by_hour", k, 10L * k);
            eq(pairs(c, "SELECT * FROM sc_top(?, ?)", "views_by_hour", 2L), List.of("4=40", "3=30"),
                    "sc_top with n from setLong");
            eq(pairs(c, "SELECT * FROM sc_top(?, ?)", "views_by_hour", 5_000_000_000L),
                    List.of("4=40", "3=30", "2=20", "1=10"), "sc_top with an n beyond int: every key");
            oneString(c, "SELECT sc_drop(?)", "views_by_hour");
            oneString(c, "SELECT sc_drop(?)", "views_kept");
        }
    }

    interface Check { void run() throws Exception; }

    public static void main(String[] args) {
        Map<String, Check> checks = new LinkedHashMap<>();
        checks.put("page views: sc_incr, sc_incr with a delta, sc_sum", ClientTest::pageViews);
        checks.put("copies sold: a committed sc_incr counts, a rolled back one does not", ClientTest::copiesSold);
        checks.put("team points: sc_sum_keys of a team, sc_top leaderboard, sc_rank, sc_total", ClientTest::teamPoints);
        checks.put("hits per hour: sc_incr at a time, sc_sum over a range, sc_series, sc_top, sc_total_series, sc_set", ClientTest::hitsPerHour);
        checks.put("sc_set returns the old value, buffered and transactional", ClientTest::buyersReset);
        checks.put("sc_incr_bounded: a rate limit per minute, a stock never below zero", ClientTest::boundedIncrements);
        checks.put("retention through placeholders; sc_incr_once: a webhook delivered three times", ClientTest::retentionAndOnce);
        checks.put("NULL key is 22004, unknown counter 42704, empty arrays, sc_incr_batch", ClientTest::nullsAndArrays);
        checks.put("setLong for sc_top's n, setString for intervals", ClientTest::naturalTypes);
        checks.put("keys as text: page views by URL, sc_incr, sc_sum, sc_top_text, sc_rank", ClientTest::viewsByUrl);
        checks.put("keys as text: copies sold by title, a committed sc_incr counts, a rolled back one does not", ClientTest::salesByTitle);
        checks.put("keys as text: multibyte and trailing space are keys of their own, text arrays, 22001 past 2048 bytes", ClientTest::textKeysExact);
        checks.put("keys as text: setString(\"42\") on a bigint counter is key 42, setLong/setInt on a text counter is 42804", ClientTest::keyKinds);
        checks.put(WORKERS + " connections count one key of a buffered counter exactly", () -> concurrentExact("buffered"));
        checks.put(WORKERS + " connections count one key of a transactional counter exactly", () -> concurrentExact("transactional"));
        checks.put("drop and re-create under " + WORKERS + " connections with prepared statements", ClientTest::recreateUnderPrepared);
        checks.put("a name written in a prepared statement and a view outlives a drop and re-create", ClientTest::literalNames);
        int failures = 0;
        for (Map.Entry<String, Check> check : checks.entrySet()) {
            try {
                check.getValue().run();
                System.out.println("ok " + STACK + ": " + check.getKey());
            } catch (Throwable e) {
                failures++;
                Throwable cause = e instanceof ExecutionException ? e.getCause() : e;
                System.out.println("not ok " + STACK + ": " + check.getKey() + ": "
                        + String.valueOf(cause).replaceAll("\\s+", " "));
                cause.printStackTrace(System.out);
            }
        }
        System.exit(failures == 0 ? 0 : 1);
    }
}
