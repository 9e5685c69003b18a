package state

import (
	"encoding/binary"
	"fmt"
)

// complete_tasks_multi (issue 17 §3, LogVersionCompleteMulti): several
// shards' delivery results in one entry. A node owns many shards, and each
// shard's flush was one complete_tasks_bin entry fenced by that shard's
// epoch, so at 256 shards the same tasks cost ~13× the Raft entries of 16
// shards (docs/architecture.md, "Issue 17 §3: the delivery path"). The
// proposer (raftstore/complete_batch.go) coalesces the completes in flight on
// one node into one entry of sections; each section is exactly a
// CompleteTasksCommand and applies through completeTasks, with its own fence:
// a section whose epoch is stale is refused alone (its outcome carries
// Refused) and the others apply. The value of the entry is one
// CompleteOutcome per section, in order.
//
// Encoding: [22][uvarint sections] then per section [uvarint len][payload],
// payload being a complete_tasks_bin (21) payload without its type byte.
// Applying the sections of one entry leaves the state the same sections
// leave as complete_tasks_bin entries applied at the same raft index
// (TestCompleteMultiMatchesSingleEntries).

// MsgCompleteTasksMulti is several CompleteTasksCommands in one entry.
const MsgCompleteTasksMulti MessageType = 22

// MaxCompleteSections bounds the sections of one complete_tasks_multi.
const MaxCompleteSections = 1024

// minSectionBytes is the shortest section: its length byte and a
// complete_tasks_bin payload with every field at its shortest (at, author,
// shard, epoch, node, count).
const minSectionBytes = 1 + 6

// CompleteTasksMultiCommand carries several shards' completes; each section
// is fenced by its own shard's epoch. Sections keep their own CommandMeta
// (At stamps a terminal task's CompletedAt).
type CompleteTasksMultiCommand struct {
	Sections []CompleteTasksCommand
}

// Validate checks the section count and every section as a complete alone,
// naming the field as sections[i].<field>.
func (c *CompleteTasksMultiCommand) Validate() *Error {
	if err := c.checkCount(); err != nil {
		return err
	}
	for i := range c.Sections {
		if err := c.Sections[i].Validate(); err != nil {
			return sectionErr(i, err)
		}
	}
	return nil
}

func (c *CompleteTasksMultiCommand) checkCount() *Error {
	switch n := len(c.Sections); {
	case n == 0:
		return invalidArg("sections", "at least one section is required")
	case n > MaxCompleteSections:
		return invalidArg("sections", "%d sections exceeds the limit of %d", n, MaxCompleteSections)
	}
	return nil
}

// sectionErr names err's field inside section i (a copy: err may be shared).
func sectionErr(i int, err *Error) *Error {
	e := *err
	if e.Field == "" {
		e.Field = fmt.Sprintf("sections[%d]", i)
	} else {
		e.Field = fmt.Sprintf("sections[%d].%s", i, e.Field)
	}
	return &e
}

// EncodeCompleteTasksMulti returns the MsgCompleteTasksMulti command for c,
// or errNotBinary (as EncodeCompleteTasksBin) when a section holds a value
// the binary form does not carry as JSON would: the proposer then sends the
// sections one entry each.
func EncodeCompleteTasksMulti(c *CompleteTasksMultiCommand) ([]byte, error) {
	b := binary.AppendUvarint([]byte{byte(MsgCompleteTasksMulti)}, uint64(len(c.Sections)))
	for i := range c.Sections {
		sec, err := EncodeCompleteTasksBin(&c.Sections[i])
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(sec)-1))
		b = append(b, sec[1:]...)
	}
	return b, nil
}

// decodeCompleteTasksMulti is strict like every binary decoder: a count the
// bytes cannot hold, a section length past the end, a damaged section (its
// field named sections[i].results[j].task_id) or a byte after the last
// section is invalid_argument, never a panic (FuzzDecodeCompleteTasksMulti).
func decodeCompleteTasksMulti(p []byte) (CompleteTasksMultiCommand, *Error) {
	r := binReader{b: p}
	var c CompleteTasksMultiCommand
	if n := r.count("sections", minSectionBytes); n > 0 {
		c.Sections = make([]CompleteTasksCommand, n)
	}
	r.list = "sections"
	for i := range c.Sections {
		r.item = i
		start, end := r.span("length", false)
		if r.err != nil {
			break
		}
		sec, err := decodeCompleteTasksBin(p[start:end])
		if err != nil {
			return CompleteTasksMultiCommand{}, sectionErr(i, err)
		}
		c.Sections[i] = sec
	}
	r.list = ""
	if err := r.done(); err != nil {
		return CompleteTasksMultiCommand{}, err
	}
	return c, nil
}

// applyCompleteTasksMulti applies each section as completeTasks applies a
// complete alone, in order, in the entry's transaction. A section refused by
// its fence is an outcome, not an error; any other refusal (a section
// validate refuses, a shard outside the map) fails the whole entry, naming
// the section, and the proposer retries the sections one entry each.
func applyCompleteTasksMulti(w *writer, payload []byte) (any, *Error) {
	c, err := decodeCompleteTasksMulti(payload)
	if err != nil {
		return nil, err
	}
	if err := c.checkCount(); err != nil {
		return nil, err
	}
	out := make([]CompleteOutcome, len(c.Sections))
	for i := range c.Sections {
		v, err := completeTasks(w, &c.Sections[i])
		if err != nil {
			return nil, sectionErr(i, err)
		}
		out[i] = v.(CompleteOutcome)
	}
	return out, nil
}
