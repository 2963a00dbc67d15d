package cluster

import "github.com/prometheus/client_golang/prometheus"

// minDiskFree is the free space below which a node is not ready: a Raft
// log append of a batch needs a few pages, and a snapshot far more. (A
// shard leader whose append fails steps down by itself, Raft's doing: the
// disk-full fault checks the node then leads no shard.)
const minDiskFree = 4 << 20

// diskFreeGauge exports the data directory's free space.
func (n *Node) diskFreeGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "cep_data_dir_free_bytes",
		Help:        "Free space of the filesystem holding the node's data directory; under 4 MiB the node is not ready.",
		ConstLabels: prometheus.Labels{"dir": n.cfg.DataDir},
	}, func() float64 {
		free, _ := diskFree(n.cfg.DataDir)
		return float64(free)
	})
}
