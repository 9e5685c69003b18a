package main

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every --addr in a help text (examples included) is a node's HTTP API
// address: port 8470 (or 18470, 28470… for the README's local cluster),
// not the gossip (8471, memberlist's 7946) or Raft port.
func TestHelpAddrExamplesUseTheAPIPort(t *testing.T) {
	// An address has a port: prose ("--addr without a scheme") does not match.
	addrRe := regexp.MustCompile(`--addr[ =]+([^\s'"` + "`" + `]*:[^\s'"` + "`" + `]+)`)
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, text := range []string{c.Long, c.Example} {
			for _, m := range addrRe.FindAllStringSubmatch(text, -1) {
				a := m[1]
				if _, rest, ok := strings.Cut(a, "://"); ok {
					a, _, _ = strings.Cut(rest, "/")
				}
				if strings.HasPrefix(a, "$") || strings.ToUpper(a) == a {
					continue // a variable or a placeholder (HOST:PORT)
				}
				_, port, err := net.SplitHostPort(a)
				n++
				if err != nil || !strings.HasSuffix(port, "8470") {
					t.Errorf("%s: --addr %s: want a node's HTTP API port (8470)", c.CommandPath(), m[1])
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd())
	if n == 0 {
		t.Fatal("no --addr in any help text: the pattern is wrong")
	}
}
