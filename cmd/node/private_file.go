package main

import (
	"errors"
	"os"
	"path/filepath"
)

// privateFile is an output file that holds secrets (a snapshot, a task
// export, a debug bundle). It is written to a temporary file beside path,
// created mode 0600, and renamed over path by Commit once complete: the
// file at path is always mode 0600 — one already there, whatever its mode,
// is replaced, never rewritten in place (opening it with O_TRUNC kept its
// mode, 0644 say, while it received the secrets) — and never half-written.
type privateFile struct {
	*os.File
	path string
	done bool
}

// createPrivate opens the temporary file for path.
func createPrivate(path string) (*privateFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := tmp.Chmod(0o600); err != nil { // CreateTemp's mode already; said here, not assumed
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return nil, err
	}
	return &privateFile{File: tmp, path: path}, nil
}

// Commit syncs and closes the file and renames it over path; on failure
// the temporary file is removed and path is left as it was.
func (p *privateFile) Commit() error {
	if p.done {
		return errors.New(p.path + ": already committed or discarded")
	}
	p.done = true
	err := p.Sync()
	if cerr := p.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p.Name(), p.path)
	}
	if err != nil {
		_ = os.Remove(p.Name())
	}
	return err
}

// Discard closes and removes the temporary file unless it was committed;
// path is left as it was. It is meant to be deferred.
func (p *privateFile) Discard() {
	if p.done {
		return
	}
	p.done = true
	_ = p.File.Close()
	_ = os.Remove(p.Name())
}
