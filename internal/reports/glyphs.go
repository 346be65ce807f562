package reports

// VerdictGlyph is the sign the HTML report marks a verdict with besides its
// colour ("✓", "↯", ...; "·" for "none": a cell a run did not have), for
// views across runs that draw the same marks; "◇" for YardstickLost, a
// correct verdict after a failure against a yardstick that nothing judged,
// so as not to draw it as a fix.
func VerdictGlyph(verdict string) string {
	if verdict == YardstickLost {
		return "◇"
	}
	if g, ok := verdictGlyphs[verdict]; ok {
		return g
	}
	return verdictGlyphs["none"]
}
