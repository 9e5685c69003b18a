package state

import "sync"

// Subscribers are woken after commit (FSM.commit), never inside a write:
// each holds a channel of buffer 1 that a wake fills if it is empty, so a
// burst of applies coalesces into one wake-up and the FSM never blocks on
// a slow reader. Consumers re-read the state on wake.

// Subscribe returns a channel that receives a value (coalesced, buffer 1)
// after every apply or restore that touched table. Consumers re-read the state
// on wake. cancel releases the subscription; it is safe to call twice.
func (s *State) Subscribe(table Table) (<-chan struct{}, func()) {
	return subscribe(&s.mu, s.subs, table)
}

// SubscribeShard returns a channel that receives a value (coalesced,
// buffer 1) after every apply that put a pending task of shard into the due
// order — a submit, a retry's new due time, a redrive, an import — and
// after every restore. A write that only takes a task out of it (a result)
// wakes no one: only the shard's owner writes results, and its queue wakes
// its own reader after each write. A shard's reader subscribes here rather
// than to TableTasks, so that a submit wakes the one reader of its shard on
// each node, not every reader of every shard (queue.ShardSubscriber).
func (s *State) SubscribeShard(shard int) (<-chan struct{}, func()) {
	return subscribe(&s.mu, s.shardSubs, shard)
}

func subscribe[K comparable](mu *sync.Mutex, subs map[K]map[chan struct{}]struct{}, key K) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	mu.Lock()
	m := subs[key]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		subs[key] = m
	}
	m[ch] = struct{}{}
	mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			mu.Lock()
			delete(subs[key], ch)
			if len(subs[key]) == 0 {
				delete(subs, key)
			}
			mu.Unlock()
		})
	}
}

// notify wakes the subscribers of tables and of shards.
func (s *State) notify(tables map[Table]struct{}, shards map[int]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range tables {
		wakeAll(s.subs[t])
	}
	for sh := range shards {
		wakeAll(s.shardSubs[sh])
	}
}

// notifyAll wakes every subscriber (a restore replaced the whole state).
func (s *State) notifyAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.subs {
		wakeAll(m)
	}
	for _, m := range s.shardSubs {
		wakeAll(m)
	}
}

func wakeAll(m map[chan struct{}]struct{}) {
	for ch := range m {
		select {
		case ch <- struct{}{}:
		default: // a wake is already pending
		}
	}
}
