-- The fusebox clusters that use this database, each by the cluster id of its Raft state, with
-- when a node of it last said so (the database's clock). A node that finds another cluster seen
-- lately is not ready: two clusters sharing one database fence each other's owners out by turns
-- (taskstore/pgstore/DESIGN.md, "One cluster per database"). Additive: older builds ignore it.
CREATE TABLE IF NOT EXISTS fusebox_clusters (
    cluster_id text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);
