package classify

// Numerics is how a cell's greedy logprobs compare with the reference cell's.
// (To be filled in: first differing token, top-k divergence.)
type Numerics struct{}

// compareNumerics sets j.Numerics and may turn a correct cell degraded.
func compareNumerics(j *Judgement, in Input) {}
