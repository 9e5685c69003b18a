// Package archtest holds the tests that keep the tree's descriptions of
// itself true: the import diagram in docs/architecture.md, and the
// Makefile's list of fuzz targets. It has no code of its own.
package archtest
