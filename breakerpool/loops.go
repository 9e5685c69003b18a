package breakerpool

import (
	"time"
)

// emit hands an event to the observer goroutine without blocking; it is
// called with the breaker's lock held. An event the queue refuses, or any
// while earlier ones wait in the overflow, goes to the overflow (overflow.go).
func (p *Pool) emit(t Transition) {
	if p.over.n.Load() == 0 {
		select {
		case p.events <- t:
			return
		default:
		}
	}
	if p.over.put(t) {
		p.dropped.Inc()
	}
}

// observeLoop logs transitions and delivers them to the observer: the
// queue's first, then, once it is empty, the overflow's, all of them before
// the queue is read again.
func (p *Pool) observeLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case t := <-p.events:
			p.deliver(t)
			continue
		default:
		}
		if batch := p.over.take(); len(batch) > 0 {
			for _, t := range batch {
				select {
				case <-p.stop:
					return
				default:
				}
				p.deliver(t)
			}
			continue
		}
		select {
		case <-p.stop:
			return
		case t := <-p.events:
			p.deliver(t)
		case <-p.over.wake:
		}
	}
}

// deliver logs t and hands it to the observer (an early warning to OnFailing).
func (p *Pool) deliver(t Transition) {
	if t.Kind == KindFailing {
		p.log.Debug("breaker failing", "key", t.Key.String(), "consecutive_failures", t.Failures,
			"generation", t.Generation)
		p.cfg.OnFailing(t) // only emitted when set
		return
	}
	logTransition(p.log, t)
	if p.cfg.Observer != nil {
		p.cfg.Observer(t)
	}
}

// onSettingsChanged is the settings subscription: it must not block.
func (p *Pool) onSettingsChanged() {
	p.settingsSeq.Add(1)
	select {
	case p.settingsCh <- struct{}{}:
	default: // a refresh is already pending; it will see this change
	}
}

// maintainLoop re-resolves settings on change and runs the eviction sweep.
func (p *Pool) maintainLoop() {
	defer p.wg.Done()
	var tick <-chan time.Time
	if p.cfg.IdleTTL > 0 {
		t := time.NewTicker(p.cfg.EvictInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-p.stop:
			return
		case <-p.settingsCh:
			p.RefreshSettings()
		case now := <-tick:
			p.EvictIdle(now)
		}
	}
}

// RefreshSettings re-resolves the settings of every live breaker; identical
// settings are a no-op. The maintenance goroutine calls it on every change
// notification; it is exported for callers without a subscription.
func (p *Pool) RefreshSettings() {
	p.entries.Range(func(k Key, b *Breaker) bool {
		select {
		case <-p.stop:
			return false
		default:
		}
		b.applySettings(p.resolve(k))
		return true
	})
}
