DROP TABLE IF EXISTS fusebox_clusters;
