package pgstore

import (
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// MigrationsTable is where golang-migrate records the schema version.
const MigrationsTable = "schema_migrations_fusebox"

// SchemaVersion is the newest migration this build carries.
const SchemaVersion = 4

// migrateUp brings the schema to SchemaVersion with golang-migrate (its
// pgx/v5 driver, embedded migrations). A database at a newer version (a
// newer fusebox migrated it) is accepted: migrations are additive (see
// docs/scaling.md, online migrations), so this build's statements still run.
func migrateUp(pool *pgxpool.Pool) (version uint, err error) {
	m, closeMigrate, err := openMigrate(pool)
	if err != nil {
		return 0, err
	}
	// Closing returns the driver's connection to the pool (pgxpool's Close
	// waits for every connection).
	defer closeMigrate()
	m.LockTimeout = migrateLockWait
	cur, dirty, verr := m.Version()
	if verr == nil && cur > SchemaVersion && !dirty {
		return cur, nil
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("pgstore: migrate up: %w", err)
	}
	v, dirty, err := m.Version()
	if err != nil {
		return 0, fmt.Errorf("pgstore: schema version: %w", err)
	}
	if dirty {
		return v, fmt.Errorf("pgstore: schema version %d is dirty (a migration failed half-way); fix it by hand, then force the version", v)
	}
	return v, nil
}

// migrateLockWait bounds how long Open waits for another node's migration
// (golang-migrate's advisory lock). golang-migrate's default, 15 s, is not a
// bound: on its timeout it returns an error while the lock call goes on in
// a goroutine on the driver's connection, and closing the driver waits for
// that call, so Open waits for the lock either way; the lock, once granted,
// is then never released, and that connection goes back to the pool holding
// it, so the next migration waits for it until the connection is closed.
// A node that starts while another migrates a large table waits for it.
const migrateLockWait = time.Hour

// openMigrate is golang-migrate over pool with the embedded migrations,
// and the func that closes it, returning its connection to the pool.
func openMigrate(pool *pgxpool.Pool) (*migrate.Migrate, func(), error) {
	src, err := iofs.New(migrations, "migrations")
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: MigrationsTable})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("pgstore: migrations: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = drv.Close()
		_ = db.Close()
		return nil, nil, fmt.Errorf("pgstore: migrations: %w", err)
	}
	return m, func() { _, _ = m.Close(); _ = db.Close() }, nil
}
