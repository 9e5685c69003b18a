package node

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/dynconfig"
)

// diskSpaceTTL is how long a free-space reading is reused: a submit costs
// no syscall, and a disk filling up is seen within a second.
const diskSpaceTTL = time.Second

// dataDirSpace reads the free space of the file system holding the data
// dir (Raft's log and snapshots), cached for diskSpaceTTL.
type dataDirSpace struct {
	dir  string
	stat func(dir string) (uint64, error) // statFree; tests replace it

	mu   sync.Mutex
	at   time.Time
	free uint64
	ok   bool
}

func newDataDirSpace(dir string) *dataDirSpace { return &dataDirSpace{dir: dir, stat: statFree} }

// Free returns the bytes available to this process on the data dir's file
// system; ok is false when it cannot be read (the guard then stays open).
func (d *dataDirSpace) Free() (free uint64, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if now := time.Now(); d.at.IsZero() || now.Sub(d.at) >= diskSpaceTTL {
		f, err := d.stat(d.dir)
		d.at, d.free, d.ok = now, f, err == nil
	}
	return d.free, d.ok
}

// register adds fusebox_data_dir_free_bytes (read at scrape time).
func (d *dataDirSpace) register(reg prometheus.Registerer) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fusebox_data_dir_free_bytes",
		Help: "Bytes free for this node on the file system of its data dir (Raft log and snapshots); below fusebox.tasks.minFreeDiskMB the node answers submits with 503.",
	}, func() float64 {
		f, _ := d.Free()
		return float64(f)
	}))
}

// minFreeDiskBytes is fusebox.tasks.minFreeDiskMB in bytes (0: no floor).
func minFreeDiskBytes(config *dynconfig.Collection) uint64 {
	mb := lookupInt(config, dynconfig.KeyTaskMinFreeDiskMB, dynconfig.DefaultTaskMinFreeDiskMB)
	if mb <= 0 {
		return 0
	}
	return uint64(mb) << 20
}
