//go:build !unix

package node

import "errors"

// statFree cannot read free space here: the data-dir floor stays off.
func statFree(string) (uint64, error) {
	return 0, errors.New("free space not supported on this platform")
}
