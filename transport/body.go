package transport

import (
	"io"
)

// maxSnippet bounds how much of an error response is kept for Message.
const maxSnippet = 4 << 10

// limitedBody bounds a response body: reads past remaining bytes fail with
// ErrResponseTooLarge instead of growing a buffer without end. It keeps the
// first maxSnippet bytes of error responses and records read errors in the
// capture so classification sees them even when the sdk swallows them.
type limitedBody struct {
	rc        io.ReadCloser
	remaining int64
	c         *capture
	keep      bool // keep a snippet (non-2xx responses)
	over      bool // Content-Length already announced too much
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.over {
		b.c.tooLarge = true
		return 0, ErrResponseTooLarge
	}
	if b.remaining <= 0 {
		// Probe one byte to tell a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			b.over = true
			b.c.tooLarge = true
			return 0, ErrResponseTooLarge
		}
		b.noteErr(err)
		return 0, err
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.rc.Read(p)
	b.remaining -= int64(n)
	if b.keep && len(b.c.snippet) < maxSnippet {
		b.c.snippet = append(b.c.snippet, p[:min(n, maxSnippet-len(b.c.snippet))]...)
	}
	b.noteErr(err)
	return n, err
}

func (b *limitedBody) noteErr(err error) {
	if err != nil && err != io.EOF && b.c.bodyErr == nil {
		b.c.bodyErr = err
	}
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// maxDrainBytes is how much of a callback's answer body drain reads to
// keep its connection: a receiver's answer is a status and a short body. A
// longer one is cut and its connection closed (net/http closes a
// connection whose body was not read to the end): reading a 1 MiB answer
// to the end cost 668 µs of CPU a call against 45 µs (the isolation
// review), paid by every other destination's calls on the node, and a body
// that never ends held the call until its timeout.
const maxDrainBytes = 64 << 10

// drain reads what is left of a bounded body, up to maxDrainBytes, so the
// connection can be reused, then closes it.
func drain(rc io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(rc, maxDrainBytes))
	_ = rc.Close()
}
