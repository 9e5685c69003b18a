// Package archtest holds the test that keeps the import diagram in
// docs/architecture.md true: it has no code of its own.
package archtest
