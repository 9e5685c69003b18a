// Package filewatch is the one file poller that the reloadable files of a
// node (TLS material, the token file) share: a goroutine owned by its
// Poller that asks changed every interval and calls reload when it says
// yes. SIGHUP reloads at once; the poller catches edits nobody signalled.
package filewatch

import (
	"sync"
	"time"
)

// Poller runs until Close. The zero value and nil are closed pollers.
type Poller struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Start polls every interval: when changed reports true, reload runs (on
// the poller's goroutine; it must log its own errors).
func Start(interval time.Duration, changed func() bool, reload func()) *Poller {
	p := &Poller{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				if changed() {
					reload()
				}
			}
		}
	}()
	return p
}

// Close stops the poller and waits for its goroutine. Idempotent.
func (p *Poller) Close() {
	if p == nil || p.stop == nil {
		return
	}
	p.once.Do(func() { close(p.stop) })
	<-p.done
}
