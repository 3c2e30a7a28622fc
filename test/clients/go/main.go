// slotted_counter through pgx (v4), called as docs/guides/drivers.md shows it.
//
// pgx prepares each statement on the server and encodes each argument as the type the server
// inferred for its placeholder. A key placeholder of sc_incr and the other functions with a
// text form is inferred as text (PostgreSQL prefers text for an untyped value), so an integer
// key is written $2::bigint; a string key, a slice of keys, the counter's name and intervals go
// as they are. Connected as libpq's PG* environment variables say. Prints "ok pgx: ..." or
// "not ok pgx: ...", and exits 1 if a check failed. With --pgbouncer, only the pool's check,
// with the setting that is safe behind pgbouncer's transaction pooling.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

var (
	ctx      = context.Background()
	failures = 0
)

func check(name string, fn func() error) {
	if err := fn(); err != nil {
		failures++
		fmt.Printf("not ok pgx: %s: %s\n", name, strings.Join(strings.Fields(err.Error()), " "))
		return
	}
	fmt.Printf("ok pgx: %s\n", name)
}

func eq(got, want interface{}, what string) error {
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s: got %v, expected %v", what, got, want)
	}
	return nil
}

// one runs a query of one row and one column into dst.
func one(conn *pgx.Conn, dst interface{}, query string, args ...interface{}) error {
	return conn.QueryRow(ctx, query, args...).Scan(dst)
}

func int64Of(conn *pgx.Conn, query string, args ...interface{}) (int64, error) {
	var n int64
	err := one(conn, &n, query, args...)
	return n, err
}

func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func bigintKeys(conn *pgx.Conn) error {
	var name string
	if err := one(conn, &name, "SELECT sc_create($1, $2)", "page_views", "buffered"); err != nil {
		return err
	}
	if err := eq(name, "page_views", "sc_create returns the name as a string"); err != nil {
		return err
	}
	for want := int64(1); want <= 7; want++ {
		n, err := int64Of(conn, "SELECT sc_incr($1, $2::bigint)", "page_views", 42)
		if err != nil {
			return err
		}
		if err := eq(n, want, "a view of post 42"); err != nil {
			return err
		}
	}
	n, err := int64Of(conn, "SELECT sc_incr($1, $2::bigint, $3)", "page_views", 42, 10)
	if err != nil {
		return err
	}
	if err := eq(n, int64(17), "adding 10"); err != nil {
		return err
	}
	var values []int64
	if err := one(conn, &values, "SELECT sc_incr_batch($1, $2, $3)", "page_views",
		[]int64{1, 2, 42}, []int64{5, 6, 1}); err != nil {
		return err
	}
	if err := eq(values, []int64{5, 6, 18}, "sc_incr_batch takes slices"); err != nil {
		return err
	}
	if n, err = int64Of(conn, "SELECT sc_sum_keys($1, $2)", "page_views", []int64{1, 2}); err != nil {
		return err
	}
	if err := eq(n, int64(11), "sc_sum_keys takes a slice"); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, "SELECT key, value FROM sc_top($1, $2)", "page_views", 2)
	if err != nil {
		return err
	}
	var top [][2]int64
	for rows.Next() {
		var k, v int64
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		top = append(top, [2]int64{k, v})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return eq(top, [][2]int64{{42, 18}, {2, 6}}, "sc_top")
}

func untypedIntKeyRefused(conn *pgx.Conn) error {
	_, err := int64Of(conn, "SELECT sc_incr($1, $2)", "page_views", 42)
	if err == nil {
		return errors.New("an integer key without ::bigint was accepted; update the guide")
	}
	return eq(strings.Contains(err.Error(), "cannot convert 42 to Text"), true,
		"pgx's message: "+err.Error())
}

func textKeys(conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT sc_create($1, $2, key_type => $3)", "views_by_url",
		"buffered", "text"); err != nil {
		return err
	}
	n, err := int64Of(conn, "SELECT sc_incr($1, $2, $3)", "views_by_url", "/pricing", 5)
	if err != nil {
		return err
	}
	if err := eq(n, int64(5), "a string key"); err != nil {
		return err
	}
	var values []int64
	if err := one(conn, &values, "SELECT sc_incr_batch_text($1, $2, $3)", "views_by_url",
		[]string{"/", "/pricing"}, []int64{1, 1}); err != nil {
		return err
	}
	return eq(values, []int64{1, 6}, "sc_incr_batch_text")
}

func intervalsAndVoid(conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT sc_create($1, $2, $3, $4)", "hits", "buffered",
		"1 hour", "90 days"); err != nil {
		return err
	}
	// A function returning void: Exec (pgx cannot scan void, OID 2278).
	if _, err := conn.Exec(ctx, "SELECT sc_alter_retention($1, $2)", "hits", "30 days"); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "SELECT sc_drop($1)", "hits")
	return err
}

func errorsCarrySQLSTATE(conn *pgx.Conn) error {
	for _, c := range []struct {
		state, query string
		args         []interface{}
	}{
		{"22004", "SELECT sc_incr($1, $2::bigint)", []interface{}{"page_views", nil}},
		{"42704", "SELECT sc_incr($1, $2::bigint)", []interface{}{"no_such", 1}},
		{"22007", "SELECT sc_create($1, $2, $3)", []interface{}{"bad", "buffered", "one day"}},
	} {
		_, err := conn.Exec(ctx, c.query, c.args...)
		if err := eq(sqlstate(err), c.state, c.query); err != nil {
			return err
		}
	}
	return nil
}

func transactional(conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT sc_create($1)", "copies_sold"); err != nil {
		return err
	}
	for _, commit := range []bool{true, false} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT sc_incr($1, $2::bigint)", "copies_sold", 1); err != nil {
			return err
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			return err
		}
	}
	n, err := int64Of(conn, "SELECT sc_sum($1, $2::bigint)", "copies_sold", 1)
	if err != nil {
		return err
	}
	return eq(n, int64(1), "the rolled-back increment did not count")
}

// 20 pooled connections: buffered sc_incr hands out every value once, the transactional total
// is exact.
func poolExact(settings string) error {
	pool, err := pgxpool.Connect(ctx, "pool_max_conns=20 "+settings)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "SELECT sc_create($1, $2), sc_create($3)", "likes", "buffered",
		"likes_tx"); err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		values []int64
		wg     sync.WaitGroup
		first  error
	)
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var n int64
				err := pool.QueryRow(ctx, "SELECT sc_incr($1, $2::bigint)", "likes", 1).Scan(&n)
				if err == nil {
					_, err = pool.Exec(ctx, "SELECT sc_incr($1, $2::bigint)", "likes_tx", 1)
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				values = append(values, n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	sort.Slice(values, func(i, j int) bool { return values[i] < values[j] })
	for i, v := range values {
		if v != int64(i+1) {
			return fmt.Errorf("buffered values: %d at place %d, expected 1..1000 each once", v, i)
		}
	}
	var total int64
	if err := pool.QueryRow(ctx, "SELECT sc_sum($1, $2::bigint)", "likes_tx", 1).Scan(&total); err != nil {
		return err
	}
	return eq(total, int64(1000), "the transactional total")
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--pgbouncer" {
		// Through pgbouncer's transaction pooling: the drivers guide's safe setting.
		check("20 pooled connections through pgbouncer with statement_cache_mode=describe count exactly",
			func() error { return poolExact("statement_cache_mode=describe") })
		if failures > 0 {
			os.Exit(1)
		}
		return
	}
	conn, err := pgx.Connect(ctx, "")
	if err != nil {
		fmt.Printf("not ok pgx: connect: %v\n", err)
		os.Exit(1)
	}
	check("bigint keys with $2::bigint, slices of keys, sc_top", func() error { return bigintKeys(conn) })
	check("an integer key without the cast fails as the guide says",
		func() error { return untypedIntKeyRefused(conn) })
	check("text keys as strings", func() error { return textKeys(conn) })
	check("intervals as strings, void results", func() error { return intervalsAndVoid(conn) })
	check("errors carry their SQLSTATE", func() error { return errorsCarrySQLSTATE(conn) })
	check("a transactional counter in pgx's transactions", func() error { return transactional(conn) })
	conn.Close(ctx)
	check("20 pooled connections count exactly", func() error { return poolExact("") })
	if failures > 0 {
		os.Exit(1)
	}
}
