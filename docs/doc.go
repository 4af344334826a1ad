// Package docs holds the README's guides and the design (DESIGN.md). It has
// no code: its tests check that every Markdown link of the repository
// resolves, that every test the documentation cites exists, and that
// DESIGN.md's layout lists the tree as it is.
package docs
