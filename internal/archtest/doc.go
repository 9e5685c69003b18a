// Package archtest holds the tests that keep the tree's descriptions of
// itself and its rules true: the import diagram in docs/architecture.md,
// README.md's table of folders, the Makefile's list of fuzz targets, and a
// goroutine-leak check in every package that starts goroutines. It has no
// code of its own.
package archtest
