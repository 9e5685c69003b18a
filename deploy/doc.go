// Package deploy holds fusebox's operator artifacts: Prometheus alert rules
// and their unit tests (prometheus/), a Grafana dashboard (grafana/), a
// systemd unit (systemd/) and a Kubernetes StatefulSet (kubernetes/). The Go
// package has no code; its tests check the artifacts against the binary's
// flags, the metrics the code registers and docs/metrics.md.
package deploy
