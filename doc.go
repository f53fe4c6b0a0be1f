// Package handoff runs handoff inside a Go program: the engine, the store
// and the delivery of onChange that `handoff serve` runs, with each app's
// transition tables and handlers written as Go functions instead of
// access.js and backend.js.
//
// The package sits at the root of the module, so a program imports it
// under the project's own name:
//
//	import "github.com/handoff-run/handoff"
//
// It is the one package meant for programs that embed handoff; the other
// packages of the module are the server's own parts and change with it.
//
// # Apps
//
// An [App] is a value. Its [Table] for a database sees every write to that
// database before it commits, with the head it replaces and who writes,
// and allows it (saying who may read the new revision) or refuses it with
// [Forbid]. Its [OnChange] handler runs after commits, at least once per
// commit, and its [Scheduled] handler once per interval; their writes go
// through the tables like anyone's, marked as theirs ([Write.Handler]), so
// a table can keep a step such as "running → done" for the server's own
// handlers ([Write.RequireBackend]).
//
// [Open] starts handoff on the embedded SQLite store in a folder, [New] on
// any [store.Store] (PostgreSQL for several nodes). Both create the apps
// and their owners when missing and make the Go code their live code.
// [Instance.As] then reads and writes as a user, every write through the
// tables, as a client of the server would.
//
// # Errors
//
// Errors are *[errs.Error] values with a stable code: test them with
// [errs.Is], for example errs.Is(err, errs.Conflict) when a compare-and-set
// write lost its race. A table's refusal has code forbidden and keeps the
// table's own words in Reason.
package handoff
