package pgtest

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestNewDatabaseServesQueries(t *testing.T) {
	url := NewDatabase(t)
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	var n int
	if err := c.QueryRow(t.Context(), "SELECT 1 + 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("select = %d, %v", n, err)
	}
}
