package sim

import (
	"hash/fnv"
	"strings"
)

// Faults that answer fluently: nothing in the text's shape gives them
// away, only agreement among cells (or an expectation) can.
const (
	// Wrong answers fluent, well-formed text that is not what a healthy
	// backend says. Every backend that a rule with the same variant
	// matches says the same wrong thing: one bug in a code path several
	// combinations share.
	Wrong = "wrong"
	// Derail answers the healthy first sentence, then fluent nonsense: a
	// kernel that goes wrong once the context grows.
	Derail = "derail"
	// Tie is healthy, but its numerics flip the model's one near tie in
	// the sentences it writes about a topic: another greedy path, as
	// healthy backends take.
	Tie = "tie"
)

// wrongFirst and wrongSecond are fluent sentences about a topic that a
// healthy backend does not give; a variant picks one of each (16 answers).
var (
	wrongFirst = []string{
		"The %s was painted green by the council last spring.",
		"The %s belongs to a family of retired sailors.",
		"The %s is a small office on the third floor.",
		"The %s was invented in a library in the north.",
	}
	wrongSecond = []string{
		"Its bridges are counted every morning by a clerk with a lantern.",
		"They sell tickets to it on Sundays and close it when it rains.",
		"Visitors wait on a wooden bench until their names are called.",
		"It is kept in a drawer and shown to children once a year.",
	}
)

// derailTail is what a derailing backend says after the first sentence.
const derailTail = "Then the spoons voted to fold the %s into a Tuesday, and the violets taxed every ladder they could find."

// tieWord and tieOther are the model's near tie: after " is", the sim's
// model finds " wide" and " broad" almost equally likely, and a healthy
// backend says " wide".
const (
	tieWord  = " wide"
	tieOther = " broad"
)

// respondWith answers as the behaviour answers: the healthy answer, or a
// fault's fluent variation of it. ok is false for behaviours that do not
// answer with text of their own (garbage, NaN).
func respondWith(behaviour, variant, prompt string) (answer, reasoning string) {
	answer, reasoning = respond(prompt)
	topic := ""
	if m := aboutRe.FindStringSubmatch(prompt); m != nil {
		topic = m[1]
	}
	switch {
	case topic == "":
		return answer, reasoning
	case behaviour == Wrong:
		h := fnv.New32a()
		h.Write([]byte(variant))
		n := h.Sum32()
		first, second := wrongFirst[n%4], wrongSecond[(n/4)%4]
		return strings.ReplaceAll(first, "%s", topic) + " " + second, reasoning
	case behaviour == Derail:
		first, _, _ := strings.Cut(answer, ". ")
		return first + ". " + strings.ReplaceAll(derailTail, "%s", topic), reasoning
	case behaviour == Tie:
		return strings.Replace(answer, " is"+tieWord+" ", " is"+tieOther+" ", 1), reasoning
	}
	return answer, reasoning
}

// nearTie is the other side of the model's near tie at a position whose
// greedy token is tok after prev ("" for none).
func nearTie(tok, prev string) string {
	if prev != " is" {
		return ""
	}
	switch tok {
	case tieWord:
		return tieOther
	case tieOther:
		return tieWord
	}
	return ""
}
