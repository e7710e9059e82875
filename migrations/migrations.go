// Package migrations embeds the numbered SQL files that define sbgate's schema. A landed migration
// is never edited; a change to the schema is a new pair of files.
package migrations

import "embed"

// FS holds every *.up.sql and *.down.sql file, read by golang-migrate's iofs source.
//
//go:embed *.sql
var FS embed.FS
