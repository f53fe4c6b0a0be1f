package sqlite

import (
	"database/sql"
	"fmt"
)

// migrations are applied in order, each once; user_version records how
// many ran. Append, never edit.
var migrations = []string{
	`CREATE TABLE users (
		name    TEXT PRIMARY KEY,
		admin   INTEGER NOT NULL DEFAULT 0,
		created INTEGER NOT NULL
	);
	CREATE TABLE tokens (
		hash    BLOB PRIMARY KEY,
		user    TEXT NOT NULL REFERENCES users(name),
		created INTEGER NOT NULL
	);
	CREATE TABLE apps (
		id      INTEGER PRIMARY KEY,
		owner   TEXT NOT NULL REFERENCES users(name),
		name    TEXT NOT NULL,
		public  INTEGER NOT NULL DEFAULT 0,
		created INTEGER NOT NULL,
		seq     INTEGER NOT NULL DEFAULT 0,
		access_timeout_ms INTEGER NOT NULL DEFAULT 0,
		UNIQUE (owner, name)
	);
	CREATE TABLE members (
		app_id INTEGER NOT NULL REFERENCES apps(id),
		user   TEXT NOT NULL REFERENCES users(name),
		role   TEXT NOT NULL,
		PRIMARY KEY (app_id, user, role)
	) WITHOUT ROWID;
	CREATE TABLE dbs (
		app_id INTEGER NOT NULL REFERENCES apps(id),
		name   TEXT NOT NULL,
		PRIMARY KEY (app_id, name)
	) WITHOUT ROWID;
	-- docs holds each document's head; tombstones keep deleted=1 and a
	-- NULL body so they never match a field query.
	CREATE TABLE docs (
		app_id  INTEGER NOT NULL,
		db      TEXT NOT NULL,
		id      TEXT NOT NULL,
		rev     TEXT NOT NULL,
		deleted INTEGER NOT NULL,
		body    TEXT,
		seq     INTEGER NOT NULL,
		time    INTEGER NOT NULL,
		channels TEXT,
		has_grants INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (app_id, db, id)
	);
	-- grants holds the grants of live documents only: a write replaces
	-- its document's rows and a tombstone removes them.
	CREATE TABLE grants (
		app_id    INTEGER NOT NULL,
		db        TEXT NOT NULL,
		doc_id    TEXT NOT NULL,
		kind      TEXT NOT NULL,
		principal TEXT NOT NULL,
		channel   TEXT NOT NULL
	);
	CREATE INDEX grants_by_doc ON grants (app_id, db, doc_id);
	-- grant_counts: how many live documents give each grant. Reads of who
	-- may see what use it, so their cost does not grow with documents.
	CREATE TABLE grant_counts (
		app_id    INTEGER NOT NULL,
		kind      TEXT NOT NULL,
		principal TEXT NOT NULL,
		channel   TEXT NOT NULL,
		n         INTEGER NOT NULL,
		PRIMARY KEY (app_id, kind, principal, channel)
	) WITHOUT ROWID;
	CREATE TABLE code (
		app_id  INTEGER NOT NULL REFERENCES apps(id),
		version INTEGER NOT NULL,
		access  TEXT NOT NULL,
		backend TEXT NOT NULL,
		author  TEXT NOT NULL,
		created INTEGER NOT NULL,
		active  INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (app_id, version)
	);
	-- revisions is the ledger: every revision, in per-app sequence order.
	CREATE TABLE revisions (
		app_id  INTEGER NOT NULL,
		seq     INTEGER NOT NULL,
		db      TEXT NOT NULL,
		id      TEXT NOT NULL,
		rev     TEXT NOT NULL,
		deleted INTEGER NOT NULL,
		body    TEXT,
		time    INTEGER NOT NULL,
		user    TEXT NOT NULL DEFAULT '',
		device  TEXT NOT NULL DEFAULT '',
		handler TEXT NOT NULL DEFAULT '',
		path    TEXT NOT NULL,
		channels TEXT,
		prev_seq INTEGER NOT NULL DEFAULT 0,
		UNIQUE (app_id, seq)
	);
	CREATE INDEX revisions_by_doc ON revisions (app_id, db, id, seq);
	-- events is the outbox of onChange: one row per committed write of an
	-- app with an onChange handler, deleted when the handler acks it.
	CREATE TABLE events (
		app_id     INTEGER NOT NULL,
		seq        INTEGER NOT NULL,
		depth      INTEGER NOT NULL,
		attempts   INTEGER NOT NULL DEFAULT 0,
		next_at    INTEGER NOT NULL,
		dead       INTEGER NOT NULL DEFAULT 0,
		last_error TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (app_id, seq)
	) WITHOUT ROWID;
	CREATE INDEX events_due ON events (app_id, dead, next_at);
	CREATE TABLE ticks (
		app_id   INTEGER PRIMARY KEY,
		planned  INTEGER NOT NULL,
		started  INTEGER NOT NULL,
		duration INTEGER NOT NULL,
		error    TEXT NOT NULL
	);
	CREATE TABLE logs (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		app_id  INTEGER NOT NULL,
		time    INTEGER NOT NULL,
		level   TEXT NOT NULL,
		source  TEXT NOT NULL,
		message TEXT NOT NULL,
		fields  TEXT
	);
	CREATE INDEX logs_by_app ON logs (app_id, id);
	-- A device name can be reused once revoked: revoked rows keep their
	-- history under the time they were revoked.
	CREATE TABLE devices (
		user       TEXT NOT NULL REFERENCES users(name),
		name       TEXT NOT NULL,
		public_key BLOB NOT NULL,
		app        TEXT NOT NULL DEFAULT '',
		created    INTEGER NOT NULL,
		revoked    INTEGER NOT NULL DEFAULT 0
	);
	CREATE UNIQUE INDEX devices_live ON devices (user, name) WHERE revoked = 0;
	CREATE TABLE secrets (
		app_id  INTEGER NOT NULL REFERENCES apps(id),
		name    TEXT NOT NULL,
		sealed  BLOB NOT NULL,
		updated INTEGER NOT NULL,
		PRIMARY KEY (app_id, name)
	) WITHOUT ROWID;
	CREATE INDEX revisions_by_db ON revisions (app_id, db, seq);`,
	// 2: static files of each code version (an app folder's public/).
	`CREATE TABLE code_files (
		app_id  INTEGER NOT NULL,
		version INTEGER NOT NULL,
		path    TEXT NOT NULL,
		data    BLOB NOT NULL,
		PRIMARY KEY (app_id, version, path)
	) WITHOUT ROWID;`,
	// 3: an event whose run started and never settled was interrupted
	// (the process died mid-run): the attempt counts.
	`ALTER TABLE events ADD COLUMN running INTEGER NOT NULL DEFAULT 0;`,
	// 4: the write each event's chain of onChange writes started from.
	`ALTER TABLE events ADD COLUMN origin INTEGER NOT NULL DEFAULT 0;`,
	// 5: the web origins besides its own site that may call the API for
	// an app, as a JSON array.
	`ALTER TABLE apps ADD COLUMN origins TEXT NOT NULL DEFAULT '[]';`,
	// 6: app visitors: a user row scoped to one app with a password
	// hash, the app's sign-up policy, single-use tickets (invite codes,
	// passkey ceremonies) and passkeys.
	`ALTER TABLE users ADD COLUMN app TEXT NOT NULL DEFAULT '';
	ALTER TABLE users ADD COLUMN password_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE apps ADD COLUMN signup TEXT NOT NULL DEFAULT 'closed';
	CREATE TABLE tickets (
		hash    BLOB PRIMARY KEY,
		app_id  INTEGER NOT NULL REFERENCES apps(id),
		kind    TEXT NOT NULL,
		user    TEXT NOT NULL DEFAULT '',
		data    BLOB,
		expires INTEGER NOT NULL DEFAULT 0,
		created INTEGER NOT NULL
	);
	CREATE INDEX tickets_by_expiry ON tickets (expires) WHERE expires > 0;
	CREATE TABLE passkeys (
		id      BLOB PRIMARY KEY,
		user    TEXT NOT NULL REFERENCES users(name),
		data    BLOB NOT NULL,
		created INTEGER NOT NULL
	);
	CREATE INDEX passkeys_by_user ON passkeys (user, created);`,
	// 7: each event names its document, so a claim takes only the
	// earliest live event of each document: events_by_doc answers "is an
	// earlier one live?" with one probe.
	`ALTER TABLE events ADD COLUMN db TEXT NOT NULL DEFAULT '';
	ALTER TABLE events ADD COLUMN doc_id TEXT NOT NULL DEFAULT '';
	UPDATE events SET db = (SELECT r.db FROM revisions r WHERE r.app_id = events.app_id AND r.seq = events.seq),
		doc_id = (SELECT r.id FROM revisions r WHERE r.app_id = events.app_id AND r.seq = events.seq);
	CREATE INDEX events_by_doc ON events (app_id, db, doc_id, seq) WHERE dead = 0;`,
	// The memory one call of the app's JavaScript may use, when the
	// operator set one (MiB; 0 is the server's default).
	`ALTER TABLE apps ADD COLUMN js_memory_mib INTEGER NOT NULL DEFAULT 0;`,
}

func migrate(db *sql.DB) error {
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	for i := version; i < len(migrations); i++ {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(migrations[i]); err != nil {
			tx.Rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, i+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}
