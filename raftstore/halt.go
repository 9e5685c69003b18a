package raftstore

// Halted is closed when this node's FSM met a raft entry it does not know
// and stopped applying (HaltErr says which). The store fails with it
// (Failed, FailErr wrapping the *state.HaltError): the node stops.
func (s *Store) Halted() <-chan struct{} { return s.fsm.Halted() }

// HaltErr is why the FSM halted, or nil.
func (s *Store) HaltErr() error {
	if he := s.fsm.HaltErr(); he != nil {
		return he
	}
	return nil
}
