package pgstate

// migrations are the schema's versions, in order: migrations[i] takes
// the schema from version i to i+1. Never change one that was released;
// add the next.
var migrations = []string{
	// 1: the recovery state.
	`CREATE TABLE meta (key text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE workspaces (id text PRIMARY KEY, body json NOT NULL);
CREATE TABLE checkpoints (workspace text NOT NULL, time_ns bigint NOT NULL, snapshot text NOT NULL, body json NOT NULL,
	PRIMARY KEY (workspace, time_ns, snapshot));
CREATE TABLE pending (key bytea PRIMARY KEY, workspace text NOT NULL, body json NOT NULL);
CREATE INDEX pending_workspace ON pending (workspace);
CREATE TABLE operations (id text PRIMARY KEY, workspace text NOT NULL, idempotency_key bytea NOT NULL UNIQUE,
	active boolean NOT NULL, body json NOT NULL);
CREATE UNIQUE INDEX operations_one_active_per_workspace ON operations (workspace) WHERE active;
CREATE TABLE repair_holds (id text PRIMARY KEY, workspace text NOT NULL, body json NOT NULL);
CREATE TABLE process_restarts (key bytea PRIMARY KEY, workspace text NOT NULL, body json NOT NULL);
CREATE TABLE leases (name text PRIMARY KEY, owner text NOT NULL, epoch bigint NOT NULL, expires_ns bigint NOT NULL);
CREATE TABLE events (id bigserial PRIMARY KEY, origin text NOT NULL, body json NOT NULL, created timestamptz NOT NULL DEFAULT now());`,
}

// Schema is the newest schema version this lifeboat knows.
var Schema = len(migrations)
