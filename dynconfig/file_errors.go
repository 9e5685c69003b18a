package dynconfig

import (
	"fmt"
	"strings"
)

// FileProblem is one reason a file is refused. Index is the value's
// position in its key's list, -1 when the problem is the key's (or the
// file's, with Key empty).
type FileProblem struct {
	Key    string `json:"key,omitempty"`
	Index  int    `json:"index"`
	Line   int    `json:"line,omitempty"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (p FileProblem) String() string {
	var b strings.Builder
	if p.Key != "" {
		b.WriteString(p.Key)
		if p.Index >= 0 {
			fmt.Fprintf(&b, "[%d]", p.Index)
		}
	} else {
		b.WriteString("file")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// FileError refuses a whole file: nothing of it may be applied.
type FileError struct {
	Problems []FileProblem
	// More counts problems beyond those listed.
	More int
}

func (e *FileError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	s := "dynamic config file refused: " + strings.Join(parts, "; ")
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more)", e.More)
	}
	return s
}

// fileParser collects problems while reading a file.
type fileParser struct {
	problems []FileProblem
	more     int
}

func (p *fileParser) add(key string, index, line int, field, format string, args ...any) {
	if len(p.problems) >= maxFileProblems {
		p.more++
		return
	}
	p.problems = append(p.problems, FileProblem{Key: key, Index: index, Line: line, Field: field,
		Reason: truncate(fmt.Sprintf(format, args...), 4*maxEcho)})
}
