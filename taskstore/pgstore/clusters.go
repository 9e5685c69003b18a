package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// OtherCluster is another fusebox cluster seen using this database.
type OtherCluster struct {
	ClusterID string
	Ago       time.Duration // since a node of it last said so
}

// SeenBy records that a node of cluster id uses this database now, and
// returns the other clusters seen within the last window (the database's
// clock on both sides, so the nodes' clocks do not matter).
func (s *Store) SeenBy(ctx context.Context, id string, window time.Duration) ([]OtherCluster, error) {
	if id == "" {
		return nil, fmt.Errorf("pgstore: SeenBy: no cluster id")
	}
	var out []OtherCluster
	err := s.retry(ctx, func() error {
		out = out[:0]
		if _, err := s.pool.Exec(ctx, `
INSERT INTO fusebox_clusters (cluster_id, seen_at) VALUES ($1, now())
ON CONFLICT (cluster_id) DO UPDATE SET seen_at = now()`, id); err != nil {
			return err
		}
		rows, err := s.pool.Query(ctx, `
SELECT cluster_id, EXTRACT(EPOCH FROM now() - seen_at)::float8 FROM fusebox_clusters
WHERE cluster_id <> $1 AND seen_at > now() - ($2::float8 * interval '1 second')
ORDER BY seen_at DESC`, id, window.Seconds())
		if err != nil {
			return err
		}
		var (
			other string
			ago   float64
		)
		_, err = pgx.ForEachRow(rows, []any{&other, &ago}, func() error {
			out = append(out, OtherCluster{ClusterID: other, Ago: time.Duration(max(ago, 0) * float64(time.Second))})
			return nil
		})
		return err
	})
	return out, err
}
