// Package e2e holds fusebox's chaos end-to-end tests: they build the real
// fusebox binary, start clusters of real processes on loopback (and, when
// the machine allows, in network namespaces), and kill, stall, restart and
// cut them off while writes flow, then check that nothing acknowledged was
// lost and that every node agrees. See DESIGN.md for the harness and
// profiles. The package has no non-test code beyond this comment.
package e2e
