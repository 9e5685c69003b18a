package pgstore

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is a node's pool size when neither Config.MaxConns nor
// the URL's pool_max_conns sets one (DESIGN.md, "Connections per node").
//
// pgxpool's own default, max(4, the node's CPUs), sizes the pool by the
// machine the node runs on, not by the database all the nodes share: the
// database's connections grow with the nodes times their cores. A node's
// writes are two group commits with one transaction in flight each, and
// its reads are short; more connections than that add statements running
// at once on the database, not throughput. On the 2-core test machine, five
// processes on one PostgreSQL delivered a median 7.8k tasks/s (6.6k–9.6k)
// with 4 connections each and 10.1k (8.0k–10.3k) with 2, six alternated
// runs each (one process: 10.9k–12.7k against 9.4k–12.4k), and the
// database's CPU per task fell from a median 94 µs (70–99) to 66 (62–85).
const DefaultMaxConns = 2

// poolConfig parses cfg.URL into the pool's configuration and sizes the
// pool: Config.MaxConns when set, else the URL's pool_max_conns, else
// DefaultMaxConns.
func poolConfig(cfg Config) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgx's parse errors can quote the URL: never echo it.
		return nil, fmt.Errorf("pgstore: invalid postgres URL %s", RedactURL(cfg.URL))
	}
	switch {
	case cfg.MaxConns > 0:
		pc.MaxConns = cfg.MaxConns
	case !setsPoolMaxConns(cfg.URL):
		pc.MaxConns = DefaultMaxConns
	}
	return pc, nil
}

// setsPoolMaxConns reports whether a connection string pgxpool.ParseConfig
// accepted names pool_max_conns: a URL's query parameter, or a key of the
// keyword/value form ("host=… pool_max_conns=8").
func setsPoolMaxConns(connString string) bool {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		return err == nil && u.Query().Has("pool_max_conns")
	}
	return keywordPoolMaxConns.MatchString(connString)
}

// keywordPoolMaxConns finds the key in the keyword/value form, which allows
// spaces around '='.
var keywordPoolMaxConns = regexp.MustCompile(`(^|\s)pool_max_conns\s*=`)
