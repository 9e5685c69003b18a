// Package taskstore holds the task stores' shared pieces: storetest, the
// one test suite every store passes, and pgstore, the PostgreSQL store.
// The interfaces are declared by their consumers: queue.Store (the shard
// readers and result writes) and the node's task API; the raft store is
// node.TaskStore over raftstore.
package taskstore
