package pgstore

import (
	"embed"
	"errors"
	"fmt"

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
