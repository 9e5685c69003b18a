package node

import (
	"fusebox/breakerpool"
	"fusebox/dynconfig"
)

// withSeriesLimit makes the pool read its per-destination series cap from
// dynamic config (fusebox.metrics.destinationSeriesLimit) at every scrape:
// the K busiest closed breakers get series of their own, the rest are summed
// under destination "_other"; the executor's request series follow the
// pool's choice (transport.Options.Series).
func withSeriesLimit(cfg breakerpool.Config, config *dynconfig.Collection) breakerpool.Config {
	cfg.SeriesLimit = func() int {
		return lookupInt(config, dynconfig.KeyMetricsDestinationSeriesLimit, dynconfig.DefaultMetricsDestinationSeriesLimit)
	}
	return cfg
}
