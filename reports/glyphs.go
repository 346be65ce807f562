package reports

// VerdictGlyph is the sign the HTML report marks a verdict with besides its
// colour ("✓", "↯", ...; "·" for "none": a cell a run did not have), for
// views across runs that draw the same marks.
func VerdictGlyph(verdict string) string {
	if g, ok := verdictGlyphs[verdict]; ok {
		return g
	}
	return verdictGlyphs["none"]
}
